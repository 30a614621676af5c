//! The parity cases that move data: gathers and embeddings, shape ops
//! and views (a constant graph output among them). Part of `cases`.

use super::*;

pub fn gather_embedding() -> Vec<Case> {
    let mut rng = Rng::new(9);
    let mut v = Vec::new();
    let g = one_op(
        "gather",
        &[(F, vec![3, 10, 4]), (DType::I64, vec![2, 5])],
        Attrs::new().with("axis", 1i64),
    );
    // Negative indices count from the end.
    let idx = HostTensor::from_slice(&[0i64, 9, -1, 3, 3, -10, 5, 2, 1, 8], vec![2, 5]).unwrap();
    let x = rand(&mut rng, F, &[3, 10, 4], -1.0, 1.0);
    v.push(Case::new("gather", g, vec![x, idx], EXACT));
    let g = one_op(
        "embedding",
        &[(F, vec![50, 6]), (DType::I64, vec![2, 7])],
        Attrs::new(),
    );
    let ins = vec![
        rand(&mut rng, F, &[50, 6], -1.0, 1.0),
        rand(&mut rng, DType::I64, &[2, 7], 0.0, 50.0),
    ];
    v.push(Case::new("embedding", g, ins, EXACT));
    let g = one_op(
        "index_select",
        &[(DType::I32, vec![6, 5]), (DType::I32, vec![4])],
        Attrs::new().with("axis", 0i64),
    );
    let ins = vec![
        rand(&mut rng, DType::I32, &[6, 5], -9.0, 9.0),
        rand(&mut rng, DType::I32, &[4], 0.0, 6.0),
    ];
    v.push(Case::new("index_select i32", g, ins, EXACT));
    // The table in each claimed dtype, with i64 and i32 indices.
    for d in [F, DType::I32, DType::Bool] {
        let (lo, hi) = movement_range(d);
        let g = one_op(
            "gather",
            &[(d, vec![4, 6]), (DType::I32, vec![3, 2])],
            Attrs::new().with("axis", -1i64),
        );
        let idx = HostTensor::from_slice(&[5i32, 0, -6, -1, 2, 2], vec![3, 2]).unwrap();
        let ins = vec![rand(&mut rng, d, &[4, 6], lo, hi), idx];
        v.push(Case::new(format!("gather {d}"), g, ins, EXACT));
        let g = one_op(
            "embedding",
            &[(d, vec![9, 3]), (DType::I32, vec![5])],
            Attrs::new(),
        );
        let ins = vec![
            rand(&mut rng, d, &[9, 3], lo, hi),
            rand(&mut rng, DType::I32, &[5], 0.0, 9.0),
        ];
        v.push(Case::new(format!("embedding {d}"), g, ins, EXACT));
        let g = one_op(
            "index_select",
            &[(d, vec![3, 7]), (DType::I64, vec![5])],
            Attrs::new().with("axis", 1i64),
        );
        let ins = vec![
            rand(&mut rng, d, &[3, 7], lo, hi),
            rand(&mut rng, DType::I64, &[5], 0.0, 7.0),
        ];
        v.push(Case::new(format!("index_select {d}"), g, ins, EXACT));
    }
    v
}

/// A value range per dtype for data movement: i64 values past 2^32, so
/// both words of the two-word layout are moved.
fn movement_range(d: DType) -> (f64, f64) {
    match d {
        DType::I64 => (-1e12, 1e12),
        DType::I32 => (-1e9, 1e9),
        _ => (-1.0, 1.0),
    }
}

pub fn shape_ops_and_views() -> Vec<Case> {
    let mut rng = Rng::new(10);
    let mut v = Vec::new();
    type Op = (&'static str, Vec<Vec<usize>>, Attrs);
    let x = || vec![2, 3, 4];
    let ops: Vec<Op> = vec![
        (
            "permute",
            vec![x()],
            Attrs::new().with("perm", vec![2i64, 0, 1]),
        ),
        (
            "broadcast",
            vec![vec![3, 1]],
            Attrs::new().with("shape", vec![2i64, 3, 5]),
        ),
        (
            "narrow",
            vec![x()],
            Attrs::new()
                .with("axis", 2i64)
                .with("start", 1i64)
                .with("len", 2i64),
        ),
        (
            "slice",
            vec![x()],
            Attrs::new()
                .with("starts", vec![2i64, 0])
                .with("ends", vec![-4i64, 3])
                .with("axes", vec![2i64, 1])
                .with("steps", vec![-1i64, 2]),
        ),
        ("flip", vec![x()], Attrs::new().with("axes", vec![0i64, 2])),
        (
            "concat",
            vec![x(), vec![2, 1, 4]],
            Attrs::new().with("axis", 1i64),
        ),
        (
            "split",
            vec![x()],
            Attrs::new().with("axis", 2i64).with("sizes", vec![1i64, 3]),
        ),
        (
            "squeeze",
            vec![vec![2, 1, 3]],
            Attrs::new().with("axes", vec![1i64]),
        ),
        (
            "unsqueeze",
            vec![x()],
            Attrs::new().with("axes", vec![0i64]),
        ),
        (
            "reshape",
            vec![x()],
            Attrs::new().with("shape", vec![4i64, 6]),
        ),
    ];
    // Every op in every dtype the backend holds (the data-movement kernels
    // are word-size generic; i64 moves two words per element).
    for d in [F, DType::I32, DType::I64, DType::Bool] {
        let (lo, hi) = movement_range(d);
        for (op, shapes, attrs) in &ops {
            let ins: Vec<_> = shapes.iter().map(|s| (d, s.clone())).collect();
            let g = one_op(op, &ins, attrs.clone());
            let vals: Vec<_> = shapes
                .iter()
                .map(|s| rand(&mut rng, d, s, lo, hi))
                .collect();
            v.push(Case::new(format!("{op} {d}"), g, vals, EXACT));
        }
    }
    // reshape of a permuted (non-contiguous) value: a strided copy.
    let t = Trace::new("reshape_of_permute");
    let a = t.input("a", F, vec![2, 3, 4]);
    let y = a
        .permute(&[1, 0, 2])
        .unwrap()
        .reshape(&[3, 8])
        .unwrap()
        .apply1("exp", &[], Attrs::new())
        .unwrap();
    let g = t.finish(&[&y]).unwrap();
    let x = rand(&mut rng, F, &[2, 3, 4], -1.0, 1.0);
    v.push(Case::new("reshape of permute", g, vec![x], (1e-6, 1e-5)));
    // A graph output that is a constant (ONNX's Shape, ConstantOfShape,
    // EyeLike import as one) is read back like any other.
    let mut b = rlx::ir::GraphBuilder::new("const_out");
    let x = b.input("x", rlx::TensorType::new(F, vec![2, 3]));
    let c = b
        .constant(HostTensor::from_slice(&[1i64, 2, 3], [3]).unwrap())
        .unwrap();
    let y = b.unary("neg", x).unwrap();
    let g = b.finish(&[c, y]).unwrap();
    let x = rand(&mut rng, F, &[2, 3], -1.0, 1.0);
    v.push(Case::new("a constant graph output", g, vec![x], (0.0, 0.0)));
    v
}
