//! Text from ids as they are generated. A token is a run of bytes, not of
//! characters (byte-level BPE and `<0xXX>` fallback split multi-byte
//! characters), so bytes are held back until they complete a character.

use super::LlmTokenizer;

/// Turns token ids into text as they arrive; see
/// [`LlmTokenizer::stream_decoder`].
///
/// ```no_run
/// # fn demo(tok: &rlx_tokenizers::LlmTokenizer, generated: &[u32]) {
/// let mut out = tok.stream_decoder();
/// for &id in generated {
///     print!("{}", out.push(id)); // complete characters only
/// }
/// print!("{}", out.finish());
/// # }
/// ```
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a LlmTokenizer,
    bytes: Utf8Stream,
}

impl<'a> StreamDecoder<'a> {
    pub(crate) fn new(tok: &'a LlmTokenizer) -> Self {
        StreamDecoder {
            tok,
            bytes: Utf8Stream::default(),
        }
    }

    /// Add one token; returns the text it completes (possibly empty).
    /// Control tokens add nothing.
    pub fn push(&mut self, id: u32) -> String {
        self.bytes.push(self.tok.token_bytes(id))
    }

    /// The bytes still held (an unfinished character), as U+FFFD; the
    /// decoder is then empty.
    pub fn finish(&mut self) -> String {
        self.bytes.finish()
    }
}

/// The byte side of [`StreamDecoder`], owning no tokenizer (for state that
/// must outlive a borrow, as a generation held across calls from
/// JavaScript): complete UTF-8 characters out, an unfinished one held.
#[derive(Clone, Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Add bytes; returns the text they complete (possibly empty). Bytes
    /// that can never become valid UTF-8 come out as U+FFFD at once rather
    /// than blocking what follows.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Valid by construction: the prefix `from_utf8` accepted.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete character at the end: wait for more.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// The bytes still held, as U+FFFD; then empty.
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}
