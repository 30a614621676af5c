//! Finding a graph's dense layers, calibrating their inputs, and
//! rewriting the graph to read quantized weights and activations.

use super::{quantize_weight, Observer, QParams, QuantWeight, Scheme};
use crate::{Device, Error};
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, Shape, TensorType, ValueId};
use std::collections::{BTreeMap, HashMap};

/// Ops whose second operand is the (in, out) weight of a dense layer.
const DENSE_OPS: [&str; 3] = ["matmul", "matmul_bias_act", "matmul_residual"];

fn err(msg: impl Into<String>) -> Error {
    Error::Quant(msg.into())
}

/// One dense layer: node `node` multiplies `x` by the weight that is graph
/// input `input`, stored `dims` and read through `permute([1, 0])` when
/// `transposed` (stored (out, in), as PyTorch keeps it).
#[derive(Clone, Debug, PartialEq)]
pub struct DenseSite {
    pub input: usize,
    pub name: String,
    pub node: usize,
    pub x: ValueId,
    pub dims: [usize; 2],
    pub transposed: bool,
}

impl DenseSite {
    /// The weight's axis of output channels.
    pub fn out_axis(&self) -> usize {
        usize::from(!self.transposed)
    }
}

/// Candidate weights that are not dense layers: (graph input, why).
pub type Skipped = Vec<(usize, String)>;

/// The dense layers among the weights that are graph inputs `candidates`,
/// and for each candidate that is not one, why (read by something other
/// than one dense product, not rank 2, not f32).
pub fn dense_sites(g: &Graph, candidates: &[usize]) -> Result<(Vec<DenseSite>, Skipped), Error> {
    let mut sites = vec![];
    let mut skipped = vec![];
    let readers = |v: ValueId| -> Vec<usize> {
        (0..g.nodes.len())
            .filter(|&n| g.nodes[n].inputs.contains(&v))
            .collect()
    };
    for &k in candidates {
        let wv = *g.inputs.get(k).ok_or_else(|| {
            err(format!(
                "input {k} does not exist (the graph has {})",
                g.inputs.len()
            ))
        })?;
        let ty = g.ty(wv);
        let name = g.values[wv.index()]
            .name
            .clone()
            .unwrap_or_else(|| format!("input {k}"));
        let dims = ty.shape.dims();
        if ty.dtype != DType::F32 || dims.len() != 2 {
            skipped.push((k, format!("`{name}`: {ty} is not a rank-2 f32 weight")));
            continue;
        }
        // The weight, or its transpose, must feed exactly one dense product
        // as the second operand and nothing else.
        let mut through = wv;
        let mut transposed = false;
        let mut rs = readers(wv);
        if let [n] = rs[..] {
            let node = &g.nodes[n];
            if node.op.name() == "permute" && node.attrs.ints("perm").ok() == Some(&[1, 0][..]) {
                through = node.outputs[0];
                transposed = true;
                rs = readers(through);
            }
        }
        let site = match rs[..] {
            [n] if DENSE_OPS.contains(&g.nodes[n].op.name())
                && g.nodes[n].inputs.get(1) == Some(&through)
                && g.nodes[n].inputs[0] != through =>
            {
                n
            }
            _ => {
                let ops: Vec<&str> = rs.iter().map(|&n| g.nodes[n].op.name()).collect();
                skipped.push((
                    k,
                    format!("`{name}` is read by {ops:?}, not as one dense layer's weight"),
                ));
                continue;
            }
        };
        let x = g.nodes[site].inputs[0];
        if g.ty(x).dtype != DType::F32 {
            skipped.push((k, format!("`{name}`'s layer input is {}", g.ty(x))));
            continue;
        }
        sites.push(DenseSite {
            input: k,
            name,
            node: site,
            x,
            dims: [dims[0], dims[1]],
            transposed,
        });
    }
    Ok((sites, skipped))
}

/// Records the inputs of the dense layers whose weights are the graph
/// inputs `candidates`, over calibration runs (a graph per run shape is
/// fine: layers are known by their weight's input position).
#[derive(Clone, Debug, Default)]
pub struct Calibrator {
    candidates: Vec<usize>,
    observers: BTreeMap<usize, Observer>,
    runs: usize,
}

impl Calibrator {
    pub fn new(candidates: impl IntoIterator<Item = usize>) -> Self {
        Calibrator {
            candidates: candidates.into_iter().collect(),
            ..Calibrator::default()
        }
    }

    /// Run `g` on the CPU with `inputs` and record every dense layer's
    /// input. `rows`: which rows of those inputs (all axes but the last,
    /// flattened) count — e.g. the attention mask, to leave padding out.
    pub fn observe(
        &mut self,
        g: &Graph,
        inputs: &[&HostTensor],
        rows: Option<&[bool]>,
    ) -> Result<(), Error> {
        let (sites, _) = dense_sites(g, &self.candidates)?;
        if sites.is_empty() {
            return Err(err("calibration: the graph has no dense layer to observe"));
        }
        let mut xs: Vec<ValueId> = vec![];
        for s in &sites {
            if !xs.contains(&s.x) {
                xs.push(s.x);
            }
        }
        let mut gx = g.clone();
        gx.outputs = xs.clone();
        let out = crate::compile(&gx, Device::Cpu)?.run_refs(inputs)?;
        for s in &sites {
            let t = &out[xs.iter().position(|&v| v == s.x).unwrap_or(0)];
            let v = t.to_vec::<f32>()?;
            let width = t.shape().dims().last().copied().unwrap_or(1).max(1);
            let obs = self.observers.entry(s.input).or_default();
            let res = match rows {
                None => obs.add(&v),
                Some(m) if m.len() * width == v.len() => v
                    .chunks_exact(width)
                    .zip(m)
                    .filter(|(_, &keep)| keep)
                    .try_for_each(|(r, _)| obs.add(r)),
                Some(m) => {
                    return Err(err(format!(
                        "calibration: {} row flags for `{}`'s input of {} rows",
                        m.len(),
                        s.name,
                        v.len() / width
                    )))
                }
            };
            res.map_err(|e| err(format!("calibration of `{}`'s input: {e}", s.name)))?;
        }
        self.runs += 1;
        Ok(())
    }

    /// The observer of the layer whose weight is input `k`.
    pub fn observer(&self, k: usize) -> Option<&Observer> {
        self.observers.get(&k)
    }

    /// How many runs were observed.
    pub fn runs(&self) -> usize {
        self.runs
    }

    /// Quantize the dense layers of `g` with `scheme`: the weights from
    /// `inputs` (aligned with the graph's inputs), the activation ranges
    /// from what was observed.
    pub fn plan(&self, g: &Graph, scheme: &Scheme, inputs: &[&HostTensor]) -> Result<Plan, Error> {
        Plan::build(g, &self.candidates, scheme, inputs, Some(self))
    }
}

/// How one dense layer is quantized.
#[derive(Clone, Debug, PartialEq)]
pub struct SitePlan {
    pub name: String,
    pub dims: [usize; 2],
    /// The weight's axis of output channels.
    pub out_axis: usize,
    /// The grid of the layer's input (`None`: weight-only or dynamic).
    pub activation: Option<QParams>,
    /// The layer's input is quantized at run time over its own range
    /// ([`super::Range::Dynamic`]).
    pub dynamic: bool,
    pub weight: QuantWeight,
}

impl SitePlan {
    /// Whether the layer runs as an integer product (`matmul_integer_scaled`):
    /// a static activation grid and one weight scale per tensor or per
    /// output channel (groups stay dequantized in f32).
    pub fn integer(&self) -> bool {
        let outs = self.dims[self.out_axis];
        (self.activation.is_some() || self.dynamic)
            && matches!(self.weight.scales.len(), n if n == 1 || n == outs)
    }

    /// The quantized weight's shape as the rewritten graph reads it: an
    /// integer layer's is (in, out), whatever the f32 weight's storage.
    pub fn input_dims(&self) -> [usize; 2] {
        match (self.integer(), self.out_axis) {
            (true, 0) => [self.dims[1], self.dims[0]],
            _ => self.dims,
        }
    }
}

/// The quantized dense layers of a graph, by the graph input of their
/// weight; [`Plan::apply`] rewrites any graph of the same model (any
/// batch or sequence length) to use them.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub scheme: Scheme,
    pub sites: BTreeMap<usize, SitePlan>,
    /// Candidates left in f32, with why.
    pub skipped: Skipped,
}

impl Plan {
    /// Quantization without calibration: weight-only (`scheme.activations`
    /// `None`) or dynamic int8 ([`Scheme::dynamic_int8`]).
    pub fn weight_only(
        g: &Graph,
        candidates: &[usize],
        scheme: &Scheme,
        inputs: &[&HostTensor],
    ) -> Result<Plan, Error> {
        Plan::build(g, candidates, scheme, inputs, None)
    }

    fn build(
        g: &Graph,
        candidates: &[usize],
        scheme: &Scheme,
        inputs: &[&HostTensor],
        cal: Option<&Calibrator>,
    ) -> Result<Plan, Error> {
        if inputs.len() != g.inputs.len() {
            return Err(err(format!(
                "{} inputs given for a graph of {}",
                inputs.len(),
                g.inputs.len()
            )));
        }
        let (sites, skipped) = dense_sites(g, candidates)?;
        let mut plan = Plan {
            scheme: *scheme,
            sites: BTreeMap::new(),
            skipped,
        };
        for s in sites {
            let dynamic = scheme.activations.map(|a| a.range) == Some(super::Range::Dynamic);
            if dynamic && matches!(scheme.granularity, super::Granularity::Group(_)) {
                return Err(err(format!(
                    "dynamic int8 needs one weight scale per tensor or per output channel, not {}",
                    scheme.granularity
                )));
            }
            let activation = match (scheme.activations, cal) {
                (None, _) => None,
                (Some(_), _) if dynamic => None,
                (Some(_), None) => {
                    return Err(err("static activation quantization needs calibration runs"))
                }
                (Some(a), Some(c)) => {
                    let (lo, hi) = c
                        .observer(s.input)
                        .and_then(|o| o.range(a.range, a.symmetric))
                        .ok_or_else(|| err(format!("`{}`'s input was never observed", s.name)))?;
                    Some(QParams::int8(lo, hi, a.symmetric))
                }
            };
            let w = inputs[s.input];
            if w.shape().dims() != s.dims {
                return Err(err(format!(
                    "`{}` is {:?}, the graph reads {:?}",
                    s.name,
                    w.shape().dims(),
                    s.dims
                )));
            }
            let weight = quantize_weight(
                &w.to_vec::<f32>()?,
                s.dims,
                s.out_axis(),
                scheme.weight_bits,
                scheme.granularity,
            )
            .map_err(|e| err(format!("`{}`: {e}", s.name)))?;
            plan.sites.insert(
                s.input,
                SitePlan {
                    name: s.name.clone(),
                    dims: s.dims,
                    out_axis: s.out_axis(),
                    activation,
                    dynamic,
                    weight,
                },
            );
        }
        if plan.sites.is_empty() {
            return Err(err("no dense layer to quantize"));
        }
        Ok(plan)
    }

    /// The i8 values to pass for graph input `k` (a quantized weight), in
    /// [`SitePlan::input_dims`] (an integer layer's stored (out, in)
    /// weight comes transposed).
    pub fn weight(&self, k: usize) -> Option<Result<HostTensor, Error>> {
        self.sites.get(&k).map(|s| {
            let dims = s.input_dims();
            // Transposed exactly when the shape is (a square weight's
            // shape says nothing).
            let v = if !(s.integer() && s.out_axis == 0) {
                s.weight.values.clone()
            } else {
                let [r, c] = s.dims;
                (0..r * c)
                    .map(|i| s.weight.values[(i % r) * c + i / r])
                    .collect()
            };
            HostTensor::from_slice(&v, dims.to_vec()).map_err(Error::from)
        })
    }

    /// A hash of the grids (scheme, activation parameters, weight scales;
    /// not the weight values): tells plans apart in a compile cache key.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (k, s) in &self.sites {
            k.hash(&mut h);
            s.dims.hash(&mut h);
            if let Some(a) = s.activation {
                (a.scale.to_bits(), a.zero_point).hash(&mut h);
            }
            s.dynamic.hash(&mut h);
            s.weight
                .scales
                .iter()
                .for_each(|v| v.to_bits().hash(&mut h));
        }
        h.finish()
    }

    /// Bytes of the quantized weights as held (one byte per value, even
    /// for int4) plus their f32 scales.
    pub fn weight_bytes(&self) -> usize {
        self.sites
            .values()
            .map(|s| s.weight.values.len() + 4 * s.weight.scales.len())
            .sum()
    }

    /// `g` with every planned layer's weight an i8 input: with a static
    /// activation grid and per-tensor or per-channel scales, the layer is
    /// an integer product of its input quantized to i8 ([`SitePlan::integer`],
    /// `matmul_integer_scaled`); otherwise the weight is dequantized in the
    /// graph and (static, groups) the input quantized and dequantized.
    pub fn apply(&self, g: &Graph) -> Result<Graph, Error> {
        let (sites, _) = dense_sites(g, &self.sites.keys().copied().collect::<Vec<_>>())?;
        if sites.len() != self.sites.len() {
            let found: Vec<usize> = sites.iter().map(|s| s.input).collect();
            let missing: Vec<&str> = self
                .sites
                .iter()
                .filter(|(k, _)| !found.contains(k))
                .map(|(_, s)| s.name.as_str())
                .collect();
            return Err(err(format!(
                "the graph does not read {missing:?} as dense weights"
            )));
        }
        let by_node: HashMap<usize, &DenseSite> = sites.iter().map(|s| (s.node, s)).collect();
        let mut b = GraphBuilder::new(g.name.clone());
        let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
        for (k, &v) in g.inputs.iter().enumerate() {
            let name = g.values[v.index()].name.clone().unwrap_or_default();
            let nv = match self.sites.get(&k) {
                Some(p) => {
                    let ty = TensorType::new(DType::I8, Shape::new(p.input_dims().to_vec()));
                    let q = b.input(name, ty);
                    if p.integer() {
                        q
                    } else {
                        dequantize_weight(&mut b, q, p)?
                    }
                }
                None => b.input(name, g.ty(v).clone()),
            };
            map[v.index()] = Some(nv);
        }
        let get = |map: &[Option<ValueId>], v: ValueId| {
            map[v.index()].ok_or_else(|| err(format!("%{} used before it is defined", v.0)))
        };
        // Quantize-dequantize of one layer input, shared by layers reading
        // the same value on the same grid (e.g. Q, K and V).
        let mut qdq: HashMap<(ValueId, [u32; 2]), ValueId> = HashMap::new();
        // An integer layer reads its i8 weight (in, out) as given: the
        // transpose of a stored (out, in) weight is the graph input itself.
        let int_transposes: Vec<ValueId> = sites
            .iter()
            .filter(|s| s.transposed && self.sites[&s.input].integer())
            .map(|s| g.inputs[s.input])
            .collect();
        let mut quantized: HashMap<(ValueId, [u32; 2]), ValueId> = HashMap::new();
        // Per layer input: its run-time quantization (y, scale, zero point).
        let mut dynamic: HashMap<ValueId, [ValueId; 3]> = HashMap::new();
        for (n, node) in g.nodes.iter().enumerate() {
            let mut ins = node
                .inputs
                .iter()
                .map(|&v| get(&map, v))
                .collect::<Result<Vec<_>, _>>()?;
            if node.op.name() == "permute" && int_transposes.contains(&node.inputs[0]) {
                map[node.outputs[0].index()] = Some(ins[0]);
                continue;
            }
            if let Some(site) = by_node.get(&n).filter(|s| self.sites[&s.input].dynamic) {
                let p = &self.sites[&site.input];
                let q = match dynamic.get(&site.x) {
                    Some(&q) => q,
                    None => {
                        let q = super::integer::quantize_dynamic(&mut b, ins[0])?;
                        dynamic.insert(site.x, q);
                        q
                    }
                };
                b.set_origin(node.origin.clone());
                let y = super::integer::dense_dynamic(
                    &mut b,
                    node.op.name(),
                    &node.attrs,
                    &ins,
                    q,
                    ins[1],
                    p,
                )?;
                map[node.outputs[0].index()] = Some(y);
                continue;
            }
            if let Some(site) = by_node.get(&n).filter(|s| self.sites[&s.input].integer()) {
                let p = &self.sites[&site.input];
                let q = p
                    .activation
                    .expect("integer layers have an activation grid");
                let key = (site.x, [q.scale.to_bits(), q.zero_point as u32]);
                let xq = match quantized.get(&key) {
                    Some(&v) => v,
                    None => {
                        let v = super::integer::quantize_input(&mut b, ins[0], &q)?;
                        quantized.insert(key, v);
                        v
                    }
                };
                b.set_origin(node.origin.clone());
                let y = super::integer::dense(
                    &mut b,
                    node.op.name(),
                    &node.attrs,
                    &ins,
                    xq,
                    ins[1],
                    p,
                )?;
                map[node.outputs[0].index()] = Some(y);
                continue;
            }
            if let Some(site) = by_node.get(&n) {
                if let Some(q) = self.sites[&site.input].activation {
                    let key = (site.x, [q.scale.to_bits(), q.zero_point as u32]);
                    let v = match qdq.get(&key) {
                        Some(&v) => v,
                        None => {
                            let v = fake_quant(&mut b, ins[0], &q)?;
                            qdq.insert(key, v);
                            v
                        }
                    };
                    ins[0] = v;
                }
            }
            b.set_origin(node.origin.clone());
            let outs = b.push(node.op, &ins, node.attrs.clone())?;
            for (o, m) in node.outputs.iter().zip(outs) {
                map[o.index()] = Some(m);
            }
        }
        b.set_origin(None);
        let outs = g
            .outputs
            .iter()
            .map(|&v| get(&map, v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(b.finish(&outs)?)
    }
}

/// (clamp(round(x / s) + z, qmin, qmax) − z) · s, in f32 ops.
fn fake_quant(b: &mut GraphBuilder, x: ValueId, q: &QParams) -> Result<ValueId, Error> {
    let s = b.scalar(q.scale as f64, DType::F32)?;
    let mut t = b.binary("div", x, s)?;
    t = b.unary("round", t)?;
    let z = (q.zero_point != 0)
        .then(|| b.scalar(q.zero_point as f64, DType::F32))
        .transpose()?;
    if let Some(z) = z {
        t = b.binary("add", t, z)?;
    }
    let bounds = Attrs::new()
        .with("min", q.qmin as f64)
        .with("max", q.qmax as f64);
    t = b.op1("clamp", &[t], bounds)?;
    if let Some(z) = z {
        t = b.binary("sub", t, z)?;
    }
    Ok(b.binary("mul", t, s)?)
}

/// An i8 weight input times its scales, as f32 of the weight's shape.
fn dequantize_weight(b: &mut GraphBuilder, q: ValueId, p: &SitePlan) -> Result<ValueId, Error> {
    let f = b.op1("cast", &[q], Attrs::new().with("dtype", DType::F32))?;
    let [r, c] = p.dims;
    let scales = &p.weight.scales;
    let reshape = |b: &mut GraphBuilder, v, shape: Vec<usize>| {
        let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        b.op1("reshape", &[v], Attrs::new().with("shape", s))
    };
    let constant = |b: &mut GraphBuilder, v: Vec<f32>, shape: Vec<usize>| {
        HostTensor::from_slice(&v, shape).and_then(|t| b.constant(t))
    };
    let outs = p.dims[p.out_axis];
    let ins = p.dims[1 - p.out_axis];
    if scales.len() == 1 {
        let s = b.scalar(scales[0] as f64, DType::F32)?;
        return Ok(b.binary("mul", f, s)?);
    }
    if scales.len() == outs {
        let shape = if p.out_axis == 0 {
            vec![r, 1]
        } else {
            vec![1, c]
        };
        let s = constant(b, scales.clone(), shape)?;
        return Ok(b.binary("mul", f, s)?);
    }
    // Groups of `n` inputs: scales are (outs, ins / n) row-major.
    let per = scales.len() / outs;
    let n = ins / per;
    let (grouped, sshape, s) = if p.out_axis == 0 {
        (vec![r, per, n], vec![r, per, 1], scales.clone())
    } else {
        let mut t = vec![0f32; scales.len()];
        for o in 0..outs {
            for j in 0..per {
                t[j * outs + o] = scales[o * per + j];
            }
        }
        (vec![per, n, c], vec![per, 1, c], t)
    };
    let g3 = reshape(b, f, grouped)?;
    let s = constant(b, s, sshape)?;
    let m = b.binary("mul", g3, s)?;
    Ok(reshape(b, m, vec![r, c])?)
}
