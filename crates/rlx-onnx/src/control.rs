//! ONNX control flow: `If`, `Loop`, `Scan`. Shapes are static in rlx, so:
//!
//! * `If` whose condition is known at import is its taken branch, inlined;
//!   with a run-time condition it is the IR's `if`, each branch imported
//!   as a sub-graph whose inputs are the outer values it reads;
//! * `Scan` is unrolled over its (static) sequence;
//! * `Loop` is unrolled when its trip count is known at import and its
//!   condition stays known (a loop that stops on a run-time value has no
//!   static shape).
//!
//! Inlining maps the body's nodes into the enclosing import under
//! per-instance names (`prefix` + name), so one body serves many steps.

use crate::import::{Bound, Cx};
use crate::ops::Out;
use crate::proto::{GraphProto, NodeProto};
use crate::tensor::to_host;
use rlx_ir::{Attrs, DType, HostTensor};
use std::collections::{BTreeSet, HashSet};

type R = Result<Vec<Out>, String>;

/// The longest loop or scan unrolled.
const MAX_STEPS: usize = 4096;

/// Names a graph defines: inputs, initializers, node outputs.
fn defined(g: &GraphProto) -> HashSet<String> {
    let mut d: HashSet<String> = g.input.iter().map(|v| v.name().to_string()).collect();
    d.extend(g.initializer.iter().map(|t| t.name().to_string()));
    d.extend(g.node.iter().flat_map(|n| n.output.iter().cloned()));
    d
}

/// Names a graph reads from outside (its nested graphs' included), in
/// first-use order.
pub(crate) fn free_names(g: &GraphProto, depth: usize) -> Vec<String> {
    let def = defined(g);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut add = |n: &str, out: &mut Vec<String>| {
        if !n.is_empty() && !def.contains(n) && seen.insert(n.to_string()) {
            out.push(n.to_string());
        }
    };
    for n in &g.node {
        for i in &n.input {
            add(i, &mut out);
        }
        if depth < rlx_ir::limits::limits().max_nesting_depth {
            for a in &n.attribute {
                for sub in a.g.iter().chain(&a.graphs) {
                    for f in free_names(sub, depth + 1) {
                        add(&f, &mut out);
                    }
                }
            }
        }
    }
    for o in &g.output {
        add(o.name(), &mut out);
    }
    out
}

/// `name` under `prefix` when the body defines it.
fn renamed(name: &str, local: &HashSet<String>, prefix: &str) -> String {
    if !name.is_empty() && local.contains(name) {
        format!("{prefix}{name}")
    } else {
        name.to_string()
    }
}

/// A graph with every reference to `local` names prefixed (nested graphs'
/// references to them too).
fn rename_graph(g: &GraphProto, local: &HashSet<String>, prefix: &str) -> GraphProto {
    let mut g = g.clone();
    for n in &mut g.node {
        *n = rename_node(n, local, prefix);
    }
    for o in &mut g.output {
        o.name = Some(renamed(o.name(), local, prefix));
    }
    g
}

fn rename_node(n: &NodeProto, local: &HashSet<String>, prefix: &str) -> NodeProto {
    let mut n = n.clone();
    for s in n.input.iter_mut().chain(n.output.iter_mut()) {
        *s = renamed(s, local, prefix);
    }
    for a in &mut n.attribute {
        if let Some(g) = a.g.as_mut() {
            *g = rename_graph(g, local, prefix);
        }
        for g in &mut a.graphs {
            *g = rename_graph(g, local, prefix);
        }
    }
    n
}

impl Cx {
    /// Map `body`'s nodes into this import under `prefix`, its inputs
    /// bound to `binds` (in order); returns its outputs.
    pub(crate) fn inline(
        &mut self,
        body: &GraphProto,
        prefix: &str,
        binds: Vec<Bound>,
    ) -> Result<Vec<Bound>, String> {
        if binds.len() != body.input.len() {
            return Err(format!(
                "the body takes {} inputs, {} are given",
                body.input.len(),
                binds.len()
            ));
        }
        let local = defined(body);
        for t in &body.initializer {
            let h = to_host(t).map_err(|e| e.to_string())?;
            self.bind(&format!("{prefix}{}", t.name()), Bound::Const(h));
        }
        for (vi, b) in body.input.iter().zip(binds) {
            self.bind(&format!("{prefix}{}", vi.name()), b);
        }
        let before = self.missing_count();
        for (i, n) in body.node.iter().enumerate() {
            self.node(i, &rename_node(n, &local, prefix));
        }
        if self.missing_count() > before {
            return Err("its body has nodes that cannot be imported (listed too)".into());
        }
        body.output
            .iter()
            .map(|o| self.bound(&renamed(o.name(), &local, prefix)))
            .collect()
    }

    /// A branch as a sub-graph reading the outer values `captures` (its
    /// inputs, in that order); outer constants it reads are copied in.
    fn branch(&mut self, g: &GraphProto, captures: &[String]) -> Result<rlx_ir::Graph, String> {
        let mut sub = self.child(if g.name().is_empty() {
            "branch"
        } else {
            g.name()
        });
        for f in free_names(g, 0) {
            if let Some(t) = self.consts.get(&f) {
                sub.consts.insert(f.clone(), t.clone());
            }
        }
        for c in captures {
            let v = self.value(c)?;
            let ty = self.b.ty(v).clone();
            let iv = sub.b.input(c.clone(), ty);
            sub.bind(c, Bound::Value(iv));
        }
        let outs = sub.inline(g, "", Vec::new());
        // Nodes the branch cannot map are reported with the rest.
        self.take_missing(&mut sub);
        let outs = outs?;
        let vals = outs
            .into_iter()
            .map(|b| sub.value_of(b))
            .collect::<Result<Vec<_>, _>>()?;
        sub.b.finish(&vals).map_err(|e| e.to_string())
    }
}

/// ONNX `If`.
pub(crate) fn if_op(cx: &mut Cx, node: &NodeProto, id: usize) -> R {
    let branch = |name: &str| -> Result<&GraphProto, String> {
        node.attribute
            .iter()
            .find(|a| a.name() == name)
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| format!("If without {name}"))
    };
    let (then_g, else_g) = (branch("then_branch")?, branch("else_branch")?);
    let cond = node.input.first().ok_or("If without a condition")?;
    if let Some(c) = cx.consts.get(cond) {
        // Known at import: the taken branch, inlined.
        let take = c
            .to_f64_vec()
            .map_err(|e| e.to_string())?
            .first()
            .is_some_and(|&v| v != 0.0);
        let g = if take { then_g } else { else_g };
        let outs = cx.inline(g, &format!("if{id}/"), Vec::new())?;
        return Ok(outs.into_iter().map(Bound::into_out).collect());
    }
    // Run time: the IR's `if` over the outer values either branch reads.
    let mut captures = Vec::new();
    for f in free_names(then_g, 0)
        .into_iter()
        .chain(free_names(else_g, 0))
    {
        if !cx.consts.contains_key(&f) && !captures.contains(&f) {
            captures.push(f);
        }
    }
    // Sequences and optionals are lists known at import: a branch that
    // makes one needs its condition known too.
    let lists = |e: String| {
        if e.contains("a sequence") || e.contains("an empty optional") {
            format!(
                "input 0 (`{cond}`) must be known at import: a branch makes a sequence or \
                 an optional, which rlx keeps as lists known at import"
            )
        } else {
            e
        }
    };
    let t = cx.branch(then_g, &captures).map_err(lists)?;
    let e = cx.branch(else_g, &captures).map_err(lists)?;
    let mut ins = vec![cx.value(cond)?];
    for c in &captures {
        ins.push(cx.value(c)?);
    }
    let c0 = ins[0];
    if cx.b.dtype(c0) != DType::Bool {
        ins[0] =
            cx.b.op1("cast", &[c0], Attrs::new().with("dtype", DType::Bool))
                .map_err(|e| e.to_string())?;
    }
    let outs =
        cx.b.op(
            "if",
            &ins,
            Attrs::new().with("then_branch", t).with("else_branch", e),
        )
        .map_err(|e| e.to_string())?;
    Ok(outs.into_iter().map(Out::Value).collect())
}

/// `v` as a graph value stacked along `axis` from per-step values.
fn stack(cx: &mut Cx, steps: Vec<Bound>, axis: i64) -> Result<Out, String> {
    let mut vals = Vec::new();
    for s in steps {
        let v = cx.value_of(s)?;
        vals.push(
            cx.b.op1("unsqueeze", &[v], Attrs::new().with("axes", vec![axis]))
                .map_err(|e| e.to_string())?,
        );
    }
    let v = if vals.len() == 1 {
        vals[0]
    } else {
        cx.b.op1("concat", &vals, Attrs::new().with("axis", axis))
            .map_err(|e| e.to_string())?
    };
    Ok(Out::Value(v))
}

/// ONNX `Scan`, unrolled: opset 9+ as it is, opset 8 (a batch axis in
/// front, `sequence_lens`) as one opset-9 scan per batch item, stacked.
pub(crate) fn scan_op(cx: &mut Cx, node: &NodeProto, id: usize) -> R {
    if cx.opset < 9 {
        return scan8(cx, node, id);
    }
    scan9(cx, node, id)
}

/// Opset 8: inputs (sequence_lens, states…, scan inputs…), each with the
/// batch axis first and the scan inputs' time axis second; `directions`
/// per scan input. Every sequence must run its whole length.
fn scan8(cx: &mut Cx, node: &NodeProto, id: usize) -> R {
    let attr = |name: &str| node.attribute.iter().find(|a| a.name() == name);
    let m = attr("num_scan_inputs").map_or(0, |a| a.i()) as usize;
    let ins = &node.input[node.input.len().min(1)..];
    if m == 0 || m > ins.len() {
        return Err(format!("num_scan_inputs = {m} for {} inputs", ins.len()));
    }
    let n_state = ins.len() - m;
    let vals = ins
        .iter()
        .map(|n| cx.value(n))
        .collect::<Result<Vec<_>, _>>()?;
    let batch = *cx
        .b
        .shape(vals[0])
        .dims()
        .first()
        .ok_or("a scan input without a batch axis")?;
    if let Some(lens) = node.input.first().filter(|s| !s.is_empty()) {
        let full =
            cx.b.shape(vals[n_state])
                .dims()
                .get(1)
                .copied()
                .unwrap_or(0) as i64;
        let l = cx.consts.get(lens).ok_or_else(|| {
            format!("input 0 (`{lens}`) must be known at import (sequence lengths)")
        })?;
        if l.to_i64_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .any(|&v| v != full)
        {
            return Err("sequence_lens shorter than the scan (padding) is not supported".into());
        }
    }
    let mut sub = node.clone();
    sub.input.clear();
    sub.attribute.retain(|a| a.name() != "directions");
    if let Some(d) = attr("directions") {
        let mut a = d.clone();
        a.name = Some("scan_input_directions".into());
        sub.attribute.push(a);
    }
    let mut per_batch: Vec<Vec<Bound>> = Vec::new();
    for b in 0..batch {
        sub.input.clear();
        for (j, &v) in vals.iter().enumerate() {
            let at =
                cx.b.op1(
                    "narrow",
                    &[v],
                    Attrs::new()
                        .with("axis", 0i64)
                        .with("start", b as i64)
                        .with("len", 1i64),
                )
                .map_err(|e| e.to_string())?;
            let one =
                cx.b.op1("squeeze", &[at], Attrs::new().with("axes", vec![0i64]))
                    .map_err(|e| e.to_string())?;
            let name = format!("scan8_{id}/{b}/in{j}");
            cx.bind(&name, Bound::Value(one));
            sub.input.push(name);
        }
        let inner = cx.next_instance();
        let outs = scan9(cx, &sub, inner)?;
        for (k, o) in outs.into_iter().enumerate() {
            if per_batch.len() <= k {
                per_batch.push(Vec::new());
            }
            per_batch[k].push(o.into_bound());
        }
    }
    per_batch.into_iter().map(|ys| stack(cx, ys, 0)).collect()
}

/// Opset 9+ `Scan`.
fn scan9(cx: &mut Cx, node: &NodeProto, id: usize) -> R {
    let attr = |name: &str| node.attribute.iter().find(|a| a.name() == name);
    let body = attr("body")
        .and_then(|a| a.g.as_ref())
        .ok_or("Scan without a body")?;
    let m = attr("num_scan_inputs").map_or(0, |a| a.i()) as usize;
    let n_in = node.input.len();
    if m == 0 || m > n_in {
        return Err(format!("num_scan_inputs = {m} for {n_in} inputs"));
    }
    let n_state = n_in - m;
    let ints = |name: &str, len: usize| -> Vec<i64> {
        attr(name).map_or(vec![0; len], |a| a.ints.clone())
    };
    let (in_axes, in_dirs) = (ints("scan_input_axes", m), ints("scan_input_directions", m));
    let k = body.output.len().saturating_sub(n_state);
    let (out_axes, out_dirs) = (
        ints("scan_output_axes", k),
        ints("scan_output_directions", k),
    );
    let mut states: Vec<Bound> = Vec::new();
    for name in &node.input[..n_state] {
        states.push(cx.bound(name)?);
    }
    let mut seqs = Vec::new();
    let mut len = None;
    for (j, name) in node.input[n_state..].iter().enumerate() {
        let v = cx.value(name)?;
        let dims = cx.b.shape(v).dims().to_vec();
        let a = in_axes.get(j).copied().unwrap_or(0);
        let a = if a < 0 { a + dims.len() as i64 } else { a } as usize;
        let l = *dims.get(a).ok_or("a scan axis out of range")?;
        if len.is_some_and(|x| x != l) {
            return Err("scan inputs of different lengths".into());
        }
        len = Some(l);
        seqs.push((v, a, in_dirs.get(j).copied().unwrap_or(0) == 1));
    }
    let len = len.unwrap_or(0);
    if len > MAX_STEPS {
        return Err(format!(
            "a scan of {len} steps is longer than rlx unrolls ({MAX_STEPS})"
        ));
    }
    let mut per_step: Vec<Vec<Bound>> = vec![Vec::new(); k];
    for t in 0..len {
        let mut binds = states.clone();
        for &(v, a, rev) in &seqs {
            let at = if rev { len - 1 - t } else { t };
            let s =
                cx.b.op1(
                    "narrow",
                    &[v],
                    Attrs::new()
                        .with("axis", a as i64)
                        .with("start", at as i64)
                        .with("len", 1i64),
                )
                .map_err(|e| e.to_string())?;
            let s =
                cx.b.op1("squeeze", &[s], Attrs::new().with("axes", vec![a as i64]))
                    .map_err(|e| e.to_string())?;
            binds.push(Bound::Value(s));
        }
        let outs = cx.inline(body, &format!("scan{id}/{t}/"), binds)?;
        if outs.len() < n_state {
            return Err(format!(
                "the body returns {} values for {n_state} states",
                outs.len()
            ));
        }
        let (st, ys) = outs.split_at(n_state);
        states = st.to_vec();
        for (j, y) in ys.iter().enumerate() {
            per_step[j].push(y.clone());
        }
    }
    let mut out: Vec<Out> = states.into_iter().map(Bound::into_out).collect();
    for (j, mut ys) in per_step.into_iter().enumerate() {
        if out_dirs.get(j).copied().unwrap_or(0) == 1 {
            ys.reverse();
        }
        if ys.is_empty() {
            return Err("a scan of no steps has no stacked outputs".into());
        }
        out.push(stack(cx, ys, out_axes.get(j).copied().unwrap_or(0))?);
    }
    Ok(out)
}

/// ONNX `Loop`, unrolled while its trip count and condition are known.
pub(crate) fn loop_op(cx: &mut Cx, node: &NodeProto, id: usize) -> R {
    let body = node
        .attribute
        .iter()
        .find(|a| a.name() == "body")
        .and_then(|a| a.g.as_ref())
        .ok_or("Loop without a body")?;
    let known = |cx: &Cx, k: usize| -> Result<Option<f64>, String> {
        match node.input.get(k).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(n) => match cx.consts.get(n) {
                Some(t) => Ok(t.to_f64_vec().map_err(|e| e.to_string())?.first().copied()),
                None => Err(format!(
                    "input {k} (`{n}`) must be known at import (a loop of run-time length has no static shape)"
                )),
            },
        }
    };
    let trip = known(cx, 0)?;
    let mut cond = known(cx, 1)?.is_none_or(|c| c != 0.0);
    let max = match trip {
        Some(m) if m >= 0.0 => (m as usize).min(MAX_STEPS + 1),
        Some(_) => 0,
        None => MAX_STEPS + 1,
    };
    let mut states: Vec<Bound> = Vec::new();
    for name in node.input.iter().skip(2) {
        states.push(cx.bound(name)?);
    }
    let n_state = states.len();
    let mut per_step: Vec<Vec<Bound>> = Vec::new();
    let mut t = 0usize;
    while cond && t < max {
        if t == MAX_STEPS {
            return Err(format!(
                "the loop runs more than {MAX_STEPS} steps (rlx unrolls loops)"
            ));
        }
        let iter = HostTensor::from_slice(&[t as i64], rlx_ir::Shape::scalar())
            .map_err(|e| e.to_string())?;
        let c =
            HostTensor::from_slice(&[true], rlx_ir::Shape::scalar()).map_err(|e| e.to_string())?;
        let mut binds = vec![Bound::Const(iter), Bound::Const(c)];
        binds.extend(states.iter().cloned());
        let outs = cx.inline(body, &format!("loop{id}/{t}/"), binds)?;
        if outs.len() < 1 + n_state {
            return Err(format!(
                "the body returns {} values for a condition and {n_state} states",
                outs.len()
            ));
        }
        let c_out = &outs[0];
        cond = match c_out {
            Bound::Const(c) => c
                .to_f64_vec()
                .map_err(|e| e.to_string())?
                .first()
                .is_some_and(|&v| v != 0.0),
            Bound::Value(_) => {
                return Err(
                    "the loop condition depends on run-time values (no static shape)".into(),
                )
            }
            Bound::Seq(_) | Bound::Absent => {
                return Err("the loop condition is not a boolean tensor".into())
            }
        };
        states = outs[1..1 + n_state].to_vec();
        let scans = &outs[1 + n_state..];
        if per_step.is_empty() {
            per_step = vec![Vec::new(); scans.len()];
        }
        for (j, y) in scans.iter().enumerate() {
            per_step[j].push(y.clone());
        }
        t += 1;
    }
    let mut out: Vec<Out> = states.into_iter().map(Bound::into_out).collect();
    let k = body.output.len().saturating_sub(1 + n_state);
    if k > 0 && per_step.iter().all(|s| s.is_empty()) {
        return Err("a loop of no iterations has no stacked outputs".into());
    }
    for ys in per_step {
        out.push(stack(cx, ys, 0)?);
    }
    Ok(out)
}
