//! Kernel templates. Each returns CUDA C text named `@NAME@`; shapes,
//! strides and attribute values are constants in the text.

use crate::ctype::{compute, lit, load, storage, store};
use rlx_ir::DType;

/// Threads per block of the row kernels (reductions, norms).
pub const ROW_THREADS: u32 = 256;

/// One operand of an elementwise loop: its dtype and its stride (in
/// elements, 0 = broadcast) along each output axis.
#[derive(Clone, Debug)]
pub struct Operand {
    pub dtype: DType,
    pub strides: Vec<i64>,
    /// Read through a gather instead of stored: the strides then address
    /// the gather's (never stored, contiguous) output, and the element
    /// comes from the gather's table.
    pub gather: Option<GatherLoad>,
}

impl Operand {
    /// An operand read from memory at `strides`.
    pub fn plain(dtype: DType, strides: Vec<i64>) -> Operand {
        Operand {
            dtype,
            strides,
            gather: None,
        }
    }
}

/// A gather (`embedding`, `gather`, `index_select`) computed where its
/// output is read: output element `f` (flat) is table element
/// `(o·len + idx[p])·inner + e` for `f = (o·n_idx + p)·inner + e`, as the
/// [`gather`] kernel stores it. The operand's buffer is the table; the
/// index array is the kernel parameter `ix{k}`. An index out of range
/// reports `code` on the error flag (as the gather kernel would) and
/// reads row 0 instead.
#[derive(Clone, Debug, PartialEq)]
pub struct GatherLoad {
    pub idx_dtype: DType,
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub n_idx: usize,
    pub code: i32,
}

/// Statements that set `x{k}` (compute type) to operand `k` at the element
/// with coordinates `c0..` over `dims`: a strided load of `{buf}{k}`, or
/// for a gathered operand an index read from `ix{k}` and the table element
/// it picks (range-checked; `err` is the error flag).
pub fn operand_load(buf: &str, k: usize, dims: &[usize], o: &Operand) -> String {
    let at = offset(dims, &o.strides);
    let c = compute(o.dtype);
    match &o.gather {
        None => format!(
            "    {c} x{k} = {};\n",
            load(o.dtype, &format!("{buf}{k}[{at}]"))
        ),
        Some(g) => {
            // Index arithmetic in 32 bits when every offset fits (division
            // by a constant is a multiply-high then), else 64.
            let span = g.inner * g.n_idx;
            let small = g.outer * span < 1 << 31 && g.outer * g.len * g.inner < 1 << 31;
            let (it, sf) = if small {
                ("unsigned", "u")
            } else {
                ("long long", "LL")
            };
            let inner = g.inner;
            // The index position and, with an outer axis, the outer index.
            let (pos, row) = if g.outer == 1 {
                (format!("gf{k} / {inner}{sf}"), String::new())
            } else {
                (
                    format!("(gf{k} / {inner}{sf}) % {}{sf}", g.n_idx),
                    format!("(long long)(gf{k} / {span}{sf}) * {}LL + ", g.len),
                )
            };
            format!(
                "    {it} gf{k} = ({it})({at});
    long long gj{k} = (long long)ix{k}[{pos}]; if (gj{k} < 0) gj{k} += {len}LL;
    if (gj{k} < 0 || gj{k} >= {len}LL) {{ report(err, {code}); gj{k} = 0; }}
    {c} x{k} = {};\n",
                load(
                    o.dtype,
                    &format!("{buf}{k}[({row}gj{k}) * {inner}LL + gf{k} % {inner}{sf}]")
                ),
                len = g.len,
                code = g.code,
            )
        }
    }
}

/// The index-array parameters of the gathered operands among `ins`, then
/// the error flag (empty when no operand is gathered): they follow every
/// other parameter, as the planner passes them.
fn gather_params(ins: &[Operand]) -> String {
    let mut s = String::new();
    for (k, o) in ins.iter().enumerate() {
        if let Some(g) = &o.gather {
            s += &format!(", const {}* __restrict__ ix{k}", st(g.idx_dtype));
        }
    }
    if !s.is_empty() {
        s += ", int* err";
    }
    s
}

fn st(d: DType) -> &'static str {
    storage(d).unwrap_or("float")
}

/// Code that sets `c0..c{r-1}` from the flat index `i` over `dims`.
fn unravel(dims: &[usize], i: &str) -> String {
    unravel_as(dims, 0, i, "r_", "long long")
}

/// Code that sets `c{first}..` from index `i` over `dims` (`var` holds
/// the remainder).
fn unravel_from(dims: &[usize], first: usize, i: &str, var: &str) -> String {
    unravel_as(dims, first, i, var, "long long")
}

/// [`unravel_from`] in integer type `ty`: `unsigned` when the index fits
/// in 32 bits, where a division by a constant is a multiply-high and a
/// shift (64-bit division is a long emulated sequence, and elementwise
/// kernels over large tensors are instruction-bound on it).
fn unravel_as(dims: &[usize], first: usize, i: &str, var: &str, ty: &str) -> String {
    let mut s = format!("{ty} {var} = {i};");
    for k in (0..dims.len()).rev() {
        let c = first + k;
        if k == 0 {
            s += &format!(" {ty} c{c} = {var};");
        } else {
            s += &format!(" {ty} c{c} = {var} % {d}; {var} /= {d};", d = dims[k]);
        }
    }
    s
}

/// `c0*s0 + c1*s1 + ...` (zero strides and unit dims left out).
fn offset(dims: &[usize], strides: &[i64]) -> String {
    let terms: Vec<String> = strides
        .iter()
        .enumerate()
        .filter(|&(k, &s)| s != 0 && dims[k] != 1)
        .map(|(k, &s)| {
            if s == 1 {
                format!("c{k}")
            } else {
                format!("c{k} * {s}LL")
            }
        })
        .collect();
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}

/// Contiguous row-major strides of `dims`.
pub fn contiguous(dims: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1] as i64;
    }
    s
}

/// The parameter list of an elementwise kernel: `in{k}` pointers to the
/// operands' stored types, then `out{k}` pointers.
fn params(ins: &[Operand], outs: &[(DType, Vec<i64>)]) -> Vec<String> {
    let mut params: Vec<String> = ins
        .iter()
        .enumerate()
        .map(|(k, o)| format!("const {}* __restrict__ in{k}", st(o.dtype)))
        .collect();
    params.extend(
        outs.iter()
            .enumerate()
            .map(|(k, (d, _))| format!("{}* __restrict__ out{k}", st(*d))),
    );
    params
}

/// An elementwise loop over `dims`. Inputs load into `x0..`; `body` is
/// statements over them that define the compute-type values named in
/// `results`; output k (dtype, strides) stores `results[k]`. Gathered
/// operands take their index arrays after the outputs, then the error flag.
pub fn elementwise(
    dims: &[usize],
    ins: &[Operand],
    outs: &[(DType, Vec<i64>)],
    body: &str,
    results: &[String],
) -> String {
    let n: usize = dims.iter().product();
    let params = params(ins, outs);
    let mut s = format!(
        "extern \"C\" __global__ void @NAME@({}{}) {{\n  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {n}LL; i += (long long)gridDim.x * blockDim.x) {{\n    {}\n",
        params.join(", "),
        gather_params(ins),
        if n < 1 << 31 {
            unravel_as(dims, 0, "(unsigned)i", "r_", "unsigned")
        } else {
            unravel(dims, "i")
        }
    );
    for (k, o) in ins.iter().enumerate() {
        s += &operand_load("in", k, dims, o);
    }
    s += body;
    for (k, ((d, strides), r)) in outs.iter().zip(results).enumerate() {
        s += &format!(
            "    out{k}[{}] = {};\n",
            offset(dims, strides),
            store(*d, r)
        );
    }
    s += "  }\n}\n";
    s
}

/// [`elementwise`] with `vec` neighbouring elements along the last axis
/// per thread (16 bytes of each operand and output whose last stride is
/// 1: one load or store instead of `vec`, and the index arithmetic once).
/// The planner checks what this needs (see `vector_width` in the plan):
/// `dims.last() % vec == 0`; every operand with last stride 1 and every
/// output of a 16/`vec`-byte float type, 16-byte aligned at every group
/// start; other operands broadcast along the last axis (stride 0); no
/// gathered operand.
pub fn elementwise_vec(
    dims: &[usize],
    ins: &[Operand],
    outs: &[(DType, Vec<i64>)],
    body: &str,
    results: &[String],
    vec: usize,
) -> String {
    let r = dims.len();
    if vec <= 1 || r == 0 {
        return elementwise(dims, ins, outs, body, results);
    }
    let last = r - 1;
    let groups: usize = dims.iter().product::<usize>() / vec;
    let mut gdims = dims.to_vec();
    gdims[last] /= vec;
    let params = params(ins, outs);
    let half = 16 / vec == 2;
    // Element e_ of the 16 bytes held in words w[0..4], as a stored value.
    let lane = |w: &str, d: DType| match d {
        DType::F16 => format!("h16{{(unsigned short)({w}[e_ >> 1] >> ((e_ & 1) * 16))}}"),
        DType::BF16 => format!("b16{{(unsigned short)({w}[e_ >> 1] >> ((e_ & 1) * 16))}}"),
        _ => format!("__uint_as_float({w}[e_])"),
    };
    let mut s = format!(
        "extern \"C\" __global__ void @NAME@({}) {{\n  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {groups}LL; i += (long long)gridDim.x * blockDim.x) {{\n    {} c{last} *= {vec};\n",
        params.join(", "),
        unravel_as(&gdims, 0, "(unsigned)i", "r_", "unsigned"),
    );
    for (k, o) in ins.iter().enumerate() {
        if o.strides[last] == 1 {
            s += &format!(
                "    v16b t{k} = *(const v16b*)(in{k} + {}); unsigned w{k}[4] = {{t{k}.x, t{k}.y, t{k}.z, t{k}.w}};\n",
                offset(dims, &o.strides)
            );
        }
    }
    for k in 0..outs.len() {
        s += &format!("    unsigned ow{k}[4] = {{0u, 0u, 0u, 0u}};\n");
    }
    s += &format!("    #pragma unroll\n    for (int e_ = 0; e_ < {vec}; ++e_) {{\n");
    for (k, o) in ins.iter().enumerate() {
        let x = if o.strides[last] == 1 {
            load(o.dtype, &lane(&format!("w{k}"), o.dtype))
        } else {
            load(o.dtype, &format!("in{k}[{}]", offset(dims, &o.strides)))
        };
        s += &format!("    {} x{k} = {x};\n", compute(o.dtype));
    }
    s += body;
    for (k, ((d, _), res)) in outs.iter().zip(results).enumerate() {
        s += &if half {
            format!(
                "    ow{k}[e_ >> 1] |= (unsigned){}.b << ((e_ & 1) * 16);\n",
                store(*d, res)
            )
        } else {
            format!("    ow{k}[e_] = __float_as_uint({});\n", store(*d, res))
        };
    }
    s += "    }\n";
    for (k, (_, strides)) in outs.iter().enumerate() {
        s += &format!(
            "    *(v16b*)(out{k} + {}) = v16b{{ow{k}[0], ow{k}[1], ow{k}[2], ow{k}[3]}};\n",
            offset(dims, strides)
        );
    }
    s += "  }\n}\n";
    s
}

/// Block-wide combine of `v` (per-thread partials) into thread 0's `v`, then
/// broadcast through `sh[0]`. `op` combines two values `a`, `b`.
fn block_reduce(ty: &str, op: &str) -> String {
    format!(
        "  {{ __shared__ {ty} sh[{t}]; sh[threadIdx.x] = v; __syncthreads();\n    for (int w = {h}; w > 0; w >>= 1) {{ if (threadIdx.x < w) {{ {ty} a = sh[threadIdx.x], b = sh[threadIdx.x + w]; sh[threadIdx.x] = {op}; }} __syncthreads(); }}\n    v = sh[0]; __syncthreads(); }}\n",
        t = ROW_THREADS,
        h = ROW_THREADS / 2
    )
}

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

/// Softmax (or log-softmax) over the middle axis of a contiguous
/// (outer, n, inner) tensor; one block per (outer, inner) row.
pub fn softmax(d: DType, n: usize, inner: usize, log: bool) -> String {
    let c = compute(d);
    let (fexp, flog, fmax) = if c == "double" {
        ("exp", "log", "fmax")
    } else {
        ("expf", "logf", "fmaxf")
    };
    let x = load(d, &format!("in0[base + j * {inner}LL]"));
    let neg_inf = lit(d, f64::NEG_INFINITY);
    let out = if log {
        "x - m - lse"
    } else {
        &format!("{fexp}(x - m) / v")
    };
    let _ = fmax;
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, {s}* __restrict__ out0) {{
  long long row = blockIdx.x; long long base = (row / {inner}LL) * {ni}LL + (row % {inner}LL);
  {c} v = {neg_inf};
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x}; v = (x != x || v != v) ? ({c})(x + v) : (x > v ? x : v); }}
{r1}  {c} m = v; v = 0;
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x}; v += {fexp}(x - m); }}
{r2}  {c} lse = {flog}(v); (void)lse;
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x}; out0[base + j * {inner}LL] = {st}; }}
}}
",
        s = st(d),
        ni = n * inner,
        r1 = block_reduce(c, "(a != a || b != b) ? a + b : (a > b ? a : b)"),
        r2 = block_reduce(c, "a + b"),
        st = store(d, out),
    )
}

/// Layer norm (or RMS norm when `beta` is absent) over contiguous rows of
/// `n` elements; gamma/beta contiguous of `n`. One block per row.
pub fn norm(d: DType, n: usize, eps: f64, rms: bool) -> String {
    let c = compute(d);
    let fsqrt = if c == "double" { "sqrt" } else { "sqrtf" };
    let x = load(d, "in0[base + j]");
    let beta_param = if rms {
        String::new()
    } else {
        format!(", const {}* __restrict__ in2", st(d))
    };
    let mean = if rms {
        "  m = 0;\n".to_string()
    } else {
        format!("  v = 0;\n  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ v += {x}; }}\n{}  m = v / ({c}){n};\n", block_reduce(c, "a + b"))
    };
    let shift = if rms {
        String::new()
    } else {
        format!(" + {}", load(d, "in2[j]"))
    };
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1{beta_param}, {s}* __restrict__ out0) {{
  long long base = blockIdx.x * {n}LL; {c} v, m;
{mean}  v = 0;
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x} - m; v += x * x; }}
{r}  {c} inv = ({c})1 / {fsqrt}(v / ({c}){n} + {eps});
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = ({x} - m) * inv * {g}{shift}; out0[base + j] = {o}; }}
}}
",
        s = st(d),
        r = block_reduce(c, "a + b"),
        eps = lit(d, eps),
        g = load(d, "in1[j]"),
        o = store(d, "x"),
    )
}

/// Rows of `x` (outer, len, inner) picked by indices along the middle axis:
/// out (outer, n_idx, inner). Both contiguous. Bad indices set `err`.
pub fn gather(
    d: DType,
    di: DType,
    outer: usize,
    len: usize,
    inner: usize,
    n_idx: usize,
    code: i32,
) -> String {
    let total = outer * n_idx * inner;
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {si}* __restrict__ in1, {s}* __restrict__ out0, int* err) {{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {total}LL; i += (long long)gridDim.x * blockDim.x) {{
    long long in_ = i % {inner}LL; long long p = (i / {inner}LL) % {n_idx}LL; long long o = i / ({inner}LL * {n_idx}LL);
    long long j = (long long)in1[p]; if (j < 0) j += {len}LL;
    if (j < 0 || j >= {len}LL) {{ report(err, {code}); continue; }}
    out0[i] = in0[(o * {len}LL + j) * {inner}LL + in_];
  }}
}}
",
        s = st(d),
        si = st(di),
    )
}

/// Where a score is masked or biased in attention.
#[derive(Clone, Debug)]
pub enum Mask {
    None,
    /// Keep where the mask is non-zero (bool or numeric), strides over (batch..., sq, sk).
    Keep {
        dtype: DType,
        strides: Vec<i64>,
    },
    /// Add the mask.
    Bias {
        dtype: DType,
        strides: Vec<i64>,
    },
}

/// The mask's kernel parameter (input slot `slot`) and the statement that
/// applies it to score `var` of query row `row` and key `j`: −inf where a
/// keep-mask is false, or the additive bias. One definition for the three
/// attention kernels.
fn mask_source(
    mask: &Mask,
    batch: &[usize],
    slot: usize,
    row: &str,
    var: &str,
) -> (String, String) {
    let r = batch.len();
    match mask {
        Mask::None => (String::new(), String::new()),
        Mask::Keep { dtype, strides } | Mask::Bias { dtype, strides } => {
            let param = format!(", const {}* __restrict__ in{slot}", st(*dtype));
            let moff = format!(
                "{} + {row} * {}LL + j * {}LL",
                offset(batch, &strides[..r]),
                strides[r],
                strides[r + 1]
            );
            let m = load(*dtype, &format!("in{slot}[{moff}]"));
            let code = if matches!(mask, Mask::Keep { .. }) {
                format!("if (!({m} != 0)) {var} = -__int_as_float(0x7f800000);")
            } else {
                format!("{var} += (float)({m});")
            };
            (param, code)
        }
    }
}

/// One attention problem, as the three attention kernels take it:
/// softmax(q·kᵀ·scale + mask)·v over `batch` heads. Strides are in
/// elements over (batch..., rows, cols) of q (sq × dh), k (sk × dh),
/// v (sk × dv) and the output (sq × dv).
#[derive(Clone, Copy, Debug)]
pub struct AttentionSpec<'a> {
    /// K and V rows are whole float4s, 16-byte aligned (f32): staged a
    /// float4 at a time.
    pub vec_kv: bool,
    pub dtype: DType,
    pub batch: &'a [usize],
    pub sq: usize,
    pub sk: usize,
    pub dh: usize,
    pub dv: usize,
    pub q: &'a [i64],
    pub k: &'a [i64],
    pub v: &'a [i64],
    pub out: &'a [i64],
    pub mask: &'a Mask,
    pub scale: f64,
}

/// The per-head base offsets and the row/column strides every attention
/// kernel bakes into its text.
struct AttentionStrides {
    /// Head base offsets of q, k, v and out (C expressions over `c0..`).
    qb: String,
    kb: String,
    vb: String,
    ob: String,
    /// (row, column) strides.
    q: (i64, i64),
    k: (i64, i64),
    v: (i64, i64),
    o: (i64, i64),
    /// Code that sets `c0..` from the head index `b`.
    unravel: String,
    /// The scale as an f32 literal.
    scale: String,
}

impl AttentionSpec<'_> {
    fn strides(&self) -> AttentionStrides {
        let r = self.batch.len();
        let boff = |s: &[i64]| offset(self.batch, &s[..r]);
        let rc = |s: &[i64]| (s[r], s[r + 1]);
        AttentionStrides {
            qb: boff(self.q),
            kb: boff(self.k),
            vb: boff(self.v),
            ob: boff(self.out),
            q: rc(self.q),
            k: rc(self.k),
            v: rc(self.v),
            o: rc(self.out),
            unravel: unravel(self.batch, "b"),
            scale: lit(DType::F32, self.scale as f32 as f64),
        }
    }

    fn heads(&self) -> usize {
        self.batch.iter().product()
    }
}

/// Fused attention: softmax(q·kᵀ·scale + mask)·v, one warp per query row.
pub fn attention(a: &AttentionSpec, warps: u32) -> String {
    let AttentionSpec {
        dtype: d,
        sq,
        sk,
        dh,
        dv,
        ..
    } = *a;
    let t = a.strides();
    let ((qr, qc), (kr, kc), (vr, vc)) = (t.q, t.k, t.v);
    let (mask_param, mask_code) = mask_source(a.mask, a.batch, 3, "row", "s");
    let nb = a.heads();
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long b = blockIdx.y; long long row = (long long)blockIdx.x * {warps} + warp;
  if (b >= {nb}LL || row >= {sq}LL) return;
  {unr}
  const {s}* q = in0 + {qb} + row * {qr}LL; const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb};
  float* qv = smem + warp * ({dh} + {sk});
  float* p = qv + {dh};
  for (int t = lane; t < {dh}; t += 32) qv[t] = {lq} * {scale};
  __syncwarp();
  float mx = -__int_as_float(0x7f800000);
  for (int j = lane; j < {sk}; j += 32) {{
    const {s}* kj = k + j * {kr}LL; float s = 0.f;
    for (int t = 0; t < {dh}; ++t) s += qv[t] * {lk};
    {mask_code}
    p[j] = s; mx = fmaxf(mx, s);
  }}
  mx = warp_max(mx);
  float sum = 0.f;
  for (int j = lane; j < {sk}; j += 32) {{ float e = expf(p[j] - mx); p[j] = e; sum += e; }}
  sum = warp_sum(sum);
  float inv = 1.f / sum;
  __syncwarp();
  {s}* o = out0 + {ob} + row * {osr}LL;
  for (int t = lane; t < {dv}; t += 32) {{
    float acc = 0.f;
    for (int j = 0; j < {sk}; ++j) acc += p[j] * {lv};
    o[t * {ost}LL] = {so};
  }}
}}
",
        s = st(d),
        unr = t.unravel,
        qb = t.qb,
        kb = t.kb,
        vb = t.vb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        lk = load(d, &format!("kj[t * {kc}LL]")),
        lv = load(d, &format!("v[j * {vr}LL + t * {vc}LL]")),
        so = store(d, "acc * inv"),
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
        scale = t.scale,
    )
}

/// The start of the attention kernels that stage a head in shared memory:
/// the head `b` (blocks past the last head return), `k` / `v` pointing at
/// its K and V, both staged into `ks` (rows `kp` floats apart) and `vs`,
/// and a block barrier. Eight loads per thread are issued before their
/// stores: one at a time, each load's global-memory latency was paid in
/// series (the staging of 32 elements per thread dominated the kernels at
/// MiniLM's 128 keys).
///
/// `pre` runs between the head's pointers and the staging: a kernel's own
/// global loads issued there overlap the staging's latency instead of
/// following the barrier.
fn staged_head(a: &AttentionSpec, t: &AttentionStrides, kp: usize, pre: &str) -> String {
    let (d, sk, dh, dv) = (a.dtype, a.sk, a.dh, a.dv);
    let ((kr, kc), (vr, vc)) = (t.k, t.v);
    let one = |n: usize, cols: usize, dst: &str, ld: usize, src: &str| {
        format!(
            "  for (int e0 = threadIdx.x; e0 < {n}; e0 += 8 * blockDim.x) {{
    float x[8];
    #pragma unroll
    for (int u = 0; u < 8; ++u) {{ int e = e0 + u * blockDim.x, j = e / {cols}, t = e % {cols}; x[u] = e < {n} ? (float)({src}) : 0.f; }}
    #pragma unroll
    for (int u = 0; u < 8; ++u) {{ int e = e0 + u * blockDim.x; if (e < {n}) {dst}[(e / {cols}) * {ld} + e % {cols}] = x[u]; }}
  }}
"
        )
    };
    // f32 rows of whole float4s: a float4 per load and store, a quarter
    // of the scalar copy's loads, stores and index arithmetic (the f32
    // attention was issue-bound: ncu, benches/cuda/minilm-cuda-analysis.md),
    // four loads in flight per thread.
    let four = |rows: usize, cols: usize, dst: &str, ld: usize, src: &str, rs: i64| {
        let n = rows * cols / 4;
        let c4 = cols / 4;
        format!(
            "  for (int e0 = threadIdx.x; e0 < {n}; e0 += 4 * blockDim.x) {{
    float4 x[4];
    #pragma unroll
    for (int u = 0; u < 4; ++u) {{ int e = e0 + u * blockDim.x; if (e < {n}) x[u] = *(const float4*)({src} + (e / {c4}) * {rs}LL + (e % {c4}) * 4); }}
    #pragma unroll
    for (int u = 0; u < 4; ++u) {{ int e = e0 + u * blockDim.x; if (e < {n}) *(float4*)({dst} + (e / {c4}) * {ld} + (e % {c4}) * 4) = x[u]; }}
  }}
"
        )
    };
    // The kernel's dtype too: `vec_kv` speaks of K and V's buffers, the
    // staging reads them as the kernel's type; padded K rows must stay
    // float4-aligned.
    let vec = a.vec_kv && d == DType::F32 && kp.is_multiple_of(4);
    let (stk, stv) = if vec {
        (
            four(sk, dh, "ks", kp, "k", kr),
            four(sk, dv, "vs", dv, "v", vr),
        )
    } else {
        (
            one(
                sk * dh,
                dh,
                "ks",
                kp,
                &load(d, &format!("k[j * {kr}LL + t * {kc}LL]")),
            ),
            one(
                sk * dv,
                dv,
                "vs",
                dv,
                &load(d, &format!("v[j * {vr}LL + t * {vc}LL]")),
            ),
        )
    };
    format!(
        "  long long b = blockIdx.y;
  if (b >= {nb}LL) return;
  {unr}
  const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb};
{pre}{stk}{stv}  __syncthreads();
",
        nb = a.heads(),
        unr = t.unravel,
        s = st(d),
        kb = t.kb,
        vb = t.vb,
    )
}

/// Attention with the head's K and V staged in shared memory once per block
/// of `rows` query rows (`warps` warps, each owning rows/warps of them): K and
/// V are read from global memory once per block instead of once per row.
/// K rows are padded by one float so lanes reading different keys hit
/// different banks.
pub fn attention_tiled(a: &AttentionSpec, warps: u32, rows: u32) -> String {
    let AttentionSpec {
        dtype: d,
        sq,
        sk,
        dh,
        dv,
        ..
    } = *a;
    let t = a.strides();
    let (qr, qc) = t.q;
    let kp = dh + 1;
    let (mask_param, mask_code) = mask_source(a.mask, a.batch, 3, "row", "s");
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  float* ks = smem; float* vs = ks + {sk} * {kp}; float* wq = vs + {sk} * {dv};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
{head}  float* qv = wq + warp * ({dh} + {sk});
  float* p = qv + {dh};
  for (int rr = warp; rr < {rows}; rr += {warps}) {{
    long long row = (long long)blockIdx.x * {rows} + rr;
    if (row >= {sq}LL) break;
    const {s}* q = in0 + {qb} + row * {qr}LL;
    for (int t = lane; t < {dh}; t += 32) qv[t] = {lq} * {scale};
    __syncwarp();
    // Each lane's keys j = lane + 32c side by side: {nj} independent
    // dot products per q element loaded (the key order within each sum
    // is unchanged). Past the last key a lane reads key sk - 1 and
    // drops the result.
    float sc[{nj}]; const float* kc[{nj}];
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{ sc[c] = 0.f; kc[c] = ks + min(lane + 32 * c, {sk} - 1) * {kp}; }}
    #pragma unroll 8
    for (int t = 0; t < {dh}; ++t) {{
      float qt = qv[t];
      #pragma unroll
      for (int c = 0; c < {nj}; ++c) sc[c] += qt * kc[c][t];
    }}
    float mx = -__int_as_float(0x7f800000);
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{
      int j = lane + 32 * c;
      if (j < {sk}) {{ float s = sc[c]; {mask_code} p[j] = s; mx = fmaxf(mx, s); }}
    }}
    mx = warp_max(mx);
    float sum = 0.f;
    for (int j = lane; j < {sk}; j += 32) {{ float e = expf(p[j] - mx); p[j] = e; sum += e; }}
    sum = warp_sum(sum);
    float inv = 1.f / sum;
    __syncwarp();
    {s}* o = out0 + {ob} + row * {osr}LL;
    // Four partial sums over the keys (j mod 4) break the dependency
    // chain of one long sum.
    for (int t = lane; t < {dv}; t += 32) {{
      float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
      int j = 0;
      #pragma unroll 2
      for (; j + 4 <= {sk}; j += 4) {{
        const float* vj = vs + j * {dv} + t;
        a0 += p[j] * vj[0]; a1 += p[j + 1] * vj[{dv}]; a2 += p[j + 2] * vj[2 * {dv}]; a3 += p[j + 3] * vj[3 * {dv}];
      }}
      for (; j < {sk}; ++j) a0 += p[j] * vs[j * {dv} + t];
      float acc = (a0 + a1) + (a2 + a3);
      o[t * {ost}LL] = {so};
    }}
    __syncwarp();
  }}
}}
",
        s = st(d),
        qb = t.qb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        head = staged_head(a, &t, kp, ""),
        so = store(d, "acc * inv"),
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
        scale = t.scale,
        nj = sk.div_ceil(32).max(1),
    )
}

/// Query rows per warp in [`attention_rows`].
pub const ATTN_ROWS_PER_WARP: u32 = 4;

/// Shared memory of [`attention_rows`] in bytes: K (rows padded by four
/// floats), V, and per warp its rows' scaled queries and probabilities.
pub fn attention_rows_smem(a: &AttentionSpec, warps: u32) -> usize {
    let r = ATTN_ROWS_PER_WARP as usize;
    (a.sk * (a.dh + 4) + a.sk * a.dv + warps as usize * r * (a.dh + a.sk)) * 4
}

/// Attention without tensor cores, register-tiled: the head's K and V
/// staged in shared memory once per block; each warp owns 4 query rows and
/// each lane keys `lane + 32c`, so one K element read from shared memory
/// feeds 4 rows' scores (the tiled kernel's one row per warp read it per
/// row). Softmax per row by warp shuffles; then each lane one output dim
/// of the 4 rows, each V element read once for them. Arithmetic per output
/// is the tiled kernel's: scores summed over the head dim in order, four
/// partial sums over the keys (j mod 4) in the product with V.
pub fn attention_rows(a: &AttentionSpec, warps: u32) -> String {
    let AttentionSpec {
        dtype: d,
        sq,
        sk,
        dh,
        dv,
        ..
    } = *a;
    let t = a.strides();
    let (qr, qc) = t.q;
    let kp = dh + 4;
    let rows = ATTN_ROWS_PER_WARP;
    let (mask_param, mask_code) = mask_source(a.mask, a.batch, 3, "row", "s");
    let nj = sk.div_ceil(32).max(1);
    // A mask the same for every query row (MiniLM's padding mask): read
    // once per key before the scores, not per row and score (one load and
    // its index arithmetic per score in an issue-bound kernel). Keep
    // masks become 0 / -inf, applied by selection.
    let per_key = match a.mask {
        Mask::Keep { strides, .. } | Mask::Bias { strides, .. } => strides[a.batch.len()] == 0,
        Mask::None => false,
    };
    let (mask_pre, mask_code) = if per_key {
        let once = mask_source(a.mask, a.batch, 3, "0", "s").1;
        let apply = if matches!(a.mask, Mask::Keep { .. }) {
            "if (mk[c] != 0.f) s = mk[c];"
        } else {
            "s += mk[c];"
        };
        (
            format!(
                "  float mk[{nj}];\n  #pragma unroll\n  for (int c = 0; c < {nj}; ++c) {{ int j = min(lane + 32 * c, {sk} - 1); float s = 0.f; {once} mk[c] = s; }}\n"
            ),
            apply.to_string(),
        )
    } else {
        (
            String::new(),
            format!("if (row < {sq}LL) {{ {mask_code} }}"),
        )
    };
    // The warp's scaled query rows and the mask, loaded into registers
    // before the head is staged (their global latency overlaps the
    // staging's instead of following the barrier).
    let qn = (rows as usize * dh).div_ceil(32);
    let pre = format!(
        "{mask_pre}  float qx[{qn}];
  #pragma unroll
  for (int u = 0; u < {qn}; ++u) {{
    int e = lane + 32 * u; float x = 0.f;
    if (e < {rows} * {dh}) {{ int r = e / {dh}, t = e % {dh}; long long row = row0 + r; const {s}* q = in0 + {qb} + row * {qr}LL; if (row < {sq}LL) x = {lq} * {scale}; }}
    qx[u] = x;
  }}
",
        s = st(d),
        qb = t.qb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        scale = t.scale,
    );
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  float* ks = smem; float* vs = ks + {sk} * {kp};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* qw = vs + {sk} * {dv} + warp * {rows} * ({dh} + {sk});
  float* pw = qw + {rows} * {dh};
  const long long row0 = ((long long)blockIdx.x * {warps} + warp) * {rows};
{head}  if (row0 >= {sq}LL) return;
  #pragma unroll
  for (int u = 0; u < {qn}; ++u) {{ int e = lane + 32 * u; if (e < {rows} * {dh}) qw[e] = qx[u]; }}
  __syncwarp();
  // Scores: lane's keys j = lane + 32c (past the last key a lane reads key
  // sk - 1 and drops the result), 4 rows at once.
  float sc[{rows}][{nj}]; const float* kc[{nj}];
  #pragma unroll
  for (int c = 0; c < {nj}; ++c) {{
    kc[c] = ks + min(lane + 32 * c, {sk} - 1) * {kp};
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) sc[r][c] = 0.f;
  }}
  // float4 reads over the head dim: K rows are dh + 4 floats apart, so
  // the 8 lanes of a phase read 8 distinct bank groups.
  for (int t = 0; t < {dh}; t += 4) {{
    float4 kt[{nj}];
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) kt[c] = *(const float4*)(kc[c] + t);
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      float4 qt = *(const float4*)(qw + r * {dh} + t);
      #pragma unroll
      for (int c = 0; c < {nj}; ++c) {{
        float x = sc[r][c];
        x += qt.x * kt[c].x; x += qt.y * kt[c].y; x += qt.z * kt[c].z; x += qt.w * kt[c].w;
        sc[r][c] = x;
      }}
    }}
  }}
  float inv[{rows}];
  #pragma unroll
  for (int r = 0; r < {rows}; ++r) {{
    long long row = row0 + r;
    float* p = pw + r * {sk};
    float mx = -__int_as_float(0x7f800000);
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{
      int j = lane + 32 * c;
      if (j < {sk}) {{ float s = sc[r][c]; {mask_code} sc[r][c] = s; mx = fmaxf(mx, s); }}
    }}
    mx = warp_max(mx);
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{
      int j = lane + 32 * c;
      if (j < {sk}) {{ float e = expf(sc[r][c] - mx); p[j] = e; sum += e; }}
    }}
    sum = warp_sum(sum);
    inv[r] = 1.f / sum;
  }}
  __syncwarp();
  for (int t = lane; t < {dv}; t += 32) {{
    float a[{rows}][4];
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) {{ a[r][0] = 0.f; a[r][1] = 0.f; a[r][2] = 0.f; a[r][3] = 0.f; }}
    int j = 0;
    for (; j + 4 <= {sk}; j += 4) {{
      const float* vj = vs + j * {dv} + t;
      float v0 = vj[0], v1 = vj[{dv}], v2 = vj[2 * {dv}], v3 = vj[3 * {dv}];
      #pragma unroll
      for (int r = 0; r < {rows}; ++r) {{
        const float4 p = *(const float4*)(pw + r * {sk} + j);
        a[r][0] += p.x * v0; a[r][1] += p.y * v1; a[r][2] += p.z * v2; a[r][3] += p.w * v3;
      }}
    }}
    for (; j < {sk}; ++j) {{
      #pragma unroll
      for (int r = 0; r < {rows}; ++r) a[r][0] += pw[r * {sk} + j] * vs[j * {dv} + t];
    }}
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      long long row = row0 + r;
      if (row >= {sq}LL) break;
      float acc = (a[r][0] + a[r][1]) + (a[r][2] + a[r][3]);
      float inv_r = inv[r];
      {s}* o = out0 + {ob} + row * {osr}LL;
      o[t * {ost}LL] = {so};
    }}
  }}
}}
",
        s = st(d),
        head = staged_head(a, &t, kp, &pre),
        so = store(d, "acc * inv_r"),
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
    )
}

/// Layer/RMS norm with one warp per row for rows of at most 1024 elements:
/// the row stays in registers (one global read), reductions are warp
/// shuffles, no block barriers. 8 rows per 256-thread block.
pub fn norm_warp(
    d: DType,
    n: usize,
    rows: usize,
    eps: f64,
    rms: bool,
    src: Option<&NormSrc>,
) -> String {
    let per = n.div_ceil(32);
    let beta_param = if rms {
        String::new()
    } else {
        format!(", const {}* __restrict__ in2", st(d))
    };
    // The row's elements: loaded, or computed by the fused producer (its
    // operands `p0..`, rounded to `d` as storing it would).
    let (x_params, fetch, tail_params) = match src {
        None => (
            format!("const {}* __restrict__ in0", st(d)),
            format!(
                "v[k] = j < N ? (float)({}) : 0.f;",
                load(d, "in0[base + j]")
            ),
            String::new(),
        ),
        Some(f) => {
            let params: Vec<String> = f
                .ins
                .iter()
                .enumerate()
                .map(|(k, o)| format!("const {}* __restrict__ p{k}", st(o.dtype)))
                .collect();
            let loads: String = f
                .ins
                .iter()
                .enumerate()
                .map(|(k, o)| operand_load("p", k, f.dims, o))
                .collect();
            (
                params.join(", "),
                // Coordinates from the row (leading axes) and `j`
                // (normalized axes): no division for a last-axis norm.
                format!(
                    "float val_ = 0.f;\n    if (j < N) {{\n    {} {}\n{loads}{}    val_ = (float)({});\n    }}\n    v[k] = val_;",
                    unravel_from(&f.dims[..f.axis], 0, "row", "rl_"),
                    unravel_from(&f.dims[f.axis..], f.axis, "j", "rt_"),
                    f.stmts,
                    load(d, &store(d, f.result))
                ),
                gather_params(f.ins),
            )
        }
    };
    let mean = if rms {
        "  float m = 0.f;\n".to_string()
    } else {
        "  float s = 0.f;\n  for (int k = 0; k < PER; ++k) s += v[k];\n  float m = warp_sum(s) / (float)N;\n".to_string()
    };
    // gamma (and beta) are loaded with the row, before the reductions:
    // loaded after them (where they are used) they were a second memory
    // round trip on the kernel's critical path (ptxas keeps loads where
    // the source puts them after shuffles).
    let (affine_loads, shift) = if rms {
        (
            format!("gv[k] = j < N ? {} : 0.f;", load(d, "in1[j]")),
            String::new(),
        )
    } else {
        (
            format!(
                "gv[k] = j < N ? {} : 0.f; bv[k] = j < N ? {} : 0.f;",
                load(d, "in1[j]"),
                load(d, "in2[j]")
            ),
            " + bv[k]".to_string(),
        )
    };
    let bv_decl = if rms { "" } else { ", bv[PER]" };
    format!(
        "extern \"C\" __global__ void @NAME@({x_params}, const {s}* __restrict__ in1{beta_param}, {s}* __restrict__ out0{tail_params}) {{
  const int N = {n}, PER = {per};
  long long row = blockIdx.x * 8LL + (threadIdx.x >> 5); int lane = threadIdx.x & 31;
  if (row >= {rows}LL) return;
  long long base = row * {n}LL;
  float v[PER], gv[PER]{bv_decl};
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; {fetch} }}
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; {affine_loads} }}
{mean}  float q = 0.f;
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; float c = j < N ? v[k] - m : 0.f; q += c * c; }}
  float inv = 1.f / sqrtf(warp_sum(q) / (float)N + {eps});
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; if (j < N) {{ float y = (v[k] - m) * inv * gv[k]{shift}; out0[base + j] = {o}; }} }}
}}
",
        s = st(d),
        eps = lit(DType::F32, eps),
        o = store(d, "y"),
    )
}

/// The elementwise node a warp-per-row norm computes its input with
/// (fused: the input is never stored): operands over the norm input's
/// `dims`, statements over them loaded as `x0..`, and the result.
pub struct NormSrc<'a> {
    pub dims: &'a [usize],
    /// The first normalized axis of `dims`.
    pub axis: usize,
    pub ins: &'a [Operand],
    pub stmts: &'a str,
    pub result: &'a str,
}

/// Softmax of f32 attention scores (nb, sq, sk) contiguous, times `scale`,
/// with the mask, written as dtype `d` probabilities. One warp per row.
pub fn attention_softmax(
    d: DType,
    batch: &[usize],
    sq: usize,
    sk: usize,
    mask: &Mask,
    scale: f64,
) -> String {
    let nb: usize = batch.iter().product();
    let rows = nb * sq;
    let (mask_param, mask_code) = mask_source(mask, batch, 1, "i", "x");
    format!(
        "extern \"C\" __global__ void @NAME@(const float* __restrict__ in0{mask_param}, {s}* __restrict__ out0) {{
  long long row = blockIdx.x * 8LL + (threadIdx.x >> 5); int lane = threadIdx.x & 31;
  if (row >= {rows}LL) return;
  long long b = row / {sq}LL, i = row % {sq}LL;
  {unr}
  const float* x0 = in0 + row * {sk}LL; {s}* o = out0 + row * {sk}LL;
  float mx = -__int_as_float(0x7f800000);
  for (int j = lane; j < {sk}; j += 32) {{ float x = x0[j] * {scale}; {mask_code} mx = fmaxf(mx, x); }}
  mx = warp_max(mx);
  float sum = 0.f;
  for (int j = lane; j < {sk}; j += 32) {{ float x = x0[j] * {scale}; {mask_code} sum += expf(x - mx); }}
  float inv = 1.f / warp_sum(sum);
  for (int j = lane; j < {sk}; j += 32) {{ float x = x0[j] * {scale}; {mask_code} o[j] = {so}; }}
}}
",
        s = st(d),
        unr = unravel(batch, "b"),
        so = store(d, "expf(x - mx) * inv"),
        scale = lit(DType::F32, scale as f32 as f64),
    )
}

/// How the tensor-core attention covers a head (see [`attention_mma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaBlocks {
    /// Warps per block, 16 query rows each (any count up to 8; the
    /// planner picks 2, 4 or 8).
    pub warps: u32,
    /// Stage K and V row-major with `cp.async` (every 16-byte copy of a
    /// thread in flight at once, thread count baked in) and a row-broadcast
    /// mask with all its loads before its stores: one memory round trip
    /// instead of one per loop iteration. `false`: the first version's
    /// block-strided loops and transposed V (kept for the A/B,
    /// `RLX_CUDA_ATTN_SPLIT=0`).
    pub batched: bool,
}

/// Attention on tensor cores for f16/bf16 (sm_80+): each warp owns 16 query
/// rows and keeps their scores in registers from Q·Kᵀ to P·V — no score
/// ever goes to global memory. `mma.sync.m16n8k16` (fp32 accumulation)
/// computes S = Q·Kᵀ; the fp32 softmax runs on the accumulator fragments
/// (a row's values sit in the 4 lanes of one lane group), in log2 units
/// (scale·log2 e folded into one multiply, then `exp2f`); the
/// probabilities, rounded to the storage type, are already laid out as the
/// A operand of P·V. Each block (`blocks.warps` warps, 16·warps rows of one
/// head) stages all of the head's K and V in shared memory as 16-bit
/// values, rows padded by 8 elements so the fragment loads of the 8 lane
/// groups fall in different banks. Needs dh % 16 == 0, dv % 8 == 0,
/// sk % 16 == 0 and sk ≤ 128 (a warp holds 16 × sk scores); out-of-range
/// query rows compute on zeros and are not stored.
pub fn attention_mma(a: &AttentionSpec, blocks: MmaBlocks) -> String {
    let AttentionSpec {
        dtype: d,
        batch,
        sq,
        sk,
        dh,
        dv,
        mask,
        ..
    } = *a;
    let MmaBlocks { warps, batched } = blocks;
    let nt = (warps * 32) as usize;
    let r = batch.len();
    let t = a.strides();
    let (qr, qc) = t.q;
    // K row-major [sk][dh + 8] (its MMA B operand: 32-bit shared-memory
    // loads of two adjacent elements); V see `v_frag` below.
    let kp = dh + 8;
    // Scores are kept in log2 units: s·scale·log2(e) + bias·log2(e), so
    // e^(x − max) is one exp2 of (s − max).
    const L2E: f64 = std::f64::consts::LOG2_E;
    let l2e = lit(DType::F32, L2E as f32 as f64);
    let (mask_param, mut mask_code) = match mask {
        Mask::Bias { .. } => {
            let (param, code) = mask_source(mask, batch, 3, "row", "mb");
            (
                param,
                format!("{{ float mb = 0.f; {code} s = fmaf(mb, {l2e}, s); }}"),
            )
        }
        _ => mask_source(mask, batch, 3, "row", "s"),
    };
    // A mask broadcast over query rows (a padding mask) is staged in shared
    // memory once per block: 0/1 drop flags of a keep-mask, or the bias
    // (times log2 e). With `batched` its loads go out before any store.
    let (mut mask_loads, mut mask_stores) = (String::new(), String::new());
    if let Mask::Keep { dtype, strides } | Mask::Bias { dtype, strides } = mask {
        if strides[r] == 0 {
            let m = load(
                *dtype,
                &format!(
                    "in3[{} + j * {}LL]",
                    offset(batch, &strides[..r]),
                    strides[r + 1]
                ),
            );
            let keep = matches!(mask, Mask::Keep { .. });
            let val = if keep {
                format!("({m} != 0) ? 0.f : 1.f")
            } else {
                format!("(float)({m}) * {l2e}")
            };
            let ms = format!("float* ms = (float*)(ks + {});", mma_v_end(a, batched));
            if batched {
                let n = sk.div_ceil(nt);
                mask_loads = format!(
                    "float mv[{n}];\n  #pragma unroll\n  for (int i = 0; i < {n}; ++i) {{ int j = threadIdx.x + i * {nt}; mv[i] = j < {sk} ? ({val}) : 0.f; }}"
                );
                mask_stores = format!(
                    "{ms}\n  #pragma unroll\n  for (int i = 0; i < {n}; ++i) {{ int j = threadIdx.x + i * {nt}; if (j < {sk}) ms[j] = mv[i]; }}"
                );
            } else {
                mask_stores = format!(
                    "{ms} for (int j = threadIdx.x; j < {sk}; j += blockDim.x) ms[j] = {val};"
                );
            }
            mask_code = if keep {
                "if (ms[j] != 0.f) s = -__int_as_float(0x7f800000);".into()
            } else {
                "s += ms[j];".into()
            };
        }
    }
    let (ty, pack) = match d {
        DType::BF16 => ("bf16", "f2b"),
        _ => ("f16", "f2h"),
    };
    let rows = 16 * warps;
    let (stage_kv, vp) = if batched {
        (stage_async(a, nt), dv + 8)
    } else {
        (stage_blockwise(a), sk + 8)
    };
    // The B operand of Q·Kᵀ: K[n·8 + g][c·16 + 2·t4 (+1, +8, +9)]. With
    // heads a multiple of 32 (and K row-major, 16-byte rows), one
    // `ldmatrix.x4` per 8 keys loads it for two k steps; else two 32-bit
    // shared loads per MMA.
    let mma = format!("mma_{ty}");
    let k_frag = if batched && dh.is_multiple_of(32) {
        format!(
            "#pragma unroll
    for (int c2 = 0; c2 < {dh} / 32; ++c2) {{
      unsigned r[4]; ldsm4(r, ks + (n * 8 + (lane & 7)) * {kp} + c2 * 32 + (lane >> 3) * 8);
      {mma}(sc[n], qf[2 * c2], r[0], r[1]); {mma}(sc[n], qf[2 * c2 + 1], r[2], r[3]);
    }}"
        )
    } else {
        format!(
            "const unsigned short* kk = ks + (n * 8 + g) * {kp} + 2 * t4;
    #pragma unroll
    for (int c = 0; c < {dh} / 16; ++c)
      {mma}(sc[n], qf[c], *(const unsigned*)(kk + c * 16), *(const unsigned*)(kk + c * 16 + 8));"
        )
    };
    // The B operand of P·V: V[c·16 + 2·t4 (+1, +8, +9)][n·8 + g]. From
    // row-major V with dv a multiple of 16: one `ldmatrix.x4.trans` per
    // two 8-wide column tiles; else one 32-bit load from transposed V, or
    // two 16-bit loads from row-major V, per MMA.
    let v_frag = if batched && dv.is_multiple_of(16) {
        format!(
            "#pragma unroll
    for (int n = 0; n < {dv} / 8; n += 2) {{
      unsigned r[4]; ldsm4t(r, vs + (c * 16 + (lane & 15)) * {vp} + n * 8 + (lane >> 4) * 8);
      {mma}(oc[n], pf[c], r[0], r[1]); {mma}(oc[n + 1], pf[c], r[2], r[3]);
    }}"
        )
    } else {
        let load = if batched {
            format!(
                "const unsigned short* vv = vs + (c * 16 + 2 * t4) * {vp} + n * 8 + g;
      unsigned b0 = (unsigned)vv[0] | ((unsigned)vv[{vp}] << 16), b1 = (unsigned)vv[8 * {vp}] | ((unsigned)vv[9 * {vp}] << 16);"
            )
        } else {
            format!(
                "const unsigned short* vv = vs + (n * 8 + g) * {vp} + c * 16 + 2 * t4;
      unsigned b0 = *(const unsigned*)vv, b1 = *(const unsigned*)(vv + 8);"
            )
        };
        format!(
            "#pragma unroll
    for (int n = 0; n < {dv} / 8; ++n) {{
      {load}
      {mma}(oc[n], pf[c], b0, b1);
    }}"
        )
    };
    // Heads of up to 32 need ~88 registers per thread (ptxas, sm_90, for
    // sk = 128): 2 blocks of 8 warps per SM, so 384 heads (MiniLM at B=32)
    // take two waves on 132 SMs. Capped at 80 (768 threads per SM: 3 such
    // blocks, one wave) ptxas spills 12 bytes. Larger heads need 100+ and
    // would spill far more: no cap. Blocks of fewer warps are chosen for
    // small grids, where occupancy does not matter but the staged loads
    // held in registers do: no cap either.
    let bounds = if dh <= 32 && dv <= 32 && (warps == 8 || !batched) {
        format!("__launch_bounds__({}, {}) ", warps * 32, 24 / warps)
    } else {
        String::new()
    };
    let pk = format!("pack_{ty}");
    format!(
        "extern \"C\" __global__ void {bounds}@NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  unsigned short* ks = (unsigned short*)smem; unsigned short* vs = ks + {sk} * {kp};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  long long b = blockIdx.y;
  {unr}
  const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb}; const {s}* q = in0 + {qb};
  long long r0 = (long long)blockIdx.x * {rows} + warp * 16;
  long long ra = r0 + g, rb = r0 + g + 8;
  auto ldq = [&](long long row, int t) -> unsigned {{
    if (row >= {sq}LL) return 0u;
    const {s}* p = q + row * {qr}LL;
    return (unsigned)p[t * {qc}LL].b | ((unsigned)p[(t + 1) * {qc}LL].b << 16);
  }};
  unsigned qf[{dh} / 16][4];
  #pragma unroll
  for (int c = 0; c < {dh} / 16; ++c) {{
    int t0 = c * 16 + 2 * t4;
    qf[c][0] = ldq(ra, t0); qf[c][1] = ldq(rb, t0); qf[c][2] = ldq(ra, t0 + 8); qf[c][3] = ldq(rb, t0 + 8);
  }}
  // Q (above) is loaded before K/V are staged so the loads overlap.
  {mask_loads}
  {stage_kv}
  {mask_stores}
  __syncthreads();
  if (r0 >= {sq}LL) return;
  float sc[{sk} / 8][4];
  #pragma unroll
  for (int n = 0; n < {sk} / 8; ++n) {{
    sc[n][0] = 0.f; sc[n][1] = 0.f; sc[n][2] = 0.f; sc[n][3] = 0.f;
    {k_frag}
  }}
  float mxa = -__int_as_float(0x7f800000), mxb = mxa;
  #pragma unroll
  for (int n = 0; n < {sk} / 8; ++n) {{
    #pragma unroll
    for (int e = 0; e < 4; ++e) {{
      long long row = e < 2 ? ra : rb; if (row >= {sq}LL) row = {sq}LL - 1;
      int j = n * 8 + 2 * t4 + (e & 1);
      float s = sc[n][e] * {scale};
      {mask_code}
      sc[n][e] = s;
    }}
    mxa = fmaxf(mxa, fmaxf(sc[n][0], sc[n][1])); mxb = fmaxf(mxb, fmaxf(sc[n][2], sc[n][3]));
  }}
  mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 1)); mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 2));
  mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 1)); mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 2));
  float suma = 0.f, sumb = 0.f;
  unsigned pf[{sk} / 16][4];
  #pragma unroll
  for (int n = 0; n < {sk} / 8; ++n) {{
    float e0 = exp2f(sc[n][0] - mxa), e1 = exp2f(sc[n][1] - mxa), e2 = exp2f(sc[n][2] - mxb), e3 = exp2f(sc[n][3] - mxb);
    suma += e0 + e1; sumb += e2 + e3;
    pf[n / 2][(n & 1) * 2] = {pk}(e0, e1); pf[n / 2][(n & 1) * 2 + 1] = {pk}(e2, e3);
  }}
  suma += __shfl_xor_sync(0xffffffffu, suma, 1); suma += __shfl_xor_sync(0xffffffffu, suma, 2);
  sumb += __shfl_xor_sync(0xffffffffu, sumb, 1); sumb += __shfl_xor_sync(0xffffffffu, sumb, 2);
  float oc[{dv} / 8][4];
  #pragma unroll
  for (int n = 0; n < {dv} / 8; ++n) {{ oc[n][0] = 0.f; oc[n][1] = 0.f; oc[n][2] = 0.f; oc[n][3] = 0.f; }}
  #pragma unroll
  for (int c = 0; c < {sk} / 16; ++c) {{
    #pragma unroll
    {v_frag}
  }}
  float ia = 1.f / suma, ib = 1.f / sumb;
  {s}* o = out0 + {ob};
  #pragma unroll
  for (int n = 0; n < {dv} / 8; ++n) {{
    long long col = n * 8 + 2 * t4;
    if (ra < {sq}LL) {{ o[ra * {osr}LL + col * {ost}LL] = {pack}(oc[n][0] * ia); o[ra * {osr}LL + (col + 1) * {ost}LL] = {pack}(oc[n][1] * ia); }}
    if (rb < {sq}LL) {{ o[rb * {osr}LL + col * {ost}LL] = {pack}(oc[n][2] * ib); o[rb * {osr}LL + (col + 1) * {ost}LL] = {pack}(oc[n][3] * ib); }}
  }}
}}
",
        s = st(d),
        unr = t.unravel,
        qb = t.qb,
        kb = t.kb,
        vb = t.vb,
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
        scale = lit(DType::F32, (a.scale * L2E) as f32 as f64),
    )
}

/// Where the row-broadcast mask starts in the tensor-core attention's
/// shared memory, in 16-bit elements: after K ([sk][dh + 8]) and V
/// (transposed [dv][sk + 8], or with `batched` row-major [sk][dv + 8]).
fn mma_v_end(a: &AttentionSpec, batched: bool) -> usize {
    let v = if batched {
        a.sk * (a.dv + 8)
    } else {
        a.dv * (a.sk + 8)
    };
    a.sk * (a.dh + 8) + v
}

/// Dynamic shared memory of [`attention_mma`]: K, V, then room for a
/// row-broadcast mask (f32).
pub fn attention_mma_smem(a: &AttentionSpec, blocks: MmaBlocks) -> usize {
    mma_v_end(a, blocks.batched) * 2 + a.sk * 4
}

/// Staging K and V (row-major, rows padded to dh + 8 and dv + 8) with
/// `cp.async`: when rows are contiguous and 16-byte aligned (checked on
/// the head's base addresses at run time), every 16-byte copy of a thread
/// is issued before the first completes — one memory round trip, no
/// registers held — else one element per load.
fn stage_async(a: &AttentionSpec, nt: usize) -> String {
    let t = a.strides();
    let ((kr, kc), (vr, vc)) = (t.k, t.v);
    let sk = a.sk;
    let ops = [("ks", "k", a.dh, kr, kc), ("vs", "v", a.dv, vr, vc)];
    let scalar: Vec<String> = ops
        .iter()
        .map(|&(dst, src, n, rs, cs)| {
            format!(
                "for (int e = threadIdx.x; e < {sk} * {n}; e += {nt}) {{ int j = e / {n}, t = e % {n}; {dst}[j * {p} + t] = {src}[j * {rs}LL + t * {cs}LL].b; }}",
                p = n + 8
            )
        })
        .collect();
    let vector = ops
        .iter()
        .all(|&(_, _, n, rs, cs)| cs == 1 && rs % 8 == 0 && n.is_multiple_of(8));
    if !vector {
        return scalar.join("\n  ");
    }
    let copies: Vec<String> = ops
        .iter()
        .map(|&(dst, src, n, rs, _)| {
            let (n8, p) = (n / 8, n + 8);
            let chunks = sk * n8;
            let it = chunks.div_ceil(nt);
            let guard = if chunks.is_multiple_of(nt) {
                String::new()
            } else {
                format!("if (e < {chunks}) ")
            };
            format!(
                "#pragma unroll\n    for (int i = 0; i < {it}; ++i) {{ int e = threadIdx.x + i * {nt}; {guard}cp_async16({dst} + (e / {n8}) * {p} + (e % {n8}) * 8, {src} + (e / {n8}) * {rs}LL + (e % {n8}) * 8); }}"
            )
        })
        .collect();
    format!(
        "if (((((unsigned long long)k) | ((unsigned long long)v)) & 15ull) == 0) {{\n    {}\n    cp_async_wait_all();\n  }} else {{\n    {}\n  }}",
        copies.join("\n    "),
        scalar.join("\n    ")
    )
}

/// The first version's staging (`RLX_CUDA_ATTN_SPLIT=0`, for the A/B):
/// K row-major, V transposed ([dv][sk + 8]), block-strided loops with one
/// load in flight per thread per iteration; 16-byte loads when rows are
/// contiguous and 16-byte aligned, else one element per load.
fn stage_blockwise(a: &AttentionSpec) -> String {
    let t = a.strides();
    let ((kr, kc), (vr, vc)) = (t.k, t.v);
    let sk = a.sk;
    // Element (j, t) of the source goes to dst[j * pitch + t], or with
    // `transpose` to dst[t * pitch + j].
    let stage = |dst: &str,
                 src: &str,
                 n: usize,
                 pitch: usize,
                 rs: i64,
                 cs: i64,
                 transpose: bool| {
        let at = |j: &str, t: &str| {
            if transpose {
                format!("{t} * {pitch} + {j}")
            } else {
                format!("{j} * {pitch} + {t}")
            }
        };
        let scalar = format!(
            "for (int e = threadIdx.x; e < {sk} * {n}; e += blockDim.x) {{ int j = e / {n}, t = e % {n}; {dst}[{}] = {src}[j * {rs}LL + t * {cs}LL].b; }}",
            at("j", "t")
        );
        if cs == 1 && rs % 8 == 0 && n.is_multiple_of(8) {
            let put = if transpose {
                format!(
                    "v16b w = *(const v16b*)({src} + j * {rs}LL + t); unsigned u[4] = {{w.x, w.y, w.z, w.w}}; for (int h = 0; h < 8; ++h) {dst}[{}] = (unsigned short)(u[h >> 1] >> ((h & 1) * 16));",
                    at("j", "(t + h)")
                )
            } else {
                format!(
                    "*(v16b*)({dst} + {}) = *(const v16b*)({src} + j * {rs}LL + t);",
                    at("j", "t")
                )
            };
            format!(
                "if ((((unsigned long long){src}) & 15ull) == 0) {{ for (int e = threadIdx.x; e < {sk} * {n8}; e += blockDim.x) {{ int j = e / {n8}, t = (e % {n8}) * 8; {put} }} }} else {{ {scalar} }}",
                n8 = n / 8
            )
        } else {
            scalar
        }
    };
    format!(
        "{}\n  {}",
        stage("ks", "k", a.dh, a.dh + 8, kr, kc, false),
        stage("vs", "v", a.dv, a.sk + 8, vr, vc, true)
    )
}
