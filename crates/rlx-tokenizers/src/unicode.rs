//! Character classes, exactly as HuggingFace `tokenizers` defines them for
//! BERT (`normalizers/bert.rs`, `pre_tokenizers/bert.rs`):
//!
//! * whitespace: `\t`, `\n`, `\r` or [`char::is_whitespace`] (the Unicode
//!   `White_Space` property: Zs, Zl, Zp and a few Cc such as U+0085);
//! * control: general category Cc, Cf or Co (private use), except `\t`,
//!   `\n`, `\r` (HF's `is_other()`; unassigned code points are *not* control);
//! * punctuation: ASCII punctuation (33–47, 58–64, 91–96, 123–126, which
//!   includes symbols such as `$`, `+`, `^`) or a Unicode P* category;
//! * non-spacing mark (stripped after NFD): category Mn;
//! * Chinese character: the CJK ranges of HF's `is_chinese_char`.
//!
//! The category tables come from the `unicode_categories` crate, the same
//! crate (and so the same Unicode snapshot) HF uses, so the classification
//! is identical code point for code point (a test sweeps all of them).

use unicode_categories::UnicodeCategories;

/// BERT whitespace (mapped to `' '` by clean-text, removed by the pre-tokenizer).
pub(crate) fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// BERT control character (removed by clean-text).
pub(crate) fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// BERT punctuation (isolated by the pre-tokenizer).
pub(crate) fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// Unicode category Mn (removed by accent stripping, after NFD).
pub(crate) fn is_mark_nonspacing(c: char) -> bool {
    c.is_mark_nonspacing()
}

/// The CJK ideograph ranges HF surrounds with spaces. Note `0x2B920`, not
/// BERT's original `0x2B820`: this is HF's table, reproduced as is.
pub(crate) fn is_chinese_char(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(is_whitespace('\u{3000}') && is_whitespace('\u{85}') && is_whitespace('\t'));
        assert!(!is_whitespace('\u{200b}'));
        assert!(is_control('\u{0}') && is_control('\u{200d}') && is_control('\u{e000}'));
        assert!(!is_control('\n') && !is_control('\u{378}'));
        assert!(is_punctuation('$') && is_punctuation('¿') && is_punctuation('。'));
        assert!(!is_punctuation('€') && !is_punctuation('a'));
        // Po in current Unicode, but newer than HF's tables: HF keeps it in words.
        assert!(!is_punctuation('\u{2E4E}'));
        assert!(is_mark_nonspacing('\u{301}') && !is_mark_nonspacing('e'));
        assert!(is_chinese_char('中') && !is_chinese_char('あ') && !is_chinese_char('\u{2B820}'));
    }
}
