//! Reductions: one workgroup per output element; each thread folds a
//! strided share of the reduced elements, then a shared-memory tree
//! combines the 256 partials. f32 accumulation (the reference widens to
//! f64; tests allow for the difference).

use super::{grid, unravel, Builder, Kernel, WG};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_ir::DType;
use std::fmt::Write;

/// The reductions with a kernel, and their input dtypes.
pub fn claims() -> Vec<(&'static str, Vec<DType>)> {
    let f = || vec![DType::F32, DType::F16];
    vec![
        ("reduce_sum", f()),
        ("reduce_mean", f()),
        ("reduce_prod", f()),
        ("reduce_max", f()),
        ("reduce_min", f()),
        ("reduce_logsumexp", f()),
        ("reduce_variance", f()),
        ("reduce_any", vec![DType::Bool]),
        ("reduce_all", vec![DType::Bool]),
        ("argmax", f()),
        ("argmin", f()),
    ]
}

/// Split `x`'s axes into kept and reduced: the output multi-index walks
/// the kept axes, a reduced flat index walks the reduced ones.
pub struct Split {
    pub kept: TensorRef,
    pub red: TensorRef,
}

pub fn split(x: &TensorRef, axes: &[usize]) -> Split {
    let pick = |want: bool| {
        let ks: Vec<usize> = (0..x.dims.len())
            .filter(|k| axes.contains(k) == want)
            .collect();
        TensorRef {
            dims: ks.iter().map(|&k| x.dims[k]).collect(),
            strides: ks.iter().map(|&k| x.strides[k]).collect(),
            offset: 0,
            ..x.clone()
        }
    };
    let mut kept = pick(false);
    kept.offset = x.offset;
    Split {
        kept,
        red: pick(true),
    }
}

/// Code computing `base` (the row's start address, i32) for workgroup row
/// `row`, plus the opening of the kernel. Returns (code, base expression).
/// `sg`: the entry point also takes the subgroup builtins [`tree_sum`] uses.
pub fn row_prologue(
    kept: &TensorRef,
    rows: usize,
    groups: [u32; 3],
    shared: &str,
    sg: bool,
) -> String {
    let (u, k) = unravel("row", &kept.dims, "k");
    format!(
        "{shared}\n@compute @workgroup_size({WG})\nfn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32{}) {{\nlet row: u32 = wg.x + wg.y * {}u;\nif (row >= {rows}u) {{ return; }}\n{u}let base: i32 = {};\n",
        if sg { SG_ARGS } else { "" },
        groups[0],
        Builder::addr(kept, &k)
    )
}

/// Entry-point parameters for [`tree_sum`] with subgroups.
const SG_ARGS: &str = ", @builtin(subgroup_id) sgid: u32, @builtin(subgroup_invocation_id) sgl: u32, @builtin(subgroup_size) sgs: u32";

/// A workgroup sum of `acc` into `out` (all `WG` invocations, uniform
/// control flow): with `sg`, one `subgroupAdd` per subgroup and a loop
/// over the subgroups' partials — two barriers instead of a tree's nine;
/// else the shared-memory tree. Subgroups of at most 32 (`Caps`) keep the
/// partials within `sh`.
pub fn tree_sum(acc: &str, out: &str, sg: bool) -> String {
    if !sg {
        return tree(acc, out, "a + b");
    }
    format!(
        "{{ let v_ = subgroupAdd({acc}); if (sgl == 0u) {{ sh[sgid] = v_; }} }}\nworkgroupBarrier();\nvar {out}_: f32 = sh[0];\nfor (var i_: u32 = 1u; i_ < {WG}u / sgs; i_ = i_ + 1u) {{ {out}_ = {out}_ + sh[i_]; }}\nlet {out} = {out}_;\nworkgroupBarrier();\n"
    )
}

/// A loop over the reduced elements owned by this thread; inside, `x` is
/// the loaded element and `r` its reduced flat index.
pub fn row_loop(b: &mut Builder, x: &TensorRef, red: &TensorRef, len: usize, body: &str) -> String {
    let (u, j) = unravel("r", &red.dims, "j");
    let a = format!("base + ({})", Builder::addr(red, &j));
    let ld = b.load(x, &a);
    // bool folds as 0/1.
    let ld = if x.dtype == DType::Bool {
        format!("select(0.0, 1.0, {ld})")
    } else {
        ld
    };
    format!(
        "for (var r: u32 = lid; r < {len}u; r = r + {WG}u) {{\n{u}let x: f32 = {ld};\n{body}\n}}\n"
    )
}

/// A shared-memory tree reduction of `acc` into `out` (all threads get it).
pub fn tree(acc: &str, out: &str, combine: &str) -> String {
    tree_n(acc, out, combine, WG)
}

/// [`tree`] for a workgroup of `n` threads (a power of two).
pub fn tree_n(acc: &str, out: &str, combine: &str, n: u32) -> String {
    format!(
        "sh[lid] = {acc};\nworkgroupBarrier();\nfor (var s: u32 = {h}u; s > 0u; s = s >> 1u) {{\nif (lid < s) {{ let a = sh[lid]; let b = sh[lid + s]; sh[lid] = {combine}; }}\nworkgroupBarrier();\n}}\nlet {out} = sh[0];\nworkgroupBarrier();\n",
        h = n / 2
    )
}

/// A reduction over `axes` of `x` into contiguous `out`.
pub fn kernel(
    name: &str,
    op: &str,
    x: &TensorRef,
    axes: &[usize],
    correction: i64,
    out: &TensorRef,
    sg: bool,
) -> Result<Kernel, WgpuError> {
    let sp = split(x, axes);
    let rows = sp.kept.numel().max(1);
    let len = sp.red.numel();
    let groups = grid(rows, 1);
    let mut b = Builder::default();
    let arg = op == "argmax" || op == "argmin";
    let shared = if arg {
        format!("var<workgroup> sh: array<f32, {WG}>;\nvar<workgroup> si: array<u32, {WG}>;")
    } else {
        format!("var<workgroup> sh: array<f32, {WG}>;")
    };
    let mut s = row_prologue(&sp.kept, rows, groups, &shared, sg);
    let fold = |b: &mut Builder, init: &str, step: &str, comb: &str, out_: &str| {
        let mut s = format!("var acc: f32 = {init};\n");
        s.push_str(&row_loop(b, x, &sp.red, len, step));
        if comb == "a + b" {
            s.push_str(&tree_sum("acc", out_, sg));
        } else {
            s.push_str(&tree("acc", out_, comb));
        }
        s
    };
    let ninf = "bits_(0xff800000u)";
    let pinf = "bits_(0x7f800000u)";
    let result = match op {
        "reduce_sum" | "reduce_mean" => {
            s.push_str(&fold(&mut b, "0.0", "acc = acc + x;", "a + b", "t"));
            if op == "reduce_mean" {
                format!("t / {}.0", len)
            } else {
                "t".into()
            }
        }
        "reduce_prod" => {
            s.push_str(&fold(&mut b, "1.0", "acc = acc * x;", "a * b", "t"));
            "t".into()
        }
        "reduce_max" => {
            s.push_str(&fold(
                &mut b,
                ninf,
                "acc = fmax_(acc, x);",
                "fmax_(a, b)",
                "t",
            ));
            "t".into()
        }
        "reduce_min" => {
            s.push_str(&fold(
                &mut b,
                pinf,
                "acc = fmin_(acc, x);",
                "fmin_(a, b)",
                "t",
            ));
            "t".into()
        }
        "reduce_any" => {
            s.push_str(&fold(&mut b, "0.0", "acc = max(acc, x);", "max(a, b)", "t"));
            "t != 0.0".into()
        }
        "reduce_all" => {
            s.push_str(&fold(&mut b, "1.0", "acc = min(acc, x);", "min(a, b)", "t"));
            "t != 0.0".into()
        }
        "reduce_logsumexp" => {
            s.push_str(&fold(
                &mut b,
                ninf,
                "acc = fmax_(acc, x);",
                "fmax_(a, b)",
                "m",
            ));
            let body = "acc = acc + exp(x - m);".to_string();
            s.push_str("var acc2: f32 = 0.0;\n");
            let lp = row_loop(&mut b, x, &sp.red, len, &body.replace("acc", "acc2"));
            s.push_str(&lp);
            s.push_str(&tree_sum("acc2", "t", sg));
            "select(m + log(t), m, inf_(m) || nan_(m))".into()
        }
        "reduce_variance" => {
            s.push_str(&fold(&mut b, "0.0", "acc = acc + x;", "a + b", "t"));
            let _ = writeln!(s, "let mean = t / {}.0;\nvar acc2: f32 = 0.0;", len);
            let lp = row_loop(
                &mut b,
                x,
                &sp.red,
                len,
                "let d = x - mean; acc2 = acc2 + d * d;",
            );
            s.push_str(&lp);
            s.push_str(&tree_sum("acc2", "q", sg));
            format!("q / f32({})", len as i64 - correction)
        }
        "argmax" | "argmin" => {
            // NaN wins outright; ties keep the first index.
            let better = if op == "argmax" { ">" } else { "<" };
            let lp = row_loop(&mut b, x, &sp.red, len, &format!(
                "if (!found || (!nan_(bv) && (nan_(x) || x {better} bv))) {{ bv = x; bi = r; found = true; }}"
            ));
            let _ = write!(
                s,
                "var bv: f32 = 0.0;\nvar bi: u32 = 0xffffffffu;\nvar found = false;\n{lp}"
            );
            let _ = write!(
                s,
                "sh[lid] = bv; si[lid] = bi;\nworkgroupBarrier();\nfor (var st: u32 = {h}u; st > 0u; st = st >> 1u) {{\nif (lid < st) {{\nlet av = sh[lid]; let ai = si[lid]; let cv = sh[lid + st]; let ci = si[lid + st];\nvar take = false;\nif (ci != 0xffffffffu) {{\n if (ai == 0xffffffffu) {{ take = true; }}\n else if (nan_(av)) {{ take = nan_(cv) && ci < ai; }}\n else if (nan_(cv)) {{ take = true; }}\n else if (cv {better} av) {{ take = true; }}\n else if (cv == av && ci < ai) {{ take = true; }}\n}}\nif (take) {{ sh[lid] = cv; si[lid] = ci; }}\n}}\nworkgroupBarrier();\n}}\n",
                h = WG / 2
            );
            "vec2<u32>(si[0], 0u)".into()
        }
        _ => {
            return Err(WgpuError::Unsupported {
                op: op.into(),
                why: "not a reduction".into(),
            })
        }
    };
    let st = b.store(out, &format!("{} + i32(row)", out.offset), "res");
    let _ = write!(s, "if (lid == 0u) {{\nlet res = {result};\n{st}\n}}\n}}\n");
    Ok(b.finish(name.to_string(), s, groups))
}
