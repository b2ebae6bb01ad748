//! The crate's bytes and values are the CLI's, bit for bit, for every scheme family: the
//! CLI (on the scalar reference kernels) is an independent route to the library.
mod common;
use common::*;

#[test]
fn bytes_and_values_equal_the_cli_reference() {
    let bin = match cli() {
        Some(b) => b,
        None => {
            eprintln!("skipped: the qtk CLI is not built (set QTK_BIN)");
            return;
        }
    };
    let dir = scratch("cli");
    for (i, spec) in SCHEMES.iter().enumerate() {
        let shape = shape_for(spec);
        let x = weights(&shape, spec.len() as u64 + i as u64);
        let xp = dir.join(format!("x{}.npy", i));
        let qp = dir.join(format!("q{}.bin", i));
        write_npy(&xp, &shape, &x);
        run_cli(&bin, &["quantize", "--scheme", spec, xp.to_str().unwrap(), qp.to_str().unwrap()]);
        let want = std::fs::read(&qp).unwrap();
        let s = qtk::Scheme::parse(spec).unwrap();
        let t = qtk::quantize(&x, &shape, &s, &Default::default()).unwrap();
        assert_eq!(t.as_bytes(), &want[..], "{}: bytes differ from the CLI's", spec);
        assert_eq!(t.nbytes(), s.nbytes(&shape).unwrap(), "{}", spec);
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        for dt in ["f32", "f16", "bf16"] {
            let yp = dir.join(format!("y{}_{}.npy", i, dt));
            run_cli(&bin, &["dequantize", "--scheme", spec, "--shape", &dims.join("x"), "--dtype", dt, qp.to_str().unwrap(), yp.to_str().unwrap()]);
            let want = read_npy_bytes(&yp);
            let got: Vec<u8> = match dt {
                "f32" => t.dequantize().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect(),
                "f16" => t.dequantize_f16().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect(),
                _ => t.dequantize_bf16().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect(),
            };
            assert_eq!(got, want, "{} ({}): values differ from the CLI's", spec, dt);
        }
        // the bytes read back (copied and borrowed) give the same tensor
        let back = qtk::Tensor::from_bytes(&want, &shape, &s).unwrap();
        assert_eq!(back.dequantize().unwrap(), t.dequantize().unwrap());
        let view = qtk::Tensor::from_bytes_borrowed(&want, &shape, &s).unwrap();
        assert_eq!(view.as_bytes().as_ptr(), want.as_ptr(), "{}: the borrowed tensor copied its bytes", spec);
        // and the scheme prints canonically and parses back
        assert_eq!(qtk::Scheme::parse(&s.to_string()).unwrap(), s, "{}", spec);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_kernel_level_gives_the_reference_bits() {
    for spec in SCHEMES {
        let shape = shape_for(spec);
        let x = weights(&shape, 3);
        let s: qtk::Scheme = spec.parse().unwrap();
        let fast = qtk::quantize(&x, &shape, &s, &Default::default()).unwrap();
        // the scalar reference; the level is process-wide, which other tests running at the
        // same time may see: harmless, since every level gives the same bits
        qtk::set_isa(qtk::Isa::Scalar).unwrap();
        let reference = qtk::quantize(&x, &shape, &s, &Default::default()).unwrap();
        let yr = reference.dequantize().unwrap();
        qtk::set_isa(qtk::Isa::Auto).unwrap();
        assert_eq!(fast.as_bytes(), reference.as_bytes(), "{}", spec);
        assert_eq!(fast.dequantize().unwrap(), yr, "{}", spec);
    }
}
