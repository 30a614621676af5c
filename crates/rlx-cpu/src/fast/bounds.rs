//! The engine's arenas are allocated once, at compile time, from the
//! program's slots. A program that did not come through the planner's
//! checks (built by hand, `Program::from_graph`, or read from elsewhere)
//! must still not make that allocation abort the process: every slot is
//! checked here, with overflow-checked arithmetic, against
//! [`rlx_ir::limits`](mod@rlx_ir::limits) before anything is sized or allocated.

use crate::CpuError;
use rlx_ir::limits::limits;
use rlx_ir::lir::Program;
use rlx_ir::IrError;

/// Each slot's type against `max_tensor_bytes` and the arena's end (the
/// furthest slot end, which sizes both the f32 and the 16-bit arena)
/// against `max_arena_bytes`.
pub(super) fn check(program: &Program) -> Result<(), CpuError> {
    let lim = limits();
    let mut end = 0u64;
    for s in &program.slots {
        let what = || format!("CPU arena slot of value %{} ({})", s.value.index(), s.ty);
        lim.check_tensor_shape(&what(), s.ty.dtype, s.ty.dims())
            .map_err(IrError::from)?;
        // Saturating: an end past u64 is over any arena bound.
        let slot_end = (s.offset as u64).saturating_add(s.bytes as u64);
        end = end.max(slot_end);
        lim.check_arena_bytes(&what(), end).map_err(IrError::from)?;
    }
    Ok(())
}
