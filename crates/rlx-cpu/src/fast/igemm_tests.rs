//! Tests of `igemm`: every kernel this CPU has (VNNI, AVX2, the integer
//! loops) against the exact product in i64, over shapes that leave every
//! edge (K not a multiple of 4, partial row and column tiles), both
//! signednesses, per-row and per-column zero points, and sums past 2^24
//! (where an f32 product would round). The op's NumPy vectors
//! (tests/vectors/ops/matmul_integer.json) check the engine's choice.
use super::igemm::{run, Cache, Dst, Isa, PackedB};
use rlx_ir::{DType, HostTensor, Shape, TensorData};

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u8
        })
        .collect()
}

fn int8(d: DType, shape: &[usize], v: Vec<u8>) -> HostTensor {
    let data: TensorData = match d {
        DType::U8 => v.into(),
        _ => v.into_iter().map(|x| x as i8).collect::<Vec<_>>().into(),
    };
    HostTensor::new(d, Shape(shape.to_vec()), data).unwrap()
}

fn val(t: &HostTensor, i: usize) -> i64 {
    t.to_i64_vec().unwrap()[i]
}

/// (a − za)(b − zb) in i64 with a (rows × k) cycling per-row zero points every `m` rows.
#[allow(clippy::too_many_arguments)]
fn exact(
    a: &HostTensor,
    b: &HostTensor,
    za: &HostTensor,
    zb: &HostTensor,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<i32> {
    let (av, bv, zav, zbv) = (
        a.to_i64_vec().unwrap(),
        b.to_i64_vec().unwrap(),
        za.to_i64_vec().unwrap(),
        zb.to_i64_vec().unwrap(),
    );
    let rows = av.len() / k;
    let mut y = Vec::with_capacity(rows * n);
    for r in 0..rows {
        let z = zav[if zav.len() == 1 { 0 } else { r % m }];
        for j in 0..n {
            let w = zbv[if zbv.len() == 1 { 0 } else { j }];
            y.push(
                (0..k)
                    .map(|p| (av[r * k + p] - z) * (bv[p * n + j] - w))
                    .sum::<i64>() as i32,
            );
        }
    }
    y
}

#[test]
fn every_kernel_equals_the_exact_product() {
    let isas = Isa::all();
    assert!(isas.contains(&Isa::Scalar));
    let mut checked = 0;
    for (case, &(batch, m, k, n, ad, bd, per_axis)) in [
        (1, 1, 1, 1, DType::U8, DType::I8, false),
        (1, 7, 37, 19, DType::U8, DType::I8, false),
        (2, 9, 64, 33, DType::I8, DType::U8, true),
        (1, 17, 130, 40, DType::I8, DType::I8, true),
        (3, 8, 384, 96, DType::U8, DType::U8, false),
        (1, 20, 1003, 65, DType::U8, DType::I8, true),
    ]
    .iter()
    .enumerate()
    {
        let seed = case as u64 * 4 + 1;
        let a = int8(ad, &[batch, m, k], bytes(batch * m * k, seed));
        let b = int8(bd, &[k, n], bytes(k * n, seed + 1));
        let (za, zb) = if per_axis {
            (
                int8(ad, &[m], bytes(m, seed + 2)),
                int8(bd, &[n], bytes(n, seed + 3)),
            )
        } else {
            (
                int8(ad, &[], bytes(1, seed + 2)),
                int8(bd, &[], bytes(1, seed + 3)),
            )
        };
        let want = exact(&a, &b, &za, &zb, m, k, n);
        for &isa in &isas {
            let mut cache = Cache::default();
            let mut got = vec![0i32; batch * m * n];
            run(
                isa,
                &a,
                &b,
                Some(&za),
                Some(&zb),
                m,
                &mut cache,
                Dst::I32(&mut got),
            )
            .unwrap();
            assert_eq!(
                got, want,
                "{isa:?}, case {case}: {batch}x{m}x{k} · {k}x{n}, {ad} · {bd}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6 * isas.len());
}

#[test]
fn sums_past_two_to_the_24_stay_exact() {
    // 255 · (−128) · 1024 = −33,423,360: an f32 accumulation would round.
    let (k, n) = (1024, 3);
    let a = int8(DType::U8, &[2, k], vec![255; 2 * k]);
    let mut bv = vec![0x80u8; k * n];
    bv[5] = 0x7f; // one +127 in column 2
    let b = int8(DType::I8, &[k, n], bv);
    let want = -255 * 128 * k as i64;
    assert!(want.abs() > 1 << 24);
    for isa in Isa::all() {
        let mut got = vec![0i32; 2 * n];
        run(
            isa,
            &a,
            &b,
            None,
            None,
            2,
            &mut Cache::default(),
            Dst::I32(&mut got),
        )
        .unwrap();
        assert_eq!(got[0] as i64, want, "{isa:?}");
        assert_eq!(got[2] as i64, want + 255 * 255, "{isa:?}");
        assert_eq!(val(&a, 0), 255);
    }
}

#[test]
fn a_weight_is_packed_once_while_it_is_the_same_tensor() {
    let (k, n) = (8, 4);
    let b = int8(DType::I8, &[k, n], bytes(k * n, 7));
    let a = int8(DType::U8, &[1, k], bytes(k, 8));
    let isa = Isa::best();
    let mut cache = Cache::default();
    let mut y = vec![0; n];
    run(isa, &a, &b, None, None, 1, &mut cache, Dst::I32(&mut y)).unwrap();
    let first = cache.pack().unwrap() as *const PackedB;
    run(
        isa,
        &a,
        &b.clone(),
        None,
        None,
        1,
        &mut cache,
        Dst::I32(&mut y),
    )
    .unwrap();
    assert!(
        std::ptr::eq(first, cache.pack().unwrap()),
        "a clone shares the data: no repack"
    );
    // Equal values in new storage: packed again, same result.
    let b2 = int8(DType::I8, &[k, n], bytes(k * n, 7));
    let mut y2 = vec![0; n];
    run(isa, &a, &b2, None, None, 1, &mut cache, Dst::I32(&mut y2)).unwrap();
    let p = cache.pack().unwrap();
    assert!(p.fits(isa, &b2) && !p.fits(isa, &b));
    assert_eq!(y, y2);
}

#[test]
fn the_f32_epilogue_is_the_cast_then_the_scale_then_the_bias() {
    // Per-column and single scales, with and without a bias, on every
    // kernel: each element as f32(dot) · scale + bias, rounded step by step.
    let (m, k, n) = (11, 70, 37);
    let a = int8(DType::U8, &[m, k], bytes(m * k, 21));
    let b = int8(DType::I8, &[k, n], bytes(k * n, 22));
    let (za, zb) = (
        int8(DType::U8, &[], vec![131]),
        int8(DType::I8, &[], vec![3]),
    );
    let dots = exact(&a, &b, &za, &zb, m, k, n);
    let cols: Vec<f32> = (0..n).map(|j| 1e-3 * (j as f32 + 0.5)).collect();
    let bias: Vec<f32> = (0..n).map(|j| (j as f32 - 18.0) * 0.25).collect();
    for isa in Isa::all() {
        for scale in [&cols[..], &[0.0071f32][..]] {
            for with_bias in [false, true] {
                let mut got = vec![0f32; m * n];
                let dst = Dst::F32 {
                    out: &mut got,
                    scale,
                    bias: with_bias.then_some(&bias[..]),
                };
                run(
                    isa,
                    &a,
                    &b,
                    Some(&za),
                    Some(&zb),
                    m,
                    &mut Cache::default(),
                    dst,
                )
                .unwrap();
                for (i, (&g, &d)) in got.iter().zip(&dots).enumerate() {
                    let j = i % n;
                    let mut want = d as f32 * scale[if scale.len() == 1 { 0 } else { j }];
                    if with_bias {
                        want += bias[j];
                    }
                    assert_eq!(
                        g.to_bits(),
                        want.to_bits(),
                        "{isa:?} element {i}: {g} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn mismatched_sizes_are_an_error_not_a_panic() {
    let a = int8(DType::U8, &[2, 5], bytes(10, 1));
    let b = int8(DType::I8, &[4, 3], bytes(12, 2));
    let mut y = vec![0; 6];
    let e = run(
        Isa::Scalar,
        &a,
        &b,
        None,
        None,
        2,
        &mut Cache::default(),
        Dst::I32(&mut y),
    )
    .unwrap_err();
    assert!(e.contains("K = 4"), "{e}");
}
