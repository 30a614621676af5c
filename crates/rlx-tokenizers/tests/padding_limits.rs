//! Padding that would need more memory than `max_tensor_bytes` allows is a
//! typed limit error (found by fuzzing tokenizer.json: `"padding":
//! {"strategy": {"Fixed": 1000000000000}}` aborted in the allocator, and
//! `pad_to_multiple_of: 18446744073709551615` overflowed).

use rlx_tokenizers::{Padding, Tokenizer, TokenizerError, Truncation};

fn tok() -> Tokenizer {
    Tokenizer::from_vocab_txt_str("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n").unwrap()
}

fn limit_error(p: Padding) -> rlx_ir::LimitError {
    match tok().encode_batch(&["hello world", "hello"], p, Truncation::none()) {
        Err(TokenizerError::Limit(l)) => l,
        other => panic!("expected a limit error, got {other:?}"),
    }
}

#[test]
fn a_huge_fixed_padding_is_refused_by_the_tensor_limit() {
    let l = limit_error(Padding::fixed(1 << 40));
    assert_eq!(l.limit, "max_tensor_bytes");
    let msg = l.to_string();
    assert!(
        msg.contains("a padded batch of 2 rows of 1099511627776 tokens"),
        "{msg}"
    );
}

#[test]
fn a_multiple_of_that_overflows_is_refused_not_a_panic() {
    let l = limit_error(Padding::longest().with_multiple_of(usize::MAX));
    assert_eq!(l.limit, "max_tensor_bytes");
    let l = limit_error(Padding::fixed(usize::MAX));
    assert_eq!(l.limit, "max_tensor_bytes");
}

#[test]
fn ordinary_padding_still_pads() {
    let b = tok()
        .encode_batch(
            &["hello world", "hello"],
            Padding::longest().with_multiple_of(8),
            Truncation::none(),
        )
        .unwrap();
    assert_eq!(b.shape, (2, 8));
    let b = tok()
        .encode_batch(&["hello"], Padding::fixed(6), Truncation::none())
        .unwrap();
    assert_eq!(b.shape, (1, 6));
}
