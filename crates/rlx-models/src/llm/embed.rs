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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::blocks::{output_slices, OUTPUT_SLICE_BYTES};

    #[test]
    fn output_slices_cover_the_vocabulary_under_the_binding_limit() {
        // Gemma-3's projection (262144 × 640 Q8_0, 170 MiB) and a small one.
        for (vocab, hidden, d, parts) in
            [(262144, 640, DType::Q8_0, 2), (49152, 576, DType::Q8_0, 1)]
        {
            let s = output_slices(vocab, hidden, d);
            assert_eq!(s.len(), parts);
            assert_eq!(s[0].start, 0);
            assert_eq!(s.last().unwrap().end, vocab);
            for (a, b) in s.iter().zip(s.iter().skip(1)) {
                assert_eq!(a.end, b.start);
            }
            for r in &s {
                let bytes = rlx_ir::limits::tensor_bytes(d, &[r.len(), hidden]).unwrap();
                assert!(bytes <= OUTPUT_SLICE_BYTES, "{r:?}: {bytes} bytes");
            }
        }
    }

    #[test]
    fn rows_come_from_the_slice_that_holds_them() {
        // A 5 × 3 table in two slices (rows 0-2, 3-4), one f32, one f16.
        let a =
            HostTensor::from_slice(&[0f32, 1., 2., 10., 11., 12., 20., 21., 22.], [3, 3]).unwrap();
        let b16: Vec<half::f16> = [30f32, 31., 32., 40., 41., 42.]
            .iter()
            .map(|&v| half::f16::from_f32(v))
            .collect();
        let b = HostTensor::new(DType::F16, [2, 3], TensorData::F16(b16)).unwrap();
        let dec = RowDecoder::default();
        let got = rows(&[(&a, 0), (&b, 3)], &dec, &[4, 0, 3, 2], 5).unwrap();
        assert_eq!(got.shape().dims(), &[1, 5, 3]);
        let v = got.to_vec::<f32>().unwrap();
        assert_eq!(
            v,
            [40., 41., 42., 0., 1., 2., 30., 31., 32., 20., 21., 22., 0., 0., 0.]
        );
        let err = rows(&[(&a, 0), (&b, 3)], &dec, &[5], 1).unwrap_err();
        assert!(err.contains("outside the 5-token table"), "{err}");
    }

    #[test]
    fn block_rows_decode_as_the_ir_dequantize_does() {
        // Two Q8_0 rows of 32: scale 0.5 (f16 0x3800), levels i and -i.
        let mut bytes = vec![];
        for sign in [1i8, -1] {
            bytes.extend([0x00, 0x38]);
            bytes.extend((0..32).map(|i| (sign * i as i8) as u8));
        }
        let t = HostTensor::new(DType::Q8_0, [2, 32], TensorData::Packed(bytes)).unwrap();
        let got = rows(&[(&t, 0)], &RowDecoder::default(), &[1], 1).unwrap();
        let want: Vec<f32> = (0..32).map(|i| -0.5 * i as f32).collect();
        assert_eq!(got.to_vec::<f32>().unwrap(), want);
    }
}
