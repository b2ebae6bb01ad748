//! Quantizes a weight to NVFP4 and runs a GEMV on it, exact and fast, against the f32 product.
//!
//!     cargo run --release --example nvfp4_gemv [N K]
use qtk::{MatmulOptions, Precision, Scheme};

fn run() -> qtk::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (n, k) = if args.len() == 2 { (args[0], args[1]) } else { (4096, 4096) };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.04
    };
    let w: Vec<f32> = (0..n * k).map(|_| rnd()).collect();
    let x: Vec<f32> = (0..k).map(|_| rnd() * 25.0).collect();
    let t = qtk::quantize(&w, &[n, k], &Scheme::nvfp4(), &Default::default())?;
    println!("W {}x{} as {}: {} bytes, {:.3} bits per weight", n, k, t.scheme(), t.nbytes(), t.bits_per_element());
    let reference: Vec<f64> = (0..n).map(|j| (0..k).map(|l| w[j * k + l] as f64 * x[l] as f64).sum()).collect();
    for p in [Precision::Exact, Precision::Fast] {
        let o = MatmulOptions { precision: p, ..Default::default() };
        let path = qtk::matmul_path(&t, 1, &o)?;
        let start = std::time::Instant::now();
        let y = qtk::matmul_with(&t, &x, 1, &o)?;
        let dt = start.elapsed();
        let (mut e2, mut s2) = (0f64, 0f64);
        for j in 0..n {
            e2 += (y[j] as f64 - reference[j]).powi(2);
            s2 += reference[j].powi(2);
        }
        println!("  {:?} ({:?} path): {:.3} ms, SQNR against the f32 weights {:.2} dB", p, path, dt.as_secs_f64() * 1e3, 10.0 * (s2 / e2).log10());
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("nvfp4_gemv: {} [{}]", e, e.status());
        std::process::exit(1);
    }
}
