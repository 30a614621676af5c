//! Shared by the integration tests: the evaluator, result comparison, a
//! small RNG, and an LIR simulator that runs a planned program through one
//! byte arena — so a buffer reused too early, or a view reading the wrong
//! bytes, shows up as a wrong result.
#![allow(dead_code)]

pub mod gen;

use half::{bf16, f16};
use rlx_ir::lir::Program;
use rlx_ir::{DType, Graph, GraphBuilder, HostTensor, TensorData, TensorType, ValueDef, ValueId};
use std::collections::HashMap;

/// `rlx_cpu::run_graph` as an [`rlx_opt::Evaluator`].
pub fn cpu(g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    rlx_cpu::run_graph(g, inputs).map_err(|e| e.to_string())
}

/// Equal results: bitwise for integers and bools; for floats both NaN or
/// within 1e-5 relative.
pub fn same_results(want: &[HostTensor], got: &[HostTensor]) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    for (k, (a, b)) in want.iter().zip(got).enumerate() {
        if a.dtype() != b.dtype() || a.shape() != b.shape() {
            return Err(format!(
                "output {k}: {}{} vs {}{}",
                a.dtype(),
                a.shape(),
                b.dtype(),
                b.shape()
            ));
        }
        if a.dtype().is_float() {
            let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
            for (i, (&p, &q)) in x.iter().zip(&y).enumerate() {
                let ok = (p.is_nan() && q.is_nan())
                    || p == q
                    || (p - q).abs() <= 1e-5 * p.abs().max(q.abs());
                if !ok {
                    return Err(format!("output {k}, element {i}: {p} vs {q}"));
                }
            }
        } else if a.dtype() == DType::C64 {
            let (x, y) = (a.to_c64_vec().unwrap(), b.to_c64_vec().unwrap());
            if x.iter()
                .zip(&y)
                .any(|(p, q)| p[0].to_bits() != q[0].to_bits() || p[1].to_bits() != q[1].to_bits())
            {
                return Err(format!("output {k}: complex values differ"));
            }
        } else if a.data() != b.data() {
            return Err(format!("output {k}: {:?} vs {:?}", a.data(), b.data()));
        }
    }
    Ok(())
}

/// SplitMix64: tiny, seeded, reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.u64() % n as u64) as usize
    }
    /// Uniform in [lo, hi].
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// Uniform in [-2, 2).
    pub fn real(&mut self) -> f64 {
        (self.u64() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// A random tensor (values in [-2, 2), or small integers).
    pub fn tensor(&mut self, dtype: DType, shape: &[usize]) -> HostTensor {
        let n: usize = shape.iter().product();
        if dtype.is_float() {
            let v = (0..n).map(|_| self.real()).collect();
            HostTensor::from_f64(dtype, shape.to_vec(), v).unwrap()
        } else {
            let v = (0..n).map(|_| self.below(9) as i64 - 4).collect();
            HostTensor::from_i64(dtype, shape.to_vec(), v).unwrap()
        }
    }
}

fn encode(t: &HostTensor) -> Vec<u8> {
    let mut out = Vec::new();
    match t.data() {
        TensorData::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
        TensorData::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
        TensorData::U8(v) => out.extend_from_slice(v),
        TensorData::I16(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::I32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::I64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::U16(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::U32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::U64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::F16(v) => v.iter().for_each(|x| out.extend(x.to_bits().to_le_bytes())),
        TensorData::BF16(v) => v.iter().for_each(|x| out.extend(x.to_bits().to_le_bytes())),
        TensorData::F32(v) => v.iter().for_each(|x| out.extend(x.to_bits().to_le_bytes())),
        TensorData::F64(v) => v.iter().for_each(|x| out.extend(x.to_bits().to_le_bytes())),
        TensorData::C64(v) => v.iter().for_each(|x| {
            out.extend(x[0].to_bits().to_le_bytes());
            out.extend(x[1].to_bits().to_le_bytes())
        }),
        TensorData::Packed(v) => out.extend_from_slice(v),
    }
    out
}

fn decode(ty: &TensorType, b: &[u8]) -> HostTensor {
    fn chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).map(|c| c.try_into().unwrap())
    }
    let data: TensorData = match ty.dtype {
        DType::Bool => b.iter().map(|&x| x != 0).collect::<Vec<_>>().into(),
        DType::I8 => b.iter().map(|&x| x as i8).collect::<Vec<_>>().into(),
        DType::U8 => b.to_vec().into(),
        DType::I16 => chunks::<2>(b)
            .map(i16::from_le_bytes)
            .collect::<Vec<_>>()
            .into(),
        DType::I32 => chunks::<4>(b)
            .map(i32::from_le_bytes)
            .collect::<Vec<_>>()
            .into(),
        DType::I64 => chunks::<8>(b)
            .map(i64::from_le_bytes)
            .collect::<Vec<_>>()
            .into(),
        DType::F16 => chunks::<2>(b)
            .map(|c| f16::from_bits(u16::from_le_bytes(c)))
            .collect::<Vec<_>>()
            .into(),
        DType::BF16 => chunks::<2>(b)
            .map(|c| bf16::from_bits(u16::from_le_bytes(c)))
            .collect::<Vec<_>>()
            .into(),
        DType::F32 => chunks::<4>(b)
            .map(|c| f32::from_bits(u32::from_le_bytes(c)))
            .collect::<Vec<_>>()
            .into(),
        DType::F64 => chunks::<8>(b)
            .map(|c| f64::from_bits(u64::from_le_bytes(c)))
            .collect::<Vec<_>>()
            .into(),
        DType::C64 => chunks::<8>(b)
            .map(|c| {
                let re = f32::from_bits(u32::from_le_bytes(c[..4].try_into().unwrap()));
                let im = f32::from_bits(u32::from_le_bytes(c[4..].try_into().unwrap()));
                [re, im]
            })
            .collect::<Vec<_>>()
            .into(),
        _ => TensorData::Packed(b.to_vec()),
    };
    HostTensor::new(ty.dtype, ty.shape.clone(), data).unwrap()
}

/// Run a planned program the way a device would: every stored value lives
/// only in its arena bytes (which start as garbage), views read their base
/// through offset and strides, graph inputs stay in the caller's tensors.
/// Each step evaluates its node with the reference kernels on what it reads.
pub fn execute(p: &Program, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let g = &p.graph;
    let mut arena = vec![0xA5u8; p.arena_bytes];
    let slots: HashMap<ValueId, _> = p.slots.iter().map(|s| (s.value, s)).collect();
    let views: HashMap<ValueId, _> = p.views.iter().map(|v| (v.value, v)).collect();
    let stored = |arena: &[u8], v: ValueId| -> HostTensor {
        match g.values[v.index()].def {
            ValueDef::Input(k) => inputs[k].clone(),
            ValueDef::Node { .. } => {
                let s = slots[&v];
                decode(&s.ty, &arena[s.offset..s.offset + s.bytes])
            }
        }
    };
    let read = |arena: &[u8], v: ValueId| -> HostTensor {
        let Some(view) = views.get(&v) else {
            return stored(arena, v);
        };
        let base = stored(arena, view.base);
        let ty = g.ty(v);
        let dims = ty.dims();
        let n: usize = ty.shape.numel();
        let mut idx = Vec::with_capacity(n);
        let mut c = vec![0usize; dims.len()];
        for _ in 0..n {
            idx.push(
                view.offset
                    + c.iter()
                        .zip(&view.strides)
                        .map(|(a, s)| a * s)
                        .sum::<usize>(),
            );
            for k in (0..dims.len()).rev() {
                c[k] += 1;
                if c[k] < dims[k] {
                    break;
                }
                c[k] = 0;
            }
        }
        base.take(&idx, ty.shape.clone()).unwrap()
    };
    for step in &p.steps {
        let node = &g.nodes[step.nodes[0]];
        let args: Vec<HostTensor> = step.inputs.iter().map(|&v| read(&arena, v)).collect();
        let mut b = GraphBuilder::new("step");
        let ins: Vec<ValueId> = args
            .iter()
            .enumerate()
            .map(|(k, t)| {
                b.input(
                    format!("i{k}"),
                    TensorType::new(t.dtype(), t.shape().clone()),
                )
            })
            .collect();
        let outs = b
            .push(node.op, &ins, node.attrs.clone())
            .map_err(|e| e.to_string())?;
        let one = b.finish(&outs).map_err(|e| e.to_string())?;
        let results = cpu(&one, &args)?;
        for (&o, t) in step.outputs.iter().zip(&results) {
            let s = slots[&o];
            arena[s.offset..s.offset + s.bytes].copy_from_slice(&encode(t));
        }
    }
    Ok(g.outputs.iter().map(|&v| read(&arena, v)).collect())
}

/// Random inputs for every graph input of `g` (seeded).
pub fn inputs_for(g: &Graph, seed: u64) -> Vec<HostTensor> {
    let mut rng = Rng(seed);
    g.inputs
        .iter()
        .map(|&v| {
            let t = g.ty(v);
            if t.dtype == DType::Bool {
                let n = t.shape.numel();
                let b: Vec<bool> = (0..n).map(|_| rng.chance(0.7)).collect();
                HostTensor::from_slice(&b, t.shape.clone()).unwrap()
            } else {
                rng.tensor(t.dtype, t.dims())
            }
        })
        .collect()
}

/// Equal results within `rtol` (relative) plus `atol` for floats; bitwise
/// for the rest.
pub fn close_results(
    want: &[HostTensor],
    got: &[HostTensor],
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    for (k, (a, b)) in want.iter().zip(got).enumerate() {
        if a.dtype() != b.dtype() || a.shape() != b.shape() {
            return Err(format!("output {k}: types differ"));
        }
        if !a.dtype().is_float() {
            if a.data() != b.data() {
                return Err(format!("output {k}: {:?} vs {:?}", a.data(), b.data()));
            }
            continue;
        }
        let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
        for (i, (&p, &q)) in x.iter().zip(&y).enumerate() {
            let ok = (p.is_nan() && q.is_nan())
                || p == q
                || (p - q).abs() <= atol + rtol * p.abs().max(q.abs());
            if !ok {
                return Err(format!("output {k}, element {i}: {p} vs {q}"));
            }
        }
    }
    Ok(())
}

/// `g` with every float dtype widened to f64 (inputs, constants, casts,
/// sub-graphs): fused and unfused forms then agree to f64 rounding, so a
/// comparison is not at the mercy of f16 intermediates.
pub fn to_f64(g: &Graph) -> Graph {
    use rlx_ir::{Attr, Attrs};
    let wide = |t: &TensorType| {
        if t.dtype.is_float() {
            TensorType::new(DType::F64, t.shape.clone())
        } else {
            t.clone()
        }
    };
    let mut b = GraphBuilder::new(g.name.clone());
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for &v in &g.inputs {
        let name = g.values[v.index()].name.clone().unwrap_or_default();
        map[v.index()] = Some(b.input(name, wide(g.ty(v))));
    }
    for n in &g.nodes {
        let ins: Vec<ValueId> = n.inputs.iter().map(|v| map[v.index()].unwrap()).collect();
        let mut attrs = Attrs::new();
        for (k, a) in &n.attrs.0 {
            let a = match a {
                Attr::Graph(sg) => Attr::Graph(Box::new(to_f64(sg))),
                Attr::Tensor(t) if t.dtype().is_float() => Attr::Tensor(
                    HostTensor::from_f64(DType::F64, t.shape().clone(), t.to_f64_vec().unwrap())
                        .unwrap(),
                ),
                Attr::DType(d) if d.is_float() => Attr::DType(DType::F64),
                a => a.clone(),
            };
            attrs.0.insert(k.clone(), a);
        }
        let outs = b.push(n.op, &ins, attrs).unwrap();
        for (o, x) in n.outputs.iter().zip(outs) {
            map[o.index()] = Some(x);
        }
    }
    let outs: Vec<ValueId> = g.outputs.iter().map(|v| map[v.index()].unwrap()).collect();
    b.finish(&outs).unwrap()
}

/// Inputs widened like [`to_f64`].
pub fn inputs_f64(inputs: &[HostTensor]) -> Vec<HostTensor> {
    inputs
        .iter()
        .map(|t| {
            if t.dtype().is_float() {
                HostTensor::from_f64(DType::F64, t.shape().clone(), t.to_f64_vec().unwrap())
                    .unwrap()
            } else {
                t.clone()
            }
        })
        .collect()
}
