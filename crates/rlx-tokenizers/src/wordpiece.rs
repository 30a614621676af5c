//! The WordPiece model (HF `models/wordpiece`): greedy longest-prefix match
//! against the vocabulary, continuation pieces prefixed with `##`; a word
//! longer than `max_input_chars_per_word` characters, or one that cannot be
//! covered, becomes a single unknown token.

use std::collections::HashMap;

use crate::normalizer::NChar;

/// A token before post-processing: id, text, and byte offsets in the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tok {
    pub id: u32,
    pub value: String,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct WordPiece {
    pub vocab: HashMap<String, u32>,
    pub unk_token: String,
    pub unk_id: u32,
    pub prefix: String,
    pub max_input_chars_per_word: usize,
    /// Longest key in bytes: longer substrings cannot match, so they are not
    /// tried (same result as HF, which tries them; bounds the work per word).
    max_key_len: usize,
}

impl WordPiece {
    pub fn new(
        vocab: HashMap<String, u32>,
        unk_token: String,
        unk_id: u32,
        prefix: String,
        max_input_chars_per_word: usize,
    ) -> Self {
        let max_key_len = vocab.keys().map(String::len).max().unwrap_or(0);
        Self {
            vocab,
            unk_token,
            unk_id,
            prefix,
            max_input_chars_per_word,
            max_key_len,
        }
    }

    fn unk(&self, word: &[NChar]) -> Tok {
        Tok {
            id: self.unk_id,
            value: self.unk_token.clone(),
            start: word[0].start,
            end: word[word.len() - 1].end,
        }
    }

    /// Appends the pieces of one pre-tokenized word to `out`.
    pub fn tokenize(&self, word: &[NChar], out: &mut Vec<Tok>) {
        if word.is_empty() {
            return;
        }
        if word.len() > self.max_input_chars_per_word {
            out.push(self.unk(word));
            return;
        }
        let s: String = word.iter().map(|n| n.c).collect();
        // bounds[k]: byte offset of char k in `s`; bounds[n] = s.len().
        let mut bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        bounds.push(s.len());
        let n = word.len();
        let first = out.len();
        let mut buf = String::with_capacity(self.prefix.len() + s.len());
        let mut start = 0;
        while start < n {
            let limit = bounds[start].saturating_add(self.max_key_len);
            // The longest candidate that can still fit in a vocabulary key.
            let mut end = bounds.partition_point(|&b| b <= limit) - 1;
            end = end.min(n);
            let mut found = None;
            while end > start {
                buf.clear();
                if start > 0 {
                    buf.push_str(&self.prefix);
                }
                buf.push_str(&s[bounds[start]..bounds[end]]);
                if let Some(&id) = self.vocab.get(buf.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            let Some(id) = found else {
                out.truncate(first);
                out.push(self.unk(word));
                return;
            };
            out.push(Tok {
                id,
                value: buf.clone(),
                start: word[start].start,
                end: word[end - 1].end,
            });
            start = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(words: &[&str]) -> WordPiece {
        let mut vocab: HashMap<String, u32> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), i as u32 + 1))
            .collect();
        vocab.insert("[UNK]".into(), 0);
        WordPiece::new(vocab, "[UNK]".into(), 0, "##".into(), 10)
    }

    fn run(m: &WordPiece, w: &str) -> Vec<String> {
        let chars: Vec<NChar> = w
            .char_indices()
            .map(|(i, c)| NChar {
                c,
                start: i,
                end: i + c.len_utf8(),
            })
            .collect();
        let mut out = vec![];
        m.tokenize(&chars, &mut out);
        out.into_iter().map(|t| t.value).collect()
    }

    #[test]
    fn greedy() {
        let m = model(&["un", "##aff", "##able", "una", "##ffable"]);
        assert_eq!(run(&m, "unaffable"), ["una", "##ffable"]);
        assert_eq!(run(&m, "unx"), ["[UNK]"]);
        assert_eq!(run(&m, "unununununun"), ["[UNK]"]); // > 10 chars
        assert!(run(&m, "").is_empty());
    }
}
