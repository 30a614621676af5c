//! Named children applied in order.

use super::*;

/// Named children applied in order: the first gets the block's inputs,
/// each next one the previous one's outputs. Empty, it passes its inputs
/// through.
#[derive(Default)]
pub struct Sequential {
    children: Vec<(String, Box<dyn Block>)>,
}

impl Sequential {
    /// No children yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Builder-style: append the child `name`.
    pub fn with(mut self, name: impl Into<String>, block: impl Block + 'static) -> Self {
        self.push(name, Box::new(block));
        self
    }
    /// Append the child `name`.
    pub fn push(&mut self, name: impl Into<String>, block: Box<dyn Block>) {
        self.children.push((name.into(), block));
    }
    /// The number of children.
    pub fn len(&self) -> usize {
        self.children.len()
    }
    /// Whether there are no children.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }
}

impl Block for Sequential {
    fn kind(&self) -> &'static str {
        "Sequential"
    }
    fn describe(&self) -> String {
        format!("Sequential({} children)", self.children.len())
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        self.children
            .iter()
            .map(|(n, b)| (n.clone(), b.as_ref()))
            .collect()
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let mut values = inputs.to_vec();
        for (name, block) in &self.children {
            values = cx.child(name, block.as_ref(), &values)?;
        }
        Ok(values)
    }
}

// ------------------------------------------------------------ tests
