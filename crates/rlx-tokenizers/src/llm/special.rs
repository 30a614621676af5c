//! Token attributes, end-of-generation tokens, and the split of special
//! tokens out of the text, as llama.cpp's vocabulary loader derives them.
//!
//! GGUF carries a type per token (normal, control, user-defined, byte, …)
//! but not which tokens end a turn; llama.cpp recognises those, and a few
//! other roles, by their text. The lists below are the token texts it
//! knows; a token found this way is also made a control token (hidden when
//! decoding, not matched in text unless `parse_special`).

use std::collections::HashMap;

/// Token attribute bits (llama.cpp's `llama_token_attr`, the subset used).
pub(crate) mod attr {
    pub(crate) const NORMAL: u8 = 1;
    pub(crate) const UNKNOWN: u8 = 2;
    pub(crate) const CONTROL: u8 = 4;
    pub(crate) const USER_DEFINED: u8 = 8;
    pub(crate) const BYTE: u8 = 16;
    /// Whitespace before the token is dropped when it is split out of text.
    pub(crate) const LSTRIP: u8 = 32;
    /// Whitespace after the token is dropped when it is split out of text.
    pub(crate) const RSTRIP: u8 = 64;
}

/// `tokenizer.ggml.token_type` to attributes: 1 normal, 2 unknown, 3
/// control, 4 user-defined, 6 byte; 5 (unused) and anything else have none.
pub(crate) fn attr_of_type(t: i32) -> u8 {
    match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        6 => attr::BYTE,
        _ => 0,
    }
}

/// End of turn, when the vocabulary does not name it.
const EOT: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM: &[&str] = &["<|eom_id|>"];
/// Fill-in-the-middle roles: made control tokens; pad, repo and file
/// separator also end generation.
const FIM_PRE: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP: &[&str] = &["<|file_sep|>"];
/// Every token with one of these texts ends generation.
const EOG: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// What the loader derives about special tokens.
pub(crate) struct Specials {
    pub(crate) attrs: Vec<u8>,
    pub(crate) eot: Option<u32>,
    pub(crate) eom: Option<u32>,
    /// End-of-generation ids, sorted.
    pub(crate) eog: Vec<u32>,
    /// Tokens split out of text before tokenizing, longest text first.
    split_order: Vec<u32>,
}

/// A stretch of the input: text still to tokenize, or a special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(usize, usize),
    Token(u32),
}

impl Specials {
    /// `name` is `general.name`, for llama.cpp's one per-model rule that
    /// applies here (Phi-3's special tokens eat the whitespace after them).
    pub(crate) fn new(
        tokens: &[String],
        token_to_id: &HashMap<String, u32>,
        mut attrs: Vec<u8>,
        ids: [Option<u32>; 3],
        (eot, eom): (Option<u32>, Option<u32>),
        name: Option<&str>,
    ) -> Self {
        // The file's own types decide what is split out of text when it
        // has any: llama.cpp also marks tokens control by their text (a
        // normal `</s>` in Qwen2.5's vocabulary), which transformers, the
        // model's own tokenizer, leaves as text. They still end generation.
        let file_attrs = attrs.clone();
        let typed = file_attrs
            .iter()
            .any(|a| a & (attr::CONTROL | attr::USER_DEFINED) != 0);
        let find = |list: &[&str]| list.iter().find_map(|t| token_to_id.get(*t).copied());
        let control = |id: Option<u32>, attrs: &mut Vec<u8>| {
            if let Some(id) = id {
                attrs[id as usize] |= attr::CONTROL;
            }
            id
        };
        let eot = eot.or_else(|| control(find(EOT), &mut attrs));
        let eom = eom.or_else(|| control(find(EOM), &mut attrs));
        for list in [FIM_PRE, FIM_SUF, FIM_MID] {
            control(find(list), &mut attrs);
        }
        let mut eog: Vec<u32> = [FIM_PAD, FIM_REP, FIM_SEP]
            .iter()
            .filter_map(|l| control(find(l), &mut attrs))
            .collect();
        for t in EOG {
            eog.extend(control(token_to_id.get(*t).copied(), &mut attrs));
        }
        // gpt-oss: these structure tokens are always shown.
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(&id) = token_to_id.get(t) {
                attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        let [_, eos, _] = ids;
        eog.extend([eos, eot, eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        let text = |id: u32| tokens[id as usize].as_str();
        let has = |eog: &[u32], t: &str| eog.iter().copied().find(|&id| text(id) == t);
        // o200k-harmony / solar-open: `<|end|>` ends a message, not generation.
        let call = has(&eog, "<|call|>").or(has(&eog, "<|calls|>"));
        if let Some(end) = has(&eog, "<|end|>") {
            if call.is_some()
                && (has(&eog, "<|return|>").is_some() || has(&eog, "<|flush|>").is_some())
            {
                eog.retain(|&id| id != end);
                attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // Gemma 4 and PLaMo-2: `</s>` is an ordinary token there.
        if has(&eog, "<|tool_response>")
            .or(has(&eog, "<|plamo:eos|>"))
            .is_some()
        {
            if let Some(s) = has(&eog, "</s>") {
                eog.retain(|&id| id != s);
                attrs[s as usize] = attr::NORMAL;
            }
        }
        let mut split_order: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&id| {
                let a = if typed && attrs[id as usize] != attr::USER_DEFINED {
                    file_attrs[id as usize]
                } else {
                    attrs[id as usize]
                };
                a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        split_order.sort_by_key(|&id| std::cmp::Reverse(text(id).len()));
        let lower = name.unwrap_or("").to_lowercase();
        if lower.contains("phi-3") || lower.contains("phi3") {
            for &id in &split_order {
                attrs[id as usize] |= attr::RSTRIP;
            }
            let mut set = |t: &str, on: bool| {
                if let Some(&id) = token_to_id.get(t) {
                    attrs[id as usize] = if on {
                        attrs[id as usize] | attr::RSTRIP
                    } else {
                        attrs[id as usize] & !attr::RSTRIP
                    };
                }
            };
            set("</s>", true);
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                set(t, false);
            }
        } else if lower.contains("modern-bert") {
            if let Some(&id) = token_to_id.get("[MASK]") {
                attrs[id as usize] |= attr::LSTRIP;
            }
        }
        Specials {
            attrs,
            eot,
            eom,
            eog,
            split_order,
        }
    }

    /// Split the special tokens out of `text`, longest token first; with
    /// `parse_special` false only user-defined tokens are (control and
    /// unknown tokens are then plain text).
    pub(crate) fn partition(
        &self,
        tokens: &[String],
        text: &str,
        parse_special: bool,
    ) -> Vec<Fragment> {
        let mut frags = vec![Fragment::Text(0, text.len())];
        if text.is_empty() {
            return Vec::new();
        }
        let mut next = Vec::new();
        // Vocabularies have thousands of special tokens (Gemma 3: 6,400);
        // searching the text for each one costs more than the tokenizing.
        // A token can only occur if every byte pair of it occurs: a bitmap
        // of the text's byte pairs rules almost all of them out at once.
        let mut pairs = vec![0u64; 1024];
        for w in text.as_bytes().windows(2) {
            let k = usize::from(w[0]) << 8 | usize::from(w[1]);
            pairs[k / 64] |= 1 << (k % 64);
        }
        let may_occur = |tok: &str| {
            tok.as_bytes().windows(2).all(|w| {
                let k = usize::from(w[0]) << 8 | usize::from(w[1]);
                pairs[k / 64] & (1 << (k % 64)) != 0
            })
        };
        for &id in &self.split_order {
            let a = self.attrs[id as usize];
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let tok = tokens[id as usize].as_str();
            if !may_occur(tok) {
                continue;
            }
            next.clear();
            for &f in &frags {
                let Fragment::Text(mut start, end) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = text[start..end].find(tok).map(|i| start + i) {
                    let mut left_end = at;
                    if a & attr::LSTRIP != 0 {
                        while left_end > start && is_c_space(text.as_bytes()[left_end - 1]) {
                            left_end -= 1;
                        }
                    }
                    if left_end > start {
                        next.push(Fragment::Text(start, left_end));
                    }
                    next.push(Fragment::Token(id));
                    start = at + tok.len();
                    if a & attr::RSTRIP != 0 {
                        while start < end && is_c_space(text.as_bytes()[start]) {
                            start += 1;
                        }
                    }
                }
                if start < end {
                    next.push(Fragment::Text(start, end));
                }
            }
            std::mem::swap(&mut frags, &mut next);
        }
        frags
    }
}

/// C's `isspace` in the "C" locale, which llama.cpp's strip rules use.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}
