//! Static tensor shapes, broadcasting and axis normalization.

use crate::error::IrError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A static shape: one extent per axis. Rank 0 is a scalar.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    pub fn new(dims: impl Into<Vec<usize>>) -> Self {
        Shape(dims.into())
    }
    pub fn scalar() -> Self {
        Shape(Vec::new())
    }
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    pub fn dims(&self) -> &[usize] {
        &self.0
    }
    /// Element count (saturating: absurd shapes are rejected by the
    /// verifier, not by an overflow).
    pub fn numel(&self) -> usize {
        self.0.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }
    /// Row-major (C order) strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        let mut s = vec![1; self.0.len()];
        for i in (0..self.0.len().saturating_sub(1)).rev() {
            s[i] = s[i + 1] * self.0[i + 1];
        }
        s
    }
    /// Resolve a possibly negative axis against this rank.
    pub fn axis(&self, axis: i64) -> Result<usize, IrError> {
        normalize_axis(axis, self.rank())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}
impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}
impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

/// Resolve `axis` (negative counts from the end) for a tensor of `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, IrError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(IrError::msg(format!(
            "axis {axis} is out of range for a tensor of rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// NumPy broadcasting of two shapes.
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Result<Shape, IrError> {
    let r = a.rank().max(b.rank());
    let mut out = vec![0; r];
    for (i, o) in out.iter_mut().enumerate() {
        let da = dim_from_end(a, r - 1 - i);
        let db = dim_from_end(b, r - 1 - i);
        *o = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(IrError::msg(format!(
                    "shapes {a} and {b} do not broadcast (axis {i} of the result: {da} vs {db})"
                )))
            }
        };
    }
    Ok(Shape(out))
}

fn dim_from_end(s: &Shape, k: usize) -> usize {
    if k < s.rank() {
        s.0[s.rank() - 1 - k]
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        let s = broadcast_shapes(&Shape::from([2, 1, 3]), &Shape::from([4, 1])).unwrap();
        assert_eq!(s, Shape::from([2, 4, 3]));
        assert!(broadcast_shapes(&Shape::from([2, 3]), &Shape::from([4])).is_err());
        let e = broadcast_shapes(&Shape::from([0]), &Shape::from([1])).unwrap();
        assert_eq!(e, Shape::from([0]));
    }

    #[test]
    fn negative_axes() {
        assert_eq!(normalize_axis(-1, 3).unwrap(), 2);
        assert!(normalize_axis(3, 3).is_err());
        assert!(normalize_axis(-4, 3).is_err());
    }
}

/// The static type of an SSA value: element type and shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    pub dtype: crate::dtype::DType,
    pub shape: Shape,
}

impl TensorType {
    pub fn new(dtype: crate::dtype::DType, shape: impl Into<Shape>) -> Self {
        TensorType {
            dtype,
            shape: shape.into(),
        }
    }
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }
    pub fn dims(&self) -> &[usize] {
        &self.shape.0
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}
