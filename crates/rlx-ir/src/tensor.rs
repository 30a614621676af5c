//! Host tensors: a dtype, a shape and the elements, row-major.
//!
//! They carry constants inside the IR, the inputs and outputs of a run, and
//! the test vectors. Reference kernels widen elements to `f64` (floats) or
//! `i64` (integers), compute, and narrow back with the casting rules below.

use crate::dtype::DType;
use crate::error::IrError;
use crate::literal;
use crate::shape::Shape;
use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The elements of a tensor, one vector variant per storage kind.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    Bool(Vec<bool>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// (re, im) pairs.
    C64(Vec<[f32; 2]>),
    /// Raw bytes of a packed or block-quantized dtype.
    Packed(Vec<u8>),
}

macro_rules! each_plain {
    ($data:expr, $v:ident => $body:expr, packed $p:ident => $pbody:expr) => {
        match $data {
            TensorData::Bool($v) => $body,
            TensorData::I8($v) => $body,
            TensorData::U8($v) => $body,
            TensorData::I16($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::U16($v) => $body,
            TensorData::U32($v) => $body,
            TensorData::U64($v) => $body,
            TensorData::F16($v) => $body,
            TensorData::BF16($v) => $body,
            TensorData::F32($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::C64($v) => $body,
            TensorData::Packed($p) => $pbody,
        }
    };
}

impl TensorData {
    /// Gather elements by flat index (`out[i] = self[idx[i]]`).
    /// Every view and movement op of the reference backend reduces to this.
    pub fn take(&self, idx: &[usize]) -> Result<TensorData, IrError> {
        Ok(each_plain!(self, v => {
            // One bounds check up front, then a plain gather.
            if let Some(&bad) = idx.iter().find(|&&i| i >= v.len()) {
                return Err(IrError::msg(format!("index {bad} out of bounds for {} elements", v.len())));
            }
            idx.iter().map(|&i| v[i]).collect::<Vec<_>>().into()
        }, packed _p => return Err(IrError::msg("cannot index elements of a packed/quantized tensor; dequantize it first"))))
    }

    /// Number of stored elements (bytes for packed data).
    pub fn len(&self) -> usize {
        each_plain!(self, v => v.len(), packed p => p.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

macro_rules! data_from {
    ($($t:ty => $var:ident),*) => {$(
        impl From<Vec<$t>> for TensorData {
            fn from(v: Vec<$t>) -> Self { TensorData::$var(v) }
        }
    )*};
}
data_from!(bool => Bool, i8 => I8, u8 => U8, i16 => I16, i32 => I32, i64 => I64, u16 => U16,
    u32 => U32, u64 => U64, f16 => F16, bf16 => BF16, f32 => F32, f64 => F64, [f32; 2] => C64);

/// A Rust element type that maps to one dtype.
pub trait Element: Copy + 'static {
    const DTYPE: DType;
    fn wrap(v: Vec<Self>) -> TensorData;
    fn unwrap(d: &TensorData) -> Option<&[Self]>;
}

macro_rules! element {
    ($($t:ty => $var:ident, $dt:ident);*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            fn wrap(v: Vec<Self>) -> TensorData { TensorData::$var(v) }
            fn unwrap(d: &TensorData) -> Option<&[Self]> {
                match d { TensorData::$var(v) => Some(v), _ => None }
            }
        }
    )*};
}
element!(bool => Bool, Bool; i8 => I8, I8; u8 => U8, U8; i16 => I16, I16; i32 => I32, I32;
    i64 => I64, I64; u16 => U16, U16; u32 => U32, U32; u64 => U64, U64; f16 => F16, F16; bf16 => BF16, BF16; f32 => F32, F32; f64 => F64, F64;
    [f32; 2] => C64, C64);

/// A tensor held in host memory. The elements are shared: a clone (a
/// graph rebuilt by an optimizer pass, a constant copied into attributes,
/// a weight handed to a run) copies a pointer, not the data — tensors are
/// never mutated in place, only built anew.
///
/// Equality compares values (a NaN is unequal to itself, shared or not);
/// [`HostTensor::shares_data`] tells a clone apart without reading it.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    dtype: DType,
    shape: Shape,
    data: Arc<TensorData>,
}

fn data_matches(dtype: DType, data: &TensorData) -> bool {
    matches!(
        (dtype, data),
        (DType::Bool, TensorData::Bool(_))
            | (DType::I8, TensorData::I8(_))
            | (DType::U8, TensorData::U8(_))
            | (DType::I16, TensorData::I16(_))
            | (DType::I32, TensorData::I32(_))
            | (DType::I64, TensorData::I64(_))
            | (DType::U16, TensorData::U16(_))
            | (DType::U32, TensorData::U32(_))
            | (DType::U64, TensorData::U64(_))
            | (DType::F16, TensorData::F16(_))
            | (DType::BF16, TensorData::BF16(_))
            | (DType::F32, TensorData::F32(_))
            | (DType::F64, TensorData::F64(_))
            | (DType::C64, TensorData::C64(_))
    ) || (dtype.is_quantized() && matches!(data, TensorData::Packed(_)))
}

impl HostTensor {
    /// Build a tensor, checking that `data` has the dtype and element count.
    pub fn new(dtype: DType, shape: impl Into<Shape>, data: TensorData) -> Result<Self, IrError> {
        let shape = shape.into();
        if !data_matches(dtype, &data) {
            return Err(IrError::msg(format!(
                "tensor data does not hold {dtype} elements"
            )));
        }
        // `numel` saturates and `storage_bytes` multiplies unchecked: a
        // shape whose byte size overflows is refused first (no data can
        // match it anyway).
        if crate::limits::tensor_bytes(dtype, shape.dims())
            .and_then(|b| usize::try_from(b).ok())
            .is_none()
        {
            return Err(IrError::msg(format!(
                "shape {shape} of dtype {dtype}: the byte size overflows"
            )));
        }
        let want = if dtype.is_quantized() {
            dtype.storage_bytes(shape.numel()).ok_or_else(|| {
                IrError::msg(format!(
                    "shape {shape} is not a whole number of {dtype} blocks"
                ))
            })?
        } else {
            shape.numel()
        };
        if data.len() != want {
            return Err(IrError::msg(format!(
                "shape {shape} of dtype {dtype} needs {want} stored elements, got {}",
                data.len()
            )));
        }
        Ok(HostTensor {
            dtype,
            shape,
            data: Arc::new(data),
        })
    }

    /// Copy a slice into a new tensor of the given shape.
    pub fn from_slice<T: Element>(data: &[T], shape: impl Into<Shape>) -> Result<Self, IrError> {
        Self::new(T::DTYPE, shape, T::wrap(data.to_vec()))
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(v: T) -> Self {
        HostTensor {
            dtype: T::DTYPE,
            shape: Shape::scalar(),
            data: Arc::new(T::wrap(vec![v])),
        }
    }

    /// A tensor of zeros (false, 0, 0.0).
    ///
    /// The shape's byte size is checked (overflow-checked, against
    /// [`limits()`](crate::limits::limits)`.max_tensor_bytes`) before
    /// anything is allocated, so a huge or overflowing shape is a
    /// [`IrError::Limit`] instead of an allocator abort.
    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Result<Self, IrError> {
        let shape = shape.into();
        crate::limits::limits().check_tensor_shape(
            &format!("zeros tensor {dtype}{shape}"),
            dtype,
            shape.dims(),
        )?;
        // Within the limit, so the element count fits memory and `usize`.
        let n = shape.numel();
        let data: TensorData = match dtype {
            DType::Bool => vec![false; n].into(),
            DType::I8 => vec![0i8; n].into(),
            DType::U8 => vec![0u8; n].into(),
            DType::I16 => vec![0i16; n].into(),
            DType::I32 => vec![0i32; n].into(),
            DType::I64 => vec![0i64; n].into(),
            DType::U16 => vec![0u16; n].into(),
            DType::U32 => vec![0u32; n].into(),
            DType::U64 => vec![0u64; n].into(),
            DType::F16 => vec![f16::ZERO; n].into(),
            DType::BF16 => vec![bf16::ZERO; n].into(),
            DType::F32 => vec![0f32; n].into(),
            DType::F64 => vec![0f64; n].into(),
            DType::C64 => vec![[0f32; 2]; n].into(),
            d => {
                let bytes = d.storage_bytes(n).ok_or_else(|| {
                    IrError::msg(format!("shape {shape} is not a whole number of {d} blocks"))
                })?;
                TensorData::Packed(vec![0; bytes])
            }
        };
        Self::new(dtype, shape, data)
    }

    /// The elements as a `Vec<T>`; errors when `T` is not this dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, IrError> {
        T::unwrap(&self.data).map(|s| s.to_vec()).ok_or_else(|| {
            IrError::msg(format!(
                "to_vec::<{}>() on a tensor of dtype {}",
                T::DTYPE,
                self.dtype
            ))
        })
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    pub fn data(&self) -> &TensorData {
        &self.data
    }
    /// The elements, copied only when another clone still shares them.
    pub fn into_data(self) -> TensorData {
        Arc::try_unwrap(self.data).unwrap_or_else(|shared| (*shared).clone())
    }

    /// Whether `self` and `other` share their elements (one is a clone of
    /// the other): then they are equal without comparing a value.
    pub fn shares_data(&self, other: &HostTensor) -> bool {
        Arc::ptr_eq(&self.data, &other.data)
    }
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// Same elements under a new shape with the same element count.
    pub fn reshape(mut self, shape: impl Into<Shape>) -> Result<Self, IrError> {
        let shape = shape.into();
        if shape.numel() != self.shape.numel() {
            return Err(IrError::msg(format!(
                "cannot reshape {} into {shape}",
                self.shape
            )));
        }
        self.shape = shape;
        Ok(self)
    }

    /// Widen every element to f64 (bool → 0/1, integers exactly up to 2^53,
    /// complex → real part). Errors for packed data.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>, IrError> {
        Ok(match &*self.data {
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U16(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::C64(v) => v.iter().map(|x| x[0] as f64).collect(),
            TensorData::Packed(_) => return Err(packed_err(self.dtype)),
        })
    }

    /// Widen every element to i64 (floats truncate toward zero and saturate,
    /// NaN → 0; bool → 0/1; u64 keeps its bits, so values above `i64::MAX`
    /// read negative: the ring operations (+, −, ×, bitwise) stay exact,
    /// and kernels that order or divide u64 values must not use this).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>, IrError> {
        Ok(match &*self.data {
            TensorData::Bool(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I64(v) => v.clone(),
            TensorData::U16(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::Packed(_) => return Err(packed_err(self.dtype)),
            _ => self.to_f64_vec()?.into_iter().map(|x| x as i64).collect(),
        })
    }

    /// Complex elements as (re, im) pairs; real tensors get im = 0.
    pub fn to_c64_vec(&self) -> Result<Vec<[f64; 2]>, IrError> {
        match &*self.data {
            TensorData::C64(v) => Ok(v.iter().map(|c| [c[0] as f64, c[1] as f64]).collect()),
            _ => Ok(self.to_f64_vec()?.into_iter().map(|x| [x, 0.0]).collect()),
        }
    }

    /// Narrow f64 values into `dtype`: floats round to nearest, integers
    /// truncate toward zero and wrap to the type's width (NaN → 0),
    /// bool is `x != 0`.
    pub fn from_f64(dtype: DType, shape: impl Into<Shape>, v: Vec<f64>) -> Result<Self, IrError> {
        let data = match dtype {
            DType::F16 => v
                .iter()
                .map(|&x| f16::from_f64(x))
                .collect::<Vec<_>>()
                .into(),
            DType::BF16 => v
                .iter()
                .map(|&x| bf16::from_f64(x))
                .collect::<Vec<_>>()
                .into(),
            DType::F32 => v.iter().map(|&x| x as f32).collect::<Vec<_>>().into(),
            DType::F64 => v.into(),
            DType::C64 => v
                .iter()
                .map(|&x| [x as f32, 0.0])
                .collect::<Vec<_>>()
                .into(),
            DType::Bool => v.iter().map(|&x| x != 0.0).collect::<Vec<_>>().into(),
            // Through i64 would wrap values above i64::MAX.
            DType::U64 => v.iter().map(|&x| x as u64).collect::<Vec<_>>().into(),
            d if d.is_int() => {
                return Self::from_i64(d, shape, v.iter().map(|&x| x as i128 as i64).collect())
            }
            d => return Err(packed_err(d)),
        };
        Self::new(dtype, shape, data)
    }

    /// Narrow i64 values into `dtype` (wrapping for integers).
    pub fn from_i64(dtype: DType, shape: impl Into<Shape>, v: Vec<i64>) -> Result<Self, IrError> {
        let data = match dtype {
            DType::Bool => v.iter().map(|&x| x != 0).collect::<Vec<_>>().into(),
            DType::I8 => v.iter().map(|&x| x as i8).collect::<Vec<_>>().into(),
            DType::U8 => v.iter().map(|&x| x as u8).collect::<Vec<_>>().into(),
            DType::I16 => v.iter().map(|&x| x as i16).collect::<Vec<_>>().into(),
            DType::I32 => v.iter().map(|&x| x as i32).collect::<Vec<_>>().into(),
            DType::I64 => v.into(),
            DType::U16 => v.iter().map(|&x| x as u16).collect::<Vec<_>>().into(),
            DType::U32 => v.iter().map(|&x| x as u32).collect::<Vec<_>>().into(),
            DType::U64 => v.iter().map(|&x| x as u64).collect::<Vec<_>>().into(),
            d => return Self::from_f64(d, shape, v.iter().map(|&x| x as f64).collect()),
        };
        Self::new(dtype, shape, data)
    }

    /// Complex pairs into a c64 tensor.
    pub fn from_c64(shape: impl Into<Shape>, v: Vec<[f64; 2]>) -> Result<Self, IrError> {
        let data = v
            .iter()
            .map(|c| [c[0] as f32, c[1] as f32])
            .collect::<Vec<_>>();
        Self::new(DType::C64, shape, data.into())
    }

    /// The elements as little-endian bytes (bool as 0/1, c64 as re then
    /// im, packed dtypes as stored): what `bitcast` reinterprets.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        macro_rules! le {
            ($v:expr) => {
                $v.iter().flat_map(|x| x.to_le_bytes()).collect()
            };
        }
        match &*self.data {
            TensorData::Bool(v) => v.iter().map(|&b| b as u8).collect(),
            TensorData::I8(v) => le!(v),
            TensorData::U8(v) | TensorData::Packed(v) => v.clone(),
            TensorData::I16(v) => le!(v),
            TensorData::I32(v) => le!(v),
            TensorData::I64(v) => le!(v),
            TensorData::U16(v) => le!(v),
            TensorData::U32(v) => le!(v),
            TensorData::U64(v) => le!(v),
            TensorData::F16(v) => le!(v),
            TensorData::BF16(v) => le!(v),
            TensorData::F32(v) => le!(v),
            TensorData::F64(v) => le!(v),
            TensorData::C64(v) => v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// A tensor of `dtype` read from little-endian bytes (the inverse of
    /// [`HostTensor::to_le_bytes`]; a non-zero byte is `true`).
    pub fn from_le_bytes(
        dtype: DType,
        shape: impl Into<Shape>,
        bytes: &[u8],
    ) -> Result<Self, IrError> {
        let shape = shape.into();
        let want = dtype.storage_bytes(shape.numel());
        if want != Some(bytes.len()) {
            return Err(IrError::msg(format!(
                "{} bytes cannot hold {dtype}{shape}",
                bytes.len()
            )));
        }
        macro_rules! le {
            ($t:ty) => {
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<$t>>()
                    .into()
            };
        }
        let data: TensorData = match dtype {
            DType::Bool => bytes.iter().map(|&b| b != 0).collect::<Vec<_>>().into(),
            DType::I8 => le!(i8),
            DType::U8 => bytes.to_vec().into(),
            DType::I16 => le!(i16),
            DType::I32 => le!(i32),
            DType::I64 => le!(i64),
            DType::U16 => le!(u16),
            DType::U32 => le!(u32),
            DType::U64 => le!(u64),
            DType::F16 => le!(f16),
            DType::BF16 => le!(bf16),
            DType::F32 => le!(f32),
            DType::F64 => le!(f64),
            DType::C64 => {
                let f: Vec<f32> = le!(f32);
                f.chunks_exact(2)
                    .map(|c| [c[0], c[1]])
                    .collect::<Vec<_>>()
                    .into()
            }
            _ => TensorData::Packed(bytes.to_vec()),
        };
        Self::new(dtype, shape, data)
    }

    /// Elements gathered by flat index into a tensor of `shape`.
    pub fn take(&self, idx: &[usize], shape: impl Into<Shape>) -> Result<Self, IrError> {
        Self::new(self.dtype, shape, self.data.take(idx)?)
    }
}

fn packed_err(d: DType) -> IrError {
    IrError::msg(format!(
        "elements of {d} are packed; dequantize the tensor before using it elementwise"
    ))
}

// ---- JSON form: {"dtype": "f32", "shape": [2], "data": [1.0, "nan"]} ----
// Non-finite floats are strings ("nan", "inf", "-inf"); c64 is a list of
// [re, im]; packed data is a hex string.

#[derive(Serialize, Deserialize)]
struct Wire {
    dtype: DType,
    shape: Shape,
    data: serde_json::Value,
}

pub(crate) fn float_to_json(x: f64) -> serde_json::Value {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into)
    }
}

/// The shortest decimal that reads back as the same f32.
fn f32_to_json(x: f32) -> serde_json::Value {
    float_to_json(format!("{x:?}").parse().unwrap_or(x as f64))
}

pub(crate) fn float_from_json(v: &serde_json::Value) -> Result<f64, IrError> {
    match v {
        serde_json::Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| IrError::msg(format!("bad number {n}"))),
        serde_json::Value::String(s) => match s.as_str() {
            "nan" | "NaN" => Ok(f64::NAN),
            "inf" | "+inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            _ => Err(IrError::msg(format!("bad float `{s}`"))),
        },
        serde_json::Value::Bool(b) => Ok(*b as u8 as f64),
        _ => Err(IrError::msg(format!("expected a number, found {v}"))),
    }
}

impl HostTensor {
    /// The JSON value of this tensor (see module docs for the schema).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        let data: Value = match &*self.data {
            TensorData::Bool(v) => v.iter().map(|&b| Value::Bool(b)).collect(),
            TensorData::C64(v) => v
                .iter()
                .map(|c| Value::Array(vec![f32_to_json(c[0]), f32_to_json(c[1])]))
                .collect(),
            TensorData::Packed(p) => Value::String(p.iter().map(|b| format!("{b:02x}")).collect()),
            TensorData::F64(v) => v.iter().map(|&x| float_to_json(x)).collect(),
            TensorData::U64(v) => v.iter().map(|&x| Value::from(x)).collect(),
            // Narrower floats print their shortest f32 decimal (0.2, not
            // 0.20000000298023224): it reads back to the same value.
            _ if self.dtype.is_float() => self
                .to_f64_vec()
                .unwrap_or_default()
                .into_iter()
                .map(|x| f32_to_json(x as f32))
                .collect(),
            _ => self
                .to_i64_vec()
                .unwrap_or_default()
                .into_iter()
                .map(Value::from)
                .collect(),
        };
        serde_json::to_value(Wire {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data,
        })
        .unwrap_or(Value::Null)
    }

    /// Parse the JSON form.
    pub fn from_json(v: &serde_json::Value) -> Result<Self, IrError> {
        let w: Wire = serde_json::from_value(v.clone())
            .map_err(|e| IrError::msg(format!("bad tensor JSON: {e}")))?;
        let shape = w.shape;
        let items = |d: &serde_json::Value| -> Result<Vec<serde_json::Value>, IrError> {
            d.as_array()
                .cloned()
                .ok_or_else(|| IrError::msg("tensor `data` must be a list"))
        };
        match w.dtype {
            DType::C64 => {
                let mut out = Vec::new();
                for it in items(&w.data)? {
                    let pair = it
                        .as_array()
                        .filter(|p| p.len() == 2)
                        .ok_or_else(|| IrError::msg("c64 elements are [re, im] pairs"))?;
                    let (re, im) = (float_from_json(&pair[0])?, float_from_json(&pair[1])?);
                    for part in [re, im] {
                        literal::check_float(DType::C64, part).map_err(|error| {
                            IrError::Literal {
                                index: out.len(),
                                error,
                            }
                        })?;
                    }
                    out.push([re, im]);
                }
                Self::from_c64(shape, out)
            }
            d if d.is_quantized() => {
                let s = w
                    .data
                    .as_str()
                    .ok_or_else(|| IrError::msg("packed data is a hex string"))?;
                let bytes = hex_decode(s)?;
                Self::new(d, shape, TensorData::Packed(bytes))
            }
            d if d.is_float() => {
                let v = items(&w.data)?
                    .iter()
                    .enumerate()
                    .map(|(index, x)| {
                        let f = float_from_json(x)?;
                        literal::check_float(d, f)
                            .map_err(|error| IrError::Literal { index, error })?;
                        Ok(f)
                    })
                    .collect::<Result<_, IrError>>()?;
                Self::from_f64(d, shape, v)
            }
            d => {
                // Every element is range-checked: `from_i64` wraps, which is
                // the casting rule for computed values, not for literals.
                let v = items(&w.data)?
                    .iter()
                    .enumerate()
                    .map(|(index, x)| {
                        let i = match x {
                            serde_json::Value::Bool(b) => *b as i64,
                            serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                                (Some(i), _) => i,
                                // u64 keeps its bits in the i64 (`from_i64`).
                                (None, Some(u)) if d == DType::U64 => {
                                    return Ok(u as i64);
                                }
                                (None, Some(u)) => {
                                    return Err(IrError::Literal {
                                        index,
                                        error: literal::u64_out_of_range(d, u),
                                    })
                                }
                                _ => return Err(IrError::msg(format!("{n} is not an integer"))),
                            },
                            _ => {
                                return Err(IrError::msg(format!("expected an integer, found {x}")))
                            }
                        };
                        literal::check_int(d, i)
                            .map_err(|error| IrError::Literal { index, error })?;
                        Ok(i)
                    })
                    .collect::<Result<_, IrError>>()?;
                Self::from_i64(d, shape, v)
            }
        }
    }
}

pub(crate) fn hex_decode(s: &str) -> Result<Vec<u8>, IrError> {
    if !s.len().is_multiple_of(2) {
        return Err(IrError::msg("hex string has odd length"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16)
                .map_err(|_| IrError::msg(format!("bad hex byte `{}`", &s[i..i + 2])))
        })
        .collect()
}

impl Serialize for HostTensor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for HostTensor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        HostTensor::from_json(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_non_finite() {
        let t = HostTensor::from_slice(&[1.5f32, f32::NAN, f32::NEG_INFINITY], [3]).unwrap();
        let back = HostTensor::from_json(&t.to_json()).unwrap();
        let v = back.to_vec::<f32>().unwrap();
        assert_eq!(v[0], 1.5);
        assert!(v[1].is_nan());
        assert_eq!(v[2], f32::NEG_INFINITY);
    }

    #[test]
    fn integer_narrowing_wraps() {
        let t = HostTensor::from_i64(DType::I8, [2], vec![200, -129]).unwrap();
        assert_eq!(t.to_vec::<i8>().unwrap(), vec![-56, 127]);
    }

    #[test]
    fn zeros_of_a_huge_or_overflowing_shape_is_a_limit_error() {
        // 4e12 bytes: over the default 16 GiB bound, refused before allocating.
        let e = HostTensor::zeros(DType::F32, [1_000_000, 1_000_000]).unwrap_err();
        let IrError::Limit(l) = &e else { panic!("{e}") };
        assert_eq!((l.limit, l.value), ("max_tensor_bytes", 4_000_000_000_000));
        // The element count overflows usize: no saturated or wrapped size.
        let e = HostTensor::zeros(DType::F64, [usize::MAX, 3]).unwrap_err();
        assert!(e.to_string().contains("overflows u64"), "{e}");
        let z = HostTensor::zeros(DType::Q8_0, [64]).unwrap();
        assert_eq!(z.data().len(), 68);
        let z = HostTensor::zeros(DType::BF16, [2, 3]).unwrap();
        assert_eq!(z.to_vec::<bf16>().unwrap(), vec![bf16::ZERO; 6]);
    }

    #[test]
    fn a_shape_whose_byte_size_overflows_is_an_error_not_a_panic() {
        // A whole number of q8_0 blocks whose byte size (34 per 32) overflows.
        let e = HostTensor::new(DType::Q8_0, [usize::MAX - 31], TensorData::Packed(vec![]))
            .unwrap_err();
        assert!(e.to_string().contains("byte size overflows"), "{e}");
        let e = HostTensor::new(DType::F32, [usize::MAX, 2], Vec::<f32>::new().into()).unwrap_err();
        assert!(e.to_string().contains("byte size overflows"), "{e}");
    }

    #[test]
    fn wrong_element_count_is_an_error() {
        assert!(HostTensor::from_slice(&[1.0f32, 2.0], [3]).is_err());
    }
}
