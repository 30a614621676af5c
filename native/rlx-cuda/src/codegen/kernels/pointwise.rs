//! Elementwise loops: operand loads (strided, or gathered through an index
//! array), parameter lists, and the scalar and vectorized loop kernels.

use super::{offset, st, unravel, unravel_as};
use crate::ctype::{compute, load, store};
use rlx_ir::DType;

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
/// [`gather`](super::gather) kernel stores it. The operand's buffer is
/// the table; the index array is the kernel parameter `ix{k}`. An index
/// out of range reports `code` on the error flag (as the gather kernel
/// would) and reads row 0 instead.
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
pub(super) fn gather_params(ins: &[Operand]) -> String {
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
