//! A decoder's hyper-parameters, read from GGUF metadata (`<arch>.*` keys
//! as llama.cpp writes them) and checked before anything is built.

use super::LlmError;
use rlx_formats::GgufFile;

/// The decoder families rlx builds from GGUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// llama (SmolLM2, Llama 2/3): RMSNorm, SwiGLU, GQA, RoPE on adjacent
    /// pairs (llama.cpp's converter permutes Q/K rows so it is).
    Llama,
    /// qwen2: llama plus Q/K/V biases, RoPE on halves (NeoX).
    Qwen2,
    /// gemma3: GeGLU (tanh gelu), QK-norm, four norms per layer, the
    /// embedding scaled by √hidden, sliding-window layers with their own
    /// RoPE base.
    Gemma3,
}

impl Arch {
    fn parse(s: &str) -> Option<Arch> {
        Some(match s {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "gemma3" => Arch::Gemma3,
            _ => return None,
        })
    }

    /// The `general.architecture` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// RoPE rotates adjacent pairs (llama's GGUF layout) rather than halves.
    pub fn rope_interleaved(self) -> bool {
        self == Arch::Llama
    }
}

/// RoPE frequency scaling (`<arch>.rope.scaling.*`).
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    None,
    /// Positions divided by `factor`.
    Linear {
        factor: f64,
    },
}

/// Everything the decoder graph needs.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The context length the model was trained for.
    pub context_length: usize,
    pub rms_eps: f64,
    pub rope_base: f64,
    /// gemma3's sliding-window layers use their own base.
    pub rope_base_local: f64,
    pub rope_scaling: RopeScaling,
    /// The attention window of sliding layers (0: none).
    pub sliding_window: usize,
    /// Every `sliding_pattern`-th layer (1-based) is global; 0: all global.
    pub sliding_pattern: usize,
    /// `softmax(q·kᵀ · scale)`.
    pub attn_scale: f64,
    /// `tanh(x / c) · c` on the final logits (0: none).
    pub logit_softcap: f64,
    /// The output projection is the embedding table (`output.weight` absent).
    pub tied_embeddings: bool,
}

impl LlmConfig {
    /// Read and check the config of `file`: an unknown architecture, a
    /// missing key or inconsistent sizes are errors that name the file.
    pub fn from_gguf(file: &GgufFile) -> Result<LlmConfig, LlmError> {
        let bad = |what: String| LlmError::Config {
            file: file.label().to_string(),
            what,
        };
        let arch_name = file.str("general.architecture")?;
        let arch = Arch::parse(arch_name).ok_or_else(|| {
            bad(format!(
                "architecture `{arch_name}` is not supported (rlx builds llama, qwen2 and gemma3)"
            ))
        })?;
        let a = arch.name();
        let uint = |k: &str| -> Result<usize, LlmError> {
            let v = file.uint(&format!("{a}.{k}"))?;
            usize::try_from(v).map_err(|_| bad(format!("`{a}.{k}` = {v} is too large")))
        };
        let opt_uint = |k: &str| file.get(&format!("{a}.{k}")).map(|_| uint(k)).transpose();
        let opt_float = |k: &str| -> Result<Option<f64>, LlmError> {
            let key = format!("{a}.{k}");
            Ok(match file.get(&key) {
                Some(_) => Some(file.float(&key)?),
                None => None,
            })
        };
        let hidden = uint("embedding_length")?;
        let heads = uint("attention.head_count")?;
        let kv_heads = opt_uint("attention.head_count_kv")?.unwrap_or(heads);
        let head_dim = match opt_uint("attention.key_length")? {
            Some(d) => d,
            None if heads > 0 => hidden / heads,
            None => 0,
        };
        let tokens = file.array("tokenizer.ggml.tokens")?.len();
        let vocab_size = opt_uint("vocab_size")?.unwrap_or(tokens);
        let rope_base = opt_float("rope.freq_base")?.unwrap_or(10_000.0);
        let rope_scaling = match file.get(&format!("{a}.rope.scaling.type")) {
            None => RopeScaling::None,
            Some(_) => match file.str(&format!("{a}.rope.scaling.type"))? {
                "none" => RopeScaling::None,
                "linear" => RopeScaling::Linear {
                    factor: opt_float("rope.scaling.factor")?.unwrap_or(1.0),
                },
                other => {
                    return Err(bad(format!(
                        "rope scaling `{other}` is not supported (none, linear)"
                    )))
                }
            },
        };
        let (sliding_window, sliding_pattern, rope_base_local) = match arch {
            // Gemma 3: five local layers, then a global one; local layers
            // keep RoPE base 10 000.
            Arch::Gemma3 => (
                opt_uint("attention.sliding_window")?.unwrap_or(0),
                6,
                10_000.0,
            ),
            _ => (0, 0, rope_base),
        };
        let c = LlmConfig {
            arch,
            vocab_size,
            hidden,
            ffn: uint("feed_forward_length")?,
            layers: uint("block_count")?,
            heads,
            kv_heads,
            head_dim,
            context_length: uint("context_length")?,
            rms_eps: opt_float("attention.layer_norm_rms_epsilon")?.unwrap_or(1e-6),
            rope_base,
            rope_base_local,
            rope_scaling,
            sliding_window,
            sliding_pattern,
            attn_scale: 1.0 / (head_dim as f64).sqrt(),
            logit_softcap: opt_float("final_logit_softcapping")?.unwrap_or(0.0),
            tied_embeddings: file.info("output.weight").is_err(),
        };
        if let Some(d) = opt_uint("rope.dimension_count")? {
            if d != c.head_dim {
                return Err(bad(format!(
                    "partial RoPE ({d} of {} head dims) is not supported",
                    c.head_dim
                )));
            }
        }
        if tokens != c.vocab_size {
            return Err(bad(format!(
                "the tokenizer has {tokens} tokens but the model's vocabulary is {}",
                c.vocab_size
            )));
        }
        c.check().map_err(bad)?;
        Ok(c)
    }

    /// Sizes positive and consistent.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("embedding_length", self.hidden),
            ("feed_forward_length", self.ffn),
            ("block_count", self.layers),
            ("attention.head_count", self.heads),
            ("attention.head_count_kv", self.kv_heads),
            ("head dim", self.head_dim),
            ("vocab_size", self.vocab_size),
            ("context_length", self.context_length),
        ] {
            if v == 0 {
                return Err(format!("`{name}` is 0"));
            }
            if v > 1 << 24 {
                return Err(format!("`{name}` = {v} is implausibly large"));
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "{} query heads are not a multiple of {} key/value heads",
                self.heads, self.kv_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(format!(
                "head dim {} is odd (RoPE rotates pairs)",
                self.head_dim
            ));
        }
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0) {
            return Err(format!(
                "rms epsilon {} is not a positive number",
                self.rms_eps
            ));
        }
        if !(self.rope_base.is_finite() && self.rope_base > 1.0) {
            return Err(format!(
                "rope base {} is not a number above 1",
                self.rope_base
            ));
        }
        Ok(())
    }

    /// Whether layer `i` attends within the sliding window.
    pub fn is_sliding(&self, layer: usize) -> bool {
        self.sliding_window > 0
            && self.sliding_pattern > 0
            && !(layer + 1).is_multiple_of(self.sliding_pattern)
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// `(cos, sin)` of RoPE for absolute positions `pos`, each
    /// `pos.len() × head_dim/2`, computed in f32 as `transformers` does
    /// (inverse frequencies in f32, angle = position · inv_freq in f32).
    pub fn rope_tables(&self, pos: &[usize], local: bool) -> (Vec<f32>, Vec<f32>) {
        let base = if local {
            self.rope_base_local
        } else {
            self.rope_base
        };
        let half = self.head_dim / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| {
                let e = (2 * i) as f32 / self.head_dim as f32;
                1.0 / (base as f32).powf(e)
            })
            .collect();
        let scale = match self.rope_scaling {
            RopeScaling::Linear { factor } if !local => 1.0 / factor as f32,
            _ => 1.0,
        };
        let (mut cos, mut sin) = (Vec::with_capacity(pos.len() * half), Vec::new());
        sin.reserve(pos.len() * half);
        for &p in pos {
            for &f in &inv {
                let a = (p as f32 * scale) * f;
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        (cos, sin)
    }
}
