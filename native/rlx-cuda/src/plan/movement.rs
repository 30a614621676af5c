//! Movement ops whose index maps come from the CPU reference kernel.

use super::*;

/// Movement ops whose semantics are taken from the reference kernel: run it
/// once on an iota of source indices, keep the result as an index table.
pub(super) fn table_copy(p: &mut Planner, i: usize, node: &Node) -> Result<(), CudaError> {
    let g = p.g;
    let mut b = GraphBuilder::new("iota");
    let mut ins = Vec::new();
    let mut iotas = Vec::new();
    let mut base = 1usize; // 0 marks "filled, not copied"
    for &v in &node.inputs {
        let ty = g.ty(v);
        let n = ty.shape.numel();
        ins.push(b.input("x", TensorType::new(DType::F64, ty.shape.clone())));
        iotas.push(
            HostTensor::from_f64(
                DType::F64,
                ty.shape.clone(),
                (base..base + n).map(|x| x as f64).collect(),
            )
            .map_err(|e| unsupported(i, node, e.to_string()))?,
        );
        base += n;
    }
    let mut attrs = node.attrs.clone();
    if node.op.name() == "pad" {
        attrs.set("value", 0.0);
    }
    let outs = b
        .op(node.op.name(), &ins, attrs)
        .map_err(|e| unsupported(i, node, e.to_string()))?;
    let graph = b
        .finish(&outs)
        .map_err(|e| unsupported(i, node, e.to_string()))?;
    let tables =
        rlx_ref::run_graph(&graph, &iotas).map_err(|e| unsupported(i, node, e.to_string()))?;
    let srcs: Vec<Loc> = node
        .inputs
        .iter()
        .map(|&v| p.contiguous(v))
        .collect::<Result<_, _>>()?;
    let fill = node.attrs.opt_float("value").unwrap_or(0.0);
    for (k, &o) in node.outputs.iter().enumerate() {
        let out = p.loc(o)?;
        let idx: Vec<i64> = tables[k]
            .to_f64_vec()
            .map_err(|e| unsupported(i, node, e.to_string()))?
            .iter()
            .map(|&x| x as i64 - 1)
            .collect();
        let n = idx.len();
        let table = p.const_loc(
            HostTensor::from_slice(&idx, [n]).map_err(|e| unsupported(i, node, e.to_string()))?,
        );
        let d = out.dtype;
        let sty = ctype::storage(d).unwrap_or("float");
        let mut params = vec!["const long long* __restrict__ t".to_string()];
        let mut pick = ctype::store(d, &ctype::lit(d, fill));
        let mut off = 0usize;
        let mut args = vec![table.ptr()];
        for (s, l) in srcs.iter().enumerate() {
            params.push(format!("const {sty}* __restrict__ in{s}"));
            let len: usize = l.dims.iter().product();
            pick = format!(
                "(j >= {off}LL && j < {}LL) ? in{s}[j - {off}LL] : {pick}",
                off + len
            );
            off += len;
            args.push(l.ptr());
        }
        args.push(out.ptr());
        let text = format!(
            "extern \"C\" __global__ void @NAME@({}, {sty}* __restrict__ out0) {{\n  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {n}LL; i += (long long)gridDim.x * blockDim.x) {{ long long j = t[i]; out0[i] = {pick}; }}\n}}\n",
            params.join(", ")
        );
        if n > 0 {
            p.kernel(text, grid_for(n), 256, 0, args, false);
        }
    }
    Ok(())
}
