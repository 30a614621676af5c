//! Choosing the next token from logits: greedy, or sampling with
//! temperature, top-k, top-p, min-p and a repetition penalty, from a
//! seeded generator so a seed reproduces a generation.
//!
//! The order is `transformers`' logits processors: repetition penalty,
//! temperature, top-k, top-p, min-p, then a draw from the softmax.

use super::LlmError;

/// How to pick tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// 0: greedy (argmax; ties go to the lowest id).
    pub temperature: f32,
    /// Keep the k most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p (1: all).
    pub top_p: f32,
    /// Drop tokens less likely than min_p × the most likely one (0: none).
    pub min_p: f32,
    /// Above 1 discourages tokens already in the prompt or the output (a
    /// positive logit is divided by it, a negative one multiplied).
    pub repetition_penalty: f32,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling::greedy()
    }
}

impl Sampling {
    /// Always the most likely token.
    pub fn greedy() -> Sampling {
        Sampling {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }

    /// Check the values: an error names the bad one.
    pub fn check(&self) -> Result<(), LlmError> {
        let bad = |m: String| Err(LlmError::Options(m));
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(format!(
                "temperature {} must be a number ≥ 0",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top-p {} must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min-p {} must be in [0, 1]", self.min_p));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(format!(
                "repetition penalty {} must be a number > 0",
                self.repetition_penalty
            ));
        }
        Ok(())
    }
}

/// A small seeded generator (SplitMix64): reproducible on every platform.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The index of the largest value (the lowest on ties; NaN never wins).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x > logits[best] || logits[best].is_nan() {
            best = i;
        }
    }
    best
}

/// Pick the next token from `logits` given the tokens so far.
pub fn pick(s: &Sampling, logits: &mut [f32], history: &[u32], rng: &mut Rng) -> u32 {
    if s.repetition_penalty != 1.0 {
        let mut seen = vec![false; logits.len()];
        for &t in history {
            if let Some(x) = seen.get_mut(t as usize) {
                *x = true;
            }
        }
        for (l, _) in logits.iter_mut().zip(&seen).filter(|(_, &s)| s) {
            *l = if *l > 0.0 {
                *l / s.repetition_penalty
            } else {
                *l * s.repetition_penalty
            };
        }
    }
    if s.temperature == 0.0 {
        return argmax(logits) as u32;
    }
    // Candidates, most likely first.
    let mut cand: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_nan())
        .map(|(i, &l)| (i as u32, l / s.temperature))
        .collect();
    cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if s.top_k > 0 {
        cand.truncate(s.top_k.max(1));
    }
    let top = cand.first().map_or(0.0, |c| c.1);
    let mut probs: Vec<f64> = cand.iter().map(|c| ((c.1 - top) as f64).exp()).collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    let mut keep = probs.len();
    if s.top_p < 1.0 {
        let mut acc = 0.0;
        for (i, p) in probs.iter().enumerate() {
            acc += p;
            if acc >= s.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
    }
    if s.min_p > 0.0 {
        let floor = probs[0] * s.min_p as f64;
        keep = keep.min(probs.iter().take_while(|&&p| p >= floor).count().max(1));
    }
    probs.truncate(keep);
    let total: f64 = probs.iter().sum();
    let mut u = rng.uniform() * total;
    for (i, p) in probs.iter().enumerate() {
        if u < *p {
            return cand[i].0;
        }
        u -= p;
    }
    cand[keep - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_maximum() {
        let mut l = vec![0.5, 2.0, 2.0, -1.0];
        assert_eq!(pick(&Sampling::greedy(), &mut l, &[], &mut Rng::new(0)), 1);
    }

    #[test]
    fn repetition_penalty_follows_transformers() {
        let s = Sampling {
            repetition_penalty: 2.0,
            ..Sampling::greedy()
        };
        // 3.0 / 2 = 1.5 < 2.0; -1 * 2 = -2.
        let mut l = vec![3.0, 2.0, -1.0];
        assert_eq!(pick(&s, &mut l, &[0, 2], &mut Rng::new(0)), 1);
        assert_eq!(l, vec![1.5, 2.0, -2.0]);
    }

    #[test]
    fn top_k_one_is_greedy_and_sampling_is_seeded() {
        let s = Sampling {
            temperature: 1.0,
            top_k: 1,
            ..Sampling::greedy()
        };
        let mut l = vec![0.0, 1.0, 0.5];
        assert_eq!(pick(&s, &mut l, &[], &mut Rng::new(7)), 1);
        let s = Sampling {
            temperature: 1.0,
            ..Sampling::greedy()
        };
        let draw = |seed| {
            let mut r = Rng::new(seed);
            (0..50)
                .map(|_| pick(&s, &mut [0.0, 0.0, 0.0, 0.0], &[], &mut r))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        let d = draw(3);
        // Uniform logits: every token is drawn.
        assert!((0..4).all(|t| d.contains(&t)), "{d:?}");
    }

    #[test]
    fn top_p_and_min_p_cut_the_tail() {
        // probabilities ≈ 0.64, 0.24, 0.09, 0.03
        let logits = [3.0f32, 2.0, 1.0, 0.0];
        let s = Sampling {
            temperature: 1.0,
            top_p: 0.5,
            ..Sampling::greedy()
        };
        let mut r = Rng::new(1);
        assert!((0..100).all(|_| pick(&s, &mut logits.clone(), &[], &mut r) == 0));
        let s = Sampling {
            temperature: 1.0,
            min_p: 0.2,
            ..Sampling::greedy()
        };
        assert!((0..200).all(|_| pick(&s, &mut logits.clone(), &[], &mut r) <= 1));
    }

    #[test]
    fn bad_values_are_errors() {
        for s in [
            Sampling {
                temperature: -1.0,
                ..Sampling::greedy()
            },
            Sampling {
                top_p: 0.0,
                ..Sampling::greedy()
            },
            Sampling {
                repetition_penalty: f32::NAN,
                ..Sampling::greedy()
            },
        ] {
            assert!(s.check().is_err(), "{s:?}");
        }
    }
}
