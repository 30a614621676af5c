//! A program whose slots exceed the limits is refused by the CPU backend's
//! compile with a typed limit error, before the arena is allocated (it
//! used to abort the process in the allocator). The program here is laid
//! out naively by `Program::from_graph`, bypassing the planner's checks.

use rlx_cpu::CpuBackend;
use rlx_ir::lir::Program;
use rlx_ir::{DType, GraphBuilder, IrError, TensorType};
use rlx_runtime::{Backend, RuntimeError};

#[test]
fn a_program_over_the_arena_limit_is_an_error_not_an_abort() {
    let mut b = GraphBuilder::new("huge");
    let x = b.input("x", TensorType::new(DType::F32, [1_000_000, 1_000_000]));
    let y = b.unary("relu", x).unwrap();
    let g = b.finish(&[y]).unwrap();
    let err = match CpuBackend::default().compile(Program::from_graph(g)) {
        Ok(_) => panic!("a 4 TB arena compiled"),
        Err(e) => e,
    };
    let RuntimeError::Ir(IrError::Limit(l)) = &err else {
        panic!("expected a limit error, got {err:?}")
    };
    assert_eq!((l.limit, l.value), ("max_tensor_bytes", 4_000_000_000_000));
    assert!(l.what.contains("CPU arena slot"), "{}", l.what);
}
