//! `matmul_integer`: 8-bit integer GEMM with exact int32 accumulation —
//! ONNX's `MatMulInteger` of dynamically quantized models and rlx's static
//! int8 quantization.
//!
//! Both operands are brought to one signedness pair first: a to u8 (an
//! i8 value plus 128) and b to i8 (a u8 value minus 128), their zero points
//! moved the same way, so that every ISA multiplies u8 × i8:
//!
//! `Σ (a − za)(b − zb) = Σ a·b − zb·Σ a − za·Σ b + K·za·zb`
//!
//! `Σ a·b` runs on `vpdpbusd` (AVX-512 VNNI: four u8 × i8 products per
//! 32-bit lane, no intermediate rounding or saturation), on AVX2 as i16
//! pairs through `vpmaddwd` (exact: `vpmaddubsw` would saturate a pair of
//! 255 · 127 products), or in plain integer loops elsewhere ([`Isa`]). The
//! row sums of a are taken as a is staged (its rows padded to a multiple
//! of four), the column sums of b when b is packed — once for a weight
//! that stays the same tensor between runs ([`PackedB::fits`]).

#[cfg(target_arch = "x86_64")]
use super::par;
use rlx_ir::{DType, HostTensor};

/// K is padded to a multiple of this in both operands.
const KQ: usize = 4;
/// Per-column vectors are padded to a multiple of this.
const PAD: usize = 32;

/// The instruction set a product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 VNNI `vpdpbusd`: 8 rows × 32 columns per register tile.
    Vnni,
    /// AVX2 `vpmaddwd` on 16-bit pairs: 4 rows × 16 columns.
    Avx2,
    /// wasm simd128 `i32x4.dot_i16x8_s` on 16-bit pairs: 4 rows × 8 columns.
    Simd128,
    /// Integer loops (wasm and other CPUs).
    Scalar,
}

impl Isa {
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Vnni => super::igemm_x86::has_vnni(),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Vnni | Isa::Avx2 => false,
            Isa::Simd128 => cfg!(all(target_arch = "wasm32", target_feature = "simd128")),
            Isa::Scalar => true,
        }
    }

    /// Every kernel this CPU can run (tests run each).
    pub fn all() -> Vec<Isa> {
        [Isa::Vnni, Isa::Avx2, Isa::Simd128, Isa::Scalar]
            .into_iter()
            .filter(|i| i.available())
            .collect()
    }

    /// The fastest kernel here.
    pub fn best() -> Isa {
        Isa::all()[0]
    }

    pub fn describe(self) -> &'static str {
        match self {
            Isa::Vnni => "AVX-512 VNNI u8 x i8 dot products, int32 accumulation",
            Isa::Avx2 => "AVX2 16-bit pair products (vpmaddwd), int32 accumulation",
            Isa::Simd128 => "simd128 16-bit pair products (i32x4.dot_i16x8_s), int32 accumulation",
            Isa::Scalar => "integer loops, int32 accumulation",
        }
    }

    /// Columns per packed panel.
    fn panel(self) -> usize {
        match self {
            Isa::Vnni => 16,
            Isa::Avx2 => 8,
            Isa::Simd128 => 4,
            Isa::Scalar => 1,
        }
    }
}

/// b (K × N) as the kernel reads it, in i8 (`b − 128` for a u8 b).
pub struct PackedB {
    pub isa: Isa,
    pub k: usize,
    pub n: usize,
    /// Vnni: `[N/16][Kp/4][16][4]` bytes; Avx2: `[N/8][Kp/2][8][2]` i16
    /// (as bytes); Scalar: `[K][N]` bytes.
    data: Vec<i8>,
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "wasm32")),
        allow(dead_code)
    )]
    wide: Vec<i16>,
    /// Σ over K of each column (after the shift).
    col_sums: Vec<i32>,
    /// The tensor it was packed from (its storage is shared, never copied):
    /// a later run with the same tensor reuses the pack.
    from: HostTensor,
}

/// An 8-bit integer tensor's elements as i32 (u8 or i8).
fn values(t: &HostTensor) -> Option<Vec<i32>> {
    use rlx_ir::Element;
    match t.dtype() {
        DType::U8 => u8::unwrap(t.data()).map(|v| v.iter().map(|&x| x as i32).collect()),
        DType::I8 => i8::unwrap(t.data()).map(|v| v.iter().map(|&x| x as i32).collect()),
        _ => None,
    }
}

/// The shift that brings a u8 operand to i8 (b) or an i8 one to u8 (a).
fn shift(d: DType, to_unsigned: bool) -> i32 {
    match (d, to_unsigned) {
        (DType::U8, false) => -128,
        (DType::I8, true) => 128,
        _ => 0,
    }
}

impl PackedB {
    /// Packs b (K × N, row-major u8 or i8) for `isa`.
    pub fn new(isa: Isa, b: &HostTensor) -> Option<PackedB> {
        let (k, n) = (b.shape().dims()[0], b.shape().dims()[1]);
        let s = shift(b.dtype(), false);
        let v: Vec<i32> = values(b)?.into_iter().map(|x| x + s).collect();
        let kp = k.next_multiple_of(KQ);
        // Padded to whole register tiles: the tiles read them a vector at a time.
        let mut col_sums = vec![0i32; n.next_multiple_of(PAD)];
        for row in v.chunks(n.max(1)) {
            for (c, &x) in col_sums.iter_mut().zip(row) {
                *c += x;
            }
        }
        let at = |kk: usize, j: usize| if kk < k && j < n { v[kk * n + j] } else { 0 };
        let (mut data, mut wide) = (Vec::new(), Vec::new());
        let p = isa.panel();
        match isa {
            Isa::Vnni => {
                data.reserve(n.div_ceil(p) * p * kp);
                for j0 in (0..n).step_by(p) {
                    for k4 in (0..kp).step_by(4) {
                        for j in j0..j0 + p {
                            data.extend((k4..k4 + 4).map(|kk| at(kk, j) as i8));
                        }
                    }
                }
            }
            Isa::Avx2 | Isa::Simd128 => {
                wide.reserve(n.div_ceil(p) * p * kp);
                for j0 in (0..n).step_by(p) {
                    for k2 in (0..kp).step_by(2) {
                        for j in j0..j0 + p {
                            wide.extend((k2..k2 + 2).map(|kk| at(kk, j) as i16));
                        }
                    }
                }
            }
            Isa::Scalar => data = v.iter().map(|&x| x as i8).collect(),
        }
        Some(PackedB {
            isa,
            k,
            n,
            data,
            wide,
            col_sums,
            from: b.clone(),
        })
    }

    /// Whether this pack was made from `b` (the same storage) for `isa`.
    pub fn fits(&self, isa: Isa, b: &HostTensor) -> bool {
        self.isa == isa && self.from.shares_data(b) && self.from.shape() == b.shape()
    }
}

/// a (rows × K) staged as u8 rows of `Kp` bytes, and each row's sum; the
/// buffers are kept between runs.
#[derive(Default)]
struct StagedA {
    kp: usize,
    bytes: Vec<u8>,
    sums: Vec<i32>,
}

impl StagedA {
    fn fill(&mut self, a: &HostTensor, k: usize, rows: usize) -> Option<()> {
        use rlx_ir::Element;
        self.kp = k.next_multiple_of(KQ);
        self.bytes.clear();
        self.bytes.resize(rows * self.kp, 0);
        self.sums.clear();
        self.sums.resize(rows, 0);
        // An i8 value plus 128 is its bits with the top one flipped.
        let (src, flip): (&[u8], u8) = match a.dtype() {
            DType::U8 => (u8::unwrap(a.data())?, 0),
            DType::I8 => {
                let v = i8::unwrap(a.data())?;
                // SAFETY: i8 and u8 have one size and alignment; every
                // bit pattern is a u8.
                #[allow(unsafe_code)]
                let u = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len()) };
                (u, 0x80)
            }
            _ => return None,
        };
        let chunks = src.chunks(k.max(1)).zip(self.bytes.chunks_mut(self.kp));
        for ((src, dst), sum) in chunks.zip(&mut self.sums) {
            let mut s = 0i32;
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = x ^ flip;
                s += *d as i32;
            }
            *sum = s;
        }
        Some(())
    }
}

/// What a `matmul_integer` node keeps between runs: its weight's pack and
/// the staging buffers of a.
#[derive(Default)]
pub struct Cache {
    pack: Option<PackedB>,
    a: StagedA,
}

impl Cache {
    pub fn pack(&self) -> Option<&PackedB> {
        self.pack.as_ref()
    }
}

/// Zero points after the shift, one per row (`za`, of `m` rows cycling
/// over the batch) or per column (`zb`).
fn zero_points(z: Option<&HostTensor>, s: i32) -> Option<Vec<i32>> {
    match z {
        // No zero point is a zero point of 0, shifted like the values.
        None => Some(vec![s]),
        Some(t) => Some(values(t)?.into_iter().map(|x| x + s).collect()),
    }
}

/// The output tile's corrections: `dot − zb·Σa − za·Σb + K·za·zb`.
pub(super) struct Fix<'a> {
    pub k: i32,
    pub row_sums: &'a [i32],
    /// Per column, padded with zeros to whole register tiles.
    pub col_sums: &'a [i32],
    pub zb: &'a [i32],
    /// One, or one per row of a batch item (cycling every `m` rows).
    za: &'a [i32],
    m: usize,
    /// For an f32 output: per (padded) column, `y = f32(dot) · scale + bias`.
    pub scale: Option<&'a [f32]>,
    pub bias: Option<&'a [f32]>,
}

impl Fix<'_> {
    #[inline]
    pub fn za_of(&self, r: usize) -> i32 {
        self.za[if self.za.len() == 1 { 0 } else { r % self.m }]
    }

    /// The f32 output of column `j`: the cast, then the product with the
    /// scale, then the bias — each rounded, as the decomposition is.
    #[inline]
    pub(super) fn rescale(&self, j: usize, y: i32) -> f32 {
        let v = y as f32 * self.scale.map_or(1.0, |s| s[j]);
        match self.bias {
            Some(b) => v + b[j],
            None => v,
        }
    }

    #[inline]
    pub(super) fn apply(&self, r: usize, j: usize, dot: i32) -> i32 {
        let (za, zb) = (self.za_of(r), self.zb[j]);
        dot.wrapping_sub(zb.wrapping_mul(self.row_sums[r]))
            .wrapping_sub(za.wrapping_mul(self.col_sums[j]))
            .wrapping_add(self.k.wrapping_mul(za).wrapping_mul(zb))
    }
}

/// Raw output pointer shared by tasks that write disjoint tiles: int32
/// values, or f32 ones rescaled in the epilogue ([`Fix::scale`]).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) enum Out {
    I32(*mut i32),
    F32(*mut f32),
}
// SAFETY: tasks write disjoint (row, column) tiles of one buffer that
// outlives them (see `run`).
#[allow(unsafe_code)]
unsafe impl Send for Out {}
#[allow(unsafe_code)]
unsafe impl Sync for Out {}

/// Where [`run`] writes.
pub enum Dst<'a> {
    /// `matmul_integer`: the int32 products.
    I32(&'a mut [i32]),
    /// `matmul_integer_scaled`: `f32(product) · scale [+ bias]`, scale and
    /// bias one per column or a single value.
    F32 {
        out: &'a mut [f32],
        scale: &'a [f32],
        bias: Option<&'a [f32]>,
    },
}

impl Dst<'_> {
    fn len(&self) -> usize {
        match self {
            Dst::I32(o) => o.len(),
            Dst::F32 { out, .. } => out.len(),
        }
    }
}

/// A per-column vector (or one value) spread over `len` padded columns.
fn columns_of(v: &[f32], n: usize, len: usize) -> Vec<f32> {
    let mut c = vec![0.0; len];
    for (j, x) in c.iter_mut().enumerate().take(n) {
        *x = v[if v.len() == 1 { 0 } else { j }];
    }
    c
}

/// `matmul_integer(a, b, za, zb)` into `out` (rows × N, row-major), b
/// packed (or repacked into `cache` when it is another tensor or ISA).
/// `m` is a's row count per batch item (for per-row zero points).
#[allow(clippy::too_many_arguments)]
pub fn run(
    isa: Isa,
    a: &HostTensor,
    b: &HostTensor,
    za: Option<&HostTensor>,
    zb: Option<&HostTensor>,
    m: usize,
    cache: &mut Cache,
    mut out: Dst,
) -> Result<(), String> {
    if !cache.pack.as_ref().is_some_and(|p| p.fits(isa, b)) {
        cache.pack = Some(PackedB::new(isa, b).ok_or("b is not an 8-bit integer matrix")?);
    }
    let Cache { pack, a: sa } = cache;
    let pb = pack.as_ref().expect("packed above");
    let (k, n) = (pb.k, pb.n);
    let rows = out.len() / n.max(1);
    if let Dst::F32 { scale, bias, .. } = &out {
        let bad = |v: &[f32]| v.len() != 1 && v.len() != n;
        if bad(scale) || bias.is_some_and(bad) {
            return Err(format!("a scale or bias of neither 1 nor N = {n} values"));
        }
    }
    if a.shape().numel() != rows * k || out.len() != rows * n {
        return Err(format!(
            "a of {} values and an output of {} for K = {k}, N = {n}",
            a.shape().numel(),
            out.len()
        ));
    }
    sa.fill(a, k, rows)
        .ok_or("a is not an 8-bit integer tensor")?;
    let za = zero_points(za, shift(a.dtype(), true)).ok_or("a's zero point is not 8-bit")?;
    let zb = zero_points(zb, shift(b.dtype(), false)).ok_or("b's zero point is not 8-bit")?;
    let mut zb_cols = vec![0i32; pb.col_sums.len()];
    for (j, z) in zb_cols.iter_mut().enumerate().take(n) {
        *z = zb[if zb.len() == 1 { 0 } else { j }];
    }
    let padded = pb.col_sums.len();
    let (scale, bias) = match &out {
        Dst::F32 { scale, bias, .. } => (
            Some(columns_of(scale, n, padded)),
            bias.map(|b| columns_of(b, n, padded)),
        ),
        Dst::I32(_) => (None, None),
    };
    let fix = Fix {
        k: k as i32,
        row_sums: &sa.sums,
        col_sums: &pb.col_sums,
        zb: &zb_cols,
        za: &za,
        m: m.max(1),
        scale: scale.as_deref(),
        bias: bias.as_deref(),
    };
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Vnni | Isa::Avx2 => {
            let dst = match &mut out {
                Dst::I32(o) => Out::I32(o.as_mut_ptr()),
                Dst::F32 { out, .. } => Out::F32(out.as_mut_ptr()),
            };
            // Tasks of whole register-tile column blocks, at least two per
            // thread so a thread that finishes early takes another.
            let cols = super::igemm_x86::tile_cols(isa);
            let tiles = n.div_ceil(cols);
            let tasks = tiles.min((2 * par::threads()).max(tiles.div_ceil(8)));
            let per = tiles.div_ceil(tasks.max(1));
            par::for_each(tiles.div_ceil(per.max(1)), |t| {
                let c0 = t * per * cols;
                let c1 = ((t + 1) * per * cols).min(n);
                // SAFETY: the ISA was checked by the caller (`available`);
                // the pack and staging match K, N and rows; this task alone
                // writes columns c0..c1 of `out` (rows × n).
                #[allow(unsafe_code)]
                unsafe {
                    super::igemm_x86::columns(
                        isa, &pb.data, &pb.wide, &sa.bytes, sa.kp, rows, n, c0, c1, &fix, dst,
                    )
                }
            });
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => {
            super::igemm_wasm::product(&pb.wide, &sa.bytes, sa.kp, rows, n, &fix, &mut out)
        }
        _ => {
            let (bd, kp) = (&pb.data, sa.kp);
            for r in 0..rows {
                let ar = &sa.bytes[r * kp..r * kp + k];
                for j in 0..n {
                    let dot = ar.iter().enumerate().fold(0i32, |s, (p, &x)| {
                        s.wrapping_add(x as i32 * bd[p * n + j] as i32)
                    });
                    let y = fix.apply(r, j, dot);
                    match &mut out {
                        Dst::I32(o) => o[r * n + j] = y,
                        Dst::F32 { out, .. } => out[r * n + j] = fix.rescale(j, y),
                    }
                }
            }
        }
    }
    Ok(())
}
