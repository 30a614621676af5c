//! Convolutions and pools: the direct WGSL kernels against the reference
//! — padding (asymmetric too), strides, dilations, groups (depthwise
//! included), one and two spatial axes, a bias and a fused activation
//! (`conv_act`), transposed convs, max and average pools with and without padded taps
//! counted, an i32 max pool. `f16_twins` makes the f16 copies. Part of
//! `cases` (same helpers), split out by what it holds.

use super::*;

fn ints(v: &[i64]) -> Vec<i64> {
    v.to_vec()
}

/// `op` on x and w (and a bias when `bias`), random inputs.
fn conv_case(
    rng: &mut Rng,
    op: &str,
    x: &[usize],
    w: &[usize],
    bias: bool,
    attrs: Attrs,
    what: &str,
) -> Case {
    let mut shapes = vec![(F, x.to_vec()), (F, w.to_vec())];
    if bias {
        // Output channels (a transposed conv's w is (Cin, Cout, k…); the
        // biased case here has one group).
        let cout = if op == "conv_transpose" { w[1] } else { w[0] };
        shapes.push((F, vec![cout]));
    }
    let g = one_op(op, &shapes, attrs);
    let inputs = shapes
        .iter()
        .map(|(d, s)| rand(rng, *d, s, -1.0, 1.0))
        .collect();
    Case::new(format!("{op} {what} x{x:?} w{w:?}"), g, inputs, ACCUMULATED)
}

fn pool_case(rng: &mut Rng, op: &str, x: &[usize], attrs: Attrs, what: &str) -> Case {
    let g = one_op(op, &[(F, x.to_vec())], attrs);
    let inputs = vec![rand(rng, F, x, -2.0, 2.0)];
    Case::new(format!("{op} {what} x{x:?}"), g, inputs, ELEMENTWISE)
}

pub fn conv_and_pool() -> Vec<Case> {
    let mut rng = Rng::new(31);
    let r = &mut rng;
    let pads = |p: &[i64]| Attrs::new().with("pads", ints(p));
    vec![
        conv_case(
            r,
            "conv",
            &[1, 3, 9, 8],
            &[4, 3, 3, 3],
            true,
            pads(&[1, 1, 1, 1]),
            "3x3 pad 1 + bias",
        ),
        conv_case(
            r,
            "conv",
            &[2, 4, 11, 10],
            &[6, 4, 3, 2],
            false,
            Attrs::new()
                .with("strides", ints(&[2, 1]))
                .with("dilations", ints(&[1, 2]))
                .with("pads", ints(&[0, 1, 2, 0])),
            "strided, dilated, asymmetric pads",
        ),
        conv_case(
            r,
            "conv",
            &[1, 6, 7, 7],
            &[6, 1, 3, 3],
            true,
            pads(&[1, 1, 1, 1]).with("groups", 6i64),
            "depthwise",
        ),
        conv_case(
            r,
            "conv",
            &[1, 4, 6, 6],
            &[6, 2, 1, 1],
            false,
            Attrs::new().with("groups", 2i64),
            "grouped 1x1",
        ),
        conv_case(
            r,
            "conv",
            &[2, 3, 10],
            &[2, 3, 3],
            true,
            pads(&[2, 0]),
            "1-D",
        ),
        conv_case(
            r,
            "conv_act",
            &[1, 3, 8, 8],
            &[5, 3, 3, 3],
            true,
            pads(&[1, 1, 1, 1]).with("activation", "silu"),
            "silu",
        ),
        conv_case(
            r,
            "conv_transpose",
            &[1, 4, 5, 6],
            &[4, 3, 3, 3],
            true,
            Attrs::new()
                .with("strides", ints(&[2, 2]))
                .with("pads", ints(&[1, 0, 0, 1]))
                .with("output_padding", ints(&[1, 0])),
            "stride 2, pads, output_padding",
        ),
        conv_case(
            r,
            "conv_transpose",
            &[2, 4, 6],
            &[4, 2, 2],
            false,
            Attrs::new()
                .with("groups", 2i64)
                .with("strides", ints(&[2]))
                .with("dilations", ints(&[2])),
            "grouped, dilated, 1-D",
        ),
        pool_case(
            r,
            "max_pool",
            &[1, 3, 9, 9],
            Attrs::new()
                .with("kernel", ints(&[3, 3]))
                .with("strides", ints(&[2, 2]))
                .with("pads", ints(&[1, 1, 1, 1])),
            "3x3 s2 pad 1",
        ),
        pool_case(
            r,
            "max_pool",
            &[2, 2, 8, 7],
            Attrs::new()
                .with("kernel", ints(&[2, 3]))
                .with("dilations", ints(&[2, 1])),
            "dilated",
        ),
        pool_case(
            r,
            "avg_pool",
            &[1, 3, 7, 7],
            Attrs::new()
                .with("kernel", ints(&[3, 3]))
                .with("strides", ints(&[2, 2]))
                .with("pads", ints(&[1, 1, 1, 1])),
            "pad not counted",
        ),
        pool_case(
            r,
            "avg_pool",
            &[1, 3, 7, 7],
            Attrs::new()
                .with("kernel", ints(&[3, 3]))
                .with("pads", ints(&[1, 1, 1, 1]))
                .with("count_include_pad", true),
            "pad counted",
        ),
        // Integers: the max of i32 windows, padding never winning.
        Case::new(
            "max_pool i32 3x3 pad 1 x[1, 2, 5, 5]",
            one_op(
                "max_pool",
                &[(DType::I32, vec![1, 2, 5, 5])],
                Attrs::new()
                    .with("kernel", ints(&[3, 3]))
                    .with("pads", ints(&[1, 1, 1, 1])),
            ),
            vec![rand(r, DType::I32, &[1, 2, 5, 5], -1000.0, 1000.0)],
            EXACT,
        ),
    ]
}
