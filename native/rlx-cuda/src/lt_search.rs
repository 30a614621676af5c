//! cuBLASLt's algorithm space beyond its heuristic (`RLX_CUDA_LT_SEARCH`).
//!
//! The heuristic ranks a few configurations per GEMM from a model of the
//! GPU; for MiniLM's skinny products (K = 384 or 1536 against a few
//! thousand rows) its top 16 leave most SMs idle or pick a tile that
//! wastes a wave. Here every algorithm id cuBLASLt has for the GEMM's
//! types is expanded into its configurations (tile, stages, CTA
//! swizzle, custom option, K split), each kept when `cublasLtMatmulAlgoCheck`
//! accepts it for this exact GEMM within the workspace and computes in
//! the precision asked for. The tuner then times them with the rest.
//!
//! Precision is never traded: an fp32 GEMM without the TF32 opt-in keeps
//! only algorithms whose numerical-implementation flags say fp32 inputs
//! and an fp32 accumulator, and split-K sums its parts in the compute
//! type (fp32), never in the fp16 output type.

use cudarc::cublaslt::sys as lt;

/// `1` searches the whole space; `0` or unset keeps the heuristic's
/// candidates (and their split-K variants) only.
pub const SEARCH_ENV: &str = "RLX_CUDA_LT_SEARCH";

/// The most configurations kept per GEMM: the tuner times each one
/// (~1–3 ms apiece on MiniLM's shapes).
pub const MAX_VARIANTS: usize = 768;

/// K splits tried on algorithms that support splitting.
const SPLITS: [i32; 6] = [1, 2, 3, 4, 6, 8];

/// Custom options tried per algorithm (of its advertised maximum).
const MAX_CUSTOM: u32 = 3;

/// cuBLASLt's `CUBLASLT_NUMERICAL_IMPL_FLAGS_*` bits that matter here.
const ACCUMULATOR_16F: u64 = 0x100;
const INPUT_REDUCED: u64 = 0x07 << 16; // 16F | 16BF | TF32

/// The types of a GEMM, as cuBLASLt names them.
#[derive(Clone, Copy, Debug)]
pub struct Types {
    pub compute: lt::cublasComputeType_t,
    pub scale: lt::cudaDataType,
    pub data: lt::cudaDataType,
    /// fp32 data without the TF32 opt-in: reduced-precision inputs are
    /// refused.
    pub strict_f32: bool,
}

/// One configuration of one algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub id: i32,
    pub tile: u32,
    pub stages: u32,
    pub swizzle: u32,
    pub custom: u32,
    pub split: i32,
}

impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "id {} tile {} stages {} swizzle {} custom {} split-K {}",
            self.id, self.tile, self.stages, self.swizzle, self.custom, self.split
        )
    }
}

/// A capability attribute that is an array of u32 (tile or stage ids);
/// `[0]` (undefined: the algorithm picks) when it lists none.
///
/// # Safety
/// `algo` is an initialized algorithm.
unsafe fn cap_ids(
    algo: &lt::cublasLtMatmulAlgo_t,
    attr: lt::cublasLtMatmulAlgoCapAttributes_t,
) -> Vec<u32> {
    let ok = lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
    let mut bytes = 0usize;
    if lt::cublasLtMatmulAlgoCapGetAttribute(algo, attr, std::ptr::null_mut(), 0, &mut bytes) != ok
        || bytes < 4
    {
        return vec![0];
    }
    let mut ids = vec![0u32; bytes / 4];
    let mut written = 0usize;
    if lt::cublasLtMatmulAlgoCapGetAttribute(
        algo,
        attr,
        ids.as_mut_ptr() as *mut _,
        ids.len() * 4,
        &mut written,
    ) != ok
    {
        return vec![0];
    }
    ids
}

/// A scalar capability or configuration attribute (`None` on error).
///
/// # Safety
/// `algo` is an initialized algorithm and `T` the attribute's type.
unsafe fn cap<T: Copy + Default>(
    algo: &lt::cublasLtMatmulAlgo_t,
    attr: lt::cublasLtMatmulAlgoCapAttributes_t,
) -> Option<T> {
    let mut v = T::default();
    let mut written = 0usize;
    (lt::cublasLtMatmulAlgoCapGetAttribute(
        algo,
        attr,
        &mut v as *mut T as *mut _,
        std::mem::size_of::<T>(),
        &mut written,
    ) == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
        .then_some(v)
}

/// Set a configuration attribute; false if cuBLASLt refused it.
///
/// # Safety
/// `T` is the attribute's type.
unsafe fn set<T: Copy>(
    algo: &mut lt::cublasLtMatmulAlgo_t,
    attr: lt::cublasLtMatmulAlgoConfigAttributes_t,
    v: T,
) -> bool {
    lt::cublasLtMatmulAlgoConfigSetAttribute(
        algo,
        attr,
        &v as *const T as *const _,
        std::mem::size_of::<T>(),
    ) == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS
}

/// The configurations cuBLASLt accepts for this GEMM (`desc`, `layouts`:
/// A, B, C = D): at most [`MAX_VARIANTS`], an even share per algorithm id.
/// Failures only shrink the list.
pub(crate) fn variants(
    handle: lt::cublasLtHandle_t,
    desc: lt::cublasLtMatmulDesc_t,
    layouts: &[lt::cublasLtMatrixLayout_t; 3],
    t: Types,
    workspace: usize,
) -> Vec<(lt::cublasLtMatmulAlgo_t, Config)> {
    use lt::cublasLtMatmulAlgoCapAttributes_t as Cap;
    use lt::cublasLtMatmulAlgoConfigAttributes_t as Cfg;
    let ok = lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
    let mut per_id: Vec<Vec<(lt::cublasLtMatmulAlgo_t, Config)>> = Vec::new();
    // SAFETY: every out-pointer is a local of the size passed; the
    // descriptors are live for the call; algorithms are plain data.
    unsafe {
        let mut ids = vec![0i32; 256];
        let mut count = 0i32;
        if lt::cublasLtMatmulAlgoGetIds(
            handle,
            t.compute,
            t.scale,
            t.data,
            t.data,
            t.data,
            t.data,
            ids.len() as i32,
            ids.as_mut_ptr(),
            &mut count,
        ) != ok
        {
            return Vec::new();
        }
        ids.truncate(count.max(0) as usize);
        // The ids that initialize for these types and compute in the
        // precision asked for.
        let bases: Vec<(i32, lt::cublasLtMatmulAlgo_t)> = ids
            .iter()
            .filter_map(|&id| {
                let mut base = std::mem::zeroed::<lt::cublasLtMatmulAlgo_t>();
                if lt::cublasLtMatmulAlgoInit(
                    handle, t.compute, t.scale, t.data, t.data, t.data, t.data, id, &mut base,
                ) != ok
                {
                    return None;
                }
                let flags: u64 =
                    cap(&base, Cap::CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS).unwrap_or(0);
                let reduced =
                    flags & ACCUMULATOR_16F != 0 || (t.strict_f32 && flags & INPUT_REDUCED != 0);
                (!reduced).then_some((id, base))
            })
            .collect();
        for &(id, base) in &bases {
            let tiles = cap_ids(&base, Cap::CUBLASLT_ALGO_CAP_TILE_IDS);
            let stages = cap_ids(&base, Cap::CUBLASLT_ALGO_CAP_STAGES_IDS);
            let split_ok =
                cap::<i32>(&base, Cap::CUBLASLT_ALGO_CAP_SPLITK_SUPPORT).unwrap_or(0) != 0;
            let compute_reduce = cap::<u32>(&base, Cap::CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK)
                .unwrap_or(0)
                & lt::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE as u32
                != 0;
            let swizzles = if cap::<u32>(&base, Cap::CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT)
                .unwrap_or(0)
                != 0
            {
                1
            } else {
                0
            };
            let customs = cap::<i32>(&base, Cap::CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX)
                .unwrap_or(0)
                .clamp(0, MAX_CUSTOM as i32) as u32;
            // Plain configurations first: no K split, custom option 0, no
            // swizzle.
            let mut combos = Vec::new();
            for &tile in &tiles {
                for &stage in &stages {
                    for swizzle in 0..=swizzles {
                        for custom in 0..=customs {
                            for split in SPLITS {
                                if split == 1 || (split_ok && compute_reduce) {
                                    combos.push((tile, stage, swizzle, custom, split));
                                }
                            }
                        }
                    }
                }
            }
            combos.sort_by_key(|&(_, _, swizzle, custom, split)| {
                (split != 1, custom, swizzle, split)
            });
            let mut kept = Vec::new();
            for (tile, stage, swizzle, custom, split) in combos {
                let mut algo = base;
                let scheme = if split > 1 {
                    lt::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                } else {
                    lt::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_NONE
                } as u32;
                if !(set(&mut algo, Cfg::CUBLASLT_ALGO_CONFIG_TILE_ID, tile)
                    && set(&mut algo, Cfg::CUBLASLT_ALGO_CONFIG_STAGES_ID, stage)
                    && set(&mut algo, Cfg::CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, swizzle)
                    && set(&mut algo, Cfg::CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom)
                    && set(&mut algo, Cfg::CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split)
                    && set(
                        &mut algo,
                        Cfg::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                        scheme,
                    ))
                {
                    continue;
                }
                let mut res = std::mem::zeroed::<lt::cublasLtMatmulHeuristicResult_t>();
                if lt::cublasLtMatmulAlgoCheck(
                    handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], &algo, &mut res,
                ) != ok
                    || res.workspaceSize > workspace
                {
                    continue;
                }
                kept.push((
                    algo,
                    Config {
                        id,
                        tile,
                        stages: stage,
                        swizzle,
                        custom,
                        split,
                    },
                ));
            }
            per_id.push(kept);
        }
    }
    // Past the cap, ids take turns (each id's plainest configurations
    // first): the first ids alone filled it before (fp16's 768 were all
    // ids 21 and 35).
    let mut out = Vec::new();
    for rank in 0.. {
        let before = out.len();
        for kept in &per_id {
            if let Some(&c) = kept.get(rank) {
                if out.len() == MAX_VARIANTS {
                    return out;
                }
                out.push(c);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}
