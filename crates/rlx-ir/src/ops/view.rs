//! View-ness of the ops whose output can read its input's memory: each
//! computes the output's window from the input's ([`crate::op::ViewFn`]).
//! The memory planner asks these, and the ops' definitions point here.

use crate::attr::Attrs;
use crate::op::Window;
use crate::shape::{normalize_axis, Shape, TensorType};

fn row_major(dims: &[usize]) -> Vec<usize> {
    Shape::from(dims).strides()
}

/// Whether `strides` lay `dims` out row-major with no gaps (size-1 axes
/// may have any stride).
fn contiguous(dims: &[usize], strides: &[usize]) -> bool {
    let want = row_major(dims);
    dims.iter()
        .zip(strides.iter().zip(&want))
        .all(|(&d, (&s, &w))| d <= 1 || s == w)
}

/// The same elements in the same order (`identity`, `stop_gradient`, a
/// `cast` to the input's own dtype).
pub fn same(_: &TensorType, _: &Attrs, _: &TensorType, at: &Window) -> Option<Window> {
    Some(at.clone())
}

/// `reshape`, `squeeze`, `unsqueeze`: a view of a contiguous window only
/// (of a strided one the new shape needs a copy).
pub fn reshaped(x: &TensorType, _: &Attrs, out: &TensorType, at: &Window) -> Option<Window> {
    contiguous(x.dims(), &at.strides).then(|| Window {
        offset: at.offset,
        strides: row_major(out.dims()),
    })
}

/// `permute`: the input's strides, permuted.
pub fn permuted(x: &TensorType, attrs: &Attrs, _: &TensorType, at: &Window) -> Option<Window> {
    let perm = attrs.ints("perm").ok()?;
    let strides = perm
        .iter()
        .map(|&p| Some(at.strides[normalize_axis(p, x.rank()).ok()?]))
        .collect::<Option<Vec<_>>>()?;
    Some(Window {
        offset: at.offset,
        strides,
    })
}

/// `narrow` along a leading axis (every axis before it of extent 1): an
/// offset into the input. Along an inner axis it is a gather, not an
/// offset.
pub fn narrowed(x: &TensorType, attrs: &Attrs, _: &TensorType, at: &Window) -> Option<Window> {
    let axis = normalize_axis(attrs.int("axis").ok()?, x.rank()).ok()?;
    let start = usize::try_from(attrs.int("start").ok()?).ok()?;
    if x.dims()[..axis].iter().any(|&d| d != 1) {
        return None;
    }
    Some(Window {
        offset: at.offset + start * at.strides[axis],
        strides: at.strides.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{all_ops, Op};
    use crate::DType;

    fn t(dims: &[usize]) -> TensorType {
        TensorType::new(DType::F32, dims.to_vec())
    }

    fn at(offset: usize, strides: &[usize]) -> Window {
        Window {
            offset,
            strides: strides.to_vec(),
        }
    }

    #[test]
    fn exactly_the_movement_ops_that_alias_have_a_view() {
        let mut with: Vec<&str> = all_ops()
            .iter()
            .filter(|d| d.view.is_some())
            .map(|d| d.name)
            .collect();
        with.sort_unstable();
        assert_eq!(
            with,
            [
                "cast",
                "identity",
                "narrow",
                "permute",
                "reshape",
                "squeeze",
                "stop_gradient",
                "unsqueeze"
            ]
        );
    }

    #[test]
    fn windows_follow_the_input() {
        let view = |op: &str| Op::named(op).unwrap().view.unwrap();
        // A contiguous (2, 6) reshaped to (3, 4): row-major strides, same offset.
        let w = view("reshape")(&t(&[2, 6]), &Attrs::new(), &t(&[3, 4]), &at(5, &[6, 1]));
        assert_eq!(w, Some(at(5, &[4, 1])));
        // A transposed window cannot be reshaped in place.
        assert_eq!(
            view("reshape")(&t(&[2, 6]), &Attrs::new(), &t(&[12]), &at(0, &[1, 2])),
            None
        );
        let perm = Attrs::new().with("perm", vec![1i64, 0]);
        assert_eq!(
            view("permute")(&t(&[2, 6]), &perm, &t(&[6, 2]), &at(3, &[6, 1])),
            Some(at(3, &[1, 6]))
        );
        // Narrow along the leading axis: an offset; along an inner one: a copy.
        let lead = Attrs::new()
            .with("axis", 0i64)
            .with("start", 1i64)
            .with("len", 1i64);
        assert_eq!(
            view("narrow")(&t(&[3, 4]), &lead, &t(&[1, 4]), &at(0, &[4, 1])),
            Some(at(4, &[4, 1]))
        );
        let inner = Attrs::new()
            .with("axis", 1i64)
            .with("start", 1i64)
            .with("len", 2i64);
        assert_eq!(
            view("narrow")(&t(&[3, 4]), &inner, &t(&[3, 2]), &at(0, &[4, 1])),
            None
        );
    }
}
