//! Generation: prefill the prompt, then decode one token at a time,
//! streaming each token's text as soon as it is whole UTF-8 and not
//! possibly the start of a stop string.

pub use super::cache::Steps;
use super::cache::{KvCache, CHUNK};
use super::load::LlmModel;
use super::sample::{pick, Rng, Sampling};
use super::LlmError;
use rlx::Device;
use rlx_tokenizers::Utf8Stream;
use std::time::Duration;

/// Wall time for the timings. `std::time::Instant` panics on
/// wasm32-unknown-unknown: there the clock reads zero (the npm wrapper
/// times tokens with `performance.now()`).
struct Clock(#[cfg(not(target_arch = "wasm32"))] std::time::Instant);

impl Clock {
    fn start() -> Clock {
        Clock(
            #[cfg(not(target_arch = "wasm32"))]
            std::time::Instant::now(),
        )
    }
    fn elapsed(&self) -> Duration {
        #[cfg(not(target_arch = "wasm32"))]
        return self.0.elapsed();
        #[cfg(target_arch = "wasm32")]
        return Duration::ZERO;
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// New tokens at most.
    pub max_tokens: usize,
    pub sampling: Sampling,
    /// Generation ends when the text contains one of these (it is not
    /// part of the output).
    pub stop: Vec<String>,
    /// Stop at an end-of-generation token (EOS, EOT); off to always
    /// produce `max_tokens` (as parity runs do).
    pub stop_at_eos: bool,
    /// Add the tokenizer's BOS/EOS as the model expects (`add_bos_token`).
    pub add_special: bool,
}

impl GenerateOptions {
    /// Greedy, `max_tokens` new tokens, stopping at EOS.
    pub fn greedy(max_tokens: usize) -> GenerateOptions {
        GenerateOptions {
            max_tokens,
            sampling: Sampling::greedy(),
            stop: vec![],
            stop_at_eos: true,
            add_special: true,
        }
    }
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// `max_tokens` were generated.
    Length,
    /// An end-of-generation token.
    Eos,
    /// A stop string.
    Stop,
    /// The context is full.
    Context,
}

impl FinishReason {
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Eos => "eos",
            FinishReason::Stop => "stop",
            FinishReason::Context => "context",
        }
    }
}

/// One generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub id: u32,
    /// The text this token completes (may be empty: part of a UTF-8
    /// character, held back as a possible stop string, or a special token).
    pub text: String,
}

/// Compiles and caches the decoder graphs for one model and device.
pub struct Generator<'m> {
    model: &'m LlmModel,
    steps: Steps,
}

/// Timings of the last generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    pub prompt_tokens: usize,
    pub prefill: Duration,
    pub generated: usize,
    pub decode: Duration,
}

/// The default context limit: the model's trained context, at most 4096.
pub(crate) fn default_context(model: &LlmModel) -> usize {
    model.config.context_length.min(4096)
}

/// Set `steps`' context limit; an error above the model's trained context.
pub(crate) fn set_context(model: &LlmModel, steps: &mut Steps, n: usize) -> Result<(), LlmError> {
    let max = model.config.context_length;
    if n == 0 || n > max {
        return Err(LlmError::Options(format!(
            "context {n} must be in 1..={max} (the model's trained context)"
        )));
    }
    steps.limit = n;
    Ok(())
}

impl<'m> Generator<'m> {
    pub(crate) fn new(model: &'m LlmModel, device: Device) -> Generator<'m> {
        Generator {
            model,
            steps: Steps::new(device, default_context(model)),
        }
    }

    /// The context limit: prompt plus generated tokens (default: the
    /// model's trained context, at most 4096).
    pub fn context(&self) -> usize {
        self.steps.limit
    }

    /// Set the context limit; an error above the model's trained context.
    pub fn set_context(&mut self, n: usize) -> Result<(), LlmError> {
        set_context(self.model, &mut self.steps, n)
    }

    /// Whether the compiled graphs keep the key/value cache resident on
    /// the device (the default; see [`Steps::set_resident_cache`]).
    pub fn set_resident_cache(&mut self, on: bool) {
        self.steps.set_resident_cache(on)
    }

    /// Mixed precision for the graphs (see [`Steps::set_amp`]).
    pub fn set_amp(&mut self, amp: rlx::Amp) {
        self.steps.set_amp(amp)
    }

    /// The device the graphs run on.
    pub fn device(&self) -> Device {
        self.steps.device
    }

    /// The compiled graph for `t` new tokens over `past` cache slots
    /// (its dispatch report says how each node runs).
    pub fn compiled(
        &mut self,
        t: usize,
        past: usize,
    ) -> Result<std::sync::Arc<rlx::Compiled>, LlmError> {
        self.steps.compiled(self.model, t, past)
    }

    /// The logits after `ids` (a fresh cache), and the logits of each
    /// next step fed `then` one token at a time: for parity checks.
    pub fn logits(&mut self, ids: &[u32], then: &[u32]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut cache = KvCache::new();
        let mut out = vec![prefill(self.model, &mut self.steps, &mut cache, ids)?];
        for &t in then {
            out.push(self.steps.step(self.model, &mut cache, &[t])?);
        }
        Ok(out)
    }

    /// Per-kernel time of the first prompt step over `ids` (at most one
    /// prefill chunk of them, a fresh cache) and of the decode step after
    /// it, as the device's backend measures them (`Compiled::profile`).
    pub fn profile(&mut self, ids: &[u32]) -> Result<[rlx::Profile; 2], LlmError> {
        check_prompt(&self.steps, ids)?;
        let mut cache = KvCache::new();
        let chunk = &ids[..ids.len().min(CHUNK)];
        let prompt = self.steps.profile_step(self.model, &mut cache, chunk)?;
        let decode = self
            .steps
            .profile_step(self.model, &mut cache, &chunk[..1])?;
        Ok([prompt, decode])
    }

    /// Generate from a text prompt.
    pub fn generate(
        &mut self,
        prompt: &str,
        opts: &GenerateOptions,
    ) -> Result<Stream<'_, 'm>, LlmError> {
        let ids = self.model.tokenizer.encode(prompt, opts.add_special, true);
        self.generate_ids(&ids, opts)
    }

    /// Generate from prompt token ids: the prompt is prefilled here (so a
    /// bad prompt is an error before any token), tokens come from the
    /// returned iterator.
    pub fn generate_ids(
        &mut self,
        ids: &[u32],
        opts: &GenerateOptions,
    ) -> Result<Stream<'_, 'm>, LlmError> {
        let state = Generation::start(self.model, &mut self.steps, ids, opts)?;
        Ok(Stream { gen: self, state })
    }
}

/// Check that `ids` can start a generation within the context.
fn check_prompt(steps: &Steps, ids: &[u32]) -> Result<(), LlmError> {
    if ids.is_empty() {
        return Err(LlmError::Options(
            "the prompt is empty (no tokens to start from)".into(),
        ));
    }
    if ids.len() > steps.limit {
        return Err(LlmError::Context {
            limit: steps.limit,
            wanted: ids.len(),
            prompt: ids.len(),
        });
    }
    Ok(())
}

fn prefill(
    model: &LlmModel,
    steps: &mut Steps,
    cache: &mut KvCache,
    ids: &[u32],
) -> Result<Vec<f32>, LlmError> {
    check_prompt(steps, ids)?;
    let mut logits = vec![];
    for chunk in ids.chunks(CHUNK) {
        logits = steps.step(model, cache, chunk)?;
    }
    Ok(logits)
}

async fn prefill_async(
    model: &LlmModel,
    steps: &mut Steps,
    cache: &mut KvCache,
    ids: &[u32],
) -> Result<Vec<f32>, LlmError> {
    check_prompt(steps, ids)?;
    let mut logits = vec![];
    for chunk in ids.chunks(CHUNK) {
        logits = steps.step_async(model, cache, chunk).await?;
    }
    Ok(logits)
}

/// The state of one generation, owning its cache: what [`Stream`] drives
/// with its generator's model and graphs, and what the browser build holds
/// between calls from JavaScript.
pub struct Generation {
    cache: KvCache,
    opts: GenerateOptions,
    rng: Rng,
    history: Vec<u32>,
    bytes: Utf8Stream,
    /// Text decoded but not yet yielded (a possible stop-string prefix).
    pending: String,
    /// All text yielded.
    text: String,
    logits: Option<Vec<f32>>,
    generated: usize,
    finish: Option<FinishReason>,
    timings: Timings,
}

impl Generation {
    /// Check the options and prefill `ids`.
    pub fn start(
        model: &LlmModel,
        steps: &mut Steps,
        ids: &[u32],
        opts: &GenerateOptions,
    ) -> Result<Generation, LlmError> {
        opts.sampling.check()?;
        let start = Clock::start();
        let mut cache = KvCache::new();
        let logits = prefill(model, steps, &mut cache, ids)?;
        Ok(Generation::new(ids, opts, cache, logits, start))
    }

    /// [`Generation::start`] without blocking (WebGPU in the page).
    pub async fn start_async(
        model: &LlmModel,
        steps: &mut Steps,
        ids: &[u32],
        opts: &GenerateOptions,
    ) -> Result<Generation, LlmError> {
        opts.sampling.check()?;
        let start = Clock::start();
        let mut cache = KvCache::new();
        let logits = prefill_async(model, steps, &mut cache, ids).await?;
        Ok(Generation::new(ids, opts, cache, logits, start))
    }

    fn new(
        ids: &[u32],
        opts: &GenerateOptions,
        cache: KvCache,
        logits: Vec<f32>,
        start: Clock,
    ) -> Generation {
        Generation {
            rng: Rng::new(opts.sampling.seed),
            opts: opts.clone(),
            history: ids.to_vec(),
            bytes: Utf8Stream::default(),
            pending: String::new(),
            text: String::new(),
            logits: Some(logits),
            generated: 0,
            finish: None,
            cache,
            timings: Timings {
                prompt_tokens: ids.len(),
                prefill: start.elapsed(),
                ..Timings::default()
            },
        }
    }

    /// Why the generation ended (`None` while it runs).
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finish
    }

    /// The text yielded so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Prefill and decode timings so far.
    pub fn timings(&self) -> &Timings {
        &self.timings
    }

    /// How much of `pending` may be yielded: all but a tail that could
    /// still grow into a stop string.
    fn safe_len(&self) -> usize {
        let p = &self.pending;
        let mut keep = p.len();
        for s in &self.opts.stop {
            for (i, _) in p.char_indices() {
                if s.starts_with(&p[i..]) {
                    keep = keep.min(i);
                    break;
                }
            }
        }
        keep
    }

    /// The next token, or `None` once the generation has ended.
    pub fn next_token(
        &mut self,
        model: &LlmModel,
        steps: &mut Steps,
    ) -> Result<Option<Token>, LlmError> {
        let start = Clock::start();
        let Some(token) = self.sample(model, steps.limit) else {
            return Ok(None);
        };
        if self.finish.is_none() {
            self.logits = Some(steps.step(model, &mut self.cache, &[token.id])?);
        }
        self.timings.decode += start.elapsed();
        Ok(Some(token))
    }

    /// [`Generation::next_token`] without blocking (WebGPU in the page).
    pub async fn next_token_async(
        &mut self,
        model: &LlmModel,
        steps: &mut Steps,
    ) -> Result<Option<Token>, LlmError> {
        let start = Clock::start();
        let Some(token) = self.sample(model, steps.limit) else {
            return Ok(None);
        };
        if self.finish.is_none() {
            let logits = steps
                .step_async(model, &mut self.cache, &[token.id])
                .await?;
            self.logits = Some(logits);
        }
        self.timings.decode += start.elapsed();
        Ok(Some(token))
    }

    /// Pick the next token from the last logits and decide whether the
    /// generation ends with it (the step that feeds it back is the
    /// caller's); `None` once it has ended.
    fn sample(&mut self, model: &LlmModel, limit: usize) -> Option<Token> {
        if self.finish.is_some() {
            return None;
        }
        let mut logits = self.logits.take()?;
        let tok = &model.tokenizer;
        let id = pick(
            &self.opts.sampling,
            &mut logits,
            &self.history,
            &mut self.rng,
        );
        self.history.push(id);
        self.generated += 1;
        let eog = tok.is_eog(id);
        if !(eog && self.opts.stop_at_eos) {
            self.pending.push_str(&self.bytes.push(tok.token_bytes(id)));
        }
        let mut text;
        if let Some((at, _)) = self
            .opts
            .stop
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()).map(|i| (i, s)))
            .min()
        {
            self.pending.truncate(at);
            text = std::mem::take(&mut self.pending);
            self.finish = Some(FinishReason::Stop);
        } else {
            let keep = self.safe_len();
            text = self.pending[..keep].to_string();
            self.pending.drain(..keep);
            if eog && self.opts.stop_at_eos {
                self.finish = Some(FinishReason::Eos);
            } else if self.generated >= self.opts.max_tokens {
                self.finish = Some(FinishReason::Length);
            } else if self.cache.len >= limit {
                self.finish = Some(FinishReason::Context);
            }
            if self.finish.is_some() {
                self.pending.push_str(&self.bytes.finish());
                text.push_str(&std::mem::take(&mut self.pending));
            }
        }
        self.text.push_str(&text);
        self.timings.generated = self.generated;
        Some(Token { id, text })
    }
}

/// The tokens of one generation, as they are made.
pub struct Stream<'g, 'm> {
    gen: &'g mut Generator<'m>,
    state: Generation,
}

impl Stream<'_, '_> {
    /// Why the generation ended (`None` while it runs).
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.state.finish
    }

    /// The text yielded so far.
    pub fn text(&self) -> &str {
        &self.state.text
    }

    /// Prefill and decode timings so far.
    pub fn timings(&self) -> &Timings {
        &self.state.timings
    }
}

impl Iterator for Stream<'_, '_> {
    type Item = Result<Token, LlmError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.state.next_token(self.gen.model, &mut self.gen.steps) {
            Ok(t) => t.map(Ok),
            Err(e) => {
                self.state.finish = Some(FinishReason::Length);
                Some(Err(e))
            }
        }
    }
}
