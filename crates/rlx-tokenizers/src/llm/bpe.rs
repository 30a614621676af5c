//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): each pre-tokenized
//! piece is spelled in GPT-2's byte alphabet, then adjacent symbols are
//! merged, lowest merge rank first, until no pair of neighbours is a merge.
//!
//! The merge loop is llama.cpp's: a doubly linked list of symbols and a
//! priority queue of candidate pairs (rank, then leftmost first), with
//! stale candidates skipped when popped. Instead of comparing strings,
//! every string the merges mention is interned to an id (a vocabulary id
//! when it is a token, a fresh id past the vocabulary otherwise), so a
//! candidate is one hash lookup of two ids and a merge is O(log n).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::chars::ByteAlphabet;
use crate::TokenizerError;

/// The merge table and the byte alphabet of one vocabulary.
pub(crate) struct Bpe {
    /// (left, right) → (rank, merged): ids as described in the module doc.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The id of each byte's alphabet character.
    byte_sym: [u32; 256],
    /// Tokens of one byte, used for a symbol left that is not a token
    /// (llama.cpp then emits the single-byte tokens of its spelling).
    single_byte_token: [Option<u32>; 256],
    n_vocab: u32,
    pub(crate) alphabet: ByteAlphabet,
}

/// One symbol: a byte range of the piece, its interned id, its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    end: u32,
    id: u32,
    prev: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

/// A queued pair: (rank, left, right, left id, right id), smallest first.
type Candidate = Reverse<(u32, u32, u32, u32, u32)>;

/// Buffers reused from piece to piece.
#[derive(Default)]
pub(crate) struct Scratch {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Candidate>,
    pub(crate) spelled: String,
}

impl Bpe {
    pub(crate) fn new(
        token_to_id: &HashMap<String, u32>,
        n_vocab: u32,
        merges: &[String],
    ) -> Result<Self, TokenizerError> {
        let alphabet = ByteAlphabet::new();
        let mut extra: HashMap<String, u32> = HashMap::new();
        let mut intern = |s: &str| -> u32 {
            if let Some(&id) = token_to_id.get(s) {
                return id;
            }
            let next = n_vocab + extra.len() as u32;
            *extra.entry(s.to_string()).or_insert(next)
        };
        let mut byte_sym = [0u32; 256];
        let mut single_byte_token = [None; 256];
        let mut buf = [0u8; 4];
        for b in 0..=255u8 {
            byte_sym[usize::from(b)] = intern(alphabet.char_of(b).encode_utf8(&mut buf));
            // llama.cpp looks up each *byte* of the spelling; only ASCII
            // characters are one byte long, so only they can match.
            if alphabet.char_of(b).is_ascii() {
                single_byte_token[usize::from(b)] = token_to_id
                    .get(alphabet.char_of(b).encode_utf8(&mut buf) as &str)
                    .copied();
            }
        }
        let mut table = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            // "left right", split at the first space after the first byte
            // (a left part may itself start with a space). Bytes: a space
            // byte is always a character boundary.
            let cut = m.bytes().skip(1).position(|b| b == b' ').map(|i| i + 1);
            let Some(cut) = cut else {
                return Err(TokenizerError::InvalidVocab {
                    field: "tokenizer.ggml.merges",
                    message: format!("merge {rank} ({m:?}) is not two parts separated by a space"),
                });
            };
            let (l, r) = (&m[..cut], &m[cut + 1..]);
            let key = (intern(l), intern(r));
            let merged = intern(&[l, r].concat());
            // A repeated pair keeps its first (lowest) rank, as llama.cpp's map does.
            table.entry(key).or_insert((rank as u32, merged));
        }
        Ok(Bpe {
            merges: table,
            byte_sym,
            single_byte_token,
            n_vocab,
            alphabet,
        })
    }

    /// The spelling of `bytes` in the byte alphabet (a vocabulary string).
    pub(crate) fn spell(&self, bytes: &[u8], out: &mut String) {
        out.clear();
        out.extend(bytes.iter().map(|&b| self.alphabet.char_of(b)));
    }

    /// Merge one piece and append its token ids. `whole` is the piece's id
    /// when it is a token and the pre-tokenizer takes such pieces as they
    /// are (`ignore_merges`).
    pub(crate) fn encode_piece(
        &self,
        piece: &[u8],
        whole: Option<u32>,
        s: &mut Scratch,
        out: &mut Vec<u32>,
    ) {
        if let Some(id) = whole {
            out.push(id);
            return;
        }
        let syms = &mut s.symbols;
        syms.clear();
        let n = piece.len() as u32;
        for (i, &b) in piece.iter().enumerate() {
            let i = i as u32;
            syms.push(Symbol {
                start: i,
                end: i + 1,
                id: self.byte_sym[usize::from(b)],
                prev: if i == 0 { NIL } else { i - 1 },
                next: if i + 1 == n { NIL } else { i + 1 },
            });
        }
        s.queue.clear();
        for i in 1..n {
            self.push_pair(syms, &mut s.queue, i - 1, i);
        }
        while let Some(Reverse((_, left, right, left_id, right_id))) = s.queue.pop() {
            let (l, r) = (syms[left as usize], syms[right as usize]);
            // Stale: one side has merged since this pair was queued.
            if l.start == l.end
                || r.start == r.end
                || l.id != left_id
                || r.id != right_id
                || l.next != right
            {
                continue;
            }
            let merged = self.merges[&(left_id, right_id)].1;
            syms[left as usize] = Symbol {
                end: r.end,
                id: merged,
                next: r.next,
                ..l
            };
            syms[right as usize].end = syms[right as usize].start;
            if r.next != NIL {
                syms[r.next as usize].prev = left;
            }
            if l.prev != NIL {
                self.push_pair(syms, &mut s.queue, l.prev, left);
            }
            if r.next != NIL {
                self.push_pair(syms, &mut s.queue, left, r.next);
            }
        }
        let mut i = if n == 0 { NIL } else { 0 };
        while i != NIL {
            let sym = syms[i as usize];
            if sym.id < self.n_vocab {
                out.push(sym.id);
            } else {
                let bytes = &piece[sym.start as usize..sym.end as usize];
                out.extend(
                    bytes
                        .iter()
                        .filter_map(|&b| self.single_byte_token[usize::from(b)]),
                );
            }
            i = sym.next;
        }
    }

    fn push_pair(&self, syms: &[Symbol], queue: &mut BinaryHeap<Candidate>, left: u32, right: u32) {
        let (a, b) = (syms[left as usize].id, syms[right as usize].id);
        if let Some(&(rank, _)) = self.merges.get(&(a, b)) {
            queue.push(Reverse((rank, left, right, a, b)));
        }
    }
}
