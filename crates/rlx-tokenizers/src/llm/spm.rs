//! SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`), as llama.cpp
//! runs it: spaces are written `▁` (U+2581), the text starts as one symbol
//! per character, and the adjacent pair whose concatenation is the token
//! with the highest score is merged (leftmost on ties) until no pair is a
//! token. A character left that is not a token falls back to its UTF-8
//! bytes as `<0xXX>` tokens.
//!
//! Same data structure as [`super::bpe`]: a linked list of symbols over
//! the text and a priority queue of candidate pairs, skipped when stale.
//! A pair's text is a slice of the escaped text (neighbours are
//! contiguous), so looking it up allocates nothing.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// A candidate merge. Ordered so the max-heap pops the highest score, then
/// the leftmost pair.
struct Pair {
    score: f32,
    left: u32,
    right: u32,
    /// Byte length of the pair when queued: a side that grew since makes it stale.
    len: u32,
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Pair {}
impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

/// What the SPM merge needs from the vocabulary.
pub(crate) struct SpmVocab<'a> {
    pub(crate) token_to_id: &'a HashMap<String, u32>,
    pub(crate) scores: &'a [f32],
    /// The token of each byte (`<0xXX>`, else the one-byte string), for byte fallback.
    pub(crate) byte_token: &'a [Option<u32>; 256],
    /// Used for a byte that has no token at all (llama.cpp aborts there).
    pub(crate) unk: Option<u32>,
}

/// Tokenize `text` (spaces already escaped as `▁`), appending ids to `out`.
pub(crate) fn encode(v: &SpmVocab<'_>, text: &str, out: &mut Vec<u32>) {
    let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        let k = syms.len() as u32;
        syms.push(Symbol {
            start: i as u32,
            len: c.len_utf8() as u32,
            prev: k.wrapping_sub(1),
            next: k + 1,
        });
    }
    let Some(last) = syms.last_mut() else { return };
    last.next = NIL;
    if let Some(first) = syms.first_mut() {
        first.prev = NIL;
    }
    let mut queue = BinaryHeap::new();
    let push = |syms: &[Symbol], queue: &mut BinaryHeap<Pair>, left: u32, right: u32| {
        if left == NIL || right == NIL {
            return;
        }
        let (l, r) = (syms[left as usize], syms[right as usize]);
        let (a, b) = (l.start as usize, (l.start + l.len + r.len) as usize);
        if let Some(&id) = v.token_to_id.get(&text[a..b]) {
            let score = v.scores.get(id as usize).copied().unwrap_or(0.0);
            queue.push(Pair {
                score,
                left,
                right,
                len: l.len + r.len,
            });
        }
    };
    for i in 1..syms.len() as u32 {
        push(&syms, &mut queue, i - 1, i);
    }
    while let Some(p) = queue.pop() {
        let (l, r) = (syms[p.left as usize], syms[p.right as usize]);
        if l.len == 0 || r.len == 0 || l.len + r.len != p.len {
            continue;
        }
        syms[p.left as usize].len += r.len;
        syms[p.left as usize].next = r.next;
        syms[p.right as usize].len = 0;
        if r.next != NIL {
            syms[r.next as usize].prev = p.left;
        }
        push(&syms, &mut queue, l.prev, p.left);
        push(&syms, &mut queue, p.left, r.next);
    }
    let mut i = 0;
    while i != NIL {
        let s = syms[i as usize];
        let piece = &text[s.start as usize..(s.start + s.len) as usize];
        match v.token_to_id.get(piece) {
            Some(&id) => out.push(id),
            // Only single characters can be left unmatched (every merge
            // makes a token), so there is nothing to re-split: bytes.
            None => out.extend(
                piece
                    .bytes()
                    .filter_map(|b| v.byte_token[usize::from(b)].or(v.unk)),
            ),
        }
        i = s.next;
    }
}
