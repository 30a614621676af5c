//! Batched matmul with a fused epilogue (bias, activation): 64×64 output
//! tiles per workgroup, 16×16 threads each holding a 4×4 register block,
//! K in steps of 16 through shared memory. Operands are read through their
//! strides, so transposed weights (a `permute` view) cost no copy.

use super::expr::apply;
use super::{unravel, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_ir::Attrs;
use std::fmt::Write;

const BM: usize = 64;
const BN: usize = 64;
const BK: usize = 16;

/// Lift NumPy matmul operands to (batch..., m, k) and (batch..., k, n),
/// with the output's batch dims. Returns (a, b, batch dims, m, k, n).
pub fn operands(
    a: &TensorRef,
    b: &TensorRef,
) -> (TensorRef, TensorRef, Vec<usize>, usize, usize, usize) {
    let mut a = a.clone();
    let mut b = b.clone();
    if a.dims.len() == 1 {
        a.dims.insert(0, 1);
        a.strides.insert(0, 0);
    }
    if b.dims.len() == 1 {
        b.dims.push(1);
        b.strides.push(0);
    }
    let (ra, rb) = (a.dims.len(), b.dims.len());
    let (m, k, n) = (a.dims[ra - 2], a.dims[ra - 1], b.dims[rb - 1]);
    let ba = &a.dims[..ra - 2];
    let bb = &b.dims[..rb - 2];
    let r = ba.len().max(bb.len());
    let batch: Vec<usize> = (0..r)
        .map(|i| {
            let da = if i + ba.len() >= r {
                ba[i + ba.len() - r]
            } else {
                1
            };
            let db = if i + bb.len() >= r {
                bb[i + bb.len() - r]
            } else {
                1
            };
            da.max(db)
        })
        .collect();
    let full = |t: &TensorRef, x: usize, y: usize| {
        let mut d = batch.clone();
        d.extend([x, y]);
        t.broadcast_to(&d)
    };
    (full(&a, m, k), full(&b, k, n), batch, m, k, n)
}

/// act(a @ b + bias) into contiguous `out`.
pub fn kernel(
    name: &str,
    a: &TensorRef,
    b: &TensorRef,
    bias: Option<&TensorRef>,
    act: &str,
    out: &TensorRef,
) -> Result<Kernel, WgpuError> {
    let (a, b_, batch, m, k, n) = operands(a, b);
    let nb: usize = batch.iter().product();
    let groups = [
        n.div_ceil(BN) as u32,
        m.div_ceil(BM) as u32,
        nb.max(1) as u32,
    ];
    if groups[2] > super::MAX_GROUPS || groups[1] > super::MAX_GROUPS {
        return Err(WgpuError::Unsupported {
            op: "matmul".into(),
            why: format!("batch {nb} or m {m} exceeds the dispatch grid"),
        });
    }
    let mut bl = Builder::default();
    let rb = batch.len();
    let (bu, bi) = unravel("wg.z", &batch, "z");
    let bidx = |t: &TensorRef| {
        let mut bt = t.clone();
        bt.dims.truncate(rb);
        bt.strides.truncate(rb);
        Builder::addr(&bt, &bi)
    };
    let sa = (a.strides[rb], a.strides[rb + 1]);
    let sb = (b_.strides[rb], b_.strides[rb + 1]);
    let la = bl.load(&a, "abase + i32(gm) * SA0 + i32(gk) * SA1");
    let lb = bl.load(&b_, "bbase + i32(gk) * SB0 + i32(gn) * SB1");
    let la = la
        .replace("SA0", &sa.0.to_string())
        .replace("SA1", &sa.1.to_string());
    let lb = lb
        .replace("SB0", &sb.0.to_string())
        .replace("SB1", &sb.1.to_string());
    // Epilogue: bias through its broadcast strides, then the activation.
    let mut epi = String::new();
    if let Some(bias) = bias {
        let mut d = batch.clone();
        d.extend([m, n]);
        let bf = bias.broadcast_to(&if out.dims.len() == d.len() {
            d.clone()
        } else {
            d.clone()
        });
        let bb = bidx(&bf);
        let (s0, s1) = (bf.strides[rb], bf.strides[rb + 1]);
        let lbias = bl.load(&bf, &format!("({bb}) + i32(gm) * {s0} + i32(gn) * {s1}"));
        let _ = writeln!(epi, "v = v + {lbias};");
    }
    if act != "none" {
        let e = apply(
            act,
            &["v".to_string()],
            &[rlx_ir::DType::F32],
            rlx_ir::DType::F32,
            &Attrs::new(),
        )
        .ok_or_else(|| WgpuError::Unsupported {
            op: "matmul_bias_act".into(),
            why: format!("activation `{act}`"),
        })?;
        let _ = writeln!(epi, "v = {e};");
    }
    let st = bl.store(
        out,
        &format!(
            "{} + i32(wg.z) * {} + i32(gm) * {n} + i32(gn)",
            out.offset,
            m * n
        ),
        "v",
    );
    let s = format!(
        r#"var<workgroup> As: array<f32, {asz}>;
var<workgroup> Bs: array<f32, {bsz}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(local_invocation_id) li: vec3<u32>) {{
{bu}let abase: i32 = {abase};
let bbase: i32 = {bbase};
let m0: u32 = wg.y * {BM}u;
let n0: u32 = wg.x * {BN}u;
var acc: array<f32, 16>;
for (var i: u32 = 0u; i < 16u; i = i + 1u) {{ acc[i] = 0.0; }}
for (var k0: u32 = 0u; k0 < {k}u; k0 = k0 + {BK}u) {{
  for (var t: u32 = 0u; t < 4u; t = t + 1u) {{
    let e = lid + t * 256u;
    // A tile: {BM} rows x {BK} cols, stored k-major.
    let am = e / {BK}u; let ak = e % {BK}u;
    let gm = m0 + am; let gk = k0 + ak;
    var av: f32 = 0.0;
    if (gm < {m}u && gk < {k}u) {{ av = {la}; }}
    As[ak * {BM}u + am] = av;
    // B tile: {BK} rows x {BN} cols.
    let bk = e / {BN}u; let bn = e % {BN}u;
    let gk2 = k0 + bk; let gn2 = n0 + bn;
    var bv: f32 = 0.0;
    if (gk2 < {k}u && gn2 < {n}u) {{ let gk = gk2; let gn = gn2; bv = {lb}; }}
    Bs[bk * {BN}u + bn] = bv;
  }}
  workgroupBarrier();
  for (var kk: u32 = 0u; kk < {BK}u; kk = kk + 1u) {{
    let a4 = vec4<f32>(As[kk * {BM}u + li.y * 4u], As[kk * {BM}u + li.y * 4u + 1u], As[kk * {BM}u + li.y * 4u + 2u], As[kk * {BM}u + li.y * 4u + 3u]);
    let b4 = vec4<f32>(Bs[kk * {BN}u + li.x * 4u], Bs[kk * {BN}u + li.x * 4u + 1u], Bs[kk * {BN}u + li.x * 4u + 2u], Bs[kk * {BN}u + li.x * 4u + 3u]);
    for (var i: u32 = 0u; i < 4u; i = i + 1u) {{
      let ai = a4[i];
      acc[i * 4u] = fma(ai, b4.x, acc[i * 4u]);
      acc[i * 4u + 1u] = fma(ai, b4.y, acc[i * 4u + 1u]);
      acc[i * 4u + 2u] = fma(ai, b4.z, acc[i * 4u + 2u]);
      acc[i * 4u + 3u] = fma(ai, b4.w, acc[i * 4u + 3u]);
    }}
  }}
  workgroupBarrier();
}}
for (var i: u32 = 0u; i < 4u; i = i + 1u) {{
  for (var j: u32 = 0u; j < 4u; j = j + 1u) {{
    let gm = m0 + li.y * 4u + i;
    let gn = n0 + li.x * 4u + j;
    if (gm < {m}u && gn < {n}u) {{
      var v: f32 = acc[i * 4u + j];
{epi}      {st}
    }}
  }}
}}
}}
"#,
        asz = BM * BK,
        bsz = BK * BN,
        abase = bidx(&a),
        bbase = bidx(&b_),
    );
    Ok(bl.finish(name.to_string(), s, groups))
}
