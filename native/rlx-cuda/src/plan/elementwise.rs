//! Elementwise ops and `fused_elementwise` regions as CUDA C expressions.

use super::*;

/// The expression of an elementwise op over loaded operands `x0..`.
pub(super) fn elementwise_expr(
    op: &str,
    ins: &[DType],
    out: DType,
    x: &[String],
    attrs: &Attrs,
) -> Option<String> {
    match op {
        "where" => Some(format!("({} ? {} : {})", x[0], x[1], x[2])),
        "clamp" => Some(expr::clamp(ins[0], &x[0], attrs)),
        "cast" => Some(expr::cast(ins[0], out, &x[0])),
        _ if x.len() == 1 => expr::unary(op, ins[0], &x[0]),
        _ if x.len() == 2 => expr::binary(op, ins[0], &x[0], &x[1]),
        _ => None,
    }
}

/// Statements for a `fused_elementwise` body evaluated at one output
/// element (the region inputs are loaded as `x0..`).
pub(super) fn region_body(body: &Graph, _dims: &[usize]) -> Result<(String, Vec<String>), String> {
    let mut name: HashMap<ValueId, String> = HashMap::new();
    for (k, &v) in body.inputs.iter().enumerate() {
        name.insert(v, format!("x{k}"));
    }
    let mut s = String::new();
    for node in &body.nodes {
        let op = node.op.name();
        let o = node.outputs[0];
        let od = body.ty(o).dtype;
        let e = if op == "constant" {
            let t = node.attrs.tensor("value").map_err(|e| e.to_string())?;
            if t.numel() != 1 {
                return Err("a non-scalar constant inside a fused region".into());
            }
            if od.is_float() {
                ctype::lit(od, t.to_f64_vec().map_err(|e| e.to_string())?[0])
            } else {
                format!(
                    "(({})({}LL))",
                    ctype::compute(od),
                    t.to_i64_vec().map_err(|e| e.to_string())?[0]
                )
            }
        } else {
            let args: Vec<String> = node.inputs.iter().map(|v| name[v].clone()).collect();
            let dts: Vec<DType> = node.inputs.iter().map(|&v| body.ty(v).dtype).collect();
            if !(matches!(op, "where" | "clamp" | "cast") || expr::knows(op, dts[0])) {
                return Err(format!("`{op}` on {} inside a fused region", dts[0]));
            }
            elementwise_expr(op, &dts, od, &args, &node.attrs)
                .ok_or_else(|| format!("no expression for `{op}`"))?
        };
        let n = format!("v{}", o.0);
        s += &format!("    {} {n} = {e};\n", ctype::compute(od));
        name.insert(o, n);
    }
    let results = body.outputs.iter().map(|v| name[v].clone()).collect();
    Ok((s, results))
}

/// Whether `node` lowers to one elementwise kernel (an op with a CUDA
/// expression, a cast, or a `fused_elementwise` region).
pub(super) fn is_elementwise(node: &Node, in_dtype: DType) -> bool {
    let op = node.op.name();
    op == "fused_elementwise"
        || op == "cast"
        || (expr::knows(op, in_dtype) && node.outputs.len() == 1)
}

/// An elementwise node over some dims: its operands (strides broadcast to
/// those dims) and their addresses, the index arrays of its gathered
/// operands (see `gather.rs`; passed after the outputs), then statements
/// over the operands loaded as `x0..` and one result expression per output.
pub(super) struct ElementwiseParts {
    pub ins: Vec<Operand>,
    pub args: Vec<Ptr>,
    pub idx: Vec<Ptr>,
    pub stmts: String,
    pub results: Vec<String>,
}

/// The [`ElementwiseParts`] of `node` over `dims`.
pub(super) fn elementwise_parts(
    p: &Planner,
    i: usize,
    node: &Node,
    dims: &[usize],
) -> Result<ElementwiseParts, CudaError> {
    let mut ins = Vec::new();
    let mut args = Vec::new();
    let mut idx = Vec::new();
    for &v in &node.inputs {
        if let Some(g) = p.gathers.get(&v) {
            ins.push(Operand {
                dtype: g.table.dtype,
                strides: broadcast_strides(&g.out, dims),
                gather: Some(g.load.clone()),
            });
            args.push(g.table.ptr());
            idx.push(g.idx.ptr());
            continue;
        }
        let l = p.loc(v)?;
        ins.push(Operand::plain(l.dtype, broadcast_strides(&l, dims)));
        args.push(l.ptr());
    }
    let op = node.op.name();
    if op == "fused_elementwise" {
        let body = node
            .attrs
            .graph("body")
            .map_err(|e| unsupported(i, node, e.to_string()))?;
        let (stmts, results) = region_body(body, dims).map_err(|m| unsupported(i, node, m))?;
        return Ok(ElementwiseParts {
            ins,
            args,
            idx,
            stmts,
            results,
        });
    }
    let out = p.ty(node.outputs[0]).dtype;
    let names: Vec<String> = (0..ins.len()).map(|k| format!("x{k}")).collect();
    let dtypes: Vec<DType> = ins.iter().map(|o| o.dtype).collect();
    let e = elementwise_expr(op, &dtypes, out, &names, &node.attrs).ok_or_else(|| {
        unsupported(
            i,
            node,
            format!("no CUDA expression for {}", dtypes.first().unwrap_or(&out)),
        )
    })?;
    Ok(ElementwiseParts {
        ins,
        args,
        idx,
        stmts: String::new(),
        results: vec![e],
    })
}
