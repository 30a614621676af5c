//! Where a tensor's elements are, as a kernel sees them: a buffer, an
//! element offset and per-axis strides. View ops (permute, slice, flip,
//! squeeze, broadcast, ...) are host-side rewrites of a [`TensorRef`], so a
//! kernel reads strided memory instead of a copy.

use rlx_ir::DType;

/// A device buffer of a compiled program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufId {
    /// The program's arena (every planned slot of 32-bit words).
    Arena,
    /// The arena of f16 slots on adapters with `shader-f16` (2-byte
    /// elements, bound as `array<f16>`; a separate buffer because WebGPU
    /// forbids binding one writable buffer twice with different types).
    Half,
    /// Graph input `i` (weights stay resident here).
    Input(usize),
    /// A constant baked at compile time (`constant`, `arange`).
    Const(usize),
}

/// A strided tensor in one buffer. Offsets and strides count elements.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRef {
    pub buf: BufId,
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub strides: Vec<i64>,
    pub offset: i64,
    /// An f16 tensor held as f32 words (adapters without `shader-f16`):
    /// read as f32, rounded to f16 on every store. Ignored for other dtypes.
    pub wide: bool,
}

/// 32-bit words per stored element (i64 is two words; bool one).
pub fn words_per_elem(d: DType) -> usize {
    match d {
        DType::I64 => 2,
        _ => 1,
    }
}

/// Bytes per stored element: f16 is 2 unless held `wide`; bool is a whole
/// word, i64 two words.
pub fn elem_bytes(d: DType, wide: bool) -> usize {
    match d {
        DType::F16 if !wide => 2,
        d => 4 * words_per_elem(d),
    }
}

/// Row-major strides of `dims`.
pub fn row_major(dims: &[usize]) -> Vec<i64> {
    let mut s = vec![0i64; dims.len()];
    let mut acc = 1i64;
    for k in (0..dims.len()).rev() {
        s[k] = acc;
        acc *= dims[k] as i64;
    }
    s
}

impl TensorRef {
    /// A contiguous tensor at `offset` elements into `buf`.
    pub fn contiguous(buf: BufId, dtype: DType, dims: &[usize], offset: i64) -> TensorRef {
        TensorRef {
            buf,
            dtype,
            dims: dims.to_vec(),
            strides: row_major(dims),
            offset,
            wide: false,
        }
    }

    /// This tensor with f16 held as f32 words (or not).
    pub fn widened(mut self, wide: bool) -> TensorRef {
        self.wide = wide && self.dtype == DType::F16;
        self
    }

    /// Whether elements are 2-byte f16 (bound as `array<f16>`).
    pub fn is_half(&self) -> bool {
        self.dtype == DType::F16 && !self.wide
    }

    pub fn elem_bytes(&self) -> usize {
        elem_bytes(self.dtype, self.wide)
    }

    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Row-major with no gaps (size-1 axes may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let want = row_major(&self.dims);
        self.dims
            .iter()
            .zip(self.strides.iter().zip(&want))
            .all(|(&d, (&s, &w))| d <= 1 || s == w)
    }

    /// Reinterpret with new dims, if the memory allows it without a copy.
    pub fn reshaped(&self, dims: &[usize]) -> Option<TensorRef> {
        self.is_contiguous().then(|| TensorRef {
            dims: dims.to_vec(),
            strides: row_major(dims),
            ..self.clone()
        })
    }

    pub fn permuted(&self, perm: &[usize]) -> TensorRef {
        TensorRef {
            dims: perm.iter().map(|&p| self.dims[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            ..self.clone()
        }
    }

    /// NumPy broadcasting to `dims` (stride 0 on new and size-1 axes).
    pub fn broadcast_to(&self, dims: &[usize]) -> TensorRef {
        let lead = dims.len() - self.dims.len();
        let strides = (0..dims.len())
            .map(|k| {
                if k < lead || self.dims[k - lead] == 1 {
                    0
                } else {
                    self.strides[k - lead]
                }
            })
            .collect();
        TensorRef {
            dims: dims.to_vec(),
            strides,
            ..self.clone()
        }
    }

    /// `start..start+len` with `step` along `axis` (step may be negative).
    pub fn sliced(&self, axis: usize, start: i64, len: usize, step: i64) -> TensorRef {
        let mut r = self.clone();
        r.offset += start * self.strides[axis];
        r.dims[axis] = len;
        r.strides[axis] *= step;
        r
    }
}
