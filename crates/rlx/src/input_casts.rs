//! Graph inputs the compiled program takes in another dtype than the
//! caller gives: under autocast, an f32 weight read only through a 16-bit
//! cast becomes a 16-bit input (`rlx_opt::autocast::narrow_inputs`), and
//! the caller's f32 tensor is converted here — once for an input promised
//! resident (`Compiled::keep_resident`), so a resident weight is rounded
//! once, not on every run, and the backend prepares the 16-bit tensor as
//! it prepares any resident weight.

use crate::error::Error;
use rlx_ir::{DType, HostTensor, IrError, TensorData};
use rlx_runtime::RuntimeError;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
pub(crate) struct InputCasts {
    /// (input index, dtype the program takes).
    casts: Vec<(usize, DType)>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    resident: BTreeSet<usize>,
    cache: HashMap<usize, Arc<HostTensor>>,
}

impl InputCasts {
    pub(crate) fn new(casts: Vec<(usize, DType)>) -> Self {
        InputCasts {
            casts,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a cache: a panic elsewhere cannot leave it wrong.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn keep_resident(&self, inputs: &[usize]) {
        if !self.casts.is_empty() {
            self.lock().resident.extend(inputs.iter().copied());
        }
    }

    /// Input `i` changed (some of its elements, to `values`): a converted
    /// copy kept for it is stale, and the executable takes the values
    /// converted as the input is (`None` when it is not).
    pub(crate) fn updated(
        &self,
        i: usize,
        values: &HostTensor,
    ) -> Result<Option<HostTensor>, Error> {
        let Some(&(_, dt)) = self.casts.iter().find(|(j, _)| *j == i) else {
            return Ok(None);
        };
        self.lock().cache.remove(&i);
        narrow(i, values, dt).map(Some)
    }

    /// The converted inputs (index, tensor); inputs out of range are left
    /// to the executable's arity check.
    pub(crate) fn convert(
        &self,
        inputs: &[&HostTensor],
    ) -> Result<Vec<(usize, Arc<HostTensor>)>, Error> {
        let mut out = Vec::with_capacity(self.casts.len());
        for &(i, dt) in &self.casts {
            let Some(t) = inputs.get(i) else { continue };
            let resident = self.lock().resident.contains(&i);
            if resident {
                if let Some(c) = self.lock().cache.get(&i) {
                    out.push((i, c.clone()));
                    continue;
                }
            }
            let c = Arc::new(narrow(i, t, dt)?);
            if resident {
                self.lock().cache.insert(i, c.clone());
            }
            out.push((i, c));
        }
        Ok(out)
    }

    /// `inputs` with the converted ones in their places.
    pub(crate) fn apply<'a>(
        inputs: &[&'a HostTensor],
        conv: &'a [(usize, Arc<HostTensor>)],
    ) -> Vec<&'a HostTensor> {
        let mut refs = inputs.to_vec();
        for (i, c) in conv {
            refs[*i] = c;
        }
        refs
    }
}

/// Graph input `i` as a program compiled with autocast takes it: the
/// caller's f32 tensor rounded to f16/bf16 (to nearest even, as the `cast`
/// op). For callers that run a [`crate::Planned`] program's executable
/// themselves ([`crate::Compiled`] does this on its own); which inputs and
/// dtypes: the pass report's `autocast.narrowed`.
pub fn narrow_input(i: usize, t: &HostTensor, dt: DType) -> Result<HostTensor, Error> {
    narrow(i, t, dt)
}

/// An f32 tensor rounded to f16/bf16 (to nearest even, as the `cast` op).
fn narrow(i: usize, t: &HostTensor, dt: DType) -> Result<HostTensor, Error> {
    let TensorData::F32(v) = t.data() else {
        return Err(RuntimeError::Config(format!(
            "input {i}: the graph takes f32 here (autocast converts it to {dt}), got {}",
            t.dtype()
        ))
        .into());
    };
    if !matches!(dt, DType::F16 | DType::BF16) {
        return Err(Error::Ir(IrError::msg(format!(
            "input {i}: no conversion to {dt}"
        ))));
    }
    // The fast engine's rounding: the `cast` op's, on every backend.
    Ok(rlx_cpu::fast::host_from_f32(
        dt,
        t.shape().clone(),
        v.clone(),
    )?)
}
