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

/// Whether every op of a `fused_elementwise` body has a CUDA expression
/// for its dtypes (what [`region_body`] will need); else which does not.
pub(crate) fn region_form(body: &Graph) -> Result<(), String> {
    let names: Vec<String> = (0..body.inputs.len()).map(|k| format!("x{k}")).collect();
    region_body(body, &names).map(|_| ())
}

/// Statements for a `fused_elementwise` body evaluated at one output
/// element (region input k is the compute-type value named `names[k]`).
pub(super) fn region_body(body: &Graph, names: &[String]) -> Result<(String, Vec<String>), String> {
    let mut name: HashMap<ValueId, String> = HashMap::new();
    for (&v, n) in body.inputs.iter().zip(names) {
        name.insert(v, n.clone());
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
/// An input recomputed where it is read (`inline.rs`) contributes its
/// producer's operands instead of its own, and a statement computing it.
pub(super) struct ElementwiseParts {
    pub ins: Vec<Operand>,
    pub args: Vec<Ptr>,
    pub idx: Vec<Ptr>,
    pub stmts: String,
    pub results: Vec<String>,
    /// Per operand: the node input it loads (`None`: an operand of a
    /// recomputed input's producer).
    pub of: Vec<Option<usize>>,
}

/// The [`ElementwiseParts`] of `node` over `dims`.
pub(super) fn elementwise_parts(
    p: &Planner,
    i: usize,
    node: &Node,
    dims: &[usize],
) -> Result<ElementwiseParts, CudaError> {
    parts_from(p, i, node, dims, 0)
}

/// [`elementwise_parts`] with the operands named from `x{first}` on.
fn parts_from(
    p: &Planner,
    i: usize,
    node: &Node,
    dims: &[usize],
    first: usize,
) -> Result<ElementwiseParts, CudaError> {
    let mut ins = Vec::new();
    let mut args = Vec::new();
    let mut idx = Vec::new();
    let mut of = Vec::new();
    // The compute-type value each node input is known by.
    let mut names = Vec::new();
    let mut pre = String::new();
    for (k, &v) in node.inputs.iter().enumerate() {
        if let Some(g) = p.gathers.get(&v) {
            names.push(format!("x{}", first + ins.len()));
            ins.push(Operand {
                dtype: g.table.dtype,
                strides: broadcast_strides(&g.out, dims),
                gather: Some(g.load.clone()),
            });
            args.push(g.table.ptr());
            idx.push(g.idx.ptr());
            of.push(Some(k));
            continue;
        }
        if let Some(src) = p.inline.get(&v) {
            // The producer's operands, read at the element of the
            // producer's output that this element reads.
            let map = src.axis_map(dims).ok_or_else(|| {
                unsupported(
                    i,
                    node,
                    "a recomputed operand it cannot index (planner bug)",
                )
            })?;
            let pn = &p.g.nodes[src.node];
            let sub = parts_from(p, src.node, pn, &src.dims, first + ins.len())?;
            let name = format!("il{}_", first + k);
            pre += &format!(
                "    {} {name};\n    {{\n{}      {name} = {};\n    }}\n",
                ctype::compute(src.dtype),
                sub.stmts,
                ctype::load(src.dtype, &ctype::store(src.dtype, &sub.results[0]))
            );
            for o in sub.ins {
                ins.push(Operand::plain(o.dtype, src.compose(&map, &o.strides)));
                of.push(None);
            }
            args.extend(sub.args);
            names.push(name);
            continue;
        }
        let l = p.loc(v)?;
        names.push(format!("x{}", first + ins.len()));
        ins.push(Operand::plain(l.dtype, broadcast_strides(&l, dims)));
        args.push(l.ptr());
        of.push(Some(k));
    }
    let op = node.op.name();
    if op == "fused_elementwise" {
        let body = node
            .attrs
            .graph("body")
            .map_err(|e| unsupported(i, node, e.to_string()))?;
        let (stmts, results) = region_body(body, &names).map_err(|m| unsupported(i, node, m))?;
        return Ok(ElementwiseParts {
            ins,
            args,
            idx,
            stmts: pre + &stmts,
            results,
            of,
        });
    }
    let out = p.ty(node.outputs[0]).dtype;
    let dtypes: Vec<DType> = node.inputs.iter().map(|&v| p.ty(v).dtype).collect();
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
        stmts: pre,
        results: vec![e],
        of,
    })
}

/// Elements per thread of an elementwise kernel over `dims` (see
/// `kernels::elementwise_vec`): 16 bytes' worth when every operand is
/// contiguous along the last axis (or broadcast along it) and every
/// output contiguous along it, all of one 2- or 4-byte float type, each
/// 16-byte aligned at every group start (the last dim a multiple of the
/// width, the other strides too, the address 16-byte aligned); else 1.
pub(super) fn vector_width(
    dims: &[usize],
    ins: &[Operand],
    in_ptrs: &[Ptr],
    outs: &[(DType, Vec<i64>)],
    out_ptrs: &[Ptr],
) -> usize {
    let Some(&n_last) = dims.last() else {
        return 1;
    };
    let last = dims.len() - 1;
    if ins.iter().any(|o| o.gather.is_some()) {
        return 1;
    }
    // (dtype, strides, address) of everything moved 16 bytes at a time.
    let mut wide: Vec<(DType, &[i64], &Ptr)> = Vec::new();
    for (o, ptr) in ins.iter().zip(in_ptrs) {
        match o.strides[last] {
            1 => wide.push((o.dtype, &o.strides, ptr)),
            0 => {}
            _ => return 1,
        }
    }
    for ((d, strides), ptr) in outs.iter().zip(out_ptrs) {
        if strides[last] != 1 {
            return 1;
        }
        wide.push((*d, strides, ptr));
    }
    let Some(&(d0, _, _)) = wide.first() else {
        return 1;
    };
    if !matches!(d0, DType::F16 | DType::BF16 | DType::F32) {
        return 1;
    }
    let vec = 16 / esize(d0);
    let aligned = |strides: &[i64], ptr: &Ptr| {
        let root = match ptr.root {
            // Arena, inputs, constants and scratch buffers all start
            // 256-byte aligned (cudaMalloc; grouped inputs 256 apart).
            Root::Arena(off) => off as i64,
            _ => 0,
        };
        (root + ptr.byte) % 16 == 0
            && strides[..last]
                .iter()
                .zip(dims)
                .all(|(&s, &d)| d == 1 || s % vec as i64 == 0)
    };
    let ok = n_last % vec == 0
        && wide.iter().all(|&(d, strides, ptr)| {
            esize(d) == esize(d0) && d.is_float() && aligned(strides, ptr)
        });
    if ok {
        vec
    } else {
        1
    }
}
