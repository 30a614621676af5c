//! The engine's own tests: prepared copies and packs made only where read,
//! concurrent runs, the folds rlx-opt decides (`matmul_residual`,
//! `attention_merged`), each checked against the reference kernels.

use super::weights::Need;
use super::*;

pub(super) fn tensor(dims: &[usize], seed: u64) -> HostTensor {
    let mut s = seed;
    let d: Vec<f32> = (0..dims.iter().product::<usize>())
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    HostTensor::new(DType::F32, rlx_ir::Shape::from(dims.to_vec()), d.into()).unwrap()
}

/// `g`'s program with its first node, `permute(input 1)` of a
/// `(n, k)` weight, made a view of that input, as the memory plan does.
fn transposed_weight_program(g: &Graph, k: usize) -> rlx_ir::lir::Program {
    let mut prog = rlx_ir::lir::Program::from_graph(g.clone());
    prog.views.push(rlx_ir::lir::View {
        value: g.nodes[0].outputs[0],
        base: g.inputs[1],
        offset: 0,
        strides: vec![1, k],
    });
    prog
}

/// A resident weight read through a transpose (`x · wᵀ`, as Linear
/// layers store it) is packed from the graph input itself; its
/// transposed f32 copy is made only where some product still reads it:
/// on the AMX tiles, below `MIN_ROWS` rows or when the weight holds a
/// non-finite value (the `gemm` crate runs those); with gemm128, never
/// once packed; and whenever the weight is not resident. The results
/// match the reference kernels (f64) every time.
#[test]
fn transposed_weights_get_a_copy_only_where_read() {
    let kinds = if amx::available() {
        vec![Some(F32PackKind::Amx), Some(F32PackKind::Gemm128)]
    } else {
        vec![Some(F32PackKind::Gemm128)]
    };
    for kind in kinds {
        for (rows, inf, resident) in [
            (40, false, true),
            (40, true, true),
            (40, false, false),
            (7, false, true),
        ] {
            let src = format!(
                "graph @lin(%x: f32[{rows},70], %w: f32[33,70], %b: f32[33]) {{
  %wt = permute(%w) {{perm=[1, 0]}}
  %y = matmul_bias_act(%x, %wt, %b) {{activation=\"gelu\"}}
  return %y
}}"
            );
            let g = rlx_ir::text::parse(&src).unwrap();
            let prog = transposed_weight_program(&g, 70);
            let compile = || FastProgram::compile(prog.clone());
            let p = if kind == Some(F32PackKind::Amx) {
                compile()
            } else {
                amx::without(compile)
            }
            .unwrap();
            let case = format!("{kind:?} rows {rows} inf {inf} resident {resident}");
            assert_eq!(p.f32_pack_kind, kind, "{case}");
            assert_eq!(p.preps.len(), 1, "{case}");
            let tiles_too_few = kind == Some(F32PackKind::Amx) && rows < amx::MIN_ROWS;
            let want_need = if tiles_too_few {
                Need::Always
            } else {
                Need::UnlessPacked(vec![0])
            };
            assert_eq!(p.preps[0].need, want_need, "{case}");
            if resident {
                p.keep_resident(&[1, 2]);
            }
            let mut ins = random_inputs(&g, 60);
            if inf {
                let mut w = ins[1].to_f64_vec().unwrap();
                w[11] = f64::INFINITY;
                let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
                ins[1] = HostTensor::new(DType::F32, ins[1].shape().clone(), w.into()).unwrap();
            }
            let refs: Vec<&HostTensor> = ins.iter().collect();
            let want = crate::run_graph_refs(&g, &refs).unwrap();
            for run in 0..2 {
                let got = p.run(&refs).unwrap();
                assert_close(&got[0], &want[0], |i| format!("{case} run {run} [{i}]"));
            }
            // The buffer grows only as far as the copies made reach.
            let prepared = p.state.lock().unwrap().prepared.clone();
            let copy_made = prepared.len() == 33 * 70 && prepared.iter().any(|&v| v != 0.0);
            assert!(
                copy_made || prepared.is_empty(),
                "{case}: {} floats",
                prepared.len()
            );
            let finite_on_tiles = !(inf && kind == Some(F32PackKind::Amx));
            let want_copy = !resident || tiles_too_few || !finite_on_tiles;
            assert_eq!(copy_made, want_copy, "{case}");
        }
    }
}

/// bf16 weights on the dot-product matmuls (AVX512-BF16) are packed
/// from their bits: neither a plain nor a transposed one gets an f32
/// copy. Results within bf16 rounding of the reference.
#[test]
fn bf16_dot_weights_get_no_f32_copy() {
    if !bf16dot::available() {
        eprintln!("no AVX512-BF16 here: the dot-product path is not used");
        return;
    }
    let src = "graph @lin(%x: bf16[40,70], %w: bf16[33,70], %v: bf16[33,20]) {
  %wt = permute(%w) {perm=[1, 0]}
  %y = matmul(%x, %wt)
  %z = matmul(%y, %v)
  return %z
}";
    let g = rlx_ir::text::parse(src).unwrap();
    let p = FastProgram::compile(transposed_weight_program(&g, 70)).unwrap();
    assert_eq!(
        p.preps.iter().map(|p| p.need.clone()).collect::<Vec<_>>(),
        [Need::Never]
    );
    p.keep_resident(&[1, 2]);
    let ins: Vec<HostTensor> = random_inputs(&g, 80)
        .iter()
        .zip(&g.inputs)
        .map(|(t, &v)| {
            let d: Vec<half::bf16> = t
                .to_f64_vec()
                .unwrap()
                .iter()
                .map(|&x| half::bf16::from_f64(x))
                .collect();
            HostTensor::new(DType::BF16, g.ty(v).shape.clone(), d.into()).unwrap()
        })
        .collect();
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let want = crate::run_graph_refs(&g, &refs).unwrap()[0]
        .to_f64_vec()
        .unwrap();
    for run in 0..2 {
        let got = p.run(&refs).unwrap()[0].to_f64_vec().unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            // %y is rounded to bf16 (2⁻⁸) before the second product.
            assert!(
                (a - b).abs() <= 0.02 * (1.0 + b.abs()),
                "run {run} [{i}]: {a} vs {b}"
            );
        }
    }
    let st = p.state.lock().unwrap();
    assert!(st.prepared.is_empty(), "an f32 copy was made");
}

/// Runs from several threads at once (of one program: the second
/// caller gets its own state; of two programs) all finish, with the
/// results of a run alone. Each run keeps the pool's other threads
/// spinning for work (`par::with_helpers`); a run that starts while
/// another's spinner holds a thread must still get through. Compared
/// with the reference kernels (f64): a second caller's fresh state
/// runs its first products unpacked, with other rounding.
#[test]
fn concurrent_runs_finish_and_agree() {
    let src = "graph @mlp(%x: f32[1024,64], %w: f32[64,96], %b: f32[96], %v: f32[96,32]) {
  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}
  %z = matmul(%y, %v)
  return %z
}";
    let g = rlx_ir::text::parse(src).unwrap();
    let compile = || {
        let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
        p.keep_resident(&[1, 2, 3]);
        std::sync::Arc::new(p)
    };
    let programs = [compile(), compile()];
    let ins = std::sync::Arc::new(random_inputs(&g, 7));
    let want = {
        let refs: Vec<&HostTensor> = ins.iter().collect();
        crate::run_graph_refs(&g, &refs).unwrap().remove(0)
    };
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..4 {
        let (p, ins, tx) = (programs[t % 2].clone(), ins.clone(), tx.clone());
        std::thread::spawn(move || {
            let refs: Vec<&HostTensor> = ins.iter().collect();
            let outs: Vec<HostTensor> = (0..25).map(|_| p.run(&refs).unwrap().remove(0)).collect();
            tx.send(outs).unwrap();
        });
    }
    for _ in 0..4 {
        let outs = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("concurrent runs did not finish in 120 s: a deadlock");
        for (k, got) in outs.iter().enumerate() {
            assert_close(got, &want, |i| format!("run {k} [{i}]"));
        }
    }
}

/// A resident f32 weight is packed once for gemm128 (in the wasm32
/// build; natively in these unit tests): the first and later runs
/// match the reference kernels (f64), and later runs reuse it. A
/// weight that is not resident is read on every run: new values, new
/// results.
#[test]
fn resident_f32_weights_are_packed_once() {
    let src = "graph @lin(%x: f32[2,5,7], %w: f32[7,9], %b: f32[9], %v: f32[9,3]) {
  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}
  %z = matmul(%y, %v)
  return %z
}";
    let g = rlx_ir::text::parse(src).unwrap();
    // Where the CPU has AMX its packing is chosen instead (tested below).
    let p =
        amx::without(|| FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap());
    assert_eq!(p.f32_pack_kind, Some(F32PackKind::Gemm128));
    assert_eq!(p.f32_packs.len(), 2);
    p.keep_resident(&[1, 2]);
    let (x, w, b) = (tensor(&[2, 5, 7], 1), tensor(&[7, 9], 2), tensor(&[9], 3));
    for (run, vseed) in [(0, 4), (1, 4), (2, 5)] {
        let v = tensor(&[9, 3], vseed);
        let ins = [&x, &w, &b, &v];
        let want = crate::run_graph_refs(&g, &ins).unwrap()[0]
            .to_f64_vec()
            .unwrap();
        let calls = crate::kernels::gemm128::calls();
        let got = p.run(&ins).unwrap()[0].to_f64_vec().unwrap();
        assert!(
            crate::kernels::gemm128::calls() > calls,
            "run {run}: gemm128 not used"
        );
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "run {run} [{i}]: {g} vs {w}"
            );
        }
        let st = p.state.lock().unwrap();
        // Only the resident weight (%w) is held packed.
        assert_eq!(st.f32_packed_ready, [true, false], "run {run}");
    }
}

/// Where the CPU has AMX, a resident f32 weight is split for the tiles
/// once and products of at least 32 rows run on them (fewer: the
/// `gemm` crate), matching the reference kernels (f64) on every run;
/// a weight that is not resident is not packed and runs on the `gemm`
/// crate. The report names the kernel.
#[test]
fn resident_f32_weights_run_on_amx() {
    if !amx::available() {
        eprintln!("no AMX tiles on this machine: the kernel is not used here");
        return;
    }
    for rows in [7, 40, 300] {
        let src = format!(
            "graph @lin(%x: f32[{rows},70], %w: f32[70,33], %b: f32[33], %v: f32[33,20]) {{
  %y = matmul_bias_act(%x, %w, %b) {{activation=\"gelu\"}}
  %z = matmul(%y, %v)
  return %z
}}"
        );
        let g = rlx_ir::text::parse(&src).unwrap();
        let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
        assert_eq!(p.f32_pack_kind, Some(F32PackKind::Amx));
        p.keep_resident(&[1, 2]);
        for run in 0..3 {
            let mut ins = random_inputs(&g, 20);
            ins[3] = tensor(&[33, 20], 40 + run);
            let refs: Vec<&HostTensor> = ins.iter().collect();
            let want = crate::run_graph_refs(&g, &refs).unwrap();
            let uses = || p.state.lock().unwrap().amx_packed[0].uses();
            let before = uses();
            let got = p.run(&refs).unwrap();
            // %w (resident) on the tiles from 32 rows on; %v not packed.
            let used = uses() - before;
            assert_eq!(
                used > 0,
                rows >= amx::MIN_ROWS,
                "rows {rows}: {used} AMX calls"
            );
            assert_close(&got[0], &want[0], |i| {
                format!("rows {rows} run {run} [{i}]")
            });
            let st = p.state.lock().unwrap();
            assert_eq!(st.f32_packed_ready, [true, false], "run {run}");
        }
    }
    let t = TensorType::new(DType::F32, rlx_ir::Shape::from(vec![64, 64]));
    let name = kernel_name("matmul", &[&t, &t], &Attrs::default(), DType::F32);
    assert!(name.contains("AMX"), "{name}");

    // A resident weight holding an inf: its products run on the `gemm`
    // crate (the report's "of finite values"), giving what f32 gives.
    let src = "graph @lin(%x: f32[40,6], %w: f32[6,5]) {
  %y = matmul(%x, %w)
  return %y
}";
    let g = rlx_ir::text::parse(src).unwrap();
    let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
    p.keep_resident(&[1]);
    let mut ins = random_inputs(&g, 50);
    let mut w = ins[1].to_f64_vec().unwrap();
    w[7] = f64::INFINITY;
    let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    ins[1] = HostTensor::new(DType::F32, ins[1].shape().clone(), w.into()).unwrap();
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
    assert_close(&p.run(&refs).unwrap()[0], want, |i| {
        format!("inf weight [{i}]")
    });
    assert!(want.to_f64_vec().unwrap().iter().any(|v| v.is_infinite()));
    assert_eq!(p.state.lock().unwrap().amx_packed[0].uses(), 0);
}

/// A tensor per graph input, seeded `seed`, `seed + 1`, ….
pub(super) fn random_inputs(g: &Graph, seed: u64) -> Vec<HostTensor> {
    g.inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| tensor(g.ty(v).dims(), seed + i as u64))
        .collect()
}

/// `got` within 1e-5 (relative, absolute near 0) of the reference's
/// `want`, element by element — where the reference is ±inf, the same
/// infinity; where NaN, NaN; `what(i)` names element i.
fn assert_close(got: &HostTensor, want: &HostTensor, what: impl Fn(usize) -> String) {
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    assert_eq!(g.len(), w.len(), "{}: lengths differ", what(0));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let close = match (b.is_nan(), b.is_infinite()) {
            (true, _) => a.is_nan(),
            (_, true) => a == b,
            _ => (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
        };
        assert!(close, "{}: {a} vs {b}", what(i));
    }
}

/// The residual accumulated in place, copied first or read from a graph
/// input, on every GEMM path (few rows: columns split across threads; up
/// to 1024: one threaded call; more: row blocks; a resident weight:
/// gemm128, and the AMX tiles where the CPU has them).
/// `matmul_residual` (the fold rlx-opt makes of `add(matmul, r)`): the
/// GEMM accumulates onto the residual — in place where the memory plan
/// put the output over it, copied into the output first where the
/// residual lives on or is a graph input — with and without a bias.
#[test]
fn matmul_residual_accumulates_onto_its_residual() {
    for rows in [5, 64, 300, 1100] {
        let src = format!(
                "graph @g(%x: f32[{rows},16], %w: f32[16,16], %b: f32[16], %u: f32[16,16], %x2: f32[{rows},16]) {{
  %r = tanh(%x)
  %s = sigmoid(%x)
  %z = matmul_residual(%s, %u, %s, %b)
  %y = matmul_residual(%r, %w, %x2)
  %t2 = matmul_residual(%x, %u, %r, %b)
  return %y, %z, %t2
}}"
            );
        let g = rlx_ir::text::parse(&src).unwrap();
        // `from_graph` gives every value its own slot; a memory plan
        // puts %t2 in place over %r (its last use), as here.
        let mut prog = rlx_ir::lir::Program::from_graph(g.clone());
        let slot_of =
            |prog: &rlx_ir::lir::Program, v| prog.slots.iter().position(|s| s.value == v).unwrap();
        let (r, t2) = (
            slot_of(&prog, g.nodes[0].outputs[0]),
            slot_of(&prog, g.outputs[2]),
        );
        prog.slots[t2].offset = prog.slots[r].offset;
        // The AMX tiles where the CPU has them (resident weights),
        // else and also gemm128.
        for with_amx in [true, false] {
            let compile = || FastProgram::compile(prog.clone()).unwrap();
            let p = if with_amx {
                compile()
            } else {
                amx::without(compile)
            };
            let residual = p
                .steps
                .iter()
                .filter(|s| {
                    matches!(
                        s,
                        Step::Fast {
                            kind: Kind::Matmul { residual: true, .. },
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(
                residual, 3,
                "rows {rows}: residual products on the fast engine"
            );
            for resident in [false, true] {
                if resident {
                    p.keep_resident(&[1, 3]);
                }
                let ins = random_inputs(&g, 10);
                let refs: Vec<&HostTensor> = ins.iter().collect();
                let want = crate::run_graph_refs(&g, &refs).unwrap();
                for run in 0..2 {
                    let got = p.run(&refs).unwrap();
                    for (o, (gt, wt)) in got.iter().zip(&want).enumerate() {
                        assert_close(gt, wt, |i| {
                            format!("rows {rows} amx {with_amx} resident {resident} run {run} output {o} [{i}]")
                        });
                    }
                }
            }
        }
    }
}

/// `attention_merged` writes (.., Sq, H·Dv) itself — against the
/// reference (attention, then the head merge), with query-row blocks
/// split across threads (batch 1) or not, and with the heads of k and v
/// broadcast.
#[test]
fn attention_merged_writes_merged_heads() {
    for (b, sq, kvh) in [(2, 5, 3), (1, 8, 3), (2, 5, 1)] {
        let src = format!(
                "graph @g(%q: f32[{b},3,{sq},4], %k: f32[{b},{kvh},6,4], %v: f32[{b},{kvh},6,4], %m: f32[{b},1,1,6], %w: f32[12,7]) {{
  %y = attention_merged(%q, %k, %v, %m) {{mask_kind=\"bias\"}}
  %t = tanh(%w)
  %z = matmul(%y, %t)
  return %z
}}"
            );
        let g = rlx_ir::text::parse(&src).unwrap();
        let fp = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
        assert_eq!(
            fp.counts(),
            (3, 0, 0),
            "b {b} sq {sq}: all on the fast engine"
        );
        let ins = random_inputs(&g, 30);
        let refs: Vec<&HostTensor> = ins.iter().collect();
        let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
        let got = &fp.run(&refs).unwrap()[0];
        assert_close(got, want, |i| format!("b {b} sq {sq} kv heads {kvh} [{i}]"));
    }
}

/// An additive attention mask broadcast over the query rows (a
/// padding mask, (B, 1, 1, Sk)) — read once per row of keys — and one
/// that varies by query row, each against the reference kernels; the
/// batches' masks differ, so reading the wrong batch's row fails.
#[test]
fn attention_with_additive_row_masks_matches_reference() {
    for mask in ["f32[2,1,1,5]", "f32[2,1,3,5]", "f32[1,1,1,5]"] {
        let src = format!(
            "graph @g(%q: f32[2,2,3,4], %k: f32[2,2,5,4], %v: f32[2,2,5,4], %mask: {mask}) {{
  %r = attention(%q, %k, %v, %mask) {{mask_kind=\"bias\"}}
  return %r
}}"
        );
        let g = rlx_ir::text::parse(&src).unwrap();
        let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
        assert_eq!(p.counts().0, 1, "{mask}: attention not on the fast engine");
        let ins: Vec<HostTensor> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let t = tensor(g.ty(v).dims(), 10 + i as u64);
                if i < 3 {
                    return t;
                }
                // Mask values from −8 to 0, different per batch.
                let d: Vec<f32> = t
                    .to_f64_vec()
                    .unwrap()
                    .iter()
                    .map(|x| (4.0 * x - 4.0) as f32)
                    .collect();
                HostTensor::new(DType::F32, t.shape().clone(), d.into()).unwrap()
            })
            .collect();
        let refs: Vec<&HostTensor> = ins.iter().collect();
        let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
        assert_close(&p.run(&refs).unwrap()[0], want, |i| format!("{mask} [{i}]"));
    }
}

/// `conv_act` (rlx-opt's fold of an activation after a conv) runs as one
/// fast conv that applies the activation to its rows, against the
/// reference (the conv, then the activation).
#[test]
fn conv_act_applies_its_activation_as_it_writes() {
    for act in ["relu", "silu", "sigmoid", "gelu_tanh"] {
        let src = format!(
            "graph @g(%x: f32[2,3,9,8], %w: f32[5,3,3,3], %b: f32[5]) {{
  %y = conv_act(%x, %w, %b) {{pads=[1, 1, 1, 1], strides=[2, 1], activation=\"{act}\"}}
  return %y
}}"
        );
        let g = rlx_ir::text::parse(&src).unwrap();
        let fp = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
        assert_eq!(fp.counts(), (1, 0, 0), "{act}: one fast kernel");
        let ins = random_inputs(&g, 40);
        let refs: Vec<&HostTensor> = ins.iter().collect();
        let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
        assert_close(&fp.run(&refs).unwrap()[0], want, |i| format!("{act} [{i}]"));
    }
}

/// Products with too few rows for a second row block on gemm128 (the
/// wasm32 build's products; natively in these unit tests) split the
/// packed weight's panels across the threads: with an epilogue, onto a
/// residual, and with a column count that is not a multiple of the
/// panel width, they match the reference kernels (f64) on every run.
#[test]
fn few_row_gemm128_products_split_by_columns_match_the_reference() {
    let src =
        "graph @few(%x: f32[3,40], %w: f32[40,50], %b: f32[50], %r: f32[3,37], %v: f32[50,37]) {
  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}
  %z = matmul_residual(%y, %v, %r)
  return %z
}";
    let g = rlx_ir::text::parse(src).unwrap();
    let p =
        amx::without(|| FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap());
    assert_eq!(p.f32_pack_kind, Some(F32PackKind::Gemm128));
    p.keep_resident(&[1, 2, 4]);
    let ins = [
        tensor(&[3, 40], 11),
        tensor(&[40, 50], 12),
        tensor(&[50], 13),
        tensor(&[3, 37], 14),
        tensor(&[50, 37], 15),
    ];
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
    for run in 0..3 {
        let got = &p.run(&refs).unwrap()[0];
        assert_close(got, want, |i| format!("run {run} [{i}]"));
    }
}
