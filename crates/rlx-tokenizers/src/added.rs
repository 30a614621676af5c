//! Added (special) tokens: found in the text before anything else (HF
//! `AddedVocabulary`). Tokens with `normalized: false` are matched on the raw
//! input, the others on the normalized text; matching is leftmost-longest and
//! non-overlapping, with HF's `single_word`, `lstrip` and `rstrip` rules.

use std::collections::HashMap;

use unicode_categories::UnicodeCategories;

/// One entry of `added_tokens` in tokenizer.json.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedToken {
    /// Its id. As in HF, the id written in tokenizer.json is not used: a
    /// content found in the vocabulary takes its id, others get new ids from
    /// the vocabulary size up, in file order.
    pub id: u32,
    /// The text that is matched.
    pub content: String,
    /// Only match when not preceded or followed by a word character.
    pub single_word: bool,
    /// Also consume the whitespace before the match.
    pub lstrip: bool,
    /// Also consume the whitespace after the match.
    pub rstrip: bool,
    /// Match on the normalized text (true) or on the raw input (false).
    pub normalized: bool,
    /// A special token (`[CLS]`, `[SEP]`, …).
    pub special: bool,
}

/// A split of some text: plain text, or an added token (index into the
/// token list), as byte ranges of that text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    Text(usize, usize),
    Token(usize, usize, usize),
}

/// Leftmost-longest matcher over a set of patterns.
#[derive(Clone, Debug, Default)]
pub(crate) struct Matcher {
    /// (pattern, index of the added token)
    patterns: Vec<(String, usize)>,
    /// first byte -> pattern indices, longest first
    by_first: HashMap<u8, Vec<usize>>,
}

impl Matcher {
    pub fn new(patterns: Vec<(String, usize)>) -> Self {
        let mut by_first: HashMap<u8, Vec<usize>> = HashMap::new();
        for (i, (p, _)) in patterns.iter().enumerate() {
            if let Some(&b) = p.as_bytes().first() {
                by_first.entry(b).or_default().push(i);
            }
        }
        for v in by_first.values_mut() {
            // Stable: among equal patterns the first one wins.
            v.sort_by_key(|&i| std::cmp::Reverse(patterns[i].0.len()));
        }
        Self { patterns, by_first }
    }

    pub fn is_empty(&self) -> bool {
        self.by_first.is_empty()
    }

    /// The longest pattern starting at byte `pos`: (token index, length).
    fn longest_at(&self, s: &str, pos: usize) -> Option<(usize, usize)> {
        let rest = &s.as_bytes()[pos..];
        let cands = self.by_first.get(rest.first()?)?;
        cands.iter().find_map(|&i| {
            let (p, tok) = &self.patterns[i];
            rest.starts_with(p.as_bytes()).then_some((*tok, p.len()))
        })
    }

    /// HF `find_matches`: splits covering `s`, in order.
    pub fn split(&self, s: &str, tokens: &[AddedToken]) -> Vec<Split> {
        let mut splits = Vec::new();
        if self.is_empty() {
            if !s.is_empty() {
                splits.push(Split::Text(0, s.len()));
            }
            return splits;
        }
        let mut start_offset = 0;
        let mut pos = 0;
        while pos < s.len() {
            let Some((tok, len)) = self.longest_at(s, pos) else {
                pos += s[pos..].chars().next().map_or(1, char::len_utf8);
                continue;
            };
            let (mut start, mut stop) = (pos, pos + len);
            // Matching resumes after the raw match, as HF's aho-corasick
            // iterator does (not after the rstrip extension).
            pos = stop;
            let t = &tokens[tok];
            if t.single_word {
                let start_space = start == 0 || !ends_with_word(&s[..start]);
                let stop_space = stop == s.len() || !starts_with_word(&s[stop..]);
                if !start_space || !stop_space {
                    continue;
                }
            }
            if t.lstrip {
                let trimmed = s[..start].trim_end_matches(char::is_whitespace).len();
                start = trimmed.max(start_offset);
            }
            if t.rstrip {
                let rest = &s[stop..];
                stop += rest.len() - rest.trim_start_matches(char::is_whitespace).len();
            }
            if start_offset < start {
                splits.push(Split::Text(start_offset, start));
            }
            splits.push(Split::Token(tok, start, stop));
            start_offset = stop;
        }
        if start_offset < s.len() {
            splits.push(Split::Text(start_offset, s.len()));
        }
        splits
    }
}

/// Regex `\w` (Alphabetic, marks, decimal digits, connector punctuation,
/// join controls), from std and the same category tables.
fn is_word_char(c: char) -> bool {
    c.is_alphabetic()
        || c.is_mark()
        || c.is_number_decimal_digit()
        || c.is_punctuation_connector()
        || matches!(c, '\u{200c}' | '\u{200d}')
}

fn ends_with_word(s: &str) -> bool {
    s.chars().next_back().is_some_and(is_word_char)
}

fn starts_with_word(s: &str) -> bool {
    s.chars().next().is_some_and(is_word_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(content: &str) -> AddedToken {
        AddedToken {
            id: 0,
            content: content.into(),
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
        }
    }

    #[test]
    fn leftmost_longest() {
        let toks = vec![tok("[A]"), tok("[A][B]"), tok("é")];
        let m = Matcher::new(
            toks.iter()
                .enumerate()
                .map(|(i, t)| (t.content.clone(), i))
                .collect(),
        );
        assert_eq!(
            m.split("x[A][B]y[A]é", &toks),
            vec![
                Split::Text(0, 1),
                Split::Token(1, 1, 7),
                Split::Text(7, 8),
                Split::Token(0, 8, 11),
                Split::Token(2, 11, 13)
            ]
        );
    }

    #[test]
    fn strip_and_single_word() {
        let mut t = tok("<m>");
        t.lstrip = true;
        t.rstrip = true;
        let mut w = tok("ab");
        w.single_word = true;
        let toks = vec![t, w];
        let m = Matcher::new(vec![("<m>".into(), 0), ("ab".into(), 1)]);
        assert_eq!(
            m.split("x  <m>  y", &toks),
            vec![Split::Text(0, 1), Split::Token(0, 1, 8), Split::Text(8, 9)]
        );
        assert_eq!(
            m.split("xab ab", &toks),
            vec![Split::Text(0, 4), Split::Token(1, 4, 6)]
        );
    }
}
