//! if / while / scan, running their sub-graphs through the interpreter.

use super::*;

fn if_(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let c = ints(cx.input(0))?.first().copied().unwrap_or(0) != 0;
    let g = cx
        .attrs
        .graph(if c { "then_branch" } else { "else_branch" })?;
    let args: Vec<HostTensor> = cx.inputs[1..].iter().map(|t| (*t).clone()).collect();
    cx.runner.run(g, &args)
}

fn while_(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (cond, body) = (cx.attrs.graph("cond")?, cx.attrs.graph("body")?);
    let limit = cx.int("max_iterations")?;
    let mut state: Vec<HostTensor> = cx.inputs.iter().map(|t| (*t).clone()).collect();
    let mut iters = 0i64;
    loop {
        let go = cx.runner.run(cond, &state)?;
        if ints(&go[0])?.first().copied().unwrap_or(0) == 0 {
            return Ok(state);
        }
        if iters == limit {
            return Err(cx.fail(format!("loop still running after max_iterations = {limit}; raise the limit or fix the condition")));
        }
        state = cx.runner.run(body, &state)?;
        iters += 1;
    }
}

fn scan(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let body = cx.attrs.graph("body")?;
    let nc = cx.int("num_carry")? as usize;
    let mut carry: Vec<HostTensor> = cx.inputs[..nc].iter().map(|t| (*t).clone()).collect();
    let xs = &cx.inputs[nc..];
    let steps = xs[0].shape().dims()[0];
    let ny = cx.outputs.len() - nc;
    let mut ys: Vec<Vec<rlx_ir::TensorData>> = vec![Vec::new(); ny];
    for s in 0..steps {
        let mut args = carry.clone();
        for x in xs {
            let block = x.numel() / steps.max(1);
            let idx: Vec<usize> = (s * block..(s + 1) * block).collect();
            args.push(x.take(&idx, x.shape().dims()[1..].to_vec())?);
        }
        let mut out = cx.runner.run(body, &args)?;
        let rest = out.split_off(nc);
        carry = out;
        for (k, y) in rest.into_iter().enumerate() {
            ys[k].push(y.into_data());
        }
    }
    let mut result = carry;
    for (k, parts) in ys.into_iter().enumerate() {
        let ty = cx.out_type(nc + k);
        let data = if parts.is_empty() {
            HostTensor::zeros(ty.dtype, ty.shape.clone())?.into_data()
        } else {
            let refs: Vec<&rlx_ir::TensorData> = parts.iter().collect();
            super::elementwise::concat_data(&refs).map_err(|e| cx.fail(e))?
        };
        result.push(HostTensor::new(ty.dtype, ty.shape.clone(), data)?);
    }
    Ok(result)
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[("if", if_), ("while", while_), ("scan", scan)];
