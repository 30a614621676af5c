//! Typed options of the built-in backends, as plain data.
//!
//! They live in the contract crate, not in each backend, so that the one
//! edge that reads the environment (`rlx::env`) can produce them without
//! linking every backend (`rlx` stays free of wgpu, and must build for
//! wasm32). Each backend re-exports its own type and receives it when it
//! is built or compiles a program; no kernel generator reads the
//! environment. Defaults are what a user should get; the other values are
//! A/B and test knobs.

/// Which CPU engine runs a program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuEngine {
    /// The fast f32 engine over the planned LIR (reference kernels only
    /// where it has none).
    #[default]
    Fast,
    /// Every node on the f64 reference kernels (A/B comparisons, bisecting
    /// a suspected fast-kernel bug).
    Reference,
}

impl CpuEngine {
    /// The accepted names, for messages.
    pub const NAMES: &'static str = "fast, reference";

    /// `fast` or `reference`.
    pub fn parse(s: &str) -> Option<CpuEngine> {
        match s {
            "fast" => Some(CpuEngine::Fast),
            "reference" => Some(CpuEngine::Reference),
            _ => None,
        }
    }
}

/// Options of the CPU backend that change what a compile builds. The
/// thread count is process-wide (one pool): `rlx_cpu::set_threads`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuOptions {
    pub engine: CpuEngine,
    /// f32 products of resident weights on AMX tiles where the CPU has
    /// them (off: the `gemm` crate's kernels).
    pub amx: bool,
    /// bf16 products as AVX512-BF16 dot products where the CPU has them
    /// (off: widened to f32 GEMMs).
    pub bf16_dot: bool,
    /// `dequant_matmul` rounds each 32 activations to 8-bit integers and
    /// multiplies with integer dot products, as llama.cpp does (AVX2 for
    /// few rows, an integer GEMM on AVX-512 VNNI or AVX2 for many):
    /// faster, not exact (off, the default: f32 activations, equal to
    /// dequantize-then-matmul up to f32 sums).
    pub q8_activations: bool,
    /// 3×3 stride-1 convs as Winograd F(4×4, 3×3): about 4× fewer
    /// multiplies, results within f32 rounding of the direct sum but not
    /// equal to it (off: im2col + GEMM).
    pub winograd: bool,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            engine: CpuEngine::Fast,
            amx: true,
            bf16_dot: true,
            q8_activations: false,
            winograd: true,
        }
    }
}

/// How the wgpu backend holds f16 tensors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WgpuF16 {
    /// As f16 where the adapter has `shader-f16`, else as f32 words.
    #[default]
    Auto,
    /// As f32 words rounded to f16 on every store, even where the adapter
    /// has `shader-f16` (tests the path of adapters without it).
    HeldAsF32,
}

/// Which attention kernel the wgpu backend generates (where the tiled
/// one fits the head dims; cooperative matrices aside).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WgpuAttention {
    /// The tiled kernel where the head dims fit it, else one row per thread.
    #[default]
    Auto,
    /// One row per thread everywhere (A/B runs).
    Row,
}

/// A cooperative-matrix matmul's output tile (rows × columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopTile {
    pub rows: u32,
    pub cols: u32,
}

impl CoopTile {
    /// The tiles the kernel has.
    pub const ALL: [CoopTile; 4] = [
        CoopTile { rows: 64, cols: 64 },
        CoopTile {
            rows: 128,
            cols: 64,
        },
        CoopTile {
            rows: 128,
            cols: 128,
        },
        CoopTile {
            rows: 64,
            cols: 128,
        },
    ];
    /// The accepted names, for messages.
    pub const NAMES: &'static str = "64x64, 128x64, 128x128, 64x128";

    /// `64x64`, `128x64`, `128x128` or `64x128`.
    pub fn parse(s: &str) -> Option<CoopTile> {
        let (r, c) = s.split_once('x')?;
        let t = CoopTile {
            rows: r.parse().ok()?,
            cols: c.parse().ok()?,
        };
        CoopTile::ALL.contains(&t).then_some(t)
    }
}

impl std::fmt::Display for CoopTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// Options of the wgpu backend: what the adapter offers is used unless
/// turned off here; `None` lets the generator choose by shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgpuOptions {
    pub f16: WgpuF16,
    /// f16 matmuls on cooperative matrices (tensor cores) where offered.
    pub coop: bool,
    /// Subgroup operations in reductions and row ops where offered.
    pub subgroups: bool,
    /// f16 attention on cooperative matrices where it applies.
    pub attn_coop: bool,
    pub attention: WgpuAttention,
    /// Threads per attention row in the tiled kernel: 1, 2, 4 or 8 (8 only
    /// with 32-row tiles; ignored otherwise).
    pub attn_slices: Option<u32>,
    /// The scalar matmul's register block side: 2, 4 or 8.
    pub matmul_block: Option<u32>,
    /// Split K of small-batch products over more workgroups.
    pub split_k: bool,
    /// The cooperative matmul's K step: 16 or 32.
    pub coop_bk: Option<u32>,
    /// The cooperative matmul's output tile.
    pub coop_tile: Option<CoopTile>,
}

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            f16: WgpuF16::Auto,
            coop: true,
            subgroups: true,
            attn_coop: true,
            attention: WgpuAttention::Auto,
            attn_slices: None,
            matmul_block: None,
            split_k: true,
            coop_bk: None,
            coop_tile: None,
        }
    }
}

/// The accepted values of [`WgpuOptions::attn_slices`].
pub const ATTN_SLICES: [u32; 4] = [1, 2, 4, 8];
/// The accepted values of [`WgpuOptions::matmul_block`].
pub const MATMUL_BLOCKS: [u32; 3] = [2, 4, 8];
/// The accepted values of [`WgpuOptions::coop_bk`].
pub const COOP_BKS: [u32; 2] = [16, 32];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coop_tiles_parse_and_print() {
        for t in CoopTile::ALL {
            assert_eq!(CoopTile::parse(&t.to_string()), Some(t));
        }
        assert_eq!(CoopTile::parse("32x32"), None);
        assert_eq!(CoopTile::parse("64"), None);
    }
}
