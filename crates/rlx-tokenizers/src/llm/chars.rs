//! Character classes of the LLM pre-tokenizers: the `\p{L}`, `\p{N}`,
//! `\p{M}`, `\p{P}` and `\s` of their regexes, as llama.cpp classifies code
//! points (general category, and its own whitespace set, which is exactly
//! the Unicode `White_Space` property that [`char::is_whitespace`] tests).
//!
//! The categories come from `unicode-general-category` (Unicode 15.0);
//! llama.cpp's generated tables are Unicode 15.1, so only the 627 code points
//! 15.1 added (CJK Extension I and a few others) classify differently: they
//! are unassigned here, letters there.

use unicode_general_category::{get_general_category, GeneralCategory as G};

/// The classes of one character, as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags(u8);

impl Flags {
    /// Outside the piece being split: no class at all. Every real character
    /// has [`Flags::PRESENT`], so "not a letter, digit or space" can be told
    /// apart from "past the end" (llama.cpp's `as_uint() != 0`).
    pub(crate) const NONE: Flags = Flags(0);
    const PRESENT: u8 = 1;
    const LETTER: u8 = 2;
    const NUMBER: u8 = 4;
    const MARK: u8 = 8;
    const PUNCT: u8 = 16;
    const SPACE: u8 = 32;

    pub(crate) fn of(c: char) -> Flags {
        let mut f = Self::PRESENT;
        if c.is_whitespace() {
            f |= Self::SPACE;
        }
        f |= match get_general_category(c) {
            G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter => Self::LETTER,
            G::DecimalNumber | G::LetterNumber | G::OtherNumber => Self::NUMBER,
            G::NonspacingMark | G::SpacingMark | G::EnclosingMark => Self::MARK,
            G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation => Self::PUNCT,
            _ => 0,
        };
        Flags(f)
    }

    pub(crate) fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }
    pub(crate) fn letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    pub(crate) fn number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    pub(crate) fn mark(self) -> bool {
        self.0 & Self::MARK != 0
    }
    pub(crate) fn punct(self) -> bool {
        self.0 & Self::PUNCT != 0
    }
    pub(crate) fn space(self) -> bool {
        self.0 & Self::SPACE != 0
    }
}

/// GPT-2's byte-level alphabet: every byte is shown as a printable
/// character, so that BPE runs on text without spaces or control
/// characters. Printable Latin-1 bytes stand for themselves; the other 68
/// (controls, space, DEL, NBSP, soft hyphen) take U+0100 upwards in byte order.
pub(crate) struct ByteAlphabet {
    to_char: [char; 256],
    /// Indexed by code point; every character of the alphabet is below U+0144.
    to_byte: [Option<u8>; 0x144],
}

impl ByteAlphabet {
    pub(crate) fn new() -> Self {
        let mut to_char = ['\0'; 256];
        let mut to_byte = [None; 0x144];
        let mut next = 0x100u32;
        for b in 0..=255u8 {
            let c = if matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF) {
                u32::from(b)
            } else {
                next += 1;
                next - 1
            };
            // c < 0x144, a valid scalar value.
            to_char[usize::from(b)] = char::from_u32(c).unwrap_or('\0');
            to_byte[c as usize] = Some(b);
        }
        ByteAlphabet { to_char, to_byte }
    }

    pub(crate) fn char_of(&self, b: u8) -> char {
        self.to_char[usize::from(b)]
    }

    /// The byte a character of the alphabet stands for.
    pub(crate) fn byte_of(&self, c: char) -> Option<u8> {
        self.to_byte.get(c as usize).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_is_a_bijection() {
        let a = ByteAlphabet::new();
        assert_eq!(a.char_of(b' '), 'Ġ');
        assert_eq!(a.char_of(b'\n'), 'Ċ');
        assert_eq!(a.char_of(b'a'), 'a');
        assert_eq!(a.char_of(0xAD), 'Ń');
        for b in 0..=255u8 {
            assert_eq!(a.byte_of(a.char_of(b)), Some(b));
        }
        assert_eq!(a.byte_of('€'), None);
    }

    #[test]
    fn classes() {
        assert!(Flags::of('a').letter() && Flags::of('中').letter());
        assert!(Flags::of('٣').number() && Flags::of('Ⅻ').number() && Flags::of('²').number());
        assert!(Flags::of('\u{301}').mark() && Flags::of('।').punct());
        assert!(Flags::of('\u{3000}').space() && Flags::of('\u{85}').space());
        assert!(!Flags::of('\u{200b}').space() && Flags::of('\u{200b}').present());
        assert!(!Flags::NONE.present());
    }

    /// Every code point against llama.cpp's own table (src/unicode-data.cpp,
    /// extracted by ./scripts/fetch-models): the same L/N/M/P classes and
    /// whitespace, except code points newer than Unicode 15.0.
    #[test]
    fn classes_match_llama_cpp_tables() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.cache/models/llama-vocab/unicode-data.cpp"
        );
        let src = std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!("{path}: {e} — run ./scripts/fetch-models (./scripts/setup does)")
        });
        let section = |name: &str| {
            let start = src.find(name).expect(name);
            &src[start..start + src[start..].find("};").expect("end of table")]
        };
        let hex =
            |s: &str| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).expect("hex");
        // {start, flags}: flags hold from start up to the next start.
        let ranges: Vec<(u32, u32)> = section("unicode_ranges_flags")
            .lines()
            .filter_map(|l| l.trim().strip_prefix('{')?.split_once(','))
            .map(|(a, b)| (hex(a), hex(b.trim_end_matches(['}', ',']))))
            .collect();
        assert!(ranges.len() > 1000);
        let spaces: Vec<u32> = section("unicode_set_whitespace")
            .lines()
            .filter_map(|l| l.trim().strip_suffix(','))
            .map(hex)
            .collect();
        assert!(spaces.len() > 20);
        let mut newer = 0;
        for w in ranges.windows(2) {
            let ((start, theirs), (end, _)) = (w[0], w[1]);
            for cp in start..end {
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                let f = Flags::of(c);
                let bit = |on: bool, b: u32| if on { b } else { 0 };
                let ours = bit(f.letter(), 0x04)
                    | bit(f.number(), 0x02)
                    | bit(f.mark(), 0x10)
                    | bit(f.punct(), 0x20);
                if ours == theirs & 0x36 {
                    continue;
                }
                // Assigned after Unicode 15.0: unassigned here.
                assert_eq!(
                    get_general_category(c),
                    G::Unassigned,
                    "U+{cp:04X}: ours {ours:#x}, llama.cpp {theirs:#x}"
                );
                newer += 1;
            }
        }
        eprintln!("{newer} code points assigned after Unicode 15.0 differ");
        assert!(newer < 700, "{newer} code points differ");
        for cp in 0..=0x10FFFFu32 {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(
                    Flags::of(c).space(),
                    spaces.contains(&cp),
                    "whitespace U+{cp:04X}"
                );
            }
        }
    }
}
