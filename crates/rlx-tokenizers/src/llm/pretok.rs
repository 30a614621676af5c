//! BPE pre-tokenizers: the text is cut into pieces ("words") before the
//! merges run, by the regexes of each model's tokenizer.json as llama.cpp
//! applies them (`tokenizer.ggml.pre` picks the list).
//!
//! A pre-tokenizer is a list of passes; each pass cuts every piece the
//! previous one left (llama.cpp's `unicode_regex_split` over a list of
//! regexes). The big patterns (GPT-2's, Llama-3's, Qwen2's) are written
//! out by hand over character classes instead of a regex engine: they need
//! the `\s+(?!\S)` look-ahead, and hand-written they are small and linear.
//! The small patterns (`\p{N}`, `[0-9]{3}`, a punctuation run) are a
//! generic "isolate" pass: what matches becomes a piece, and so does each
//! gap between matches.

use super::chars::Flags;
use crate::TokenizerError;

/// One pass of a pre-tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// with D = 3 (Llama-3) or 1 (Qwen2); `marks` reads `[\p{L}\p{M}]`
    /// where it says `\p{L}` (Qwen3.5).
    Llama3 { max_digits: usize, marks: bool },
    /// Each match of a class (one character, or a maximal run) is a piece.
    Isolate { class: Class, run: bool },
    /// `[0-9][0-9][0-9]`: ASCII digit triples, left to right.
    AsciiDigitTriples,
}

/// The classes [`Pass::Isolate`] cuts out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// `\p{N}`
    Number,
    /// `[\p{P}\$\+<=>\^~\|]`, and with `backtick` also `` ` `` (Falcon).
    PunctOrMath { backtick: bool },
}

impl Class {
    fn contains(self, c: char, f: Flags) -> bool {
        match self {
            Class::Number => f.number(),
            Class::PunctOrMath { backtick } => {
                f.punct()
                    || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
                    || (backtick && c == '`')
            }
        }
    }
}

const GPT2: &[Pass] = &[Pass::Gpt2];
const LLAMA3: &[Pass] = &[Pass::Llama3 {
    max_digits: 3,
    marks: false,
}];
const QWEN2: &[Pass] = &[Pass::Llama3 {
    max_digits: 1,
    marks: false,
}];
const QWEN35: &[Pass] = &[Pass::Llama3 {
    max_digits: 1,
    marks: true,
}];
const STARCODER: &[Pass] = &[
    Pass::Isolate {
        class: Class::Number,
        run: false,
    },
    Pass::Gpt2,
];
const FALCON: &[Pass] = &[
    Pass::Isolate {
        class: Class::PunctOrMath { backtick: true },
        run: true,
    },
    Pass::Gpt2,
    Pass::AsciiDigitTriples,
];
/// llama.cpp's fallback for a BPE vocabulary with no (or `default`) pre-tokenizer.
const DEFAULT: &[Pass] = &[
    Pass::Isolate {
        class: Class::PunctOrMath { backtick: false },
        run: true,
    },
    Pass::Gpt2,
    Pass::Isolate {
        class: Class::Number,
        run: true,
    },
    Pass::AsciiDigitTriples,
];

/// The `tokenizer.ggml.pre` names accepted, for error messages.
pub(crate) const SUPPORTED: &str = "default, gpt-2 (and phi-2, mpt, olmo, jais, …), llama-bpe/llama3 (and falcon3, pixtral, lfm2, …), \
dbrx, smaug-bpe, qwen2 (and deepseek-r1-qwen, stablelm2, megrez, hunyuan, grok-2, …), qwen35, \
starcoder, refact, smollm, command-r, codeshell, exaone, minerva-7b, mellum2, falcon";

/// A BPE pre-tokenizer and the vocabulary settings llama.cpp ties to its name.
#[derive(Clone, Debug)]
pub(crate) struct PreTokenizer {
    passes: &'static [Pass],
    /// A piece that is a whole token is taken as is, merges or not (Llama-3).
    pub(crate) ignore_merges: bool,
    /// Add BOS unless the vocabulary says otherwise (Llama-3).
    pub(crate) add_bos: bool,
}

impl PreTokenizer {
    /// The pre-tokenizer of a `tokenizer.ggml.pre` name (`None`: llama.cpp's default).
    pub(crate) fn from_name(name: Option<&str>) -> Result<Self, TokenizerError> {
        let plain = |passes| PreTokenizer {
            passes,
            ignore_merges: false,
            add_bos: false,
        };
        Ok(match name.unwrap_or("default") {
            "" | "default" => plain(DEFAULT),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreTokenizer {
                passes: LLAMA3,
                ignore_merges: true,
                add_bos: true,
            },
            "dbrx" | "smaug-bpe" => plain(LLAMA3),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo"
            | "jais" | "trillion" | "granite-docling" => plain(GPT2),
            "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone"
            | "minerva-7b" | "mellum2" => plain(STARCODER),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "stablelm2" | "megrez"
            | "hunyuan" | "solar-open" | "grok-2" => plain(QWEN2),
            "qwen35" => plain(QWEN35),
            "falcon" => plain(FALCON),
            other => {
                return Err(TokenizerError::UnsupportedVocab {
                    what: "pre-tokenizer",
                    name: other.to_string(),
                    supported: SUPPORTED,
                })
            }
        })
    }

    /// Cut `text` into pieces; returns their byte ranges, in order, covering
    /// the whole text.
    pub(crate) fn split(&self, text: &str) -> Vec<(usize, usize)> {
        let t = Text::new(text);
        let mut pieces = vec![(0, t.chars.len())];
        let mut next = Vec::with_capacity(t.chars.len() / 3 + 1);
        for &pass in self.passes {
            next.clear();
            for &(a, b) in &pieces {
                let mut cut = Cutter {
                    t: &t,
                    end: b,
                    start: a,
                    out: &mut next,
                };
                match pass {
                    Pass::Gpt2 => cut.gpt2(),
                    Pass::Llama3 { max_digits, marks } => cut.llama3(max_digits, marks),
                    Pass::Isolate { class, run } => cut.isolate(class, run),
                    Pass::AsciiDigitTriples => cut.ascii_digit_triples(),
                }
            }
            std::mem::swap(&mut pieces, &mut next);
        }
        pieces
            .iter()
            .map(|&(a, b)| (t.offsets[a], t.offsets[b]))
            .collect()
    }
}

/// The text as characters, their classes and byte offsets (one more offset
/// than characters: the end).
struct Text {
    chars: Vec<char>,
    flags: Vec<Flags>,
    offsets: Vec<usize>,
}

impl Text {
    fn new(s: &str) -> Self {
        let n = s.chars().count();
        let (mut chars, mut flags, mut offsets) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n + 1),
        );
        for (i, c) in s.char_indices() {
            chars.push(c);
            flags.push(Flags::of(c));
            offsets.push(i);
        }
        offsets.push(s.len());
        Text {
            chars,
            flags,
            offsets,
        }
    }
}

/// Cuts one piece `[start, end)` (character indices). `start` is where the
/// next emitted piece begins; each rule advances a position and [`emit`]s.
struct Cutter<'a> {
    t: &'a Text,
    end: usize,
    start: usize,
    out: &'a mut Vec<(usize, usize)>,
}

impl Cutter<'_> {
    /// The character at `i`, `None` past the piece.
    fn c(&self, i: usize) -> Option<char> {
        (i < self.end).then(|| self.t.chars[i])
    }

    /// The classes at `i`, none past the piece (so no class test matches).
    fn f(&self, i: usize) -> Flags {
        if i < self.end {
            self.t.flags[i]
        } else {
            Flags::NONE
        }
    }

    /// Close the piece that runs from `start` to `to`.
    fn emit(&mut self, to: usize) {
        if to > self.start {
            self.out.push((self.start, to));
        }
        self.start = to;
    }

    /// `'s|'t|'re|'ve|'m|'ll|'d` at `pos`: its length.
    fn contraction(&self, pos: usize, any_case: bool) -> Option<usize> {
        if self.c(pos) != Some('\'') {
            return None;
        }
        let low = |c: Option<char>| c.map(|c| if any_case { c.to_ascii_lowercase() } else { c });
        match (low(self.c(pos + 1)), low(self.c(pos + 2))) {
            (Some('s' | 't' | 'm' | 'd'), _) => Some(2),
            (Some('r' | 'v'), Some('e')) | (Some('l'), Some('l')) => Some(3),
            _ => None,
        }
    }

    /// Not whitespace, letter or digit (and inside the piece): `[^\s\p{L}\p{N}]`.
    fn other(f: Flags, marks: bool) -> bool {
        f.present() && !(f.space() || f.letter() || f.number() || (marks && f.mark()))
    }

    /// The whitespace rules shared by both big patterns: a run of n spaces
    /// followed by a non-space yields n-1 (the last one goes with the next
    /// word: `\s+(?!\S)`), a run at the end of the piece yields all of it.
    /// With `newlines`, `\s*[\r\n]+` comes first: up to the last CR/LF.
    fn whitespace(&mut self, pos: usize, newlines: bool) {
        let mut n = 0;
        let mut last_newline = None;
        while self.f(pos + n).space() {
            if newlines && matches!(self.c(pos + n), Some('\r' | '\n')) {
                last_newline = Some(pos + n + 1);
            }
            n += 1;
        }
        if let Some(to) = last_newline {
            self.emit(to);
        } else if n > 1 && pos + n < self.end {
            self.emit(pos + n - 1);
        } else {
            // n == 0 cannot happen for a character that matched nothing
            // else; emitting one character keeps the loop going regardless.
            self.emit(pos + n.max(1));
        }
    }

    fn gpt2(&mut self) {
        while self.start < self.end {
            let pos = self.start;
            if let Some(len) = self.contraction(pos, false) {
                self.emit(pos + len);
                continue;
            }
            // ` ?X+` for X = letters, digits, or other: an optional leading
            // space, then a maximal run of one class.
            let space = self.c(pos) == Some(' ');
            let first = pos + usize::from(space);
            let f = self.f(first);
            let class: Option<fn(Flags) -> bool> = if f.letter() {
                Some(Flags::letter)
            } else if f.number() {
                Some(Flags::number)
            } else if Self::other(f, false) {
                Some(|f| Self::other(f, false))
            } else {
                None
            };
            if let Some(class) = class {
                let mut p = first;
                while class(self.f(p)) {
                    p += 1;
                }
                self.emit(p);
                continue;
            }
            self.whitespace(pos, false);
        }
    }

    fn llama3(&mut self, max_digits: usize, marks: bool) {
        let word = |f: Flags| f.letter() || (marks && f.mark());
        while self.start < self.end {
            let pos = self.start;
            if let Some(len) = self.contraction(pos, true) {
                self.emit(pos + len);
                continue;
            }
            let c = self.t.chars[pos];
            let f = self.f(pos);
            // `[^\r\n\p{L}\p{N}]?\p{L}+`: one optional lead character (a
            // space, a quote, …) then letters.
            if !(c == '\r' || c == '\n' || f.number()) && (word(f) || word(self.f(pos + 1))) {
                let mut p = pos + 1;
                while word(self.f(p)) {
                    p += 1;
                }
                self.emit(p);
                continue;
            }
            // `\p{N}{1,D}`: a run of digits in chunks of D.
            if f.number() {
                let mut p = pos;
                while self.f(p).number() {
                    p += 1;
                    if p - self.start >= max_digits {
                        self.emit(p);
                    }
                }
                self.emit(p);
                continue;
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
            let first = pos + usize::from(c == ' ');
            if c == ' ' && first == self.end || Self::other(self.f(first), marks) {
                let mut p = first;
                while Self::other(self.f(p), marks) {
                    p += 1;
                }
                while matches!(self.c(p), Some('\r' | '\n')) {
                    p += 1;
                }
                self.emit(p);
                continue;
            }
            self.whitespace(pos, true);
        }
    }

    /// Matches of `class` (single characters or maximal runs) and the gaps
    /// between them each become a piece.
    fn isolate(&mut self, class: Class, run: bool) {
        let mut p = self.start;
        while p < self.end {
            if !class.contains(self.t.chars[p], self.t.flags[p]) {
                p += 1;
                continue;
            }
            self.emit(p);
            p += 1;
            while run && p < self.end && class.contains(self.t.chars[p], self.t.flags[p]) {
                p += 1;
            }
            self.emit(p);
        }
        self.emit(self.end);
    }

    fn ascii_digit_triples(&mut self) {
        let (t, end) = (self.t, self.end);
        let digit = |i: usize| i < end && t.chars[i].is_ascii_digit();
        let mut p = self.start;
        while p < self.end {
            if digit(p) && digit(p + 1) && digit(p + 2) {
                self.emit(p);
                self.emit(p + 3);
                p += 3;
            } else {
                p += 1;
            }
        }
        self.emit(self.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: &str, s: &str) -> Vec<String> {
        let p = PreTokenizer::from_name(Some(pre)).unwrap();
        p.split(s)
            .into_iter()
            .map(|(a, b)| s[a..b].to_string())
            .collect()
    }

    // Expected splits are those of the tokenizer.json regexes (Python
    // `regex` module), written out by hand.
    #[test]
    fn gpt2() {
        assert_eq!(
            words("gpt-2", "Hello world's  end!!\n"),
            ["Hello", " world", "'s", " ", " end", "!!", "\n"]
        );
        assert_eq!(words("gpt-2", "a   b"), ["a", "  ", " b"]);
        assert_eq!(words("gpt-2", "x  "), ["x", "  "]);
    }

    #[test]
    fn llama3() {
        assert_eq!(
            words("llama-bpe", "I'M 12345 ok?\n\n  x"),
            ["I", "'M", " ", "123", "45", " ok", "?\n\n", " ", " x"]
        );
        assert_eq!(words("llama-bpe", " \n\n x"), [" \n\n", " x"]);
        assert_eq!(words("qwen2", "ab12"), ["ab", "1", "2"]);
    }

    #[test]
    fn isolating_passes() {
        assert_eq!(words("starcoder", "a12 b"), ["a", "1", "2", " b"]);
        assert_eq!(words("default", "x=1234567"), ["x", "=", "123", "456", "7"]);
        assert_eq!(
            words("falcon", "a`b 1234"),
            ["a", "`", "b", " ", "123", "4"]
        );
    }
}
