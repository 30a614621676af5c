//! Reductions, with the elementwise node that produces their input or
//! consumes their output fused in.

use super::pointwise::Operand;
use super::{block_reduce, offset, st, unravel, ROW_THREADS};
use crate::ctype::{compute, lit, load, store};
use rlx_ir::DType;

/// A reduction kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reduce {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    LogSumExp,
    /// Variance with this correction (0 population, 1 sample).
    Variance(i64),
    Any,
    All,
    ArgMax,
    ArgMin,
}

impl Reduce {
    pub fn parse(op: &str, correction: i64) -> Option<Reduce> {
        Some(match op {
            "reduce_sum" => Reduce::Sum,
            "reduce_mean" => Reduce::Mean,
            "reduce_prod" => Reduce::Prod,
            "reduce_max" => Reduce::Max,
            "reduce_min" => Reduce::Min,
            "reduce_logsumexp" => Reduce::LogSumExp,
            "reduce_variance" => Reduce::Variance(correction),
            "reduce_any" => Reduce::Any,
            "reduce_all" => Reduce::All,
            "argmax" => Reduce::ArgMax,
            "argmin" => Reduce::ArgMin,
            _ => return None,
        })
    }
}

/// A reduction's operand: dtype, strides over the kept axes, strides over
/// the reduced axes.
pub type SplitOperand = (DType, Vec<i64>, Vec<i64>);

/// What a reduction reads: one plain input, or the elementwise node that
/// produced its input (fused: computed at each reduced element, never
/// stored).
pub struct ReduceSrc {
    /// Per operand: dtype, strides over the kept axes, strides over the
    /// reduced axes. A plain input is the one operand of dtype `din`.
    pub ins: Vec<SplitOperand>,
    /// A fused producer: statements over the operands loaded as `x0..`,
    /// and its result expression (rounded to `din`, as storing it would).
    pub body: Option<(String, String)>,
}

/// An elementwise node fused after a reduction: it runs on each reduced
/// value (rounded to the reduction's dtype, as storing it would) and
/// writes its own output instead of the reduction's.
pub struct ReduceEpilogue {
    /// The node's output dims (as many elements as the reduction's output).
    pub dims: Vec<usize>,
    /// Its operands `x0..` in order: `None` is the reduced value, `Some`
    /// an input loaded at the output element (strides over `dims`).
    pub ins: Vec<Option<Operand>>,
    pub stmts: String,
    pub result: String,
    pub dtype: DType,
    pub out_strides: Vec<i64>,
}

/// An elementwise node over the reduction's input dims fused after it,
/// reading the reduced value broadcast along the reduced axes (a row
/// normalized by its own norm, `x / max(sqrt(sum(x * x)), eps)`): each
/// block, once it has its row's value, computes the node over its row.
pub struct ReduceConsumer {
    /// Its operands `x0..`: `None` is the row's value (after the
    /// epilogue, if any), `Some` (dtype, kept strides, reduced strides).
    pub ins: Vec<Option<SplitOperand>>,
    pub stmts: String,
    pub result: String,
    pub dtype: DType,
    /// Its output's strides over the kept and reduced axes.
    pub out_kept: Vec<i64>,
    pub out_red: Vec<i64>,
}

/// How a reduction's threads cover it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceLayout {
    /// One block ([`ROW_THREADS`]) per output element, threads over the
    /// reduced elements: for rows that are contiguous or few outputs.
    Block,
    /// 32 consecutive output elements per 256-thread block, 8 threads per
    /// output splitting its reduced elements: when the outputs' innermost
    /// axis is contiguous in the input (a sum over the middle axis), a
    /// warp's loads are 32 neighbours. Single-pass kinds only (sum, mean,
    /// prod, max, min), no row consumer.
    Columns,
}

/// Output elements per block of [`ReduceLayout::Columns`].
pub const REDUCE_COLUMNS: usize = 32;

/// A reduction over `kd` (kept) dims of `rd` (reduced) dims (input strides
/// in `src`), from dtype `din` to `dout`; the output is contiguous over
/// `kd`, or written by `epi`, or by `bcast` (then `epi`'s output is not
/// stored). `layout` says how the threads cover it.
pub fn reduce(
    kind: Reduce,
    (din, dout): (DType, DType),
    (kd, rd): (&[usize], &[usize]),
    src: &ReduceSrc,
    (epi, bcast): (Option<&ReduceEpilogue>, Option<&ReduceConsumer>),
    layout: ReduceLayout,
) -> String {
    let cols = layout == ReduceLayout::Columns;
    let n_out: usize = kd.iter().product();
    let count: usize = rd.iter().product();
    // Where each thread starts and how far it steps over the reduced
    // elements; which thread writes the result.
    let (j0, jstep, writer) = if cols {
        ("ty", "8", "ty == 0 && live")
    } else {
        ("threadIdx.x", "blockDim.x", "threadIdx.x == 0")
    };
    // The combine of the per-thread partials into the writer's `v`.
    let combine = |t: &str, op: &str| {
        if cols {
            format!(
                "  {{ __shared__ {t} sh[8][{REDUCE_COLUMNS}]; sh[ty][tx] = v; __syncthreads();\n    if (ty == 0) {{ for (int w = 1; w < 8; ++w) {{ {t} a = v, b = sh[w][tx]; v = {op}; }} }} }}\n"
            )
        } else {
            block_reduce(t, op)
        }
    };
    let c = compute(din);
    let acc = if din.is_float() { c } else { "long long" };
    let fmax = if c == "double" { "fmax" } else { "fmaxf" };
    let fexp = if c == "double" { "exp" } else { "expf" };
    let flog = if c == "double" { "log" } else { "logf" };
    let qoff = |rs: &[i64]| offset(rd, rs).replace('c', "q");
    // The code that sets `x`, the element reduced, in the loop over `j`.
    let fetch = match &src.body {
        None => format!(
            "long long roff = {};\n    {c} x = {};",
            qoff(&src.ins[0].2),
            load(din, "in0[base + roff]")
        ),
        Some((stmts, result)) => {
            let mut f = String::new();
            for (k, (d, _, rs)) in src.ins.iter().enumerate() {
                f += &format!(
                    "{}{} x{k} = {};\n",
                    if k == 0 { "" } else { "    " },
                    compute(*d),
                    load(*d, &format!("in{k}[base{k} + {}]", qoff(rs)))
                );
            }
            f + stmts + &format!("    {c} x = {};", load(din, &store(din, result)))
        }
    };
    let red_loop = |init: &str, step: &str| {
        format!(
            "  {acc} v = {init};\n  for (long long j = {j0}; j < {count}LL; j += {jstep}) {{\n    {}\n    {fetch}\n    {step}\n  }}\n",
            unravel(rd, "j").replace("long long c", "long long q").replace("r_", "rr_"),
        )
    };
    let nan_max = |a: &str, b: &str, cmp: &str| {
        format!("({a} != {a} ? {a} : ({b} != {b} ? {b} : ({a} {cmp} {b} ? {a} : {b})))")
    };
    let mut params: Vec<String> = src
        .ins
        .iter()
        .enumerate()
        .map(|(k, (d, _, _))| format!("const {}* __restrict__ in{k}", st(*d)))
        .collect();
    let bases = if src.body.is_none() {
        format!("long long base = {};", offset(kd, &src.ins[0].1))
    } else {
        let b: Vec<String> = src
            .ins
            .iter()
            .enumerate()
            .map(|(k, (_, ks, _))| format!("base{k} = {}", offset(kd, ks)))
            .collect();
        format!("long long {};", b.join(", "))
    };
    // The epilogue's own inputs follow the reduction's.
    let n_src = src.ins.len();
    let mut m = n_src;
    let mut epi_loads = String::new();
    if let Some(e) = epi {
        for (k, o) in e.ins.iter().enumerate() {
            let x = match o {
                None => "y_".to_string(),
                Some(o) => {
                    params.push(format!("const {}* __restrict__ in{m}", st(o.dtype)));
                    m += 1;
                    load(
                        o.dtype,
                        &format!("in{}[{}]", m - 1, offset(&e.dims, &o.strides)),
                    )
                }
            };
            let d = o.as_ref().map_or(dout, |o| o.dtype);
            epi_loads += &format!("      {} x{k} = {x};\n", compute(d));
        }
    }
    // The broadcast consumer: operands over the input dims, loaded at
    // (kept index of this block, reduced index j); `z_` is the row's value.
    let mut bc_loads = String::new();
    if let Some(b) = bcast {
        for (k, o) in b.ins.iter().enumerate() {
            let (d, x) = match o {
                None => (epi.map_or(dout, |e| e.dtype), "z_".to_string()),
                Some((d, ks, rs)) => {
                    params.push(format!("const {}* __restrict__ in{m}", st(*d)));
                    m += 1;
                    let at = format!("in{}[{} + {}]", m - 1, offset(kd, ks), qoff(rs));
                    (*d, load(*d, &at))
                }
            };
            bc_loads += &format!("    {} x{k} = {x};\n", compute(d));
        }
    }
    let out_dtype = match (epi, bcast) {
        (_, Some(b)) => b.dtype,
        (Some(e), None) => e.dtype,
        (None, None) => dout,
    };
    params.push(format!("{}* __restrict__ out0", st(out_dtype)));
    let first = if cols {
        // Threads past the last output compute on output 0 and write nothing.
        format!("int tx = threadIdx.x & 31, ty = threadIdx.x >> 5; long long o = blockIdx.x * {REDUCE_COLUMNS}LL + tx; const bool live = o < {n_out}LL; if (!live) o = 0;")
    } else {
        "long long o = blockIdx.x;".to_string()
    };
    let head = format!(
        "extern \"C\" __global__ void @NAME@({}) {{\n  {first} {}\n  {bases}\n",
        params.join(", "),
        unravel(kd, "o"),
    );
    let mut s = head;
    let fin = |s: &mut String, e: &str| {
        *s += &match (epi, bcast) {
            (None, None) => format!("  if ({writer}) out0[o] = {};\n}}\n", store(dout, e)),
            (Some(ep), None) => format!(
                "  if ({writer}) {{\n    {} y_ = {};\n    {{ {}\n{epi_loads}{}      out0[{}] = {};\n    }}\n  }}\n}}\n",
                compute(dout),
                load(dout, &store(dout, e)),
                unravel(&ep.dims, "o"),
                ep.stmts,
                offset(&ep.dims, &ep.out_strides),
                store(ep.dtype, &ep.result)
            ),
            (ep, Some(b)) => {
                // Every thread holds the reduced value: each computes the
                // row's value `z_` (rounded as storing it would), then
                // the consumer over its share of the row.
                let mut t = format!(
                    "  {} y_ = {};\n",
                    compute(dout),
                    load(dout, &store(dout, e))
                );
                match ep {
                    Some(ep) => {
                        t += &format!(
                            "  {c2} z_;\n  {{ {}\n{epi_loads}{}      z_ = {};\n  }}\n",
                            unravel(&ep.dims, "o"),
                            ep.stmts,
                            load(ep.dtype, &store(ep.dtype, &ep.result)),
                            c2 = compute(ep.dtype),
                        );
                    }
                    None => t += &format!("  {} z_ = y_;\n", compute(dout)),
                }
                t += &format!(
                    "  for (long long j = threadIdx.x; j < {count}LL; j += blockDim.x) {{\n    {}\n{bc_loads}{}    out0[{} + {}] = {};\n  }}\n}}\n",
                    unravel(rd, "j").replace("long long c", "long long q").replace("r_", "rr_"),
                    b.stmts,
                    offset(kd, &b.out_kept),
                    qoff(&b.out_red),
                    store(b.dtype, &b.result)
                );
                t
            }
        };
    };
    match kind {
        Reduce::Sum | Reduce::Mean => {
            s += &red_loop(&lit(din, 0.0), "v += x;");
            s += &combine(acc, "a + b");
            let e = if kind == Reduce::Mean {
                format!("v / ({acc}){count}")
            } else {
                "v".into()
            };
            fin(&mut s, &e);
        }
        Reduce::Prod => {
            s += &red_loop(&lit(din, 1.0), "v *= x;");
            s += &combine(acc, "a * b");
            fin(&mut s, "v");
        }
        Reduce::Max | Reduce::Min => {
            let (init, cmp) = if kind == Reduce::Max {
                (f64::NEG_INFINITY, ">")
            } else {
                (f64::INFINITY, "<")
            };
            let init = if din.is_float() {
                lit(din, init)
            } else if kind == Reduce::Max {
                "(-0x7fffffffffffffffLL - 1)".into()
            } else {
                "0x7fffffffffffffffLL".into()
            };
            let pick = if din.is_float() {
                nan_max("a", "b", cmp)
            } else {
                format!("(a {cmp} b ? a : b)")
            };
            s += &red_loop(&init, &format!("{{ {acc} a = v, b = x; v = {pick}; }}"));
            s += &combine(acc, &pick);
            fin(&mut s, "v");
        }
        Reduce::LogSumExp => {
            // Two passes: the max, then the sum of exp(x - max).
            let pick = nan_max("a", "b", ">");
            s += &red_loop(
                &lit(din, f64::NEG_INFINITY),
                &format!("{{ {acc} a = v, b = x; v = {pick}; }}"),
            );
            s += &combine(acc, &pick);
            s += &format!("  {acc} m = v; {acc} mm = ({fmax}(m, m) == m && m > -1e308 && m < 1e308) ? m : {z};\n", z = lit(din, 0.0));
            s += &red_loop(&lit(din, 0.0), &format!("v += {fexp}(x - mm);"))
                .replace(&format!("  {acc} v = "), "  v = ");
            s += &combine(acc, "a + b");
            fin(&mut s, &format!("mm + {flog}(v)"));
        }
        Reduce::Variance(corr) => {
            s += &red_loop(&lit(din, 0.0), "v += x;");
            s += &combine(acc, "a + b");
            s += &format!("  {acc} mean = v / ({acc}){count};\n");
            s += &red_loop(&lit(din, 0.0), "v += (x - mean) * (x - mean);")
                .replace(&format!("  {acc} v = "), "  v = ");
            s += &combine(acc, "a + b");
            fin(&mut s, &format!("v / ({acc})({count} - {corr})"));
        }
        Reduce::Any | Reduce::All => {
            let (init, step, op) = if kind == Reduce::Any {
                ("false", "v = v || (x != 0);", "a || b")
            } else {
                ("true", "v = v && (x != 0);", "a && b")
            };
            s += &red_loop(init, step).replacen(&format!("  {acc} v"), "  bool v", 1);
            s += &combine("bool", op);
            fin(&mut s, "v");
        }
        Reduce::ArgMax | Reduce::ArgMin => {
            // (value, index) pairs; the first NaN wins, ties keep the lowest index.
            let cmp = if kind == Reduce::ArgMax { ">" } else { "<" };
            let better = format!("(bi < 0 || (ai >= 0 && ((a != a && !(b != b)) || (!(b != b) && a {cmp} b) || ((a == b || (a != a && b != b)) && ai < bi))))");
            s += &format!(
                "  {c} v = 0; long long vi = -1;\n  for (long long j = threadIdx.x; j < {count}LL; j += blockDim.x) {{\n    {}\n    {fetch}\n    {c} a = x; long long ai = j; {c} b = v; long long bi = vi;\n    if ({better}) {{ v = a; vi = ai; }}\n  }}\n",
                unravel(rd, "j").replace("long long c", "long long q").replace("r_", "rr_"),
            );
            s += &format!(
                "  {{ __shared__ {c} sv[{t}]; __shared__ long long si[{t}]; sv[threadIdx.x] = v; si[threadIdx.x] = vi; __syncthreads();\n    for (int w = {h}; w > 0; w >>= 1) {{ if (threadIdx.x < w) {{ {c} a = sv[threadIdx.x + w], b = sv[threadIdx.x]; long long ai = si[threadIdx.x + w], bi = si[threadIdx.x]; if ({better}) {{ sv[threadIdx.x] = a; si[threadIdx.x] = ai; }} }} __syncthreads(); }}\n    vi = si[0]; }}\n",
                t = ROW_THREADS,
                h = ROW_THREADS / 2
            );
            fin(&mut s, "vi");
        }
    }
    s
}
