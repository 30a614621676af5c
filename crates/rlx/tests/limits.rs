//! Compiling a graph too large for the limits in force is a typed error
//! naming the limit — checked before the backend allocates its arena, so
//! the process never aborts in the allocator.

use rlx::ir::{DType, GraphBuilder, IrError, TensorType};
use rlx::{compile, Device, Error};

#[test]
fn a_huge_graph_is_a_limit_error_on_the_cpu_not_an_abort() {
    let mut b = GraphBuilder::new("huge");
    let x = b.input("x", TensorType::new(DType::F32, [1_000_000, 1_000_000]));
    let y = b.unary("relu", x).unwrap();
    let y = b.unary("exp", y).unwrap();
    let g = b.finish(&[y]).unwrap();
    let err = match compile(&g, Device::Cpu) {
        Ok(_) => panic!("a 4 TB graph compiled"),
        Err(e) => e,
    };
    let Error::Ir(IrError::Limit(l)) = &err else {
        panic!("expected a limit error, got {err:?}")
    };
    assert_eq!((l.limit, l.value), ("max_tensor_bytes", 4_000_000_000_000));
    let msg = err.to_string();
    assert!(
        msg.contains("max_tensor_bytes") && msg.contains("RLX_MAX_TENSOR_BYTES"),
        "{msg}"
    );
}
