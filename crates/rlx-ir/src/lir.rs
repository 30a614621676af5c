//! LIR: the scheduled program for one device. An ordered list of kernels
//! over buffer slots, with views that alias another slot instead of
//! copying. The compile pipeline (memory planning, fusion) fills these in
//! fully; [`Program::from_graph`] is the plain schedule: one kernel per MIR
//! node, one slot per value, no reuse.

use crate::graph::{Graph, ValueDef, ValueId};
use crate::shape::TensorType;
use serde::Serialize;

/// A region of the device arena holding one value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BufferSlot {
    pub value: ValueId,
    pub ty: TensorType,
    /// Byte offset in the arena.
    pub offset: usize,
    pub bytes: usize,
}

/// A value read through another slot's memory with strides (in elements).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct View {
    pub value: ValueId,
    pub base: ValueId,
    pub offset: usize,
    pub strides: Vec<usize>,
}

/// One kernel launch: runs MIR node `node` (or a fused region of nodes).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub nodes: Vec<usize>,
    pub kernel: String,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

/// The scheduled program.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Program {
    pub graph: Graph,
    pub steps: Vec<Step>,
    pub slots: Vec<BufferSlot>,
    pub views: Vec<View>,
    /// Arena size in bytes.
    pub arena_bytes: usize,
}

impl Program {
    /// One step per node in graph order; one slot per non-input value.
    pub fn from_graph(graph: Graph) -> Program {
        let steps = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| Step {
                nodes: vec![i],
                kernel: n.op.name().to_string(),
                inputs: n.inputs.clone(),
                outputs: n.outputs.clone(),
            })
            .collect();
        let mut offset = 0;
        let mut slots = Vec::new();
        for (i, v) in graph.values.iter().enumerate() {
            if matches!(v.def, ValueDef::Input(_)) {
                continue;
            }
            let bytes = v.ty.dtype.storage_bytes(v.ty.shape.numel()).unwrap_or(0);
            slots.push(BufferSlot {
                value: ValueId(i as u32),
                ty: v.ty.clone(),
                offset,
                bytes,
            });
            // Keep every slot 64-byte aligned.
            offset += bytes.div_ceil(64) * 64;
        }
        Program {
            graph,
            steps,
            slots,
            views: vec![],
            arena_bytes: offset,
        }
    }
}
