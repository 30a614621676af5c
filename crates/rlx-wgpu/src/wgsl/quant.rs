//! `dequant_matmul(x, w)`: x (..., K) times the transpose of a GGUF
//! block-quantized weight w (N, K) whose bytes stay as uploaded (a graph
//! input bound as `array<u32>`). Blocks are decoded in the shader, eight
//! elements (one "unit") at a time, with the reference's f32 arithmetic
//! (`rlx-ref` `kernels/quant.rs`); f16 scales are read with
//! `unpack2x16float`, so no `shader-f16` is needed. Accumulation is f32.
//!
//! Two kernels:
//! * **gemv** (M ≤ [`GEMV_ROWS`], decoding): a workgroup of 256 threads
//!   computes 8 output columns, 32 threads per column striding over the
//!   row's units, so each weight byte is read once; the rows' partial sums
//!   meet in a shared-memory tree (no subgroups needed).
//! * **tiled** (prompts): 64×64 output tiles, K in chunks of 32; each of
//!   the 256 threads decodes one unit of the weight tile into shared
//!   memory and holds a 4×4 register block.

use super::{Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_ir::dtype::Storage;
use rlx_ir::DType;
use std::fmt::Write;

/// Up to this many rows (M) the gemv kernel runs; more take the tiled one.
pub const GEMV_ROWS: usize = 8;

/// The weight dtypes the kernels decode.
pub const DTYPES: [DType; 8] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

/// Whether `d` is a weight dtype the kernels decode.
pub fn decodes(d: DType) -> bool {
    DTYPES.contains(&d)
}

fn unsupported(why: impl Into<String>) -> WgpuError {
    WgpuError::Unsupported {
        op: "dequant_matmul".into(),
        why: why.into(),
    }
}

/// (elements, bytes) per block of `d`.
fn block(d: DType) -> (usize, usize) {
    match d.storage() {
        Storage::Block { block, bytes } => (block, bytes),
        Storage::Plain { size } => (1, size),
    }
}

/// WGSL helpers over the weight buffer `w` (bytes in u32 words) and
/// `q_dq(rb, u) -> Q8`: elements 8u..8u+8 of the row whose bytes start at
/// byte `rb`, as two vec4s. Straight-line vector code (no arrays, no
/// loops), so compilers keep it in registers. Every multi-byte field read
/// is at an even address; blocks of a multiple of 4 bytes read whole words.
fn decoder(w: &str, d: DType) -> Result<String, WgpuError> {
    let (bl, bb) = block(d);
    // Four or eight bytes from byte `b`: word-aligned where the block size
    // keeps every field aligned, else 2-byte aligned (one select, no branch).
    let loads = if bb % 4 == 0 {
        format!(
            "fn q_4(b: u32) -> u32 {{ return {w}[b >> 2u]; }}\n\
             fn q_8(b: u32) -> vec2<u32> {{ let i = b >> 2u; return vec2<u32>({w}[i], {w}[i + 1u]); }}\n"
        )
    } else {
        format!(
            "fn q_4(b: u32) -> u32 {{ let i = b >> 2u; let a = {w}[i]; return select(a, (a >> 16u) | ({w}[i + 1u] << 16u), (b & 2u) != 0u); }}\n\
             fn q_8(b: u32) -> vec2<u32> {{\n  let i = b >> 2u; let a = {w}[i]; let c = {w}[i + 1u]; let e = {w}[i + 2u];\n  return select(vec2<u32>(a, c), vec2<u32>((a >> 16u) | (c << 16u), (c >> 16u) | (e << 16u)), (b & 2u) != 0u);\n}}\n"
        )
    };
    let mut s = format!(
        r#"struct Q8 {{ a: vec4<f32>, b: vec4<f32> }}
fn q_b(b: u32) -> u32 {{ return ({w}[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu; }}
{loads}fn q_h(b: u32) -> f32 {{ return unpack2x16float({w}[b >> 2u] >> ((b & 2u) * 8u)).x; }}
// Bits sh.. of each byte of w, masked.
fn q_f(w: u32, sh: u32, m: u32) -> vec4<u32> {{ return (vec4<u32>(w) >> (vec4<u32>(0u, 8u, 16u, 24u) + sh)) & vec4<u32>(m); }}
// Bits sh..sh+4 of w.
fn q_bits(w: u32, sh: u32) -> vec4<u32> {{ return (vec4<u32>(w) >> (vec4<u32>(0u, 1u, 2u, 3u) + sh)) & vec4<u32>(1u); }}
// The four bytes of w as i8.
fn q_s8(w: u32) -> vec4<f32> {{ return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u)); }}
"#
    );
    if matches!(d, DType::Q4K | DType::Q5K) {
        // ggml's get_scale_min_k4 over the 12 scale bytes at `s`.
        s.push_str(
            r#"fn q_smk4(s: u32, j: u32) -> vec2<f32> {
  if (j < 4u) { return vec2<f32>(f32(q_b(s + j) & 63u), f32(q_b(s + j + 4u) & 63u)); }
  let sc = (q_b(s + j + 4u) & 15u) | ((q_b(s + j - 4u) >> 6u) << 4u);
  let m = (q_b(s + j + 4u) >> 4u) | ((q_b(s + j) >> 6u) << 4u);
  return vec2<f32>(f32(sc), f32(m));
}
"#,
        );
    }
    // Per dtype: the unit's block base `bs`, its first element `e0` in the
    // block, then the values `a` (elements 0..4) and `b` (4..8), with the
    // reference's f32 formula.
    let head = format!(
        "let bs = rb + (u / {per}u) * {bb}u; let e0 = (u % {per}u) * 8u;\n",
        per = bl / 8
    );
    let body = match d {
        // Nibble order: byte j holds element j (low) and j + 16 (high).
        DType::Q4_0 => "let d = q_h(bs); let q = q_8(bs + 2u + (e0 & 15u)); let sh = (e0 >> 4u) * 4u;
  let a = d * (vec4<f32>(q_f(q.x, sh, 15u)) - 8.0); let b = d * (vec4<f32>(q_f(q.y, sh, 15u)) - 8.0);",
        DType::Q4_1 => "let d = q_h(bs); let m = q_h(bs + 2u); let q = q_8(bs + 4u + (e0 & 15u)); let sh = (e0 >> 4u) * 4u;
  let a = d * vec4<f32>(q_f(q.x, sh, 15u)) + m; let b = d * vec4<f32>(q_f(q.y, sh, 15u)) + m;",
        // The 5th bit of element j is bit j of the u32 qh.
        DType::Q5_0 => "let d = q_h(bs); let qh = q_4(bs + 2u); let q = q_8(bs + 6u + (e0 & 15u)); let sh = (e0 >> 4u) * 4u;
  let xa = q_f(q.x, sh, 15u) | (q_bits(qh, e0) << vec4<u32>(4u)); let xb = q_f(q.y, sh, 15u) | (q_bits(qh, e0 + 4u) << vec4<u32>(4u));
  let a = d * (vec4<f32>(xa) - 16.0); let b = d * (vec4<f32>(xb) - 16.0);",
        DType::Q5_1 => "let d = q_h(bs); let m = q_h(bs + 2u); let qh = q_4(bs + 4u); let q = q_8(bs + 8u + (e0 & 15u)); let sh = (e0 >> 4u) * 4u;
  let xa = q_f(q.x, sh, 15u) | (q_bits(qh, e0) << vec4<u32>(4u)); let xb = q_f(q.y, sh, 15u) | (q_bits(qh, e0 + 4u) << vec4<u32>(4u));
  let a = d * vec4<f32>(xa) + m; let b = d * vec4<f32>(xb) + m;",
        DType::Q8_0 => "let d = q_h(bs); let q = q_8(bs + 2u + e0);
  let a = q_s8(q.x) * d; let b = q_s8(q.y) * d;",
        // 4-bit planes: 32 bytes per 64 elements, low nibbles then high;
        // one (scale, min) per 32 elements.
        DType::Q4K => "let dd = q_h(bs); let dm = q_h(bs + 2u); let sm = q_smk4(bs + 4u, e0 / 32u);
  let ds = dd * sm.x; let mm = dm * sm.y;
  let q = q_8(bs + 16u + (e0 / 64u) * 32u + (e0 % 32u)); let sh = ((e0 / 32u) % 2u) * 4u;
  let a = ds * vec4<f32>(q_f(q.x, sh, 15u)) - mm; let b = ds * vec4<f32>(q_f(q.y, sh, 15u)) - mm;",
        // The 5th bit of element e is bit e/32 of qh[e % 32].
        DType::Q5K => "let dd = q_h(bs); let dm = q_h(bs + 2u); let sm = q_smk4(bs + 4u, e0 / 32u);
  let ds = dd * sm.x; let mm = dm * sm.y;
  let qh = q_8(bs + 16u + (e0 % 32u)); let hb = e0 / 32u;
  let q = q_8(bs + 48u + (e0 / 64u) * 32u + (e0 % 32u)); let sh = ((e0 / 32u) % 2u) * 4u;
  let xa = q_f(q.x, sh, 15u) | (q_f(qh.x, hb, 1u) << vec4<u32>(4u)); let xb = q_f(q.y, sh, 15u) | (q_f(qh.y, hb, 1u) << vec4<u32>(4u));
  let a = ds * vec4<f32>(xa) - mm; let b = ds * vec4<f32>(xb) - mm;",
        // ql: 64 bytes per 128 elements (low, high nibbles); qh: 2-bit
        // plane, 32 bytes per 128 elements; an i8 scale per 16.
        DType::Q6K => "let d = q_h(bs + 208u); let g = e0 / 128u;
  let ds = d * f32(bitcast<i32>(q_b(bs + 192u + e0 / 16u) << 24u) >> 24u);
  let ql = q_8(bs + g * 64u + (e0 % 64u)); let sl = ((e0 / 64u) % 2u) * 4u;
  let qh = q_8(bs + 128u + g * 32u + (e0 % 32u)); let shh = ((e0 / 32u) % 4u) * 2u;
  let xa = q_f(ql.x, sl, 15u) | (q_f(qh.x, shh, 3u) << vec4<u32>(4u)); let xb = q_f(ql.y, sl, 15u) | (q_f(qh.y, shh, 3u) << vec4<u32>(4u));
  let a = ds * (vec4<f32>(xa) - 32.0); let b = ds * (vec4<f32>(xb) - 32.0);",
        d => return Err(unsupported(format!("no WGSL decoder for {d} weights"))),
    };
    let _ = write!(
        s,
        "fn q_dq(rb: u32, u: u32) -> Q8 {{\n  {head}  {body}\n  return Q8(a, b);\n}}\n"
    );
    Ok(s)
}

/// Element address (i32) of row `m`'s first element in `x` (leading dims
/// unravelled at generation time).
fn row_addr(x: &TensorRef, m: usize) -> i64 {
    let r = x.dims.len();
    let mut rest = m;
    let mut a = x.offset;
    for k in (0..r - 1).rev() {
        let d = x.dims[k].max(1);
        a += (rest % d) as i64 * x.strides[k];
        rest /= d;
    }
    a
}

/// `fn q_row(m: u32) -> i32`: the same for a row index known at run time.
fn row_fn(x: &TensorRef) -> String {
    let r = x.dims.len();
    let mut s = format!(
        "fn q_row(m: u32) -> i32 {{\n  var r = m; var a: i32 = {};\n",
        x.offset
    );
    for k in (0..r - 1).rev() {
        let d = x.dims[k].max(1);
        if d > 1 && x.strides[k] != 0 {
            let _ = writeln!(s, "  a += i32(r % {d}u) * {};", x.strides[k]);
        }
        let _ = writeln!(s, "  r = r / {d}u;");
    }
    s.push_str("  return a;\n}\n");
    s
}

/// The kernel for y = x · dequant(w)ᵀ into contiguous `out`.
pub fn kernel(
    name: &str,
    x: &TensorRef,
    w: &TensorRef,
    out: &TensorRef,
) -> Result<Kernel, WgpuError> {
    let d = w.dtype;
    if !decodes(d) {
        let names: Vec<&str> = DTYPES.iter().map(|d| d.name()).collect();
        return Err(unsupported(format!(
            "no WGSL kernel for {d} weights ({} are decoded)",
            names.join(", ")
        )));
    }
    if w.dims.len() != 2 || x.dims.is_empty() {
        return Err(unsupported(format!(
            "expects x (..., K) and w (N, K); got {:?} and {:?}",
            x.dims, w.dims
        )));
    }
    let (n, k) = (w.dims[0], w.dims[1]);
    let (bl, bb) = block(d);
    if k % bl != 0 || x.dims[x.dims.len() - 1] != k {
        return Err(unsupported(format!(
            "K = {k} is not a whole number of {d} blocks of {bl}, or x's last dim differs"
        )));
    }
    let row_bytes = k / bl * bb;
    // The weight must be whole rows of the uploaded bytes (the input
    // itself, or a slice of its rows).
    let rows_ok = (w.strides[1] == 1 || k == 1) && (w.strides[0] == k as i64 || n == 1);
    if !rows_ok || w.offset < 0 || w.offset % k as i64 != 0 {
        return Err(unsupported(format!(
            "the {d} weight is a strided view (strides {:?}, offset {}); only whole rows of the uploaded bytes are read",
            w.strides, w.offset
        )));
    }
    let woff = w.offset as usize / k * row_bytes;
    let m: usize = x.dims[..x.dims.len() - 1].iter().product();
    let sk = x.strides[x.dims.len() - 1];
    let mut b = Builder::default();
    let wb = b.buf(w.buf);
    let mut s = decoder(&wb, d)?;
    let units = k / 8;
    let name = format!("{name}_{}", d.name());
    if m <= GEMV_ROWS {
        let cols = 8usize;
        let groups = super::grid(n.div_ceil(cols), 1);
        let mut dots = String::new();
        let mut puts = String::new();
        let mut adds = String::new();
        let mut stores = String::new();
        let mut decl = String::new();
        for r in 0..m.max(1) {
            let xa = row_addr(x, r);
            let lx: Vec<String> = (0..8)
                .map(|i| b.load(x, &format!("{xa} + i32(k0 + {i}u) * {sk}")))
                .collect();
            let _ = writeln!(
                dots,
                "      acc{r} += dot(w.a, vec4<f32>({}, {}, {}, {})) + dot(w.b, vec4<f32>({}, {}, {}, {}));",
                lx[0], lx[1], lx[2], lx[3], lx[4], lx[5], lx[6], lx[7]
            );
            let _ = writeln!(decl, "  var acc{r}: f32 = 0.0;");
            let _ = writeln!(puts, "  red[{}u + lid] = acc{r};", r * 256);
            let _ = writeln!(
                adds,
                "      red[{o}u + lid] += red[{o}u + lid + s];",
                o = r * 256
            );
            let st = b.store(
                out,
                &format!("{} + {} + i32(gn)", out.offset, r * n),
                &format!("red[{}u + lid]", r * 256),
            );
            let _ = writeln!(stores, "    {st}");
        }
        let rows = m.max(1);
        let _ = write!(
            s,
            r#"var<workgroup> red: array<f32, {red}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
  let lane = lid % 32u;
  let gn = (wg.x + wg.y * {gx}u) * {cols}u + lid / 32u;
{decl}  if (gn < {n}u) {{
    let rb = {woff}u + gn * {row_bytes}u;
    for (var u = lane; u < {units}u; u += 32u) {{
      let w = q_dq(rb, u);
      let k0 = u * 8u;
{dots}    }}
  }}
{puts}  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {{
    if (lane < s) {{
{adds}    }}
    workgroupBarrier();
  }}
  if (lane == 0u && gn < {n}u) {{
{stores}  }}
}}
"#,
            red = 256 * rows,
            gx = groups[0],
        );
        return Ok(b.finish(format!("{name}_gemv"), s, groups));
    }
    // Tiled: 64×64 outputs per workgroup, K in chunks of 32 (one unit of
    // eight per thread of the weight tile; eight x elements per thread).
    let groups = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, 1];
    if groups[0] > super::MAX_GROUPS || groups[1] > super::MAX_GROUPS {
        return Err(unsupported(format!(
            "M = {m} or N = {n} exceeds the dispatch grid"
        )));
    }
    s.push_str(&row_fn(x));
    let lx = b.load(x, &format!("q_row(gm) + i32(k0 + ak) * {sk}"));
    let mut init = String::new();
    let mut inner = String::new();
    let mut stores = String::new();
    // Each chunk of 32 sums on its own before it joins the total (blocked
    // summation: closer to the reference than one long chain of FMAs).
    let mut chunk = String::new();
    let c = ["x", "y", "z", "w"];
    for (i, ci) in c.iter().enumerate() {
        let _ = writeln!(inner, "    let a{i} = Xs[kk * 16u + li.y].{ci};");
        let _ = writeln!(inner, "    let b{i} = Ws[kk * 16u + li.x].{ci};");
        for j in 0..4 {
            let _ = writeln!(init, "  var c{i}_{j}: f32 = 0.0;");
        }
    }
    for i in 0..4 {
        for j in 0..4 {
            let _ = writeln!(init, "  var p{i}_{j}: f32 = 0.0;");
            let _ = writeln!(inner, "    p{i}_{j} = fma(a{i}, b{j}, p{i}_{j});");
            let _ = writeln!(chunk, "    c{i}_{j} += p{i}_{j}; p{i}_{j} = 0.0;");
            let st = b.store(
                out,
                &format!("{} + i32(gm) * {n} + i32(gn)", out.offset),
                &format!("c{i}_{j}"),
            );
            let _ = writeln!(
                stores,
                "  {{ let gm = m0 + li.y * 4u + {i}u; let gn = n0 + li.x * 4u + {j}u; if (gm < {m}u && gn < {n}u) {{ {st} }} }}"
            );
        }
    }
    let mut wput = String::new();
    for i in 0..8 {
        let _ = writeln!(
            wput,
            "      Ws[ws + {}u][wc] = w.{}.{};",
            i * 16,
            ["a", "b"][i / 4],
            c[i % 4]
        );
    }
    let _ = write!(
        s,
        r#"var<workgroup> Xs: array<vec4<f32>, 512>;
var<workgroup> Ws: array<vec4<f32>, 512>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(local_invocation_id) li: vec3<u32>) {{
  let m0 = wg.y * 64u;
  let n0 = wg.x * 64u;
{init}  for (var k0 = 0u; k0 < {k}u; k0 += 32u) {{
    for (var t = 0u; t < 8u; t++) {{
      let e = lid + t * 256u; let am = e / 32u; let ak = e % 32u; let gm = m0 + am;
      var xv: f32 = 0.0;
      if (gm < {m}u) {{ xv = {lx}; }}
      Xs[ak * 16u + am / 4u][am % 4u] = xv;
    }}
    {{
      let cn = lid / 4u; let uu = lid % 4u; let gn = n0 + cn;
      var w = Q8(vec4<f32>(0.0), vec4<f32>(0.0));
      if (gn < {n}u) {{ w = q_dq({woff}u + gn * {row_bytes}u, k0 / 8u + uu); }}
      let ws = uu * 128u + cn / 4u; let wc = cn % 4u;
{wput}
    }}
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk++) {{
{inner}    }}
{chunk}    workgroupBarrier();
  }}
{stores}}}
"#
    );
    Ok(b.finish(format!("{name}_tiled"), s, groups))
}
