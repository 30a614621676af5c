//! `rope` (rotary position embedding) as one elementwise kernel. Its
//! decomposition (split, four products, sub/add, concat) is about ten
//! launches per call, two calls per decoder layer: most of the kernels of
//! a decode step, each a few hundred elements.
//!
//! The last axis D is viewed as a pair axis of 2 and a column axis of
//! D/2 — (2, D/2) for rotate-half, (D/2, 2) interleaved — so that
//! `y = x·cos + sign·x̃·sin`, where `x̃` is `x` with the pair swapped (the
//! same buffer, offset by one pair step, the pair stride negated), `cos`
//! and `sin` broadcast over the pair and the leading axes, and `sign` a
//! constant (-1, 1) along the pair axis: y₁ = x₁cos − x₂sin,
//! y₂ = x₂cos + x₁sin, as the op's definition in rlx-ir says.

use super::*;

pub(super) fn rope(p: &mut Planner, i: usize, node: &Node, out: &Loc) -> Result<(), CudaError> {
    let x = p.loc(node.inputs[0])?;
    let (cos, sin) = (p.loc(node.inputs[1])?, p.loc(node.inputs[2])?);
    let interleaved = node.attrs.bool("interleaved").unwrap_or(false);
    let r = x.dims.len();
    if r < 2 || x.dims[r - 1] % 2 != 0 || out.dims != x.dims {
        return Err(unsupported(
            i,
            node,
            format!("x must be (..., S, D) with even D, got {:?}", x.dims),
        ));
    }
    let half = x.dims[r - 1] / 2;
    let n: usize = x.dims.iter().product();
    if n == 0 {
        return Ok(());
    }
    // (pair, column) of the split last axis, in the order they are laid out.
    let pair_first = !interleaved;
    let split_dims = |lead: &[usize]| -> Vec<usize> {
        let mut d = lead.to_vec();
        d.extend(if pair_first { [2, half] } else { [half, 2] });
        d
    };
    let dims = split_dims(&x.dims[..r - 1]);
    // Strides of an (..., S, D) location over `dims`: (pair, column)
    // strides from the last axis' stride.
    let split = |l: &Loc, pair_sign: i64| -> Vec<i64> {
        let sd = l.strides[r - 1];
        let (pair, col) = if interleaved {
            (sd, 2 * sd)
        } else {
            (half as i64 * sd, sd)
        };
        let mut s = l.strides[..r - 1].to_vec();
        s.extend(if pair_first {
            [pair_sign * pair, col]
        } else {
            [col, pair_sign * pair]
        });
        s
    };
    let pair_step = if interleaved {
        x.strides[r - 1]
    } else {
        half as i64 * x.strides[r - 1]
    };
    let swapped = Loc {
        offset: x.offset + pair_step,
        ..x.clone()
    };
    // cos / sin (S, D/2) over `dims`: broadcast along the leading axes and
    // the pair axis.
    let table = |l: &Loc| -> Vec<i64> {
        let mut lead = x.dims[..r - 1].to_vec();
        lead.push(half);
        let b = broadcast_strides(l, &lead);
        let (s_lead, s_col) = (&b[..r - 1], b[r - 1]);
        let mut s = s_lead.to_vec();
        s.extend(if pair_first { [0, s_col] } else { [s_col, 0] });
        s
    };
    let dtype = x.dtype;
    let sign = HostTensor::from_f64(dtype, [2], vec![-1.0, 1.0])
        .map_err(|e| unsupported(i, node, format!("rope on {dtype}: {e}")))?;
    let sign = p.const_loc(sign);
    let mut sign_strides = vec![0i64; r - 1];
    sign_strides.extend(if pair_first { [1, 0] } else { [0, 1] });
    let ins = vec![
        Operand::plain(dtype, split(&x, 1)),
        Operand::plain(dtype, split(&swapped, -1)),
        Operand::plain(cos.dtype, table(&cos)),
        Operand::plain(sin.dtype, table(&sin)),
        Operand::plain(dtype, sign_strides),
    ];
    let body = format!(
        "    {c} r0 = x0 * x2 + x4 * (x1 * x3);\n",
        c = crate::ctype::compute(dtype)
    );
    let text = kernels::elementwise(
        &dims,
        &ins,
        &[(out.dtype, split(out, 1))],
        &body,
        &["r0".into()],
    );
    let args = vec![
        x.ptr(),
        swapped.ptr(),
        cos.ptr(),
        sin.ptr(),
        sign.ptr(),
        out.ptr(),
    ];
    p.kernel(text, grid_for(n), 256, 0, args, false);
    Ok(())
}
