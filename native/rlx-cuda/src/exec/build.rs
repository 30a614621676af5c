//! Building an executable from a plan: device memory for the arena,
//! inputs, constants and scratch; every launch resolved to its device
//! addresses; GEMMs made and tuned.

use super::launch::Resolved;
use super::lt_gemm::LtGemm;
use super::tuning::Own;
use super::{upload_once, CudaExecutable, CudaOptions, State};
use crate::device::{DevBuf, Gpu};
use crate::error::CudaError;
use crate::host::bytes_of;
use crate::plan::{Launch, Plan, Ptr, Root};
use crate::staging::{pack, Pinned};
use cudarc::driver::{result, sys, CudaFunction, LaunchConfig};
use rlx_ir::TensorType;
use std::sync::{Arc, Mutex};

impl CudaExecutable {
    pub(crate) fn new(gpu: Arc<Gpu>, plan: Plan, opts: CudaOptions) -> Result<Self, CudaError> {
        gpu.ctx.bind_to_thread()?;
        let module = gpu.module(&plan.source)?;
        let arena = DevBuf::new(&gpu.ctx, plan.arena_bytes)?;
        // Input buffers: grouped inputs (weights of batched sibling GEMMs)
        // back to back in one allocation, the others in their own.
        let mut input_ptrs: Vec<Option<u64>> = vec![None; plan.inputs.len()];
        let mut input_bufs = Vec::new();
        for group in &plan.input_groups {
            let Some(&first) = group.first() else {
                continue;
            };
            let stride = crate::plan::group_stride(&plan.inputs[first]);
            let buf = DevBuf::new(&gpu.ctx, stride * group.len())?;
            for (t, &k) in group.iter().enumerate() {
                if plan.inputs[k] != plan.inputs[first] || input_ptrs[k].is_some() {
                    return Err(CudaError::Input(format!(
                        "input group {group:?}: member {k} differs or is grouped twice"
                    )));
                }
                input_ptrs[k] = Some(buf.ptr + (t * stride) as u64);
            }
            input_bufs.push(buf);
        }
        let mut inputs = Vec::new();
        for (k, ty) in plan.inputs.iter().enumerate() {
            let ptr = match input_ptrs[k] {
                Some(p) => p,
                None => {
                    let bytes = ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0);
                    let b = DevBuf::new(&gpu.ctx, bytes)?;
                    let p = b.ptr;
                    input_bufs.push(b);
                    p
                }
            };
            inputs.push((ty.clone(), ptr));
        }
        let mut consts = Vec::new();
        for t in &plan.consts {
            let b = DevBuf::new(&gpu.ctx, bytes_of(t)?.len())?;
            upload_once(b.ptr, t)?;
            consts.push(b);
        }
        let scratch: Vec<DevBuf> = plan
            .scratch
            .iter()
            .map(|&n| DevBuf::new(&gpu.ctx, n))
            .collect::<Result<_, _>>()?;
        let err = DevBuf::new(&gpu.ctx, 4)?;
        let addr = |p: &Ptr| -> u64 {
            let base = match p.root {
                Root::Arena(off) => arena.ptr + off as u64,
                Root::Input(i) => inputs[i].1,
                Root::Const(i) => consts[i].ptr,
                Root::Scratch(i) => scratch[i].ptr,
            };
            (base as i64 + p.byte) as u64
        };
        let mut funcs = std::collections::HashMap::new();
        let mut launches = Vec::new();
        // (launch index, GEMM shape and its algorithm choice).
        let mut gemm_algos = Vec::new();
        // A generated kernel's launch, its function loaded once.
        let mut resolve_kernel = |l: &Launch| -> Result<Resolved, CudaError> {
            let Launch::Kernel {
                func,
                grid,
                block,
                smem,
                args,
                err: e,
                ..
            } = l
            else {
                return Err(CudaError::Input(format!("not a kernel launch: {l:?}")));
            };
            if !funcs.contains_key(func) {
                funcs.insert(func.clone(), module.load_function(func)?);
            }
            let f: CudaFunction = funcs[func].clone();
            if *smem > 48 * 1024 {
                f.set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    *smem as i32,
                )?;
            }
            let mut a: Vec<u64> = args.iter().map(addr).collect();
            if *e {
                a.push(err.ptr);
            }
            Ok(Resolved::Kernel {
                name: func.clone(),
                func: f,
                cfg: LaunchConfig {
                    grid_dim: *grid,
                    block_dim: (*block, 1, 1),
                    shared_mem_bytes: *smem,
                },
                args: a,
            })
        };
        // Set when a GEMM's own kernel applies its tail: the tail's launch
        // (the next one) is left out.
        let mut skip = false;
        for (at, l) in plan.launches.iter().enumerate() {
            if std::mem::take(&mut skip) {
                continue;
            }
            match l {
                Launch::Kernel { node, .. } => {
                    launches.push((*node, resolve_kernel(l)?));
                }
                Launch::GemmBatched { node, gemm, ptrs } => {
                    let mut arrays = Vec::new();
                    for k in 0..3 {
                        let a: Vec<u64> = ptrs.iter().map(|t| addr(&t[k])).collect();
                        let b = DevBuf::new(&gpu.ctx, a.len() * 8)?;
                        // SAFETY: b holds a.len() u64 values.
                        unsafe { result::memcpy_htod_sync(b.ptr, &a) }?;
                        arrays.push(b);
                    }
                    let arrays: [DevBuf; 3] = arrays
                        .try_into()
                        .map_err(|_| CudaError::Input("pointer arrays".into()))?;
                    launches.push((*node, Resolved::Batched(gemm.clone(), arrays)));
                }
                Launch::Gemm { node, gemm } => {
                    let p = [addr(&gemm.a), addr(&gemm.b), addr(&gemm.c)];
                    // Every GEMM with one output dtype goes through cuBLASLt
                    // (tuned below); mixed-dtype ones through cuBLAS.
                    // (cuBLASLt rejects empty GEMMs: those stay cuBLAS no-ops.)
                    let empty = gemm.m == 0 || gemm.n == 0 || gemm.k == 0 || gemm.batch == 0;
                    if (gemm.c_dtype == gemm.dtype && !empty)
                        || gemm.bias.is_some()
                        || gemm.residual.is_some()
                    {
                        let tail = match (&gemm.tail, plan.launches.get(at + 1)) {
                            (Some(t), Some(next @ Launch::Kernel { .. })) => Some((
                                Box::new(resolve_kernel(next)?),
                                t.bias.as_ref().map_or(0, addr),
                            )),
                            _ => None,
                        };
                        let mut lt = LtGemm::new(
                            &gpu,
                            gemm,
                            p[0],
                            p[1],
                            p[2],
                            gemm.bias.as_ref().map(addr),
                            gemm.residual.as_ref().map(addr),
                            &opts,
                            tail,
                        )?;
                        if LtGemm::worth_tuning(gemm) {
                            lt.tune(&gpu, opts.tune_log)?;
                        }
                        skip = lt.fused();
                        gemm_algos.push((
                            launches.len(),
                            format!(
                                "{}{} m{} n{} k{}{}: {}",
                                match lt.own_pick.map(|o| &lt.own[o].0) {
                                    Some(Own::S(..)) => "sgemm",
                                    Some(Own::H(..)) => "hgemm",
                                    None => "cublasLt::matmul",
                                },
                                if skip { " + bias + activation" } else { "" },
                                gemm.m,
                                gemm.n,
                                gemm.k,
                                if gemm.batch > 1 {
                                    format!(" batch {}", gemm.batch)
                                } else {
                                    String::new()
                                },
                                lt.choice
                            ),
                        ));
                        launches.push((*node, Resolved::Lt(Box::new(lt))));
                    } else {
                        launches.push((*node, Resolved::Gemm(gemm.clone(), p)));
                    }
                }
            }
        }
        let outputs: Vec<(TensorType, u64)> = plan
            .outputs
            .iter()
            .map(|l| {
                let p = Ptr {
                    root: l.root,
                    byte: l.offset * crate::plan::esize(l.dtype) as i64,
                };
                (TensorType::new(l.dtype, l.dims.clone()), addr(&p))
            })
            .collect();
        let n_in = inputs.len();
        // Output staging: every output, then the 4-byte error flag.
        let mut sizes: Vec<usize> = outputs
            .iter()
            .map(|(ty, _)| ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0))
            .collect();
        sizes.push(4);
        let (out_offsets, out_bytes) = pack(&sizes);
        let out_stage = Pinned::new(&gpu.ctx, out_bytes)?;
        Ok(CudaExecutable {
            gpu,
            opts,
            launches,
            inputs,
            outputs,
            out_offsets,
            err,
            node_ops: plan.node_ops,
            kernels: plan.kernels,
            gemm_algos,
            source: plan.source,
            state: Mutex::new(State {
                graph: None,
                resident: vec![false; n_in],
                uploaded: vec![false; n_in],
                feedback: vec![],
                in_stage: None,
                in_done: None,
                out_stage,
                pending: vec![],
                scatter: None,
            }),
            _arena: arena,
            _input_bufs: input_bufs,
            _consts: consts,
            _scratch: scratch,
        })
    }
}
