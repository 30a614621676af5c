//! Chat prompts from the Jinja template a GGUF file carries
//! (`tokenizer.chat_template`), rendered with minijinja and the Python
//! string methods templates use (`.strip()`, `.startswith()`).

use super::load::LlmModel;
use super::LlmError;
use serde::Serialize;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

fn raise_exception(msg: String) -> Result<String, minijinja::Error> {
    Err(minijinja::Error::new(
        minijinja::ErrorKind::InvalidOperation,
        msg,
    ))
}

impl LlmModel {
    /// The prompt for `messages` by the file's chat template, ending with
    /// the assistant's turn opened when `add_generation_prompt`. An error
    /// when the file has no template.
    pub fn chat_prompt(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, LlmError> {
        let src = self.chat_template.as_deref().ok_or_else(|| {
            LlmError::Template(format!(
                "{} has no tokenizer.chat_template; give a plain prompt (rlx generate)",
                self.name
            ))
        })?;
        let mut env = minijinja::Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template("chat", src)
            .map_err(|e| LlmError::Template(e.to_string()))?;
        let tok = &self.tokenizer;
        let text = |id: Option<u32>| {
            id.and_then(|i| tok.token(i))
                .unwrap_or_default()
                .to_string()
        };
        env.get_template("chat")
            .and_then(|t| {
                t.render(minijinja::context! {
                    messages => messages,
                    add_generation_prompt => add_generation_prompt,
                    bos_token => text(tok.bos()),
                    eos_token => text(tok.eos()),
                })
            })
            .map_err(|e| LlmError::Template(e.to_string()))
    }
}
