//! Many Rust threads at once: one shared Tensor multiplied and dequantized, quantizing in
//! parallel, and each thread's own error messages (qtk keeps one per thread).
mod common;
use common::*;
use qtk::{Precision, Scheme};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn shared_tensor_from_many_threads() {
    assert_send_sync::<qtk::Tensor>();
    assert_send_sync::<qtk::Scheme>();
    assert_send_sync::<qtk::Error>();
    assert_send::<qtk::Checkpoint>();
    assert_send::<qtk::Writer<'static>>();
    let (n, k) = (96, 128);
    let x0 = weights(&[n, k], 41);
    let s = Scheme::parse("q4f,block=32:f16").unwrap();
    let t = qtk::quantize(&x0, &[n, k], &s, &Default::default()).unwrap();
    let xin = weights(&[4, k], 42);
    let want = qtk::matmul(&t, &xin, 4, Precision::Exact).unwrap();
    let wantf = qtk::matmul(&t, &xin, 4, Precision::Fast).unwrap();
    let deq = t.dequantize().unwrap();
    std::thread::scope(|sc| {
        for i in 0..8 {
            let (t, xin, want, wantf, deq, s, x0) = (&t, &xin, &want, &wantf, &deq, &s, &x0);
            sc.spawn(move || {
                for _ in 0..20 {
                    assert_eq!(&qtk::matmul(t, xin, 4, Precision::Exact).unwrap(), want);
                    assert_eq!(&qtk::matmul(t, xin, 4, Precision::Fast).unwrap(), wantf);
                    assert_eq!(&t.dequantize().unwrap(), deq);
                    let q = qtk::quantize(x0, &[n, k], s, &qtk::QuantizeOptions::default().threads(1 + i % 2)).unwrap();
                    assert_eq!(q.as_bytes(), t.as_bytes());
                    // an error on this thread carries this thread's message
                    let e = qtk::Scheme::parse(&format!("bad{}", i)).unwrap_err();
                    assert!(e.message().contains(&format!("bad{}", i)), "{}", e);
                }
            });
        }
    });
}

#[test]
fn checkpoints_on_their_own_threads() {
    let dir = scratch("threads");
    let p = dir.join("m.bpk");
    let x = weights(&[32, 64], 43);
    let t = qtk::quantize(&x, &[32, 64], &Scheme::nvfp4(), &Default::default()).unwrap();
    let mut w = qtk::Writer::create(&p, &Default::default()).unwrap();
    w.add_tensor("w", &t).unwrap();
    w.commit().unwrap();
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                let c = qtk::Checkpoint::open(&p).unwrap();
                assert_eq!(c.tensor("w").unwrap().as_bytes(), t.as_bytes());
                // moved to another thread and used there
                std::thread::spawn(move || assert_eq!(c.read_f32("w").unwrap().len(), 32 * 64)).join().unwrap();
            });
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}
