//! Reading and checking a BERT `config.json` before anything is built.
//!
//! A config is input: `num_hidden_layers: 1000000` must not allocate a
//! million layers before something fails, and `layer_norm_eps: -1` must not
//! give NaN embeddings with exit code 0. [`parse`] reads every field by
//! name (so an error names the field, not just a JSON column), checks it,
//! then estimates what the model will take — each weight and the largest
//! activations at the longest sequence against `max_tensor_bytes`, and
//! weights + activations + the built graph against `max_arena_bytes`
//! ([`rlx_ir::limits`](mod@rlx_ir::limits)) — all before one layer is built.

use crate::bert::BertConfig;
use rlx_ir::limits::{limits, LimitError, Limits};
use rlx_ir::{DType, IrError};
use serde_json::Value;
use thiserror::Error;

/// What one encoder layer's structure costs beyond its weights (HIR
/// blocks, MIR nodes and values with their parameter names, the plan and
/// the engine's steps): an over-estimate, so that the layer count is
/// bounded by the same arena limit as the weights.
const STRUCTURE_BYTES_PER_LAYER: f64 = 64.0 * 1024.0;

/// Why a config was refused. Each names the file, the field, the value and
/// what is allowed.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Not JSON, or not a JSON object.
    #[error("{file}: invalid JSON: {message}")]
    Json { file: String, message: String },
    /// A field is missing, of the wrong type or out of range.
    #[error("{file}: `{field}` is {value}; {allowed}")]
    Field {
        file: String,
        field: &'static str,
        value: String,
        allowed: String,
    },
    /// The model this config describes is over a limit (its `what` names
    /// the file and the fields).
    #[error(transparent)]
    Limit(#[from] LimitError),
}

impl From<ConfigError> for IrError {
    fn from(e: ConfigError) -> IrError {
        match e {
            ConfigError::Limit(l) => IrError::Limit(l),
            e => IrError::msg(e.to_string()),
        }
    }
}

struct Reader<'a> {
    file: &'a str,
    obj: &'a serde_json::Map<String, Value>,
}

impl Reader<'_> {
    fn bad(&self, field: &'static str, value: String, allowed: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            file: self.file.to_string(),
            field,
            value,
            allowed: allowed.into(),
        }
    }

    /// A positive integer field (`default` when absent, if it has one).
    fn size(&self, field: &'static str, default: Option<usize>) -> Result<usize, ConfigError> {
        let allowed = "expected a positive integer";
        let Some(v) = self.obj.get(field) else {
            return default.ok_or_else(|| self.bad(field, "missing".into(), allowed));
        };
        match v.as_u64().map(usize::try_from) {
            Some(Ok(n)) if n > 0 => Ok(n),
            _ => Err(self.bad(field, v.to_string(), allowed)),
        }
    }
}

/// Parse and check `config.json` text; `file` names it in errors.
pub fn parse(json: &str, file: &str) -> Result<BertConfig, ConfigError> {
    let v: Value = serde_json::from_str(json).map_err(|e| ConfigError::Json {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    let Some(obj) = v.as_object() else {
        return Err(ConfigError::Json {
            file: file.to_string(),
            message: "expected a JSON object".into(),
        });
    };
    let r = Reader { file, obj };
    let layer_norm_eps = match obj.get("layer_norm_eps") {
        None => 1e-12,
        Some(v) => v
            .as_f64()
            .ok_or_else(|| r.bad("layer_norm_eps", v.to_string(), "expected a number"))?,
    };
    let hidden_act = match obj.get("hidden_act") {
        None => "gelu".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(r.bad("hidden_act", v.to_string(), "expected a string")),
    };
    let c = BertConfig {
        vocab_size: r.size("vocab_size", None)?,
        hidden_size: r.size("hidden_size", None)?,
        num_hidden_layers: r.size("num_hidden_layers", None)?,
        num_attention_heads: r.size("num_attention_heads", None)?,
        intermediate_size: r.size("intermediate_size", None)?,
        max_position_embeddings: r.size("max_position_embeddings", None)?,
        type_vocab_size: r.size("type_vocab_size", Some(2))?,
        layer_norm_eps,
        hidden_act,
    };
    check(&c, file, &limits())?;
    Ok(c)
}

/// Check a config's values and what the model would take under `lim`.
pub fn check(c: &BertConfig, file: &str, lim: &Limits) -> Result<(), ConfigError> {
    let bad = |field, value: String, allowed: String| ConfigError::Field {
        file: file.to_string(),
        field,
        value,
        allowed,
    };
    for (field, n) in [
        ("vocab_size", c.vocab_size),
        ("hidden_size", c.hidden_size),
        ("num_hidden_layers", c.num_hidden_layers),
        ("num_attention_heads", c.num_attention_heads),
        ("intermediate_size", c.intermediate_size),
        ("max_position_embeddings", c.max_position_embeddings),
        ("type_vocab_size", c.type_vocab_size),
    ] {
        if n == 0 {
            return Err(bad(field, "0".into(), "expected a positive integer".into()));
        }
    }
    if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
        return Err(bad(
            "hidden_size",
            c.hidden_size.to_string(),
            format!(
                "it must be a multiple of num_attention_heads ({}): each head takes an equal \
                 slice",
                c.num_attention_heads
            ),
        ));
    }
    // LayerNorm divides by sqrt(var + eps) in f32: eps must stay a positive
    // finite f32, or a constant row gives 0/0.
    let eps = c.layer_norm_eps;
    let eps32 = eps as f32;
    if !(eps.is_finite() && eps > 0.0 && eps32.is_finite() && eps32 >= f32::MIN_POSITIVE) {
        return Err(bad(
            "layer_norm_eps",
            eps.to_string(),
            format!(
                "expected a finite number > 0 that f32 holds ({:e} to {:e}; BERT uses 1e-12)",
                f32::MIN_POSITIVE,
                f32::MAX
            ),
        ));
    }
    if !matches!(c.hidden_act.as_str(), "gelu" | "gelu_new" | "relu") {
        return Err(bad(
            "hidden_act",
            format!("`{}`", c.hidden_act),
            "expected gelu, gelu_new or relu".into(),
        ));
    }
    check_sizes(c, file, lim)
}

/// Every large tensor against `max_tensor_bytes`, then the total against
/// `max_arena_bytes`. Estimates are in f64, which cannot overflow here.
fn check_sizes(c: &BertConfig, file: &str, lim: &Limits) -> Result<(), ConfigError> {
    let (v, h, l, heads) = (
        c.vocab_size,
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
    );
    let (i, s, t) = (
        c.intermediate_size,
        c.max_position_embeddings,
        c.type_vocab_size,
    );
    // Weights, and one sequence of the longest length (batch 1).
    for (what, dims) in [
        ("word embeddings (`vocab_size` x `hidden_size`)", [v, h, 1]),
        (
            "position embeddings (`max_position_embeddings` x `hidden_size`)",
            [s, h, 1],
        ),
        (
            "token type embeddings (`type_vocab_size` x `hidden_size`)",
            [t, h, 1],
        ),
        (
            "feed-forward weight (`hidden_size` x `intermediate_size`)",
            [h, i, 1],
        ),
        (
            "attention scores at max_position_embeddings (`num_attention_heads` x \
             `max_position_embeddings`^2)",
            [heads, s, s],
        ),
    ] {
        let what = format!("{file}: {what}");
        lim.check_tensor_shape(&what, DType::F32, &dims)?;
    }
    let (vf, hf, lf, hdf) = (v as f64, h as f64, l as f64, heads as f64);
    let (f_i, sf, tf) = (i as f64, s as f64, t as f64);
    let params =
        (vf + sf + tf) * hf + 2.0 * hf + lf * (4.0 * hf * hf + 2.0 * hf * f_i + 9.0 * hf + f_i);
    // Live at once in a layer: x, q, k, v, the attention output, the
    // scores and the feed-forward hidden state.
    let activations = 5.0 * sf * hf + hdf * sf * sf + sf * f_i;
    let total = 4.0 * (params + activations) + lf * STRUCTURE_BYTES_PER_LAYER;
    let value = if total >= u64::MAX as f64 {
        u64::MAX
    } else {
        total as u64
    };
    lim.check_arena_bytes(
        &format!(
            "{file}: the model (estimated f32 weights + activations at max_position_embeddings \
             + graph for num_hidden_layers = {l})"
        ),
        value,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// all-MiniLM-L6-v2's config, with `field` replaced by `value`.
    fn minilm(field: &str, value: &str) -> String {
        let mut v: serde_json::Map<String, Value> = serde_json::from_str(
            r#"{"hidden_act": "gelu", "hidden_size": 384, "intermediate_size": 1536,
                "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
                "num_attention_heads": 12, "num_hidden_layers": 6, "type_vocab_size": 2,
                "vocab_size": 30522}"#,
        )
        .unwrap();
        if !field.is_empty() {
            v.insert(field.into(), serde_json::from_str(value).unwrap());
        }
        Value::Object(v).to_string()
    }

    fn field_error(json: &str) -> (String, String, String) {
        match parse(json, "m/config.json") {
            Err(ConfigError::Field {
                file,
                field,
                value,
                allowed,
            }) => {
                assert_eq!(file, "m/config.json");
                (field.to_string(), value, allowed)
            }
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn the_real_config_passes() {
        let c = parse(&minilm("", ""), "config.json").unwrap();
        assert_eq!((c.hidden_size, c.num_hidden_layers), (384, 6));
    }

    #[test]
    fn a_million_layers_is_a_limit_error_before_anything_is_built() {
        let e = parse(&minilm("num_hidden_layers", "1000000"), "m/config.json").unwrap_err();
        let ConfigError::Limit(l) = &e else {
            panic!("{e:?}")
        };
        assert_eq!(l.limit, "max_arena_bytes");
        assert!(l.value > 7_000_000_000_000, "{}", l.value);
        let msg = e.to_string();
        assert!(
            msg.contains("m/config.json") && msg.contains("num_hidden_layers = 1000000"),
            "{msg}"
        );
        // It reaches callers of `from_json` as a typed limit error too.
        let ir = crate::bert::BertConfig::from_json(&minilm("num_hidden_layers", "1000000"));
        assert!(matches!(ir, Err(IrError::Limit(_))), "{ir:?}");
    }

    #[test]
    fn a_huge_dimension_is_over_max_tensor_bytes() {
        let e = parse(&minilm("vocab_size", "1000000000000"), "config.json").unwrap_err();
        let ConfigError::Limit(l) = &e else {
            panic!("{e:?}")
        };
        assert_eq!(l.limit, "max_tensor_bytes");
        assert!(
            l.what.contains("`vocab_size` x `hidden_size`"),
            "{}",
            l.what
        );
    }

    #[test]
    fn layer_norm_eps_must_be_a_positive_finite_f32() {
        for bad in ["-1", "0", "1e-50", "1e300"] {
            let (field, value, allowed) = field_error(&minilm("layer_norm_eps", bad));
            assert_eq!(field, "layer_norm_eps");
            assert_eq!(value.parse::<f64>().unwrap(), bad.parse::<f64>().unwrap());
            assert!(allowed.contains("finite number > 0"), "{allowed}");
        }
        let (_, _, allowed) = field_error(&minilm("layer_norm_eps", r#""small""#));
        assert_eq!(allowed, "expected a number");
        assert!(parse(&minilm("layer_norm_eps", "1e-5"), "c").is_ok());
    }

    #[test]
    fn sizes_must_be_positive_integers_and_the_message_says_which() {
        for (field, value) in [
            ("num_hidden_layers", "-5"),
            ("hidden_size", "0"),
            ("vocab_size", "3.5"),
            ("max_position_embeddings", r#""512""#),
            ("num_attention_heads", "null"),
        ] {
            let (f, v, allowed) = field_error(&minilm(field, value));
            assert_eq!((f.as_str(), v.as_str()), (field, value));
            assert_eq!(allowed, "expected a positive integer");
        }
        // Keys print sorted, so `vocab_size` is last.
        let json = minilm("", "").replace(r#","vocab_size":30522"#, "");
        let (f, v, _) = field_error(&json);
        assert_eq!((f.as_str(), v.as_str()), ("vocab_size", "missing"));
    }

    #[test]
    fn heads_must_divide_the_hidden_size() {
        let (f, v, allowed) = field_error(&minilm("num_attention_heads", "7"));
        assert_eq!((f.as_str(), v.as_str()), ("hidden_size", "384"));
        assert!(
            allowed.contains("multiple of num_attention_heads (7)"),
            "{allowed}"
        );
        let (f, v, _) = field_error(&minilm("hidden_act", r#""swish""#));
        assert_eq!((f.as_str(), v.as_str()), ("hidden_act", "`swish`"));
    }
}
