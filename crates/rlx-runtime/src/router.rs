//! Device routing at compile time: a fallback chain (`webgpu,cpu`; the
//! edge parses `RLX_DEVICE` into one) resolved to the first device on which the graph
//! legalizes, or to the cheapest one by a cost model. The choice and the
//! reason go into the dispatch report; nothing falls back at run time.

use crate::backend::{backend_for, Backend};
use crate::calibration::{calibration, generation, CostSource};
use crate::device::Device;
use crate::legalize::{legalize, Legalized};
use crate::policy::DispatchOptions;
use crate::report::Routing;
use rlx_ir::Graph;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use thiserror::Error;

/// How the router chooses among devices that can run the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteStrategy {
    /// The first device of the chain on which the graph legalizes.
    FirstThatCompiles,
    /// The legal device with the lowest estimated run time.
    Cheapest,
}

/// A fallback chain of devices and a strategy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRouter {
    pub chain: Vec<Device>,
    pub strategy: RouteStrategy,
}

/// No device of the chain can run the graph.
#[derive(Clone, Debug, PartialEq, Error)]
pub struct RouteError {
    pub graph: String,
    pub tried: Vec<(Device, String)>,
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no device in the chain can run `{}`:", self.graph)?;
        for (d, why) in &self.tried {
            write!(f, "\n--- {d} ---\n{why}")?;
        }
        Ok(())
    }
}

impl DeviceRouter {
    pub fn new(chain: Vec<Device>) -> Self {
        DeviceRouter {
            chain,
            strategy: RouteStrategy::FirstThatCompiles,
        }
    }

    /// Parse `webgpu,cpu` (first that compiles) or `cheapest:webgpu,cpu`.
    pub fn parse(s: &str) -> Result<DeviceRouter, String> {
        let (strategy, list) = match s.split_once(':') {
            Some(("cheapest", l)) => (RouteStrategy::Cheapest, l),
            Some(("first", l)) => (RouteStrategy::FirstThatCompiles, l),
            Some((o, _)) => {
                return Err(format!(
                    "unknown routing strategy `{o}` (use first: or cheapest:)"
                ))
            }
            None => (RouteStrategy::FirstThatCompiles, s),
        };
        let chain = list
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(Device::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if chain.is_empty() {
            return Err("empty device chain".into());
        }
        Ok(DeviceRouter { chain, strategy })
    }

    /// Legalize on each device of the chain and pick one.
    pub fn route(
        &self,
        g: &Graph,
        opts: &DispatchOptions,
    ) -> Result<(Arc<dyn Backend>, Legalized), RouteError> {
        let mut tried = Vec::new();
        let mut legal: Vec<(Arc<dyn Backend>, Legalized, f64)> = Vec::new();
        let mut estimates: Vec<String> = Vec::new();
        for &d in &self.chain {
            let Some(be) = backend_for(d) else {
                tried.push((d, Some(format!("no `{d}` backend in this build"))));
                continue;
            };
            match legalize(g, be.as_ref(), opts) {
                Ok(l) => {
                    let (cost, source) = estimate(&l.graph, be.as_ref());
                    estimates.push(format!("{d} {:.3} ms ({})", cost * 1e3, source.name()));
                    tried.push((d, None));
                    legal.push((be, l, cost));
                    if self.strategy == RouteStrategy::FirstThatCompiles {
                        break;
                    }
                }
                Err(e) => tried.push((d, Some(e.to_string()))),
            }
        }
        let pick = match self.strategy {
            RouteStrategy::FirstThatCompiles => legal.into_iter().next(),
            RouteStrategy::Cheapest => legal.into_iter().min_by(|a, b| a.2.total_cmp(&b.2)),
        };
        let Some((be, mut l, cost)) = pick else {
            return Err(RouteError {
                graph: g.name.clone(),
                tried: tried
                    .into_iter()
                    .map(|(d, e)| (d, e.unwrap_or_default()))
                    .collect(),
            });
        };
        let chosen = be.device();
        let skipped: Vec<String> = tried
            .iter()
            .filter_map(|(d, e)| e.as_ref().map(|_| d.name().to_string()))
            .collect();
        let reason = match self.strategy {
            RouteStrategy::FirstThatCompiles if skipped.is_empty() => {
                "first device of the chain; the graph legalizes on it".to_string()
            }
            RouteStrategy::FirstThatCompiles => format!(
                "first device on which the graph legalizes (not on: {})",
                skipped.join(", ")
            ),
            RouteStrategy::Cheapest => format!(
                "lowest estimated cost ({:.3} ms) among the devices that can run it: {}",
                cost * 1e3,
                estimates.join(", ")
            ),
        };
        l.report.routing = Some(Routing {
            chain: self.chain.clone(),
            chosen,
            reason,
            tried,
        });
        Ok((be, l))
    }
}

/// Estimated run time in seconds: Σ flops / throughput + bytes moved /
/// bandwidth + launches × overhead (+ a measured run's fixed cost), with the device's measured figures
/// where it has a [`Calibration`](crate::Calibration), else the
/// backend's nominal ones. Cached per (graph, device, calibrations).
pub fn estimate_cost(g: &Graph, be: &dyn Backend) -> f64 {
    estimate(g, be).0
}

/// [`estimate_cost`] and where its figures came from.
pub fn estimate(g: &Graph, be: &dyn Backend) -> (f64, CostSource) {
    type Key = (u64, Device, u64);
    static CACHE: OnceLock<Mutex<HashMap<Key, (f64, CostSource)>>> = OnceLock::new();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    rlx_ir::text::print(g).hash(&mut h);
    let key = (h.finish(), be.device(), generation());
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&c) = cache
        .lock()
        .ok()
        .and_then(|m| m.get(&key).copied())
        .as_ref()
    {
        return c;
    }
    // (GFLOP/s, GB/s, µs per kernel, µs per run, whose figures)
    let (gflops, gbps, launch_us, run_us, source) = match calibration(be.device()) {
        Some(c) => (
            c.gemm_gflops,
            c.transfer_gbps.unwrap_or(f64::INFINITY),
            c.launch_us,
            c.run_us,
            CostSource::Measured,
        ),
        None => (
            be.throughput_gflops(),
            be.transfer_gbps(),
            be.launch_overhead_us(),
            0.0,
            CostSource::Nominal,
        ),
    };
    let flops: f64 = g
        .nodes
        .iter()
        .filter(|n| n.op.name() != "transfer")
        .map(|n| node_flops(g, n))
        .sum();
    let bytes = |v: rlx_ir::ValueId| {
        let t = g.ty(v);
        t.dtype.storage_bytes(t.shape.numel()).unwrap_or(0) as f64
    };
    // Legalization put a `transfer` node on every input and output a
    // device other than the host copies (weights too: a first run).
    let moved: f64 = g
        .nodes
        .iter()
        .filter(|n| n.op.name() == "transfer")
        .map(|n| bytes(n.outputs[0]))
        .sum();
    let cost = flops / (gflops.max(1e-9) * 1e9)
        + moved / (gbps.max(1e-9) * 1e9)
        + g.nodes.len() as f64 * launch_us * 1e-6
        + run_us * 1e-6;
    if let Ok(mut m) = cache.lock() {
        m.insert(key, (cost, source));
    }
    (cost, source)
}

/// A rough FLOP count: contractions by their formula, everything else one
/// per output element.
fn node_flops(g: &Graph, n: &rlx_ir::Node) -> f64 {
    let out = n
        .outputs
        .first()
        .map(|&o| g.ty(o).shape.numel() as f64)
        .unwrap_or(0.0);
    let dim = |k: usize, from_end: usize| {
        n.inputs.get(k).map(|&v| {
            let d = g.ty(v).dims();
            d.get(d.len().wrapping_sub(from_end)).copied().unwrap_or(1) as f64
        })
    };
    match n.op.name() {
        "matmul" | "matmul_bias_act" | "matmul_residual" | "dequant_matmul" => {
            2.0 * out * dim(0, 1).unwrap_or(1.0)
        }
        "attention" | "attention_merged" => 4.0 * out * dim(1, 2).unwrap_or(1.0),
        "conv" => match n.inputs.get(1).map(|&v| g.ty(v)) {
            // Each output element costs one multiply-add per weight of its group.
            Some(w) => 2.0 * out * w.shape.numel() as f64 / w.dims()[0].max(1) as f64,
            None => out,
        },
        _ => out,
    }
}
