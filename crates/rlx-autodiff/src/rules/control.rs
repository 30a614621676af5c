//! Control flow with static structure, differentiated through a rewrite
//! into straight-line MIR: `scan` (its length is a static extent) unrolls
//! into one copy of the body per step; `if` evaluates both branches and
//! selects with `where`, so the unselected branch gets a zero cotangent
//! (a branch that overflows to inf/NaN where it is not selected can still
//! poison the gradient, as with any select). `while` has a data-dependent
//! trip count: the registry marks it not differentiable (a typed error),
//! and `scan` is the differentiable loop.

use super::Rule;
use crate::emit::*;
use crate::error::Result;
use rlx_ir::{Attrs, ValueId};

fn if_(b: &mut B, x: &[ValueId], a: &Attrs) -> Result<Vec<ValueId>> {
    let t = a.graph("then_branch")?.clone();
    let e = a.graph("else_branch")?.clone();
    let tm = inline(b, &t, &x[1..])?;
    let em = inline(b, &e, &x[1..])?;
    let c = reshape(b, x[0], &[])?;
    let mut outs = vec![];
    for (to, eo) in t.outputs.iter().zip(&e.outputs) {
        outs.push(b.op1("where", &[c, tm[to.index()], em[eo.index()]], Attrs::new())?);
    }
    Ok(outs)
}

fn scan(b: &mut B, x: &[ValueId], a: &Attrs) -> Result<Vec<ValueId>> {
    let body = a.graph("body")?.clone();
    let nc = a.int("num_carry")? as usize;
    let len = b.shape(x[nc]).dims()[0];
    let mut carry: Vec<ValueId> = x[..nc].to_vec();
    let mut ys: Vec<Vec<ValueId>> = vec![vec![]; body.outputs.len() - nc];
    for t in 0..len {
        let mut args = carry.clone();
        for &xs in &x[nc..] {
            let s = b.op1(
                "narrow",
                &[xs],
                Attrs::new()
                    .with("axis", 0i64)
                    .with("start", t as i64)
                    .with("len", 1i64),
            )?;
            let d = b.shape(xs).dims()[1..].to_vec();
            args.push(reshape(b, s, &d)?);
        }
        let m = inline(b, &body, &args)?;
        let outs: Vec<ValueId> = body.outputs.iter().map(|o| m[o.index()]).collect();
        carry = outs[..nc].to_vec();
        for (k, &y) in outs[nc..].iter().enumerate() {
            let mut d = vec![1];
            d.extend(b.shape(y).dims());
            ys[k].push(reshape(b, y, &d)?);
        }
    }
    let mut res = carry;
    for parts in ys {
        res.push(if parts.len() == 1 {
            parts[0]
        } else {
            b.op1("concat", &parts, Attrs::new().with("axis", 0i64))?
        });
    }
    Ok(res)
}

pub static RULES: &[(&str, Rule)] = &[("if", Rule::Expand(if_)), ("scan", Rule::Expand(scan))];
