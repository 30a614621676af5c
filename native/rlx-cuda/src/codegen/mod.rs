//! CUDA C generation. Every kernel is specialized to its shapes and strides
//! (baked in as constants), so one graph compiles to one NVRTC module of
//! straight-line kernels; identical kernels are emitted once.

pub mod expr;
pub mod kernels;

use std::collections::HashMap;

/// The source of one module, with identical kernels shared.
#[derive(Default)]
pub struct Module {
    src: String,
    names: HashMap<String, String>,
}

impl Module {
    /// Add a kernel written with `@NAME@` for its name; returns the name
    /// (an existing kernel's, when the same text was added before).
    pub fn add(&mut self, text: String) -> String {
        if let Some(n) = self.names.get(&text) {
            return n.clone();
        }
        let name = format!("k{}", self.names.len());
        self.src.push_str(&text.replace("@NAME@", &name));
        self.src.push('\n');
        self.names.insert(text, name.clone());
        name
    }

    /// Distinct kernels so far.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The whole translation unit.
    pub fn source(&self) -> String {
        format!("{}\n{}", crate::ctype::PREAMBLE, self.src)
    }
}
