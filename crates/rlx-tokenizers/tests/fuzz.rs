//! Robustness: seeded random Unicode strings never make encoding panic, and
//! every encoding is well formed (lengths agree, offsets are in range and on
//! char boundaries, `[CLS] … [SEP]` framing, padding and masks consistent).

use std::path::PathBuf;

use rlx_tokenizers::{Padding, Tokenizer, TokenizerError, Truncation, TruncationStrategy};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn char(&mut self) -> char {
        let ranges: &[(u32, u32)] = &[
            (0x20, 0x7E),       // ASCII
            (0x00, 0x1F),       // C0 controls
            (0x80, 0x24F),      // Latin-1, Latin Extended (C1 controls too)
            (0x300, 0x36F),     // combining marks
            (0x370, 0x52F),     // Greek, Cyrillic
            (0x590, 0x6FF),     // Hebrew, Arabic
            (0x2000, 0x206F),   // general punctuation, spaces, format chars
            (0x3000, 0x30FF),   // CJK punctuation, kana
            (0x4E00, 0x9FFF),   // CJK ideographs
            (0xAC00, 0xD7A3),   // Hangul syllables
            (0xE000, 0xF8FF),   // private use
            (0xFE00, 0xFFFF),   // variation selectors, specials, U+FFFD
            (0x1F300, 0x1FAFF), // emoji
            (0x0, 0x10FFFF),    // anything
        ];
        loop {
            let (lo, hi) = ranges[self.below(ranges.len() as u64) as usize];
            let cp = lo + self.below(u64::from(hi - lo + 1)) as u32;
            if let Some(c) = char::from_u32(cp) {
                return c;
            }
        }
    }

    fn string(&mut self) -> String {
        let pieces = [
            "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "##", " ", "\u{200d}", "İ", "ﬁ",
        ];
        let n = match self.below(10) {
            0 => 0,
            1 => 100 + self.below(200), // long words
            _ => self.below(40),
        };
        let mut s = String::new();
        for _ in 0..n {
            if self.below(12) == 0 {
                s.push_str(pieces[self.below(pieces.len() as u64) as usize]);
            } else if n > 100 && self.below(3) != 0 {
                s.push('a');
            } else {
                s.push(self.char());
            }
        }
        s
    }
}

fn tokenizer() -> Tokenizer {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vectors/tokenizer/tokenizer.json");
    Tokenizer::from_file(p).unwrap()
}

fn check(tok: &Tokenizer, e: &rlx_tokenizers::Encoding, texts: &[&str]) {
    let n = e.len();
    assert!(n >= 2);
    for v in [&e.type_ids, &e.attention_mask, &e.special_tokens_mask] {
        assert_eq!(v.len(), n);
    }
    assert_eq!((e.tokens.len(), e.offsets.len()), (n, n));
    assert_eq!((e.ids[0], e.ids[n - 1]), (101, 102));
    let mut seq = 0;
    for i in 0..n {
        if e.special_tokens_mask[i] == 1 {
            assert_eq!(e.offsets[i], (0, 0));
            if e.ids[i] == 102 {
                seq += 1;
            }
            continue;
        }
        let text = texts[seq.min(texts.len() - 1)];
        let (s, t) = e.offsets[i];
        assert!(s < t && t <= text.len(), "{:?} in {text:?}", e.offsets[i]);
        assert!(text.is_char_boundary(s) && text.is_char_boundary(t));
        // A vocabulary piece maps back to its string; an added token's text is its content.
        assert_eq!(tok.id_to_token(e.ids[i]), Some(e.tokens[i].as_str()));
    }
}

#[test]
fn random_unicode_never_panics() {
    let tok = tokenizer();
    let mut rng = Rng(0x5EED_2026_1130);
    for round in 0..3000 {
        let a = rng.string();
        let b = rng.string();
        let e = tok.encode(&a);
        check(&tok, &e, &[&a]);
        let p = tok.encode_pair(&a, &b);
        check(&tok, &p, &[&a, &b]);
        assert_eq!(p.len(), e.len() + tok.encode(&b).len() - 1);

        let max = 2 + rng.below(40) as usize;
        let t = tok
            .encode_with(&a, None, Truncation::max_length(max))
            .unwrap();
        assert_eq!(t.len(), e.len().min(max));
        assert_eq!(t.ids[..t.len() - 1], e.ids[..t.len() - 1]);

        if round % 10 == 0 {
            let texts = [a.as_str(), b.as_str(), "", "x"];
            let batch = tok
                .encode_batch(&texts, Padding::longest(), Truncation::max_length(max))
                .unwrap();
            let (rows, width) = batch.shape;
            assert_eq!(rows, 4);
            assert_eq!(batch.ids.len(), rows * width);
            for (r, enc) in batch.encodings.iter().enumerate() {
                let real = batch
                    .attention_mask_row(r)
                    .iter()
                    .filter(|&&m| m == 1)
                    .count();
                assert_eq!(
                    real,
                    tok.encode_with(texts[r], None, Truncation::max_length(max))
                        .unwrap()
                        .len()
                );
                assert_eq!(enc.len(), width);
            }
            match tok.encode_with(
                &a,
                None,
                Truncation::max_length(3).with_strategy(TruncationStrategy::OnlySecond),
            ) {
                Ok(e) => assert!(e.len() <= 3),
                Err(err) => assert!(matches!(err, TokenizerError::SecondSequenceNotProvided)),
            }
        }
    }
}
