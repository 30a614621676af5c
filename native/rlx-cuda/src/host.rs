//! Host tensors as raw bytes for copies to and from the device.

use crate::error::CudaError;
use half::{bf16, f16};
use rlx_ir::{DType, HostTensor, Shape, TensorData};

/// The elements of `t` as bytes (all stored dtypes are plain old data;
/// a block-quantized tensor is its packed bytes, copied as they are).
pub fn bytes_of(t: &HostTensor) -> Result<&[u8], CudaError> {
    fn raw<T>(v: &[T]) -> &[u8] {
        // SAFETY: T is one of bool/ints/floats/half types: no padding, any
        // byte pattern of the slice is readable as u8.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
    }
    Ok(match t.data() {
        TensorData::Bool(v) => raw(v),
        TensorData::I8(v) => raw(v),
        TensorData::U8(v) => raw(v),
        TensorData::I16(v) => raw(v),
        TensorData::I32(v) => raw(v),
        TensorData::I64(v) => raw(v),
        TensorData::F16(v) => raw(v),
        TensorData::BF16(v) => raw(v),
        TensorData::F32(v) => raw(v),
        TensorData::F64(v) => raw(v),
        TensorData::Packed(v) if t.dtype().is_quantized() => v,
        _ => {
            return Err(CudaError::Input(format!(
                "dtype {} cannot be copied to the GPU",
                t.dtype()
            )))
        }
    })
}

fn typed<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    // No zero fill first: outputs are megabytes at large batch.
    let mut v = Vec::<T>::with_capacity(n);
    // SAFETY: `v` has room for n values; the source bytes came from the
    // device buffer of a tensor of this dtype (any bit pattern is a valid
    // value of these plain types), and all n are written before set_len.
    unsafe {
        std::ptr::copy_nonoverlapping(
            b.as_ptr(),
            v.as_mut_ptr() as *mut u8,
            n * std::mem::size_of::<T>(),
        );
        v.set_len(n);
    }
    v
}

/// A host tensor from bytes downloaded from the device.
pub fn from_bytes(dtype: DType, shape: Shape, b: &[u8]) -> Result<HostTensor, CudaError> {
    let data = match dtype {
        // Bytes other than 0/1 never reach a bool buffer (kernels store `bool`).
        DType::Bool => TensorData::Bool(b.iter().map(|&x| x != 0).collect()),
        DType::I8 => TensorData::I8(typed(b)),
        DType::U8 => TensorData::U8(b.to_vec()),
        DType::I16 => TensorData::I16(typed(b)),
        DType::I32 => TensorData::I32(typed(b)),
        DType::I64 => TensorData::I64(typed(b)),
        DType::F16 => TensorData::F16(typed::<f16>(b)),
        DType::BF16 => TensorData::BF16(typed::<bf16>(b)),
        DType::F32 => TensorData::F32(typed(b)),
        DType::F64 => TensorData::F64(typed(b)),
        d if d.is_quantized() => TensorData::Packed(b.to_vec()),
        d => {
            return Err(CudaError::Input(format!(
                "dtype {d} cannot be copied from the GPU"
            )))
        }
    };
    HostTensor::new(dtype, shape, data).map_err(|e| CudaError::Input(e.to_string()))
}
