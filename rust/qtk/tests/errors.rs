//! Every error path returns Err with the C status and a message that names the problem; none
//! panics.
mod common;
use common::*;
use qtk::{Scheme, Status};

fn err<T: std::fmt::Debug>(r: qtk::Result<T>, status: Status, sub: &str) {
    match r {
        Ok(v) => panic!("expected {} ({:?}), got Ok({:?})", status, sub, v),
        Err(e) => {
            assert_eq!(e.status(), status, "{:?}", e);
            assert!(e.message().contains(sub), "message {:?} lacks {:?}", e.message(), sub);
            assert_eq!(e.to_string(), e.message());
            assert_eq!(e.code(), status.0);
            let _: &dyn std::error::Error = &e;
        }
    }
}

#[test]
fn schemes() {
    err(Scheme::parse("q5x"), Status::PARSE, "q5x");
    err(Scheme::parse("q4f,block=32"), Status::PARSE, "block=32");
    err(Scheme::parse("q4f\0,block=32:f16"), Status::ARG, "NUL");
    err("nvfp5".parse::<Scheme>(), Status::PARSE, "nvfp5");
    let mut s = Scheme::nvfp4();
    s.store = qtk::QuantStore::PackedU32(9);
    err(s.validate(), Status::SCHEME, "packing dimension 9");
    let s = Scheme::default().per_block([1, 2, 3, 4, 5, 6], qtk::ScaleDtype::F16);
    err(s.nbytes(&[8, 8]), Status::SCHEME, "1 to 5 dims");
    let s = Scheme::default().per_block([70000], qtk::ScaleDtype::F16);
    err(s.validate(), Status::SCHEME, "70000");
    let s = Scheme::default().with_table("a-table-name-that-is-far-too-long-for-qtk");
    err(s.validate(), Status::SCHEME, "at most 31 bytes");
    assert!(s.to_string().starts_with("<invalid scheme:"));
    let s = Scheme::default().with_table("nosuchtable");
    err(qtk::quantize(&[1.0; 4], &[4], &s, &Default::default()), Status::NOTFOUND, "nosuchtable");
    err(Scheme::parse("q4f,block=32:f16").unwrap().nbytes(&[1; 9]), Status::SHAPE, "rank 9");
    err(Scheme::parse("q4_k").unwrap().nbytes(&[4, 100]), Status::SHAPE, "256");
    err(Scheme::parse("q4_k").unwrap().to_burn_cbor(), Status::UNSUPPORTED, "QtkQuant");
    err(Scheme::from_burn_json("{\"value\":\"Q9F\"}"), Status::FORMAT, "neither 'tensor' nor 'block'");
    err(Scheme::from_burn_json(r#"{"value":"Q9F","store":"Native","mode":"Symmetric","tensor":null,"block":null}"#), Status::FORMAT, "Q9F");
    err(Scheme::from_burn_json("{"), Status::FORMAT, "JSON");
    err(Scheme::from_burn_cbor(&[]), Status::LENGTH, "no bytes");
    err(Scheme::from_burn_cbor(&[0xa1]), Status::FORMAT, "CBOR");
    err(qtk::register_table("t", &[1.0, 2.0, 3.0]), Status::ARG, "");
    err(qtk::register_table("nf4", &[0.0; 16]), Status::ARG, "nf4");
    err(qtk::table("nosuchtable"), Status::NOTFOUND, "nosuchtable");
}

#[test]
fn tensors() {
    let s = Scheme::parse("q4f,block=32:f16").unwrap();
    err(qtk::quantize(&[0.0; 10], &[4, 4], &s, &Default::default()), Status::LENGTH, "10 values for shape [4, 4]");
    err(qtk::quantize(&[1.0, f32::NAN, 0.0, 0.0], &[4], &Scheme::default(), &Default::default()), Status::VALUE, "NaN");
    err(qtk::quantize(&[0.0; 4], &[usize::MAX, 2], &s, &Default::default()), Status::SHAPE, "more elements than usize");
    let sc = [1.0f32; 3];
    err(qtk::quantize(&[0.0; 64], &[64], &s, &qtk::QuantizeOptions::default().scales(&sc)), Status::LENGTH, "");
    let w = [1.0f32; 64];
    err(qtk::quantize(&[0.0; 64], &[64], &s, &qtk::QuantizeOptions::default().weights(&w)), Status::ARG, "mse");
    let t = qtk::quantize(&weights(&[4, 64], 1), &[4, 64], &s, &Default::default()).unwrap();
    let b = t.to_bytes();
    err(qtk::Tensor::from_bytes(&b[..b.len() - 1], &[4, 64], &s), Status::LENGTH, "");
    err(qtk::Tensor::from_bytes_borrowed(&b, &[4, 32], &s), Status::LENGTH, "");
    let mut bad = b.clone();
    let n = bad.len();
    bad[n - 2..].copy_from_slice(&0x7c00u16.to_le_bytes()); // an f16 inf scale
    err(qtk::Tensor::check_bytes(&bad, &[4, 64], &s), Status::VALUE, "scale");
    err(qtk::burn::dequantize_qfloat(&bad, &[4, 64], &s), Status::VALUE, "scale");
    err(t.dequantize_into(&mut [0.0; 3]), Status::LENGTH, "holds 3 values");
    err(t.dequantize_f16_into(&mut [0; 300]), Status::LENGTH, "300");
    err(t.offsets(), Status::SCHEME, "");
    err(t.convert(&Scheme::parse("q4_k").unwrap(), &Default::default()), Status::SHAPE, "256");
    err(qtk::burn::dequantize_qfloat_json(&b, &[4, 64], r#"{"value":"Q4F","store":{"PackedU32":0},"mode":"Lookup","tensor":null,"block":{"size":{"storage":[32,1,1,1,1],"len":1},"dtype":"F16"}}"#), Status::SCHEME, "names no table");
}

#[test]
fn matmul() {
    let s = Scheme::parse("q8s,block=32:f16").unwrap();
    let t = qtk::quantize(&weights(&[16, 64], 2), &[16, 64], &s, &Default::default()).unwrap();
    err(qtk::matmul(&t, &[0.0; 63], 1, qtk::Precision::Exact), Status::LENGTH, "K = 64");
    let bias = [0f32; 15];
    let o = qtk::MatmulOptions { bias: Some(&bias), ..Default::default() };
    err(qtk::matmul_with(&t, &[0.0; 64], 1, &o), Status::LENGTH, "N = 16");
    err(qtk::matmul_into(&t, &[0.0; 64], 1, &mut [0.0; 3], &Default::default()), Status::LENGTH, "M × N = 16");
    let t3 = qtk::quantize(&weights(&[2, 4, 32], 2), &[2, 4, 32], &s, &Default::default()).unwrap();
    err(qtk::matmul(&t3, &[0.0; 32], 1, qtk::Precision::Exact), Status::SHAPE, "rank-2");
    err(qtk::matmul(&t, &[0.0; 64], usize::MAX, qtk::Precision::Exact), Status::SHAPE, "overflows");
}

#[test]
fn checkpoints() {
    let dir = scratch("errors");
    err(qtk::Checkpoint::open(dir.join("missing.safetensors")), Status::IO, "missing.safetensors");
    let junk = dir.join("junk.bpk");
    std::fs::write(&junk, b"not a checkpoint\n").unwrap();
    err(qtk::Checkpoint::open(&junk), Status::FORMAT, "junk.bpk");
    err(qtk::HubLayout::parse("nosuch"), Status::PARSE, "nosuch");
    err(qtk::Elem::parse("F9"), Status::PARSE, "F9");
    // a checkpoint with one raw int tensor
    let p = dir.join("i.safetensors");
    let ints: Vec<u8> = (0..16u8).collect();
    let mut w = qtk::Writer::create(&p, &Default::default()).unwrap();
    w.add_raw("ids", qtk::Elem::I32, &[4], &ints).unwrap();
    w.commit().unwrap();
    let c = qtk::Checkpoint::open(&p).unwrap();
    err(c.tensor("nosuch"), Status::NOTFOUND, "nosuch");
    err(c.index_of("a\0b"), Status::ARG, "NUL");
    err(c.tensor("ids"), Status::ARG, "ids");
    err(c.read_f32("ids"), Status::UNSUPPORTED, "I32");
    assert_eq!(c.read_bytes("ids").unwrap(), ints);
    // writers: a bad length is refused at the commit and nothing is left behind
    let q = dir.join("bad.safetensors");
    let short = [0u8; 15];
    let mut w = qtk::Writer::create(&q, &Default::default()).unwrap();
    w.add_raw("ids", qtk::Elem::I32, &[4], &short).unwrap();
    err(w.commit(), Status::LENGTH, "15");
    assert!(!q.exists());
    let mut w = qtk::Writer::create(&q, &Default::default()).unwrap();
    err(w.add_f32("x", &[3], &[1.0, 2.0]), Status::LENGTH, "2 values");
    drop(w); // aborts
    assert!(!q.exists());
    let mut w = qtk::Writer::create(&q, &Default::default()).unwrap();
    w.add_raw("ids", qtk::Elem::I32, &[4], &ints).unwrap();
    let dup = w.add_raw("ids", qtk::Elem::I32, &[4], &ints).and_then(|_| w.commit());
    err(dup, Status::ARG, "ids");
    assert!(!q.exists());
    err(qtk::Writer::create(&p, &Default::default()).and_then(|w| w.commit()), Status::IO, "replaced only with force");
    let x = weights(&[4, 64], 3);
    let t = qtk::quantize(&x, &[4, 64], &Scheme::parse("q4f,block=4x8:f16").unwrap(), &Default::default()).unwrap();
    let g = dir.join("t.gguf");
    let mut w = qtk::Writer::create(&g, &Default::default()).unwrap();
    w.add_tensor("t", &t).unwrap();
    err(w.commit(), Status::UNSUPPORTED, "");
    // conversion: bad rules, cancelled, a panicking progress closure
    err(qtk::convert(&p, dir.join("o.bpk"), &qtk::ConvertOptions::new().rule("(=q8s")), Status::PARSE, "POSIX extended");
    err(qtk::convert_check(&qtk::ConvertOptions::new().scheme("q9")), Status::PARSE, "q9");
    let src = dir.join("f.safetensors");
    let xs = weights(&[64, 64], 4);
    let mut w = qtk::Writer::create(&src, &Default::default()).unwrap();
    w.add_f32("a.weight", &[64, 64], &xs).unwrap();
    w.add_f32("b.weight", &[64, 64], &xs).unwrap();
    w.commit().unwrap();
    let o = qtk::ConvertOptions::new().scheme("nvfp4").on_progress(|_| std::ops::ControlFlow::Break(()));
    err(qtk::convert(&src, dir.join("o.bpk"), &o), Status::CANCELLED, "");
    assert!(!dir.join("o.bpk").exists());
    let o = qtk::ConvertOptions::new().scheme("nvfp4").on_progress(|_| panic!("from the closure"));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| qtk::convert(&src, dir.join("o.bpk"), &o)));
    let payload = r.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"from the closure"));
    assert!(!dir.join("o.bpk").exists());
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
