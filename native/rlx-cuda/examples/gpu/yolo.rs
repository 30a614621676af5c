//! `gpu yolo --model 320n.onnx --input in_astronaut.npy [--last N]`: where
//! YOLOv8n's output on CUDA first departs from the CPU's. The full model
//! is compared (with and without CUDA graphs); then the last N nodes'
//! values are made graph outputs, together (one plan) and one at a time
//! (a plan per value: each keeps the plan of the original tail as far as
//! a value's own cone goes), and each is compared with the CPU's value.

use super::*;
use std::collections::HashMap;

fn max_diff(a: &HostTensor, b: &HostTensor) -> (f64, f64) {
    let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    let d = x
        .iter()
        .zip(&y)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    let m = y.iter().map(|q| q.abs()).fold(0.0, f64::max);
    (d, m)
}

fn cuda(g: &Graph, graphs: bool) -> Result<rlx::Compiled, String> {
    let be = CudaBackend::with_options(
        0,
        CudaOptions {
            cuda_graph: graphs,
            ..env_opts()
        },
    )
    .map_err(|e| e.to_string())?;
    let planned = rlx::plan_with(g, Target::Device(Device::Cuda), &CompileOptions::default())
        .map_err(|e| e.to_string())?;
    let exe =
        rlx_runtime::Backend::compile(&be, planned.program.clone()).map_err(|e| e.to_string())?;
    Ok(planned.finish(exe))
}

pub(super) fn yolo(args: &[String]) -> usize {
    let model = std::fs::read(arg(args, "--model").expect("--model F")).unwrap();
    let xp = arg(args, "--input").expect("--input NPY");
    let x8 = rlx_formats::npy::read("images", &std::fs::read(xp).unwrap()).unwrap();
    let x: Vec<f32> = x8
        .to_f64_vec()
        .unwrap()
        .iter()
        .map(|v| *v as f32 / 255.0)
        .collect();
    let x = HostTensor::from_slice(&x, x8.shape().clone()).unwrap();
    let last: usize = arg(args, "--last").unwrap_or("60").parse().unwrap();
    let opts = rlx_onnx::ImportOptions {
        shapes: HashMap::from([("images".to_string(), x.shape().dims().to_vec())]),
        ..Default::default()
    };
    let g = rlx_onnx::import(&model, &opts).unwrap().graph;
    let cpu = rlx::compile(&g, Device::Cpu).unwrap();
    let want = cpu.run(std::slice::from_ref(&x)).unwrap();
    let mut fails = 0;
    if let Some(k) = arg(args, "--focus") {
        let k: usize = k.parse().unwrap();
        let v = g.nodes[k].outputs[0];
        let mut one = g.clone();
        one.outputs = vec![v];
        let want = rlx::compile(&one, Device::Cpu)
            .unwrap()
            .run(std::slice::from_ref(&x))
            .unwrap()
            .remove(0);
        let be = CudaBackend::with_options(0, env_opts()).unwrap();
        let planned = rlx::plan_with(
            &one,
            Target::Device(Device::Cuda),
            &CompileOptions::default(),
        )
        .unwrap();
        let exe = be.compile_program(&planned.program).unwrap();
        let dims = want.shape().dims().to_vec();
        let (c, inner) = (dims[1], dims[2..].iter().product::<usize>());
        let w = want.to_f64_vec().unwrap();
        for run in 0..3 {
            let got = exe.run_cuda(&[&x]).unwrap().remove(0).to_f64_vec().unwrap();
            let per: Vec<String> = (0..c)
                .map(|ch| {
                    let d = (0..inner)
                        .map(|i| (got[ch * inner + i] - w[ch * inner + i]).abs())
                        .fold(0.0, f64::max);
                    format!("ch{ch} {d:.3e}")
                })
                .collect();
            println!("focus node {k} run {run}: {}", per.join(", "));
            let bad: Vec<String> = (0..c * inner)
                .filter(|&i| (got[i] - w[i]).abs() > 1e-3 * (1.0 + w[i].abs()))
                .take(8)
                .map(|i| format!("[{}] gpu {:.4} cpu {:.4}", i, got[i], w[i]))
                .collect();
            println!("  first wrong: {}", bad.join("; "));
        }
        let out = std::env::var("OUT").unwrap_or_else(|_| "/tmp".into());
        std::fs::write(format!("{out}/focus.cu"), exe.source()).unwrap();
        let ks: Vec<String> = exe
            .kernels()
            .iter()
            .map(|(n, s)| format!("{n} {s}"))
            .collect();
        std::fs::write(format!("{out}/focus_kernels.txt"), ks.join("\n")).unwrap();
        std::fs::write(
            format!("{out}/focus_lir.txt"),
            format!("{:#?}", planned.program.steps),
        )
        .unwrap();
        return 0;
    }
    for graphs in [true, false] {
        let c = cuda(&g, graphs).unwrap();
        let got = c.run(std::slice::from_ref(&x)).unwrap();
        let (d, m) = max_diff(&got[0], &want[0]);
        println!("full model, cuda_graph={graphs}: max abs diff {d:.3e} (max |cpu| {m:.1})");
        if d > 1e-2 {
            fails += 1;
        }
    }
    // The tail's values, in node order.
    let n = g.nodes.len();
    let mut vals = vec![];
    for (k, node) in g.nodes.iter().enumerate().skip(n.saturating_sub(last)) {
        for &o in &node.outputs {
            if g.ty(o).dtype.is_float() {
                vals.push((k, node.op.name(), o));
            }
        }
    }
    let mut all = g.clone();
    all.outputs = vals.iter().map(|v| v.2).collect();
    let cpu_all = rlx::compile(&all, Device::Cpu)
        .unwrap()
        .run(std::slice::from_ref(&x))
        .unwrap();
    println!("\n== the last {last} nodes' values as outputs of one graph ==");
    match cuda(&all, true).and_then(|c| c.run(std::slice::from_ref(&x)).map_err(|e| e.to_string()))
    {
        Ok(got) => {
            for ((k, op, v), (a, b)) in vals.iter().zip(got.iter().zip(&cpu_all)) {
                let (d, m) = max_diff(a, b);
                let flag = if d > 1e-3 * (1.0 + m) { "DIFF" } else { "ok" };
                println!(
                    "{flag} node {k} {op} %{} {}: {d:.3e} (max |cpu| {m:.2})",
                    v.0,
                    g.ty(*v)
                );
            }
        }
        Err(e) => println!("error: {e}"),
    }
    println!("\n== each value alone ==");
    for ((k, op, v), b) in vals.iter().zip(&cpu_all) {
        let mut one = g.clone();
        one.outputs = vec![*v];
        match cuda(&one, true)
            .and_then(|c| c.run(std::slice::from_ref(&x)).map_err(|e| e.to_string()))
        {
            Ok(got) => {
                let (d, m) = max_diff(&got[0], b);
                let flag = if d > 1e-3 * (1.0 + m) { "DIFF" } else { "ok" };
                println!(
                    "{flag} node {k} {op} %{} {}: {d:.3e} (max |cpu| {m:.2})",
                    v.0,
                    g.ty(*v)
                );
            }
            Err(e) => println!("error node {k} {op}: {e}"),
        }
    }
    // The tail as MIR text, to read the failing nodes against.
    let text = rlx_ir::text::print(&g);
    let lines: Vec<&str> = text.lines().collect();
    println!("\n== MIR tail ==");
    for l in &lines[lines.len().saturating_sub(last + 5)..] {
        println!("{l}");
    }
    fails
}

/// `gpu onnx-ref --model F --input NAME=X.npy [--input ...] --expect
/// OUT.npy [--scale S] [--tol T]`: an ONNX model on CUDA against ONNX
/// Runtime's committed output for the same inputs
/// (tests/vectors/onnx-models; float inputs are multiplied by S first, e.g.
/// 1/255 for YOLO's bytes; other inputs are passed as stored, and every
/// input's shape binds the model's symbolic dimensions). Prints the max abs
/// error; fails over T.
pub(super) fn onnx_ref(args: &[String]) -> usize {
    let model = std::fs::read(arg(args, "--model").expect("--model F")).unwrap();
    let scale: f64 = arg(args, "--scale").map_or(1.0, |s| s.parse().unwrap());
    let tol: f64 = arg(args, "--tol").map_or(1e-3, |s| s.parse().unwrap());
    let mut named: Vec<(String, HostTensor)> = Vec::new();
    for (k, a) in args.iter().enumerate() {
        if a != "--input" {
            continue;
        }
        let (name, path) = args[k + 1].split_once('=').expect("--input NAME=X.npy");
        let t = rlx_formats::npy::read(name, &std::fs::read(path).unwrap()).unwrap();
        let t = if t.dtype().is_float() {
            let v: Vec<f32> = t
                .to_f64_vec()
                .unwrap()
                .iter()
                .map(|v| (v * scale) as f32)
                .collect();
            HostTensor::from_slice(&v, t.shape().clone()).unwrap()
        } else {
            t
        };
        named.push((name.to_string(), t));
    }
    let xp = arg(args, "--input")
        .and_then(|s| s.split_once('='))
        .map(|(_, p)| p.to_string())
        .expect("--input NAME=X.npy");
    let ep = arg(args, "--expect").expect("--expect OUT.npy");
    let want = rlx_formats::npy::read("out", &std::fs::read(ep).unwrap()).unwrap();
    let opts = rlx_onnx::ImportOptions {
        shapes: named
            .iter()
            .map(|(n, t)| (n.clone(), t.shape().dims().to_vec()))
            .collect::<HashMap<_, _>>(),
        ..Default::default()
    };
    let m = rlx_onnx::import(&model, &opts).unwrap();
    let g = m.graph;
    let feed: Vec<HostTensor> = m
        .inputs
        .iter()
        .map(|n| {
            named
                .iter()
                .find(|(k, _)| k == n)
                .expect("an --input per model input")
                .1
                .clone()
        })
        .collect();
    let c = match cuda(&g, true) {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL onnx-ref {xp}: {e}");
            return 1;
        }
    };
    let got = c.run(&feed).unwrap().remove(0);
    let (d, m) = max_diff(&got, &want);
    let ok = d <= tol;
    println!(
        "{} onnx-ref {xp}: max abs error vs ONNX Runtime {d:.3e} (max |ort| {m:.2}, tol {tol:e})",
        if ok { "PASS" } else { "FAIL" }
    );
    usize::from(!ok)
}
