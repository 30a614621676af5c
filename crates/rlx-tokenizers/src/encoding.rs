//! Encodings, batches, and the settings that shape them: the post-processor
//! template, truncation and padding (HF `TemplateProcessing`,
//! `utils/truncation.rs`, `utils/padding.rs`).

use crate::error::{Result, TokenizerError};
use crate::wordpiece::Tok;

/// The encoding of one input (a text or a pair of texts).
///
/// All vectors have one entry per token. Offsets are UTF-8 byte ranges into
/// the input the token came from (the first or the second text of a pair);
/// special and padding tokens have `(0, 0)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    /// Token ids.
    pub ids: Vec<u32>,
    /// Segment ids: 0 for the first text (and its special tokens), 1 for the second.
    pub type_ids: Vec<u32>,
    /// 1 for real tokens, 0 for padding.
    pub attention_mask: Vec<u32>,
    /// 1 for special tokens added by the template and padding, 0 otherwise.
    pub special_tokens_mask: Vec<u32>,
    /// Token strings (`"##"`-prefixed for continuation pieces).
    pub tokens: Vec<String>,
    /// Byte offsets into the source text.
    pub offsets: Vec<(usize, usize)>,
}

impl Encoding {
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn push(
        &mut self,
        id: u32,
        type_id: u32,
        special: bool,
        token: String,
        offsets: (usize, usize),
    ) {
        self.ids.push(id);
        self.type_ids.push(type_id);
        self.attention_mask.push(1);
        self.special_tokens_mask.push(u32::from(special));
        self.tokens.push(token);
        self.offsets.push(offsets);
    }

    fn pad(&mut self, target: usize, pad: &PadToken, direction: Direction) {
        let n = target.saturating_sub(self.len());
        if n == 0 {
            return;
        }
        fn fill<T: Clone>(v: &mut Vec<T>, n: usize, x: T, direction: Direction) {
            match direction {
                Direction::Right => v.extend(std::iter::repeat_n(x, n)),
                Direction::Left => {
                    v.splice(0..0, std::iter::repeat_n(x, n));
                }
            }
        }
        fill(&mut self.ids, n, pad.id, direction);
        fill(&mut self.type_ids, n, pad.type_id, direction);
        fill(&mut self.attention_mask, n, 0, direction);
        fill(&mut self.special_tokens_mask, n, 1, direction);
        fill(&mut self.tokens, n, pad.token.clone(), direction);
        fill(&mut self.offsets, n, (0, 0), direction);
    }
}

/// A padded batch: `B × T` row-major `i64` tensors ready for a BERT model
/// (`input_ids`, `attention_mask`, `token_type_ids`), plus the per-row
/// encodings (padded too).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Token ids, `B × T` row-major.
    pub ids: Vec<i64>,
    /// 1 for tokens, 0 for padding, `B × T` row-major.
    pub attention_mask: Vec<i64>,
    /// Segment ids, `B × T` row-major.
    pub type_ids: Vec<i64>,
    /// `(B, T)`.
    pub shape: (usize, usize),
    /// The padded encoding of each row.
    pub encodings: Vec<Encoding>,
}

impl Batch {
    /// Builds the tensors from already padded, equally long encodings.
    pub(crate) fn from_encodings(encodings: Vec<Encoding>, width: usize) -> Self {
        let b = encodings.len();
        let mut out = Batch {
            ids: Vec::with_capacity(b * width),
            attention_mask: Vec::with_capacity(b * width),
            type_ids: Vec::with_capacity(b * width),
            shape: (b, width),
            encodings: Vec::new(),
        };
        for e in &encodings {
            out.ids.extend(e.ids.iter().map(|&x| i64::from(x)));
            out.attention_mask
                .extend(e.attention_mask.iter().map(|&x| i64::from(x)));
            out.type_ids
                .extend(e.type_ids.iter().map(|&x| i64::from(x)));
        }
        out.encodings = encodings;
        out
    }

    /// Row `i` of the ids (panics if `i >= B`, like slice indexing).
    pub fn ids_row(&self, i: usize) -> &[i64] {
        &self.ids[i * self.shape.1..(i + 1) * self.shape.1]
    }

    /// Row `i` of the attention mask (panics if `i >= B`).
    pub fn attention_mask_row(&self, i: usize) -> &[i64] {
        &self.attention_mask[i * self.shape.1..(i + 1) * self.shape.1]
    }
}

/// Which end truncation cuts, or padding fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// Cut from / pad at the start.
    Left,
    /// Cut from / pad at the end (the default).
    #[default]
    Right,
}

/// How a pair is shortened (HF `TruncationStrategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TruncationStrategy {
    /// Shorten the longer sequence first (the default).
    #[default]
    LongestFirst,
    /// Only shorten the first sequence.
    OnlyFirst,
    /// Only shorten the second sequence.
    OnlySecond,
}

/// Truncation: at most `max_length` tokens per row, *including* the special
/// tokens the template adds (`[CLS] … [SEP]` stay). `max_length: None`
/// disables it. The default is 512, BERT's (and all-MiniLM-L6-v2's)
/// `model_max_length`; [`crate::Tokenizer::default_truncation`] gives the
/// tokenizer's own limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// Maximum tokens per row, special tokens included; `None`: no truncation.
    pub max_length: Option<usize>,
    /// Pair strategy.
    pub strategy: TruncationStrategy,
    /// Which end is cut.
    pub direction: Direction,
}

impl Default for Truncation {
    fn default() -> Self {
        Self::max_length(512)
    }
}

impl Truncation {
    /// No truncation.
    pub const fn none() -> Self {
        Self {
            max_length: None,
            strategy: TruncationStrategy::LongestFirst,
            direction: Direction::Right,
        }
    }

    /// Truncate to `n` tokens (longest first, cutting the end).
    pub const fn max_length(n: usize) -> Self {
        Self {
            max_length: Some(n),
            strategy: TruncationStrategy::LongestFirst,
            direction: Direction::Right,
        }
    }

    /// The same with another pair strategy.
    pub const fn with_strategy(mut self, strategy: TruncationStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The same cutting the other end.
    pub const fn with_direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
}

/// Target length of padding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PadTo {
    /// The longest row of the batch (the default).
    #[default]
    Longest,
    /// A fixed length; a longer row is an error (truncate to it).
    Fixed(usize),
}

/// Padding of a batch with the tokenizer's pad token (id, type id and text
/// from tokenizer.json, else `[PAD]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Padding {
    /// Target length.
    pub to: PadTo,
    /// Round the target up to a multiple of this (0 or `None`: no rounding).
    pub multiple_of: Option<usize>,
    /// Which side gets the padding.
    pub direction: Direction,
}

impl Padding {
    /// Pad to the longest row.
    pub const fn longest() -> Self {
        Self {
            to: PadTo::Longest,
            multiple_of: None,
            direction: Direction::Right,
        }
    }

    /// Pad every row to `n` tokens.
    pub const fn fixed(n: usize) -> Self {
        Self {
            to: PadTo::Fixed(n),
            multiple_of: None,
            direction: Direction::Right,
        }
    }

    /// The same, rounding the length up to a multiple of `m`.
    pub const fn with_multiple_of(mut self, m: usize) -> Self {
        self.multiple_of = Some(m);
        self
    }

    /// The same, padding on the other side.
    pub const fn with_direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }

    /// The row length this padding gives a batch whose longest row is
    /// `longest`; `None` when rounding up to `multiple_of` overflows.
    pub(crate) fn target(&self, longest: usize) -> Option<usize> {
        let mut n = match self.to {
            PadTo::Longest => longest,
            PadTo::Fixed(n) => n,
        };
        if let Some(m) = self.multiple_of {
            if m > 0 && n % m > 0 {
                n = n.checked_add(m - n % m)?;
            }
        }
        Some(n)
    }
}

/// The token used for padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PadToken {
    pub id: u32,
    pub type_id: u32,
    pub token: String,
}

/// One piece of a post-processing template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// The first (`false`) or second (`true`) sequence, with its type id.
    Sequence { second: bool, type_id: u32 },
    /// A special token: its ids and tokens, and the type id.
    Special {
        ids: Vec<u32>,
        tokens: Vec<String>,
        type_id: u32,
    },
}

/// The post-processor: templates for one text and for a pair
/// (`[CLS] $A [SEP]`, `[CLS] $A [SEP] $B:1 [SEP]:1` for BERT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Template {
    pub single: Vec<Piece>,
    pub pair: Vec<Piece>,
}

impl Template {
    /// BERT's: `[CLS] $A [SEP]` and `[CLS] $A [SEP] $B:1 [SEP]:1`.
    pub fn bert(cls: (String, u32), sep: (String, u32)) -> Self {
        let special = |(t, id): &(String, u32), type_id| Piece::Special {
            ids: vec![*id],
            tokens: vec![t.clone()],
            type_id,
        };
        let seq = |second, type_id| Piece::Sequence { second, type_id };
        Self {
            single: vec![special(&cls, 0), seq(false, 0), special(&sep, 0)],
            pair: vec![
                special(&cls, 0),
                seq(false, 0),
                special(&sep, 0),
                seq(true, 1),
                special(&sep, 1),
            ],
        }
    }

    /// Number of tokens the template adds.
    pub fn added(&self, pair: bool) -> usize {
        let t = if pair { &self.pair } else { &self.single };
        t.iter()
            .map(|p| match p {
                Piece::Special { ids, .. } => ids.len(),
                Piece::Sequence { .. } => 0,
            })
            .sum()
    }
}

/// Truncates the sequences (HF `truncate_encodings`), then applies the
/// template (or concatenates with type ids 0/1 when there is none).
pub(crate) fn post_process(
    template: Option<&Template>,
    mut a: Vec<Tok>,
    mut b: Option<Vec<Tok>>,
    truncation: &Truncation,
    add_special_tokens: bool,
) -> Result<Encoding> {
    if let Some(max_length) = truncation.max_length {
        let added = match template {
            Some(t) if add_special_tokens => t.added(b.is_some()),
            _ => 0,
        };
        let max = max_length
            .checked_sub(added)
            .ok_or(TokenizerError::TruncationTooShort { max_length, added })?;
        truncate(&mut a, b.as_mut(), max, truncation)?;
    }
    let mut enc = Encoding::default();
    let push_seq = |enc: &mut Encoding, toks: Vec<Tok>, type_id: u32| {
        for t in toks {
            enc.push(t.id, type_id, false, t.value, (t.start, t.end));
        }
    };
    match template {
        Some(t) => {
            let pieces = if b.is_some() { &t.pair } else { &t.single };
            let mut seqs = [Some(a), b];
            for p in pieces {
                match p {
                    Piece::Sequence { second, type_id } => {
                        if let Some(toks) = seqs[usize::from(*second)].take() {
                            push_seq(&mut enc, toks, *type_id);
                        }
                    }
                    Piece::Special {
                        ids,
                        tokens,
                        type_id,
                    } => {
                        if add_special_tokens {
                            for (id, tok) in ids.iter().zip(tokens) {
                                enc.push(*id, *type_id, true, tok.clone(), (0, 0));
                            }
                        }
                    }
                }
            }
        }
        None => {
            push_seq(&mut enc, a, 0);
            if let Some(b) = b {
                push_seq(&mut enc, b, 1);
            }
        }
    }
    Ok(enc)
}

fn cut(v: &mut Vec<Tok>, n: usize, direction: Direction) {
    if n >= v.len() {
        return;
    }
    match direction {
        Direction::Right => v.truncate(n),
        Direction::Left => {
            v.drain(..v.len() - n);
        }
    }
}

/// HF `truncate_encodings`, with `max` already reduced by the special tokens.
fn truncate(a: &mut Vec<Tok>, b: Option<&mut Vec<Tok>>, max: usize, t: &Truncation) -> Result<()> {
    let total = a.len() + b.as_ref().map_or(0, |b| b.len());
    if max == 0 {
        a.clear();
        if let Some(b) = b {
            b.clear();
        }
        return Ok(());
    }
    if total <= max {
        return Ok(());
    }
    let to_remove = total - max;
    match t.strategy {
        TruncationStrategy::LongestFirst => match b {
            Some(b) => {
                let (mut n1, mut n2) = (a.len(), b.len());
                let swap = n1 > n2;
                if swap {
                    std::mem::swap(&mut n1, &mut n2);
                }
                n2 = if n1 > max { n1 } else { n1.max(max - n1) };
                if n1 + n2 > max {
                    n1 = max / 2;
                    n2 = n1 + max % 2;
                }
                if swap {
                    std::mem::swap(&mut n1, &mut n2);
                }
                cut(a, n1, t.direction);
                cut(b, n2, t.direction);
            }
            None => cut(a, total - to_remove, t.direction),
        },
        TruncationStrategy::OnlyFirst | TruncationStrategy::OnlySecond => {
            let target = if t.strategy == TruncationStrategy::OnlyFirst {
                a
            } else {
                b.ok_or(TokenizerError::SecondSequenceNotProvided)?
            };
            if target.len() > to_remove {
                let n = target.len() - to_remove;
                cut(target, n, t.direction);
            } else {
                return Err(TokenizerError::SequenceTooShort {
                    max_length: t.max_length.unwrap_or(max),
                });
            }
        }
    }
    Ok(())
}

/// Pads equally (HF `pad_encodings`) and builds the batch tensors.
/// Memory of one padded token: the encoding's ids, type ids, masks,
/// offsets and token string, and the batch's three i64 tensors.
const BYTES_PER_PADDED_TOKEN: u64 = 80;

pub(crate) fn pad_batch(
    mut encodings: Vec<Encoding>,
    padding: &Padding,
    pad: &PadToken,
) -> Result<Batch> {
    let longest = encodings.iter().map(Encoding::len).max().unwrap_or(0);
    // A padded token costs about BYTES_PER_PADDED_TOKEN in the encodings
    // and the batch: a tokenizer.json asking for `Fixed: 1e12` or a huge
    // `pad_to_multiple_of` is refused by the tensor limit instead of
    // aborting in the allocator (or overflowing).
    let target = padding.target(longest);
    let bytes = target.and_then(|t| {
        (t as u64)
            .checked_mul(encodings.len() as u64)?
            .checked_mul(BYTES_PER_PADDED_TOKEN)
    });
    rlx_ir::limits().check_tensor_bytes(
        &format!(
            "a padded batch of {} rows of {} tokens ({BYTES_PER_PADDED_TOKEN} bytes each)",
            encodings.len(),
            target.map_or("more than usize::MAX".to_string(), |t| t.to_string())
        ),
        bytes.unwrap_or(u64::MAX),
    )?;
    let target = target.unwrap_or(usize::MAX);
    if let Some((row, e)) = encodings.iter().enumerate().find(|(_, e)| e.len() > target) {
        return Err(TokenizerError::PaddingTooShort {
            row,
            len: e.len(),
            fixed: target,
        });
    }
    for e in &mut encodings {
        e.pad(target, pad, padding.direction);
    }
    Ok(Batch::from_encodings(encodings, target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(n: usize) -> Vec<Tok> {
        (0..n)
            .map(|i| Tok {
                id: i as u32 + 10,
                value: format!("t{i}"),
                start: i,
                end: i + 1,
            })
            .collect()
    }

    fn bert() -> Template {
        Template::bert(("[CLS]".into(), 101), ("[SEP]".into(), 102))
    }

    #[test]
    fn longest_first_pairs() {
        let t = Truncation::max_length(3 + 5);
        let e = post_process(Some(&bert()), toks(2), Some(toks(9)), &t, true).unwrap();
        assert_eq!(e.ids, [101, 10, 11, 102, 10, 11, 12, 102]);
        assert_eq!(e.type_ids, [0, 0, 0, 0, 1, 1, 1, 1]);
        let e = post_process(Some(&bert()), toks(9), Some(toks(9)), &t, true).unwrap();
        assert_eq!(e.ids, [101, 10, 11, 102, 10, 11, 12, 102]);
    }

    #[test]
    fn too_short() {
        let t = Truncation::max_length(1);
        assert!(matches!(
            post_process(Some(&bert()), toks(3), None, &t, true),
            Err(TokenizerError::TruncationTooShort {
                max_length: 1,
                added: 2
            })
        ));
        let e = post_process(
            Some(&bert()),
            toks(3),
            None,
            &Truncation::max_length(2),
            true,
        )
        .unwrap();
        assert_eq!(e.ids, [101, 102]);
    }

    #[test]
    fn padding_fixed_too_short() {
        let pad = PadToken {
            id: 0,
            type_id: 0,
            token: "[PAD]".into(),
        };
        let e = post_process(Some(&bert()), toks(5), None, &Truncation::none(), true).unwrap();
        assert!(matches!(
            pad_batch(vec![e.clone()], &Padding::fixed(4), &pad),
            Err(TokenizerError::PaddingTooShort {
                row: 0,
                len: 7,
                fixed: 4
            })
        ));
        let b = pad_batch(
            vec![e],
            &Padding::fixed(9).with_direction(Direction::Left),
            &pad,
        )
        .unwrap();
        assert_eq!(b.shape, (1, 9));
        assert_eq!(b.ids_row(0)[..3], [0, 0, 101]);
        assert_eq!(b.attention_mask_row(0)[..3], [0, 0, 1]);
        let empty = pad_batch(vec![], &Padding::longest(), &pad).unwrap();
        assert_eq!(empty.shape, (0, 0));
    }
}
