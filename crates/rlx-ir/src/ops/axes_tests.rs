//! Every axis-valued attribute of every op is range-checked by the type
//! rule (through the one helper, `axis_in`): out of range, and for lists
//! also repeated, is a node error naming the op, the attribute and the
//! rank. The table must cover every registered op with such an attribute.

use crate::{Attr, Attrs, DType, GraphBuilder, IrError, TensorType};

/// Attributes whose values are axes of some input.
const AXIS_ATTRS: &[&str] = &[
    "axis",
    "axes",
    "perm",
    "lhs_batch",
    "rhs_batch",
    "lhs_contract",
    "rhs_contract",
];

struct Case {
    op: &'static str,
    inputs: Vec<TensorType>,
    /// Valid attributes (the axis attribute under test included).
    attrs: Attrs,
    attr: &'static str,
    /// The rank the attribute's axes index.
    rank: usize,
}

fn t(d: DType, dims: &[usize]) -> TensorType {
    TensorType::new(d, dims.to_vec())
}

fn cases() -> Vec<Case> {
    use DType::*;
    let x = t(F32, &[2, 3]);
    let c = t(C64, &[2, 4]);
    let b = t(Bool, &[2, 3]);
    let a = |pairs: &[(&str, Attr)]| {
        let mut at = Attrs::new();
        for (k, v) in pairs {
            at.set(k, v.clone());
        }
        at
    };
    let ax = |v: i64| Attr::Int(v);
    let axs = |v: &[i64]| Attr::Ints(v.to_vec());
    let case = |op, inputs: Vec<TensorType>, attrs, attr, rank| Case {
        op,
        inputs,
        attrs,
        attr,
        rank,
    };
    let mut v = vec![];
    for op in [
        "argmax",
        "argmin",
        "argsort",
        "cumprod",
        "cumsum",
        "sort",
        "softmax",
        "log_softmax",
        "rfft",
    ] {
        v.push(case(op, vec![x.clone()], a(&[("axis", ax(1))]), "axis", 2));
    }
    for op in ["fft", "ifft", "irfft"] {
        v.push(case(op, vec![c.clone()], a(&[("axis", ax(1))]), "axis", 2));
    }
    for op in [
        "reduce_logsumexp",
        "reduce_max",
        "reduce_mean",
        "reduce_min",
        "reduce_prod",
        "reduce_sum",
        "reduce_variance",
    ] {
        v.push(case(
            op,
            vec![x.clone()],
            a(&[("axes", axs(&[1]))]),
            "axes",
            2,
        ));
    }
    for op in ["reduce_all", "reduce_any"] {
        v.push(case(
            op,
            vec![b.clone()],
            a(&[("axes", axs(&[1]))]),
            "axes",
            2,
        ));
    }
    let i = |dims: &[usize]| t(I64, dims);
    v.extend([
        case(
            "topk",
            vec![x.clone()],
            a(&[("axis", ax(1)), ("k", ax(1))]),
            "axis",
            2,
        ),
        case(
            "concat",
            vec![x.clone(), x.clone()],
            a(&[("axis", ax(0))]),
            "axis",
            2,
        ),
        case(
            "gather",
            vec![x.clone(), i(&[2])],
            a(&[("axis", ax(1))]),
            "axis",
            2,
        ),
        case(
            "index_select",
            vec![x.clone(), i(&[2])],
            a(&[("axis", ax(1))]),
            "axis",
            2,
        ),
        case(
            "gather_elements",
            vec![x.clone(), i(&[2, 3])],
            a(&[("axis", ax(1))]),
            "axis",
            2,
        ),
        case(
            "scatter",
            vec![x.clone(), i(&[2, 3]), x.clone()],
            a(&[("axis", ax(1))]),
            "axis",
            2,
        ),
        case(
            "scatter_add",
            vec![x.clone(), i(&[2, 3]), x.clone()],
            a(&[("axis", ax(1))]),
            "axis",
            2,
        ),
        case(
            "layer_norm",
            vec![x.clone(), t(F32, &[3]), t(F32, &[3])],
            a(&[("axis", ax(-1))]),
            "axis",
            2,
        ),
        case(
            "rms_norm",
            vec![x.clone(), t(F32, &[3])],
            a(&[("axis", ax(-1))]),
            "axis",
            2,
        ),
        case(
            "narrow",
            vec![x.clone()],
            a(&[("axis", ax(1)), ("start", ax(0)), ("len", ax(1))]),
            "axis",
            2,
        ),
        case(
            "split",
            vec![x.clone()],
            a(&[("axis", ax(0)), ("sizes", axs(&[1, 1]))]),
            "axis",
            2,
        ),
        // The new axis of one_hot indexes the output, one rank more.
        case(
            "one_hot",
            vec![i(&[2])],
            a(&[("axis", ax(1)), ("depth", ax(3))]),
            "axis",
            2,
        ),
        case(
            "permute",
            vec![x.clone()],
            a(&[("perm", axs(&[1, 0]))]),
            "perm",
            2,
        ),
        case(
            "flip",
            vec![x.clone()],
            a(&[("axes", axs(&[1]))]),
            "axes",
            2,
        ),
        case(
            "roll",
            vec![x.clone()],
            a(&[("axes", axs(&[1])), ("shifts", axs(&[1]))]),
            "axes",
            2,
        ),
        case(
            "squeeze",
            vec![t(F32, &[1, 3])],
            a(&[("axes", axs(&[0]))]),
            "axes",
            2,
        ),
        // unsqueeze's axes index the output: rank 2 + 1 inserted.
        case(
            "unsqueeze",
            vec![x.clone()],
            a(&[("axes", axs(&[0]))]),
            "axes",
            3,
        ),
        case(
            "slice",
            vec![x.clone()],
            a(&[
                ("starts", axs(&[0])),
                ("ends", axs(&[1])),
                ("axes", axs(&[1])),
                ("steps", axs(&[1])),
            ]),
            "axes",
            2,
        ),
    ]);
    let dg = |attr| {
        case(
            "dot_general",
            vec![t(F32, &[2, 3, 4]), t(F32, &[2, 4, 5])],
            a(&[
                ("lhs_batch", axs(&[0])),
                ("rhs_batch", axs(&[0])),
                ("lhs_contract", axs(&[2])),
                ("rhs_contract", axs(&[1])),
            ]),
            attr,
            3,
        )
    };
    v.extend(["lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract"].map(dg));
    v
}

/// Build one node of `c.op` with `attr` set to `value`. Lists that must
/// match the axes in length (slice's starts/ends/steps, roll's shifts)
/// are stretched to it, so the axes are what the error is about.
fn build(c: &Case, value: Option<Attr>) -> Result<(), IrError> {
    let mut b = GraphBuilder::new("g");
    let ins: Vec<_> = c
        .inputs
        .iter()
        .enumerate()
        .map(|(k, ty)| b.input(format!("x{k}"), ty.clone()))
        .collect();
    let mut attrs = c.attrs.clone();
    if let Some(v) = value {
        if let Attr::Ints(axes) = &v {
            for name in ["starts", "ends", "steps", "shifts"] {
                if let Some(Attr::Ints(l)) = attrs.get(name) {
                    let l = vec![l[0]; axes.len()];
                    attrs.set(name, l);
                }
            }
        }
        attrs.set(c.attr, v);
    }
    b.op(c.op, &ins, attrs).map(|_| ())
}

fn expect_node_error(c: &Case, value: Attr, want: &str) {
    let shown = format!("{value:?}");
    match build(c, Some(value)) {
        Err(IrError::Node { node: 0, op, msg }) => {
            assert_eq!(op, c.op);
            assert!(
                msg.contains(&format!("attribute `{}`", c.attr)) && msg.contains(want),
                "{} {}={shown}: {msg}",
                c.op,
                c.attr
            );
        }
        other => panic!(
            "{} {}={shown}: expected a node error, got {other:?}",
            c.op, c.attr
        ),
    }
}

#[test]
fn every_axis_attribute_is_range_checked() {
    let cases = cases();
    for c in &cases {
        build(c, None).unwrap_or_else(|e| panic!("{} with valid attributes: {e}", c.op));
        let rank = format!("rank {}", c.rank);
        let (hi, lo) = (c.rank as i64, -(c.rank as i64) - 1);
        let is_list = matches!(c.attrs.get(c.attr), Some(Attr::Ints(_)));
        for bad in [99, hi, lo] {
            let v = if is_list {
                Attr::Ints(vec![bad])
            } else {
                Attr::Int(bad)
            };
            expect_node_error(c, v, &format!("= {bad} is out of range for {rank}"));
        }
        if is_list {
            // The same axis twice, once written negatively (unsqueeze's
            // output rank grows with the list, so it repeats 0 plainly).
            let dup = if c.op == "unsqueeze" {
                0
            } else {
                -(c.rank as i64)
            };
            expect_node_error(c, Attr::Ints(vec![0, dup]), "lists axis 0 twice (rank");
        }
    }
    // Every registered op with an axis attribute is in the table.
    for op in crate::all_ops() {
        for spec in op.attrs.iter().filter(|s| AXIS_ATTRS.contains(&s.name)) {
            assert!(
                cases.iter().any(|c| c.op == op.name && c.attr == spec.name),
                "op `{}` attribute `{}` has no case",
                op.name,
                spec.name
            );
        }
    }
}

#[test]
fn softmax_axis_out_of_range_fails_verification() {
    // The reported bug: `softmax {axis=99}` passed `rlx ir`.
    let e = crate::text::parse(
        "graph @g(%x: f32[2,3]) {\n  %y = softmax(%x) {axis=99}\n  return %y\n}",
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains(
            "node 0 (`softmax`): attribute `axis` = 99 is out of range for rank 2 (valid: -2..=1)"
        ),
        "{s}"
    );
}

#[test]
fn gather_nd_batch_dims_must_not_be_negative() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", t(DType::F32, &[2, 3]));
    let i = b.input("i", t(DType::I64, &[2, 1]));
    let e = b
        .op("gather_nd", &[x, i], Attrs::new().with("batch_dims", -5i64))
        .unwrap_err();
    assert!(
        e.to_string().contains("`batch_dims` = -5 must be >= 0"),
        "{e}"
    );
}
