//! The token embedding, looked up on the host.
//!
//! A step needs T rows of a (vocab, hidden) table; decoding the whole table
//! to f32 at load (as a graph `gather` over an f32 input needs) costs
//! vocab × hidden × 4 bytes — 670 MB for Gemma-3's 262k × 640 — and on
//! wgpu it exceeds the adapter's storage-binding limit. So the table stays
//! in the file's type (a tied output projection reads the same bytes
//! through `dequant_matmul`) and each step decodes only its rows, with the
//! IR's `dequantize` on the CPU (bit-exact vs `gguf`; one graph per table,
//! compiled on first use), and passes them to the graph.

use rlx::HostTensor;
use rlx_ir::dtype::Storage;
use rlx_ir::{DType, TensorData};
use std::sync::{Arc, Mutex};

/// The compiled `dequantize` of one (1, hidden) row, made on first use.
#[derive(Default)]
pub(crate) struct RowDecoder(Mutex<Option<Arc<rlx::Compiled>>>);

impl RowDecoder {
    fn decode(&self, row: HostTensor) -> Result<Vec<f32>, String> {
        let c = {
            let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match &*g {
                Some(c) => c.clone(),
                None => {
                    let graph = super::load::dequantize_graph(row.dtype(), row.shape().dims())
                        .map_err(|e| e.to_string())?;
                    let c = Arc::new(
                        rlx::compile(&graph, rlx::Device::Cpu).map_err(|e| e.to_string())?,
                    );
                    *g = Some(c.clone());
                    c
                }
            }
        };
        let out = c
            .run(std::slice::from_ref(&row))
            .map_err(|e| e.to_string())?;
        out.into_iter()
            .next()
            .expect("one output")
            .to_vec::<f32>()
            .map_err(|e| e.to_string())
    }
}

/// Where the table's bytes are: its own tensor, or (tied embeddings) the
/// output projection's weights among the graph's parameters, as (weight
/// index, first row) per row slice.
pub(crate) enum TokenTable {
    Own(HostTensor),
    Weight(Vec<(usize, usize)>),
}

/// `ids`' rows of the table held in `parts` ((rows, hidden) tensors of any
/// float or block type, each with its first row, in order) as (1, t,
/// hidden) f32; rows past `ids.len()` (padding) are zero.
pub(crate) fn rows(
    parts: &[(&HostTensor, usize)],
    dec: &RowDecoder,
    ids: &[u32],
    t: usize,
) -> Result<HostTensor, String> {
    let (last, first) = parts.last().ok_or("no embedding table")?;
    let dims = last.shape().dims();
    let (vocab, h) = (first + dims[0], dims[1]);
    let mut out = vec![0f32; t * h];
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(h)) {
        let r = id as usize;
        if r >= vocab {
            return Err(format!("token id {r} is outside the {vocab}-token table"));
        }
        // The last slice that starts at or before r holds it.
        let (table, start) = parts
            .iter()
            .rev()
            .find(|(_, s)| *s <= r)
            .expect("the first slice starts at row 0");
        row_into(table, dec, r - start, dst)?;
    }
    HostTensor::new(DType::F32, [1, t, h], TensorData::F32(out)).map_err(|e| e.to_string())
}

fn row_into(table: &HostTensor, dec: &RowDecoder, r: usize, dst: &mut [f32]) -> Result<(), String> {
    let h = dst.len();
    let span = r * h..(r + 1) * h;
    match table.data() {
        TensorData::F32(v) => dst.copy_from_slice(&v[span]),
        TensorData::F16(v) => dst
            .iter_mut()
            .zip(&v[span])
            .for_each(|(d, s)| *d = s.to_f32()),
        TensorData::BF16(v) => dst
            .iter_mut()
            .zip(&v[span])
            .for_each(|(d, s)| *d = s.to_f32()),
        TensorData::Packed(bytes) => {
            let Storage::Block { block, bytes: per } = table.dtype().storage() else {
                return Err(format!("a {} table is not a block type", table.dtype()));
            };
            let row_bytes = h / block * per;
            let row = bytes[r * row_bytes..(r + 1) * row_bytes].to_vec();
            let t = HostTensor::new(table.dtype(), [1, h], TensorData::Packed(row))
                .map_err(|e| e.to_string())?;
            dst.copy_from_slice(&dec.decode(t)?);
        }
        _ => return Err(format!("a {} embedding table", table.dtype())),
    }
    Ok(())
}
