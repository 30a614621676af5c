//! Exact structural equality of attributes and graphs, and a matching
//! fingerprint for hashing.
//!
//! The derived `PartialEq` of the IR compares floats with `==`, which says
//! `0.0 == -0.0` (two constants that are not interchangeable: `1/x`
//! differs) and `NaN != NaN` (a graph unequal to itself). Here floats
//! compare by bit pattern, everywhere: scalar and list attributes and
//! tensor elements. Value names and node origins are ignored — they never
//! change what a graph computes.

use rlx_ir::{Attr, Attrs, Graph, HostTensor, TensorData};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// `a` and `b` hold the same attributes, floats compared bitwise.
pub fn attrs_identical(a: &Attrs, b: &Attrs) -> bool {
    a.0.len() == b.0.len()
        && a.0
            .iter()
            .zip(&b.0)
            .all(|((ka, va), (kb, vb))| ka == kb && attr_identical(va, vb))
}

/// One attribute value, floats compared bitwise.
pub fn attr_identical(a: &Attr, b: &Attr) -> bool {
    match (a, b) {
        (Attr::Float(x), Attr::Float(y)) => x.to_bits() == y.to_bits(),
        (Attr::Floats(x), Attr::Floats(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Attr::Tensor(x), Attr::Tensor(y)) => tensors_identical(x, y),
        (Attr::Graph(x), Attr::Graph(y)) => graphs_identical(x, y),
        (Attr::Bool(_), _)
        | (Attr::Int(_), _)
        | (Attr::Str(_), _)
        | (Attr::Ints(_), _)
        | (Attr::DType(_), _) => a == b,
        _ => false,
    }
}

/// Same dtype, shape and element bit patterns.
pub fn tensors_identical(a: &HostTensor, b: &HostTensor) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    if a.shares_data(b) {
        return true;
    }
    match (a.data(), b.data()) {
        (TensorData::F16(x), TensorData::F16(y)) => bits_eq(x, y, |v| v.to_bits() as u64),
        (TensorData::BF16(x), TensorData::BF16(y)) => bits_eq(x, y, |v| v.to_bits() as u64),
        (TensorData::F32(x), TensorData::F32(y)) => bits_eq(x, y, |v| v.to_bits() as u64),
        (TensorData::F64(x), TensorData::F64(y)) => bits_eq(x, y, |v| v.to_bits()),
        (TensorData::C64(x), TensorData::C64(y)) => bits_eq(x, y, |v| {
            (v[0].to_bits() as u64) << 32 | v[1].to_bits() as u64
        }),
        (x, y) => x == y,
    }
}

fn bits_eq<T>(a: &[T], b: &[T], bits: impl Fn(&T) -> u64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| bits(p) == bits(q))
}

/// Same name, values (types and definitions), nodes (ops, wiring,
/// attributes), inputs and outputs. Value names and origins are ignored.
pub fn graphs_identical(a: &Graph, b: &Graph) -> bool {
    a.name == b.name
        && a.inputs == b.inputs
        && a.outputs == b.outputs
        && a.values.len() == b.values.len()
        && a.values
            .iter()
            .zip(&b.values)
            .all(|(x, y)| x.ty == y.ty && x.def == y.def)
        && a.nodes.len() == b.nodes.len()
        && a.nodes.iter().zip(&b.nodes).all(|(x, y)| {
            x.op == y.op
                && x.inputs == y.inputs
                && x.outputs == y.outputs
                && attrs_identical(&x.attrs, &y.attrs)
        })
}

/// Elements of a large tensor that [`fingerprint`] hashes.
const HASHED: usize = 4096;

/// A hash of `attrs` consistent with [`attrs_identical`]: identical
/// attributes have equal fingerprints. Sub-graphs contribute only their
/// size and op names (the full comparison settles the rest).
pub fn fingerprint(attrs: &Attrs) -> u64 {
    let mut h = DefaultHasher::new();
    for (k, v) in &attrs.0 {
        k.hash(&mut h);
        hash_attr(v, &mut h);
    }
    h.finish()
}

fn hash_attr(a: &Attr, h: &mut DefaultHasher) {
    std::mem::discriminant(a).hash(h);
    match a {
        Attr::Bool(x) => x.hash(h),
        Attr::Int(x) => x.hash(h),
        Attr::Float(x) => x.to_bits().hash(h),
        Attr::Str(x) => x.hash(h),
        Attr::Ints(x) => x.hash(h),
        Attr::Floats(x) => x.iter().for_each(|f| f.to_bits().hash(h)),
        Attr::DType(x) => x.hash(h),
        Attr::Tensor(t) => {
            t.dtype().hash(h);
            t.shape().hash(h);
            // The bytes of the elements, through the widest lossless view:
            // every element of a small tensor, and of a large one (a
            // weight table) at most HASHED evenly spaced ones — a
            // fingerprint only has to agree on equal tensors;
            // `tensors_identical` settles the rest.
            fn each<T>(v: &[T], h: &mut DefaultHasher, f: impl Fn(&T, &mut DefaultHasher)) {
                let step = v.len().div_ceil(HASHED).max(1);
                v.iter().step_by(step).for_each(|x| f(x, h));
            }
            match t.data() {
                TensorData::Bool(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::I8(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::U8(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::I16(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::I32(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::I64(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::U16(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::U32(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::U64(v) => each(v, h, |x, h| x.hash(h)),
                TensorData::F16(v) => each(v, h, |x, h| x.to_bits().hash(h)),
                TensorData::BF16(v) => each(v, h, |x, h| x.to_bits().hash(h)),
                TensorData::F32(v) => each(v, h, |x, h| x.to_bits().hash(h)),
                TensorData::F64(v) => each(v, h, |x, h| x.to_bits().hash(h)),
                TensorData::C64(v) => each(v, h, |x, h| {
                    x[0].to_bits().hash(h);
                    x[1].to_bits().hash(h)
                }),
                TensorData::Packed(v) => each(v, h, |x, h| x.hash(h)),
            }
        }
        Attr::Graph(g) => {
            g.nodes.len().hash(h);
            g.nodes.iter().for_each(|n| n.op.name().hash(h));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: f32) -> Attrs {
        Attrs::new().with("value", HostTensor::scalar(v))
    }

    #[test]
    fn signed_zeros_differ_and_nan_equals_itself() {
        // The derived equality cannot tell these apart.
        assert_eq!(c(0.0), c(-0.0));
        assert!(!attrs_identical(&c(0.0), &c(-0.0)));
        assert!(attrs_identical(&c(f32::NAN), &c(f32::NAN)));
        assert!(attrs_identical(&c(1.5), &c(1.5)));
        let f = |x: f64| Attrs::new().with("min", x);
        assert!(!attrs_identical(&f(0.0), &f(-0.0)));
        assert_eq!(fingerprint(&c(2.0)), fingerprint(&c(2.0)));
        assert_ne!(fingerprint(&c(0.0)), fingerprint(&c(-0.0)));
    }

    #[test]
    fn kinds_must_match() {
        let a = Attrs::new().with("k", 1i64);
        let b = Attrs::new().with("k", 1.0f64);
        assert!(!attrs_identical(&a, &b));
        assert!(attrs_identical(&a, &a.clone()));
    }
}
