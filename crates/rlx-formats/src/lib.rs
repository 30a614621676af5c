//! # rlx-formats
//!
//! Model file formats for rlx, read into and written from
//! [`rlx_ir::HostTensor`]s.
//!
//! * [`safetensors`]: Hugging Face safetensors files, from a byte buffer
//!   (works in wasm32) or memory-mapped (native, cargo feature `mmap`, on
//!   by default), with conversion to rlx dtypes, shape-checked loading for
//!   model builders ([`safetensors::SafetensorsFile::expect`]) and writing.
//! * [`gguf`]: GGUF files (llama.cpp's container for quantized weights and
//!   decoder metadata), read from bytes or a memory map and written byte
//!   for byte as the `gguf` Python package writes them.
//!
//! Every failure is a [`FormatError`] naming the file, the tensor, what is
//! wrong and what to do; no input makes this crate panic. The only `unsafe`
//! is the memory-map call, isolated in one private module (`mmap.rs`); builds
//! without it (wasm32, or `--no-default-features`) forbid `unsafe` outright.
// `forbid` cannot be relaxed for one module, so the mmap build uses `deny`
// and `mmap.rs` alone allows it.
#![cfg_attr(all(feature = "mmap", not(target_arch = "wasm32")), deny(unsafe_code))]
#![cfg_attr(
    not(all(feature = "mmap", not(target_arch = "wasm32"))),
    forbid(unsafe_code)
)]

pub mod error;
pub mod gguf;
#[cfg(all(feature = "mmap", not(target_arch = "wasm32")))]
mod mmap;
mod names;
pub mod npy;
pub mod safetensors;
mod source;

pub use error::FormatError;
pub use gguf::GgufFile;
pub use safetensors::SafetensorsFile;
