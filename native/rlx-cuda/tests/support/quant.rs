//! What the `dequant_matmul` tests share (the host tests, the CPU
//! emulation, and the GPU suite `gpu quant`, which includes this file by
//! path): random GGUF block weights, and a tiny llama GGUF whose matrices
//! use every block type the CUDA kernels decode.

use rlx_formats::gguf::{GgufWriter, Value, ValueType};
use rlx_formats::GgufFile;
use rlx_ir::dtype::Storage;
use rlx_ir::{DType, HostTensor, TensorData};

/// xorshift64*, seeded: the same weights on every machine.
pub struct QRng(pub u64);

impl QRng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

/// Byte offsets of a block's f16 scales (d, and the min where there is one).
fn scale_offsets(d: DType) -> &'static [usize] {
    match d {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K => &[0, 2],
        DType::Q6K => &[208],
        _ => &[],
    }
}

/// An (n, k) weight of `d` with random bytes — every bit pattern of the
/// quants, sub-block scales and high-bit planes — except the f16 scales,
/// random up to a bound that makes the weights O(0.1), so a dot product of
/// K ≤ 1024 terms of x in [-1, 1] is O(1) (small ones are f16 subnormals).
pub fn random_blocks(rng: &mut QRng, d: DType, n: usize, k: usize) -> HostTensor {
    let Storage::Block { block, bytes } = d.storage() else {
        panic!("{d} is not a block type")
    };
    let mut b: Vec<u8> = (0..n * k / block * bytes)
        .map(|_| (rng.next() >> 56) as u8)
        .collect();
    let max = match d {
        DType::Q8_0 => 0.003,
        DType::Q5_0 | DType::Q5_1 => 0.025,
        DType::Q4K | DType::Q5K => 0.0005,
        DType::Q6K => 0.0002,
        _ => 0.05,
    };
    for blk in b.chunks_exact_mut(bytes) {
        for &o in scale_offsets(d) {
            let v = half::f16::from_f64(rng.uniform(-max, max));
            blk[o..o + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    HostTensor::new(d, vec![n, k], TensorData::Packed(b)).unwrap()
}

/// x of `dims` uniform in [-1, 1], as `dt`.
pub fn random_x(rng: &mut QRng, dt: DType, dims: &[usize]) -> HostTensor {
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    HostTensor::from_f64(dt, dims.to_vec(), v).unwrap()
}

/// `dequant_matmul(x: xd[xs], w: wd[n, K])` as IR text (K = xs's last).
pub fn dequant_graph(xd: DType, xs: &[usize], wd: DType, n: usize) -> String {
    let k = *xs.last().unwrap();
    let mut out = xs.to_vec();
    *out.last_mut().unwrap() = n;
    let dims = |d: &[usize]| {
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "graph @g(%x: {xd}[{}], %w: {wd}[{n}, {k}]) {{\n  %y = dequant_matmul(%x, %w) : {xd}[{}]\n  return %y\n}}",
        dims(xs),
        dims(&out)
    )
}

/// GPT-2's byte alphabet: each byte as the character byte-level BPE uses.
fn byte_tokens() -> Vec<String> {
    let direct = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut n = 0;
    (0u32..256)
        .map(|b| {
            if direct(b) {
                char::from_u32(b).unwrap().to_string()
            } else {
                n += 1;
                char::from_u32(255 + n).unwrap().to_string()
            }
        })
        .collect()
}

/// The shape and weight types of a llama written by [`llama_gguf`].
pub struct LlamaShape {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    /// The embedding table, also the (tied) output projection.
    pub embd: DType,
    /// q, k, v, o, gate, up, down.
    pub mats: [DType; 7],
}

/// A tiny llama (2 layers, hidden 256 — one k-quant block per row —, 4
/// heads of 64, 2 KV heads, FFN 512, vocabulary 258): the embedding Q8_0,
/// q Q4_0, k Q4_1, v Q5_0, o Q5_1, gate Q4_K, up Q5_K, down Q6_K, so every
/// type the CUDA kernels decode runs in its decoder graph.
pub const TINY: LlamaShape = LlamaShape {
    hidden: 256,
    layers: 2,
    heads: 4,
    kv_heads: 2,
    ffn: 512,
    vocab: 258,
    embd: DType::Q8_0,
    mats: [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ],
};

/// SmolLM2-135M's shape (30 layers, hidden 576, 9 heads of 64, 3 KV
/// heads, FFN 1536, vocabulary 49152) with random weights: Q4_1 matrices,
/// a Q8_0 embedding, as in its Q4_1 GGUF — the real file (96 MB) is too
/// big to carry to the GPU machine, the shape is what its speed depends on.
pub const SMOLLM2_SHAPE: LlamaShape = LlamaShape {
    hidden: 576,
    layers: 30,
    heads: 9,
    kv_heads: 3,
    ffn: 1536,
    vocab: 49152,
    embd: DType::Q8_0,
    mats: [DType::Q4_1; 7],
};

/// The [`TINY`] llama.
pub fn tiny_llama() -> GgufFile {
    llama_gguf(&TINY)
}

/// A llama of shape `s` as a GGUF file: random weights (matrices
/// O(1/sqrt(K)), norm gains near 1) quantized with the reference encoders,
/// a byte-level vocabulary padded with placeholder tokens, EOS last.
pub fn llama_gguf(s: &LlamaShape) -> GgufFile {
    let h = s.hidden;
    let kv = s.kv_heads * (h / s.heads);
    let u = |v: u32| Value::U32(v);
    let mut tokens = byte_tokens();
    tokens.push("he".into());
    while tokens.len() + 1 < s.vocab {
        tokens.push(format!("<t{}>", tokens.len()));
    }
    tokens.push("<eos>".into());
    let meta: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("general.name", Value::String("random-quant".into())),
        ("llama.block_count", u(s.layers as u32)),
        ("llama.context_length", u(2048)),
        ("llama.embedding_length", u(h as u32)),
        ("llama.feed_forward_length", u(s.ffn as u32)),
        ("llama.attention.head_count", u(s.heads as u32)),
        ("llama.attention.head_count_kv", u(s.kv_heads as u32)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("default".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(
                ValueType::String,
                tokens.into_iter().map(Value::String).collect(),
            ),
        ),
        (
            "tokenizer.ggml.merges",
            Value::Array(ValueType::String, vec![Value::String("h e".into())]),
        ),
        ("tokenizer.ggml.eos_token_id", u(s.vocab as u32 - 1)),
    ];
    let mut rng = QRng(0x11a3a);
    let mut quantized = |dims: &[usize], d: DType| -> HostTensor {
        let n: usize = dims.iter().product();
        let scale = 1.0 / (dims[1] as f64).sqrt();
        let v: Vec<f32> = (0..n).map(|_| rng.uniform(-scale, scale) as f32).collect();
        let q = rlx_ref::kernels::quant::quantize_values(d, &v).unwrap();
        HostTensor::new(d, dims.to_vec(), TensorData::Packed(q)).unwrap()
    };
    let gains = |n: usize| {
        let v: Vec<f32> = (0..n).map(|j| 1.0 + 0.01 * (j % 7) as f32).collect();
        HostTensor::from_slice(&v, [n]).unwrap()
    };
    let mut tensors = vec![(
        "token_embd.weight".to_string(),
        quantized(&[s.vocab, h], s.embd),
    )];
    let [wq, wk, wv, wo, wg, wu, wd] = s.mats;
    for l in 0..s.layers {
        let b = |n: &str| format!("blk.{l}.{n}.weight");
        tensors.push((b("attn_norm"), gains(h)));
        for (name, dims, d) in [
            (b("attn_q"), [h, h], wq),
            (b("attn_k"), [kv, h], wk),
            (b("attn_v"), [kv, h], wv),
            (b("attn_output"), [h, h], wo),
            (b("ffn_gate"), [s.ffn, h], wg),
            (b("ffn_up"), [s.ffn, h], wu),
            (b("ffn_down"), [h, s.ffn], wd),
        ] {
            tensors.push((name, quantized(&dims, d)));
        }
        tensors.push((b("ffn_norm"), gains(h)));
    }
    tensors.push(("output_norm.weight".into(), gains(h)));
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w.metadata(k, v).unwrap();
    }
    for (k, t) in &tensors {
        w.tensor(k, t).unwrap();
    }
    GgufFile::from_bytes_labeled(w.to_bytes(), "random-quant.gguf").unwrap()
}
