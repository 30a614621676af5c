//! The buffers of one run, allocated once per compiled program, and the
//! weights prepared in them: transposed or widened copies of graph inputs
//! ([`Prep`]) and their packs, made once for resident inputs.

use super::convert::{self, widen_into, Raw};
use super::par::Scratch;
use super::weights::{transpose_into, F32PackKind, Need};
use super::{bf16dot, fail, layout, FastProgram};
use crate::kernels::amx;
use crate::CpuError;
use layout::Root;
use rlx_ir::HostTensor;

pub struct State {
    pub arena: Vec<f32>,
    /// f16/bf16 values of the memory plan, as bits.
    pub half: Vec<u16>,
    /// f32 staging of 16-bit operands and of a 16-bit output.
    pub stage: Vec<f32>,
    pub stage_out: Vec<f32>,
    pub host: Vec<Option<HostTensor>>,
    pub pool: Scratch,
    /// Transposed and widened graph inputs ([`Root::Prepared`]).
    pub prepared: Vec<f32>,
    /// Graph inputs the caller promised not to change ([`FastProgram::keep_resident`]).
    pub resident: Vec<bool>,
    /// Whether each [`Prep`] already holds its resident input's copy.
    pub ready: Vec<bool>,
    /// The [`Pack`]s, and whether each holds its resident input already.
    pub packed: Vec<Option<bf16dot::PackedB>>,
    pub packed_ready: Vec<bool>,
    /// The [`F32Pack`]s (for gemm128 or for the AMX tiles, as
    /// [`FastProgram::f32_pack_kind`] says), and whether each holds its
    /// resident input already.
    pub f32_packed: Vec<crate::kernels::gemm128::PackedB>,
    pub amx_packed: Vec<amx::PackedB>,
    pub f32_packed_ready: Vec<bool>,
    /// Per-thread scratch for the AMX products' split left operands.
    pub amx_pool: Scratch<u16>,
    /// Per output value: a `matmul_integer`'s packed weight and staging buffers.
    pub int_packs: Vec<super::igemm::Cache>,
}

impl State {
    pub fn empty() -> State {
        State {
            arena: Vec::new(),
            half: Vec::new(),
            stage: Vec::new(),
            stage_out: Vec::new(),
            host: Vec::new(),
            pool: Scratch::new(0),
            prepared: Vec::new(),
            resident: Vec::new(),
            ready: Vec::new(),
            packed: Vec::new(),
            packed_ready: Vec::new(),
            f32_packed: Vec::new(),
            amx_packed: Vec::new(),
            f32_packed_ready: Vec::new(),
            amx_pool: Scratch::new(0),
            int_packs: Vec::new(),
        }
    }
}

impl FastProgram {
    /// Buffers for one run at a time, allocated once.
    pub(super) fn new_state(&self) -> State {
        State {
            arena: vec![0.0; self.arena_len],
            half: vec![0; self.half_len],
            stage: vec![0.0; self.stage_len],
            stage_out: vec![0.0; self.stage_out_len],
            host: vec![None; self.graph.values.len()],
            pool: Scratch::new(self.scratch),
            // Grown by the first run to the end of the last copy it makes
            // (`Need`): a copy no kernel reads takes no memory, in wasm's
            // linear memory too.
            prepared: Vec::new(),
            resident: vec![false; self.graph.inputs.len()],
            ready: vec![false; self.preps.len()],
            packed: (0..self.packs.len()).map(|_| None).collect(),
            packed_ready: vec![false; self.packs.len()],
            f32_packed: match self.f32_pack_kind {
                Some(F32PackKind::Gemm128) => vec![Default::default(); self.f32_packs.len()],
                _ => Vec::new(),
            },
            amx_packed: match self.f32_pack_kind {
                Some(F32PackKind::Amx) => (0..self.f32_packs.len())
                    .map(|_| Default::default())
                    .collect(),
                _ => Vec::new(),
            },
            f32_packed_ready: vec![false; self.f32_packs.len()],
            amx_pool: Scratch::new(self.amx_scratch),
            int_packs: (0..self.graph.values.len())
                .map(|_| Default::default())
                .collect(),
        }
    }

    /// Makes the prepared copies and packs this run needs: every time for
    /// inputs that are not resident, once for those that are.
    pub(super) fn prepare_weights(
        &self,
        st: &mut State,
        inputs: &[&HostTensor],
    ) -> Result<(), CpuError> {
        // Packs read from the graph inputs first: whether a prepared copy
        // is needed depends on them (`Need::UnlessPacked`).
        self.pack_f32_weights(st, inputs, false);
        for (i, p) in self.preps.iter().enumerate() {
            if st.resident[p.input] && st.ready[i] {
                continue;
            }
            let needed = match &p.need {
                Need::Always => true,
                Need::Never => false,
                Need::UnlessPacked(packs) => {
                    !st.resident[p.input]
                        || packs.iter().any(|&k| {
                            !st.f32_packed_ready[k]
                                || (self.f32_pack_kind == Some(F32PackKind::Amx)
                                    && !st.amx_packed[k].finite())
                        })
                }
            };
            if !needed {
                continue;
            }
            let end = p.offset + p.rows * p.cols;
            debug_assert!(end <= self.prepared_len);
            if st.prepared.len() < end {
                st.prepared.resize(end, 0.0);
            }
            let dst = &mut st.prepared[p.offset..end];
            let src = Raw::of_input(inputs[p.input]);
            crate::profile::time("prepare_weight", || {
                if p.transpose {
                    transpose_into(dst, src, p.rows, p.cols)
                } else {
                    widen_into(dst, src)
                }
            });
            st.ready[i] = st.resident[p.input];
        }
        for (i, p) in self.packs.iter().enumerate() {
            if st.resident[p.input] && st.packed_ready[i] {
                continue;
            }
            let bits = convert::half_bits(inputs[p.input])
                .ok_or_else(|| fail("matmul", "a packed weight is not bf16 (an engine bug)"))?;
            st.packed[i] = Some(crate::profile::time("prepare_weight", || {
                bf16dot::PackedB::pack(bits, p.k, p.n, p.rs, p.cs)
            }));
            st.packed_ready[i] = st.resident[p.input];
        }
        self.pack_f32_weights(st, inputs, true);
        Ok(())
    }

    /// Resident f32 weights: packed once. Others are packed by each
    /// product. Those packed from a prepared copy (`from_prepared`) go
    /// after the copies are made.
    fn pack_f32_weights(&self, st: &mut State, inputs: &[&HostTensor], from_prepared: bool) {
        for (i, p) in self.f32_packs.iter().enumerate() {
            let prepared = p.src.root == Root::Prepared;
            if prepared != from_prepared || !st.resident[p.input] || st.f32_packed_ready[i] {
                continue;
            }
            let data = match p.src.root {
                Root::Input(k) => layout::input_f32(inputs[k]),
                _ => &st.prepared[..],
            };
            let b = crate::kernels::gemm::Mat {
                data: &data[p.src.offset..],
                rows: p.src.dims[0],
                cols: p.src.dims[1],
                row_stride: p.src.strides[0],
                col_stride: p.src.strides[1],
            };
            match self.f32_pack_kind {
                Some(F32PackKind::Amx) => {
                    let dst = &mut st.amx_packed[i];
                    crate::profile::time("prepare_weight", || dst.repack(b));
                }
                _ => {
                    let dst = &mut st.f32_packed[i];
                    crate::profile::time("prepare_weight", || dst.repack(b));
                }
            }
            st.f32_packed_ready[i] = true;
        }
    }
}
