//! matmul: within the documented bound of the exact product of x and the dequantized
//! weights, both layouts, both precisions, bias, the same bits for every thread count.
mod common;
use common::*;
use qtk::{MatmulLayout, MatmulOptions, Precision, Scheme};

/// |y - y*| <= γ(K+1) (Σ|x w'| + |b|) + K 2^-149, y* exact (f64 here; K small enough that f64
/// is exact to far below the bound).
#[allow(clippy::too_many_arguments)]
fn check_exact(w: &[f32], x: &[f32], b: &[f32], y: &[f32], m: usize, n: usize, k: usize, what: &str) {
    let u = 2f64.powi(-24);
    let g = (k + 1) as f64 * u / (1.0 - (k + 1) as f64 * u);
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut a) = (b[j] as f64, b[j].abs() as f64);
            for l in 0..k {
                let p = x[i * k + l] as f64 * w[j * k + l] as f64;
                s += p;
                a += p.abs();
            }
            let bound = g * a + k as f64 * 2f64.powi(-149);
            let err = (y[i * n + j] as f64 - s).abs();
            assert!(err <= bound, "{}: y[{}][{}] = {} vs {} (error {:e} > bound {:e})", what, i, j, y[i * n + j], s, err, bound);
        }
    }
}

#[test]
fn exact_and_fast_within_bounds() {
    let (n, k) = (48, 256);
    for spec in ["q4f,block=32:f16", "nvfp4", "q8s,block=32:f16", "q4_k", "u4,block=128:f16,zero=u8", "q2s,block=32:f16", "e4m3,block=32:f16"] {
        let s = Scheme::parse(spec).unwrap();
        let t = qtk::quantize(&weights(&[n, k], 21), &[n, k], &s, &Default::default()).unwrap();
        let wq = t.dequantize().unwrap();
        for m in [1usize, 3, 17] {
            let x = weights(&[m, k], 22 + m as u64);
            let b: Vec<f32> = (0..n).map(|j| j as f32 / 100.0).collect();
            let o = MatmulOptions { bias: Some(&b), ..Default::default() };
            let y = qtk::matmul_with(&t, &x, m, &o).unwrap();
            check_exact(&wq, &x, &b, &y, m, n, k, spec);
            // fast: the activation rounding adds at most max|x|/254 · Σ|w'| per output (and the
            // same γ term); checked loosely at twice that
            let of = MatmulOptions { precision: Precision::Fast, bias: Some(&b), ..Default::default() };
            let yf = qtk::matmul_with(&t, &x, m, &of).unwrap();
            for i in 0..m {
                let xmax = x[i * k..(i + 1) * k].iter().fold(0f32, |a, v| a.max(v.abs())) as f64;
                for j in 0..n {
                    let sw: f64 = wq[j * k..(j + 1) * k].iter().map(|v| v.abs() as f64).sum();
                    let d = (yf[i * n + j] - y[i * n + j]).abs() as f64;
                    assert!(d <= 2.0 * xmax / 254.0 * sw + 1e-6, "{} fast: y[{}][{}] off by {}", spec, i, j, d);
                }
            }
            // threads give the same bits
            for th in [1usize, 2, 3] {
                let y2 = qtk::matmul_with(&t, &x, m, &MatmulOptions { threads: th, ..o }).unwrap();
                assert_eq!(y, y2, "{} threads {}", spec, th);
            }
        }
    }
}

#[test]
fn kn_layout_is_the_transpose() {
    let (kk, n) = (64, 40);
    let w = weights(&[kk, n], 31);
    let s = Scheme::parse("q8s,block=8x8:f32").unwrap();
    let t = qtk::quantize(&w, &[kk, n], &s, &Default::default()).unwrap();
    let wq = t.dequantize().unwrap();
    let mut wt = vec![0f32; kk * n]; // [N, K]
    for a in 0..kk {
        for b in 0..n {
            wt[b * kk + a] = wq[a * n + b];
        }
    }
    let x = weights(&[2, kk], 32);
    let y = qtk::matmul_with(&t, &x, 2, &MatmulOptions { layout: MatmulLayout::Kn, ..Default::default() }).unwrap();
    check_exact(&wt, &x, &vec![0.0; n], &y, 2, n, kk, "kn");
    let p = qtk::matmul_path(&t, 1, &MatmulOptions { precision: Precision::Fast, ..Default::default() }).unwrap();
    let _ = p; // any path; the call itself must succeed
}
