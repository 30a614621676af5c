//! The BERT normalizer (HF `BertNormalizer`), with alignment: every
//! normalized character remembers the byte range of the input character it
//! came from, which is how token offsets are computed.

use unicode_normalization::char::{canonical_combining_class, decompose_canonical};

use crate::unicode::{is_chinese_char, is_control, is_mark_nonspacing, is_whitespace};

/// One normalized character and the byte range, in the original input, of
/// the character it was derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NChar {
    pub c: char,
    pub start: usize,
    pub end: usize,
}

/// HF `BertNormalizer` settings. Steps, in HF's order: clean text, space
/// around CJK ideographs, strip accents (NFD, drop Mn), lowercase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BertNormalizer {
    /// Drop NUL, U+FFFD and control characters; map whitespace to `' '`.
    pub clean_text: bool,
    /// Put spaces around CJK ideographs so each becomes its own word.
    pub handle_chinese_chars: bool,
    /// Strip accents; `None` means "same as `lowercase`" (HF's rule).
    pub strip_accents: Option<bool>,
    /// Lowercase, character by character (`char::to_lowercase`).
    pub lowercase: bool,
}

impl Default for BertNormalizer {
    /// HF's defaults (uncased BERT): everything on, accents follow `lowercase`.
    fn default() -> Self {
        Self {
            clean_text: true,
            handle_chinese_chars: true,
            strip_accents: None,
            lowercase: true,
        }
    }
}

impl BertNormalizer {
    /// Normalizes `text`, whose first byte is at `base` in the original input.
    pub(crate) fn normalize(&self, text: &str, base: usize) -> Vec<NChar> {
        let mut out: Vec<NChar> = Vec::with_capacity(text.len());
        for (i, c) in text.char_indices() {
            let (start, end) = (base + i, base + i + c.len_utf8());
            let c = if self.clean_text {
                if c == '\0' || c == '\u{fffd}' || is_control(c) {
                    continue;
                }
                if is_whitespace(c) {
                    ' '
                } else {
                    c
                }
            } else {
                c
            };
            if self.handle_chinese_chars && is_chinese_char(c) {
                out.push(NChar { c: ' ', start, end });
                out.push(NChar { c, start, end });
                out.push(NChar { c: ' ', start, end });
            } else {
                out.push(NChar { c, start, end });
            }
        }
        if self.strip_accents.unwrap_or(self.lowercase) {
            out = nfd(&out);
            out.retain(|n| !is_mark_nonspacing(n.c));
        }
        if self.lowercase {
            // Per character (no final-sigma context), like HF.
            let mut lower = Vec::with_capacity(out.len());
            for n in &out {
                for l in n.c.to_lowercase() {
                    lower.push(NChar { c: l, ..*n });
                }
            }
            out = lower;
        }
        out
    }
}

/// Canonical decomposition (NFD) keeping each character's alignment: full
/// canonical decomposition, then the canonical ordering algorithm (a stable
/// sort by combining class within each run of non-starters).
pub(crate) fn nfd(chars: &[NChar]) -> Vec<NChar> {
    let mut out: Vec<NChar> = Vec::with_capacity(chars.len());
    for n in chars {
        if n.c.is_ascii() {
            out.push(*n);
        } else {
            decompose_canonical(n.c, |d| out.push(NChar { c: d, ..*n }));
        }
    }
    let mut i = 0;
    while i < out.len() {
        if canonical_combining_class(out[i].c) == 0 {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < out.len() && canonical_combining_class(out[j].c) != 0 {
            j += 1;
        }
        if j - i > 1 {
            out[i..j].sort_by_key(|n| canonical_combining_class(n.c));
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(n: &BertNormalizer, s: &str) -> String {
        n.normalize(s, 0).iter().map(|c| c.c).collect()
    }

    #[test]
    fn bert_uncased() {
        let n = BertNormalizer::default();
        assert_eq!(norm(&n, "Héllo\tWÖRLD\u{0}\u{200d}"), "hello world");
        assert_eq!(norm(&n, "中a"), " 中 a");
        assert_eq!(norm(&n, "İ"), "i");
        assert_eq!(norm(&n, "ΣΑΣ"), "σασ");
    }

    #[test]
    fn alignment_follows_source_chars() {
        let n = BertNormalizer::default();
        let v = n.normalize("aé中", 10);
        let spans: Vec<(char, usize, usize)> = v.iter().map(|c| (c.c, c.start, c.end)).collect();
        assert_eq!(
            spans,
            vec![
                ('a', 10, 11),
                ('e', 11, 13),
                (' ', 13, 16),
                ('中', 13, 16),
                (' ', 13, 16)
            ]
        );
    }

    #[test]
    fn canonical_ordering() {
        let chars: Vec<NChar> = "a\u{301}\u{316}"
            .chars()
            .map(|c| NChar {
                c,
                start: 0,
                end: 0,
            })
            .collect();
        let got: String = nfd(&chars).iter().map(|c| c.c).collect();
        assert_eq!(got, "a\u{316}\u{301}");
    }

    #[test]
    fn cased_keeps_accents() {
        let n = BertNormalizer {
            lowercase: false,
            ..BertNormalizer::default()
        };
        assert_eq!(norm(&n, "Café"), "Café");
    }
}
