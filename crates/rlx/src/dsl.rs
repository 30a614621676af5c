//! The lazy tensor DSL. Operations on [`Tensor`] append MIR nodes to their
//! [`Trace`]; shapes and dtypes are checked as each node is added. Methods
//! that can fail return `Result`; the arithmetic operators cannot, so a
//! failing `a + b` records the error (with the caller's source line) in the
//! trace, and [`Trace::finish`] returns it.

use crate::compile::compile;
use crate::error::Error;
use rlx_ir::{Attrs, DType, Element, Graph, GraphBuilder, HostTensor, Shape, TensorType, ValueId};
use rlx_runtime::Device;
use std::cell::RefCell;
use std::panic::Location;
use std::rc::Rc;

struct State {
    builder: GraphBuilder,
    /// The first error recorded by an infallible operator.
    error: Option<Error>,
}

/// A graph being traced. Cheap to clone (shared).
#[derive(Clone)]
pub struct Trace(Rc<RefCell<State>>);

/// A lazy tensor: a value in a [`Trace`].
#[derive(Clone)]
pub struct Tensor {
    trace: Trace,
    id: ValueId,
    ty: TensorType,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor(%{}: {})", self.id.0, self.ty)
    }
}

impl Trace {
    pub fn new(name: &str) -> Trace {
        Trace(Rc::new(RefCell::new(State {
            builder: GraphBuilder::new(name),
            error: None,
        })))
    }

    fn tensor_of(&self, id: ValueId) -> Tensor {
        let ty = self.0.borrow().builder.ty(id).clone();
        Tensor {
            trace: self.clone(),
            id,
            ty,
        }
    }

    /// A graph input, fed at run time.
    pub fn input(&self, name: &str, dtype: DType, shape: impl Into<Shape>) -> Tensor {
        let id = self
            .0
            .borrow_mut()
            .builder
            .input(name, TensorType::new(dtype, shape));
        self.tensor_of(id)
    }

    /// A constant baked into the graph.
    pub fn constant(&self, t: HostTensor) -> Result<Tensor, Error> {
        let id = self.0.borrow_mut().builder.constant(t)?;
        Ok(self.tensor_of(id))
    }

    /// A constant from a slice.
    pub fn tensor<T: Element>(&self, data: &[T], shape: impl Into<Shape>) -> Result<Tensor, Error> {
        self.constant(HostTensor::from_slice(data, shape)?)
    }

    /// Finish the trace with these outputs (verifies the graph).
    pub fn finish(&self, outputs: &[&Tensor]) -> Result<Graph, Error> {
        let st = self.0.borrow();
        if let Some(e) = &st.error {
            return Err(e.clone());
        }
        for o in outputs {
            if !Rc::ptr_eq(&o.trace.0, &self.0) {
                return Err(Error::Trace {
                    op: "finish".into(),
                    msg: "an output belongs to another trace".into(),
                    at: String::new(),
                });
            }
        }
        let ids: Vec<ValueId> = outputs.iter().map(|t| t.id).collect();
        Ok(st.builder.clone().finish(&ids)?)
    }

    /// The first error an operator recorded, if any.
    pub fn error(&self) -> Option<Error> {
        self.0.borrow().error.clone()
    }
}

impl Tensor {
    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }
    pub fn shape(&self) -> &Shape {
        &self.ty.shape
    }
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Apply any registered op to `self` and `others`.
    #[track_caller]
    pub fn apply(&self, op: &str, others: &[&Tensor], attrs: Attrs) -> Result<Vec<Tensor>, Error> {
        let at = Location::caller();
        let mut ids = vec![self.id];
        for o in others {
            if !Rc::ptr_eq(&o.trace.0, &self.trace.0) {
                return Err(Error::Trace {
                    op: op.into(),
                    msg: "operands belong to different traces".into(),
                    at: at.to_string(),
                });
            }
            ids.push(o.id);
        }
        let outs = self
            .trace
            .0
            .borrow_mut()
            .builder
            .op(op, &ids, attrs)
            .map_err(|e| Error::Trace {
                op: op.into(),
                msg: e.to_string(),
                at: at.to_string(),
            })?;
        Ok(outs
            .into_iter()
            .map(|id| self.trace.tensor_of(id))
            .collect())
    }

    /// Apply a single-output op.
    #[track_caller]
    pub fn apply1(&self, op: &str, others: &[&Tensor], attrs: Attrs) -> Result<Tensor, Error> {
        let mut v = self.apply(op, others, attrs)?;
        match v.len() {
            1 => Ok(v.remove(0)),
            n => Err(Error::Trace {
                op: op.into(),
                msg: format!("has {n} outputs"),
                at: Location::caller().to_string(),
            }),
        }
    }

    /// Infallible form: on error, record it in the trace and return `self`
    /// (the trace then refuses to finish).
    #[track_caller]
    fn record(&self, op: &str, others: &[&Tensor], attrs: Attrs) -> Tensor {
        if self.trace.0.borrow().error.is_some() {
            return self.clone();
        }
        match self.apply1(op, others, attrs) {
            Ok(t) => t,
            Err(e) => {
                self.trace.0.borrow_mut().error = Some(e);
                self.clone()
            }
        }
    }

    #[track_caller]
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor, Error> {
        self.apply1("matmul", &[rhs], Attrs::new())
    }
    #[track_caller]
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor, Error> {
        self.apply1("reshape", &[], Attrs::new().with("shape", shape.to_vec()))
    }
    #[track_caller]
    pub fn permute(&self, perm: &[i64]) -> Result<Tensor, Error> {
        self.apply1("permute", &[], Attrs::new().with("perm", perm.to_vec()))
    }
    /// Swap the last two axes.
    #[track_caller]
    pub fn t(&self) -> Result<Tensor, Error> {
        let r = self.shape().rank() as i64;
        let mut p: Vec<i64> = (0..r).collect();
        if r >= 2 {
            p.swap(r as usize - 2, r as usize - 1);
        }
        self.permute(&p)
    }
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Result<Tensor, Error> {
        self.apply1("cast", &[], Attrs::new().with("dtype", dtype))
    }
    #[track_caller]
    pub fn sum(&self, axes: &[i64], keepdim: bool) -> Result<Tensor, Error> {
        self.apply1(
            "reduce_sum",
            &[],
            Attrs::new()
                .with("axes", axes.to_vec())
                .with("keepdim", keepdim),
        )
    }
    #[track_caller]
    pub fn mean(&self, axes: &[i64], keepdim: bool) -> Result<Tensor, Error> {
        self.apply1(
            "reduce_mean",
            &[],
            Attrs::new()
                .with("axes", axes.to_vec())
                .with("keepdim", keepdim),
        )
    }
    #[track_caller]
    pub fn max(&self, axes: &[i64], keepdim: bool) -> Result<Tensor, Error> {
        self.apply1(
            "reduce_max",
            &[],
            Attrs::new()
                .with("axes", axes.to_vec())
                .with("keepdim", keepdim),
        )
    }
    #[track_caller]
    pub fn argmax(&self, axis: i64) -> Result<Tensor, Error> {
        self.apply1("argmax", &[], Attrs::new().with("axis", axis))
    }
    #[track_caller]
    pub fn softmax(&self, axis: i64) -> Result<Tensor, Error> {
        self.apply1("softmax", &[], Attrs::new().with("axis", axis))
    }
    #[track_caller]
    pub fn layer_norm(&self, gamma: &Tensor, beta: &Tensor, eps: f64) -> Result<Tensor, Error> {
        self.apply1("layer_norm", &[gamma, beta], Attrs::new().with("eps", eps))
    }

    /// Evaluate this tensor now on the CPU. Only for traces without inputs
    /// (constants only); graphs with inputs go through [`crate::compile`].
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        let g = self.trace.finish(&[self])?;
        if !g.inputs.is_empty() {
            return Err(Error::Trace {
                op: "to_vec".into(),
                msg: format!(
                    "the trace has {} inputs; compile it and run it with input tensors",
                    g.inputs.len()
                ),
                at: String::new(),
            });
        }
        let out = compile(&g, Device::Cpu)?.run(&[])?;
        Ok(out[0].to_vec::<T>()?)
    }
}

macro_rules! unary_methods {
    ($($name:ident => $op:literal),* $(,)?) => {
        impl Tensor {$(
            #[doc = concat!("Elementwise `", $op, "` (errors are recorded in the trace).")]
            #[track_caller]
            pub fn $name(&self) -> Tensor { self.record($op, &[], Attrs::new()) }
        )*}
    };
}
unary_methods!(relu => "relu", exp => "exp", log => "log", sqrt => "sqrt", rsqrt => "rsqrt", tanh => "tanh",
    sigmoid => "sigmoid", gelu => "gelu", silu => "silu", abs => "abs", sin => "sin", cos => "cos", erf => "erf",
    square => "square");

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        self.record("neg", &[], Attrs::new())
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:literal) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.record($op, &[rhs], Attrs::new())
            }
        }
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.record($op, &[rhs], Attrs::new())
            }
        }
        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.record($op, &[&rhs], Attrs::new())
            }
        }
        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.record($op, &[&rhs], Attrs::new())
            }
        }
    };
}
binary_operator!(Add, add, "add");
binary_operator!(Sub, sub, "sub");
binary_operator!(Mul, mul, "mul");
binary_operator!(Div, div, "div");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_errors_name_the_op_and_the_caller() {
        let t = Trace::new("bad");
        let a = t.input("a", DType::F32, [2, 3]);
        let b = t.input("b", DType::F32, [4]);
        let c = &a + &b;
        let _ = c.relu();
        let e = t.finish(&[&c]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("`add`") && msg.contains("do not broadcast") && msg.contains("dsl.rs"),
            "{msg}"
        );
        let e = a.matmul(&a).unwrap_err().to_string();
        assert!(e.contains("inner dims 3 vs 2"), "{e}");
    }

    #[test]
    fn constants_evaluate_lazily() {
        let t = Trace::new("c");
        let x = t.tensor(&[1.0f32, 4.0, 9.0], [3]).unwrap();
        assert_eq!(x.sqrt().to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    }
}
