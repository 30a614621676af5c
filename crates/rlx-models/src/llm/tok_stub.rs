//! TEMPORARY stand-in until rlx-tokenizers has the GGUF tokenizers.
#![allow(missing_docs, dead_code)]
#[derive(Default, Clone, Debug)]
pub struct LlmVocab {
    pub model: String,
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    pub scores: Vec<f32>,
    pub token_type: Vec<i32>,
    pub merges: Vec<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub add_space_prefix: Option<bool>,
}
pub struct LlmTokenizer(LlmVocab);
impl LlmTokenizer {
    pub fn new(v: LlmVocab) -> Result<Self, rlx_tokenizers::TokenizerError> { Ok(LlmTokenizer(v)) }
    pub fn encode(&self, _t: &str, _a: bool, _p: bool) -> Vec<u32> { vec![1] }
    pub fn is_eog(&self, id: u32) -> bool { Some(id) == self.0.eos }
    pub fn token(&self, id: u32) -> &str { &self.0.tokens[id as usize] }
    pub fn bos(&self) -> Option<u32> { self.0.bos }
    pub fn eos(&self) -> Option<u32> { self.0.eos }
}
pub struct StreamDecoder;
impl StreamDecoder {
    pub fn new() -> Self { StreamDecoder }
    pub fn push(&mut self, t: &LlmTokenizer, id: u32) -> String { t.token(id).replace('Ġ', " ").replace('Ċ', "\n") }
}
