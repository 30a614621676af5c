//! WGSL generation: one specialized kernel per LIR step. Shapes, strides
//! and offsets are baked in as constants, so a kernel needs no uniforms;
//! every tensor is read through its [`TensorRef`] (views cost nothing).
//!
//! Memory model: buffers are `array<u32>`; f32/i32 are bitcast, bool is
//! one word (0/1), i64 is two words (low word first; kernels that read it
//! use the low word as an index after a range check). f16 computes in f32:
//! on adapters with `shader-f16` it is stored as 2-byte elements in buffers
//! bound as `array<f16>` (the f16 arena, f16 inputs and constants); without
//! it, f16 tensors are held as f32 words and rounded to f16 on every store,
//! so both paths give the same numbers up to accumulation order.

pub mod attention;
pub mod attention_coop;
pub mod conv;
pub mod coop;
pub mod elementwise;
pub mod expr;
pub mod index;
pub mod matmul;
pub mod norm;
pub mod quant;
pub mod reduce;

use crate::error::WgpuError;
use crate::tref::{words_per_elem, BufId, TensorRef};
use rlx_ir::DType;
use std::fmt::Write;

/// Threads per workgroup of the flat (one thread per element) kernels.
pub const WG: u32 = 256;
/// Workgroups per dispatch dimension (WebGPU's guaranteed minimum).
pub const MAX_GROUPS: u32 = 65535;

/// A generated kernel, ready to become a pipeline.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// A readable name (`add_f32`, `matmul_bias_act_f32`, ...).
    pub name: String,
    pub wgsl: String,
    /// Binding `k` of group 0 is `bufs[k]`; the arena is read-write.
    pub bufs: Vec<BufId>,
    /// Workgroups to dispatch.
    pub groups: [u32; 3],
    /// Whether the kernel may raise the run's error flag.
    pub flags: bool,
    /// Arena words of scratch it needs (a split-K matmul's partial sums),
    /// at `SCRATCH_BASE`, which the lowering places after every slot.
    pub scratch_words: usize,
}

/// The WGSL type a dtype computes in, or why the GPU cannot hold it.
pub fn compute_ty(d: DType) -> Result<&'static str, WgpuError> {
    Ok(match d {
        DType::F32 | DType::F16 => "f32",
        DType::I32 => "i32",
        DType::I64 => "vec2<u32>",
        DType::Bool => "bool",
        d => {
            return Err(WgpuError::Unsupported {
                op: "tensor".into(),
                why: format!(
                    "dtype {d} has no WGSL kernel (f32, f16, i32, i64 indices and bool do)"
                ),
            })
        }
    })
}

/// Split a thread count into a dispatch grid of `WG`-thread groups.
pub fn grid(threads: usize, per_group: u32) -> [u32; 3] {
    let groups = (threads as u64).div_ceil(per_group as u64).max(1);
    if groups <= MAX_GROUPS as u64 {
        [groups as u32, 1, 1]
    } else {
        [MAX_GROUPS, groups.div_ceil(MAX_GROUPS as u64) as u32, 1]
    }
}

/// Collects bindings and helper code while a kernel is generated.
#[derive(Default)]
pub struct Builder {
    pub bufs: Vec<BufId>,
    /// Per binding: bound as `array<f16>` (else `array<u32>`).
    half: Vec<bool>,
    pub flags: bool,
    /// Uses cooperative matrices (`enable wgpu_cooperative_matrix;`).
    pub coop: bool,
    /// f16 buffers are bound as `array<vec4<f16>>` (8-byte loads); scalar
    /// accesses then address one component.
    pub half4: bool,
}

impl Builder {
    /// The WGSL name of a buffer of 32-bit words, binding it on first use.
    pub fn buf(&mut self, b: BufId) -> String {
        self.bind(b, false)
    }

    /// Four f16 elements of `r` from element `addr` (i32 expression, a
    /// multiple of 4) as a `vec4<f16>`; needs `half4`.
    pub fn load_half4(&mut self, r: &TensorRef, addr: &str) -> String {
        debug_assert!(self.half4 && r.is_half());
        let b = self.buf_of(r);
        format!("{b}[u32({addr}) / 4u]")
    }

    /// The WGSL name of the buffer holding `r`.
    fn buf_of(&mut self, r: &TensorRef) -> String {
        self.bind(r.buf, r.is_half())
    }

    fn bind(&mut self, b: BufId, half: bool) -> String {
        let k = match self.bufs.iter().position(|&x| x == b) {
            Some(k) => k,
            None => {
                self.bufs.push(b);
                self.half.push(half);
                self.bufs.len() - 1
            }
        };
        format!("b{k}")
    }

    /// Element address (i32 expression) of `r` at the given per-axis index
    /// expressions (u32); size-1 and stride-0 axes drop out.
    pub fn addr(r: &TensorRef, idx: &[String]) -> String {
        let mut s = format!("{}", r.offset);
        for (k, i) in idx.iter().enumerate() {
            if r.dims[k] > 1 && r.strides[k] != 0 {
                let _ = write!(s, " + i32({i}) * {}", r.strides[k]);
            }
        }
        s
    }

    /// Load element `addr` (i32 expression) of `r` as its compute type.
    pub fn load(&mut self, r: &TensorRef, addr: &str) -> String {
        let b = self.buf_of(r);
        let w = words_per_elem(r.dtype);
        match r.dtype {
            DType::F16 if !r.wide && self.half4 => {
                format!("f32({b}[u32({addr}) / 4u][u32({addr}) % 4u])")
            }
            DType::F16 if !r.wide => format!("f32({b}[u32({addr})])"),
            DType::F32 | DType::F16 => format!("bitcast<f32>({b}[u32({addr})])"),
            DType::I32 => format!("bitcast<i32>({b}[u32({addr})])"),
            DType::I64 => {
                format!("vec2<u32>({b}[u32({addr}) * {w}u], {b}[u32({addr}) * {w}u + 1u])")
            }
            _ => format!("({b}[u32({addr})] != 0u)"),
        }
    }

    /// Load an integer index (i32 or i64) as i32, and an expression that is
    /// true when the stored value does not fit in i32 (then out of range).
    pub fn load_index(&mut self, r: &TensorRef, addr: &str) -> (String, String) {
        let b = self.buf_of(r);
        match r.dtype {
            DType::I64 => (
                format!("bitcast<i32>({b}[u32({addr}) * 2u])"),
                format!("({b}[u32({addr}) * 2u + 1u] != select(0u, 0xffffffffu, bitcast<i32>({b}[u32({addr}) * 2u]) < 0))"),
            ),
            _ => (format!("bitcast<i32>({b}[u32({addr})])"), "false".into()),
        }
    }

    /// A statement storing `val` (compute type) at element `addr` of `r`.
    pub fn store(&mut self, r: &TensorRef, addr: &str, val: &str) -> String {
        let b = self.buf_of(r);
        match r.dtype {
            DType::F16 if !r.wide && self.half4 => {
                format!("{b}[u32({addr}) / 4u][u32({addr}) % 4u] = to_f16_({val});")
            }
            DType::F16 if !r.wide => format!("{b}[u32({addr})] = to_f16_({val});"),
            DType::F16 => format!("{b}[u32({addr})] = bitcast<u32>(rf16_({val}));"),
            DType::F32 | DType::I32 => format!("{b}[u32({addr})] = bitcast<u32>({val});"),
            DType::I64 => format!(
                "{{ let v_: vec2<u32> = {val}; {b}[u32({addr}) * 2u] = v_.x; {b}[u32({addr}) * 2u + 1u] = v_.y; }}"
            ),
            _ => format!("{b}[u32({addr})] = select(0u, 1u, {val});"),
        }
    }

    /// The binding declarations (arena read-write, the rest read-only) and
    /// the error-flag word (last word of the arena) when used.
    pub fn header(&self) -> String {
        let mut s = String::new();
        let f16 = self.half.contains(&true);
        if f16 {
            s.push_str("enable f16;\n");
        }
        if self.coop {
            s.push_str("enable wgpu_cooperative_matrix;\n");
        }
        for (k, b) in self.bufs.iter().enumerate() {
            let access = if matches!(*b, BufId::Arena | BufId::Half) {
                "read_write"
            } else {
                "read"
            };
            let _ = writeln!(
                s,
                "@group(0) @binding({k}) var<storage, {access}> b{k}: array<{}>;",
                match (self.half[k], self.half4) {
                    (true, true) => "vec4<f16>",
                    (true, false) => "f16",
                    _ => "u32",
                }
            );
        }
        if f16 {
            s.push_str(expr::F16_PRELUDE);
        }
        s
    }

    pub fn finish(self, name: String, body: String, groups: [u32; 3]) -> Kernel {
        let wgsl = format!("{}\n{}\n{body}", self.header(), expr::PRELUDE);
        Kernel {
            name,
            wgsl,
            bufs: self.bufs,
            groups,
            flags: self.flags,
            scratch_words: 0,
        }
    }
}

/// Address (i32 expression) of `t`'s origin at the batch index variables
/// `bi`, which index its leading `bi.len()` axes.
pub fn batch_addr(t: &TensorRef, bi: &[String]) -> String {
    let mut bt = t.clone();
    bt.dims.truncate(bi.len());
    bt.strides.truncate(bi.len());
    Builder::addr(&bt, bi)
}

/// `t` broadcast to `batch` followed by `[x, y]`.
pub fn with_batch(t: &TensorRef, batch: &[usize], x: usize, y: usize) -> TensorRef {
    let mut d = batch.to_vec();
    d.extend([x, y]);
    t.broadcast_to(&d)
}

/// `let iK = ...;` lines unravelling flat index `flat` (u32) over `dims`
/// into variables `{prefix}0..`.
pub fn unravel(flat: &str, dims: &[usize], prefix: &str) -> (String, Vec<String>) {
    let mut s = format!("var r_{prefix}: u32 = {flat};\n");
    let mut names = vec![String::new(); dims.len()];
    for k in (0..dims.len()).rev() {
        let n = format!("{prefix}{k}");
        let _ = writeln!(
            s,
            "let {n}: u32 = r_{prefix} % {}u; r_{prefix} = r_{prefix} / {}u;",
            dims[k].max(1),
            dims[k].max(1)
        );
        names[k] = n;
    }
    (s, names)
}

/// The entry point line and the flat thread index of a 1-thread-per-item
/// kernel launched with [`grid`]; returns early past `n`.
pub fn flat_entry(n: usize, groups: [u32; 3]) -> String {
    format!(
        "@compute @workgroup_size({WG})\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\nlet idx: u32 = gid.x + gid.y * {}u;\nif (idx >= {n}u) {{ return; }}\n",
        groups[0] * WG
    )
}

/// A statement raising the run's error flag (the arena's last word; the
/// lowering substitutes `FLAG_WORD` once the arena size is known).
pub fn flag_store(b: &mut Builder) -> String {
    b.flags = true;
    let a = b.buf(BufId::Arena);
    format!("{a}[FLAG_WORD] = 1u;")
}
