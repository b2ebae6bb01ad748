//! Checkpoint round trips through every format, conversion with rules, presets, progress and
//! its summary, and the files in ../shared/data when they are at hand.
mod common;
use common::*;
use qtk::{Checkpoint, ConvertOptions, Format, Scheme, TensorKind, Writer};

#[test]
fn round_trips_in_every_format() {
    let dir = scratch("ckpt-rt");
    let x = weights(&[64, 256], 5);
    let b: Vec<f32> = (0..64).map(|i| i as f32).collect();
    // GGUF holds the ggml types only
    for (ext, specs) in [
        ("bpk", &["nvfp4", "q4s,block=32:f32", "q4_k", "u4,block=128:f16,zero=u8", "q8s,block=64x1:f16"][..]),
        ("safetensors", &["nvfp4", "mxfp4", "q4f,block=32:f16", "q6_k", "nf4"][..]),
        ("gguf", &["q8_0", "q4_0", "q4_k", "q6_k", "mxfp4"][..]),
    ] {
        let path = dir.join(format!("m.{}", ext));
        let ts: Vec<qtk::Tensor> =
            specs.iter().map(|s| qtk::quantize(&x, &[64, 256], &Scheme::parse(s).unwrap(), &Default::default()).unwrap()).collect();
        let mut w = Writer::create(&path, &Default::default()).unwrap();
        for (i, t) in ts.iter().enumerate() {
            w.add_tensor(&format!("blk.{}.weight", i), t).unwrap();
        }
        w.add_f32("bias", &[64], &b).unwrap();
        w.add_meta("qtk.test", "round trip").unwrap();
        w.commit().unwrap();
        let c = Checkpoint::open(&path).unwrap();
        assert_eq!(c.format(), Some(match ext {
            "bpk" => Format::Burnpack,
            "gguf" => Format::Gguf,
            _ => Format::Safetensors,
        }));
        assert_eq!(c.len(), specs.len() + 1, "{}", ext);
        for (i, t) in ts.iter().enumerate() {
            let name = format!("blk.{}.weight", i);
            let info = c.info(&name).unwrap();
            assert_eq!(info.kind, TensorKind::Quantized(t.scheme().clone()), "{} {}", ext, specs[i]);
            let back = c.tensor(&name).unwrap();
            assert_eq!(back.as_bytes(), t.as_bytes(), "{} {}", ext, specs[i]);
            assert_eq!(c.read_f32(&name).unwrap(), t.dequantize().unwrap(), "{} {}", ext, specs[i]);
        }
        assert_eq!(c.read_f32("bias").unwrap(), b);
        assert!(c.metadata().iter().any(|(k, v)| k == "qtk.test" && v == "round trip"), "{}: {:?}", ext, c.metadata());
        // a tensor loaded from the checkpoint outlives it
        let t0 = c.tensor("blk.0.weight").unwrap();
        drop(c);
        assert_eq!(t0.as_bytes(), ts[0].as_bytes());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_with_rules_presets_and_progress() {
    let dir = scratch("ckpt-convert");
    let src = dir.join("m.safetensors");
    let names = ["model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"];
    let xs: Vec<Vec<f32>> = (0..3).map(|i| weights(&[64, 256], 10 + i)).collect();
    let norm = vec![1f32; 256];
    let mut w = Writer::create(&src, &Default::default()).unwrap();
    for i in 0..3 {
        w.add_f32(names[i], &[64, 256], &xs[i]).unwrap();
    }
    w.add_f32(names[3], &[256], &norm).unwrap();
    w.commit().unwrap();
    let mut seen = Vec::new();
    let o = ConvertOptions::new().scheme("nvfp4").rule("embed=q8s,block=32:f16").rule("q_proj=keep").on_progress(|p| {
        seen.push((p.done, p.total));
        std::ops::ControlFlow::Continue(())
    });
    let out = dir.join("m.bpk");
    let s = qtk::convert(&src, &out, &o).unwrap();
    drop(o);
    assert_eq!((s.tensors, s.quantized, s.kept), (4, 2, 2));
    assert_eq!(s.in_format, Some(Format::Safetensors));
    assert_eq!(s.out_format, Some(Format::Burnpack));
    assert_eq!(seen.last(), Some(&(4, 4)));
    let plan: Vec<(&str, qtk::Action)> = s.plan.iter().map(|p| (p.name.as_str(), p.action)).collect();
    assert!(plan.contains(&(names[0], qtk::Action::Quantize)), "{:?}", s.plan);
    assert!(plan.contains(&(names[2], qtk::Action::Keep)), "{:?}", s.plan);
    let up = s.plan.iter().find(|p| p.name == names[1]).unwrap();
    assert_eq!(up.output_type, "nvfp4");
    let c = Checkpoint::open(&out).unwrap();
    assert_eq!(c.info(names[0]).unwrap().scheme(), Some(&Scheme::parse("q8s,block=32:f16").unwrap()));
    let t = c.tensor(names[1]).unwrap();
    let want = qtk::quantize(&xs[1], &[64, 256], &Scheme::nvfp4(), &Default::default()).unwrap();
    assert_eq!(t.as_bytes(), want.as_bytes());
    assert_eq!(c.read_f32(names[2]).unwrap(), xs[2]);
    // a llama.cpp mixture into GGUF, and back to floats
    let g = dir.join("m.gguf");
    let mut o = ConvertOptions::new();
    o.mixture = Some("q4_k_m".into());
    let s = qtk::convert(&src, &g, &o).unwrap();
    assert_eq!(s.out_format, Some(Format::Gguf));
    assert!(s.quantized >= 2, "{:?}", s);
    let f = dir.join("back.safetensors");
    let mut o = ConvertOptions::new().scheme("none");
    o.dtype = qtk::FloatType::BF16;
    let s = qtk::convert(&g, &f, &o).unwrap();
    assert!(s.dequantized >= 2);
    let c = Checkpoint::open(&f).unwrap();
    assert!(c.tensors().all(|t| matches!(t.kind, TensorKind::Raw(e) if e == qtk::Elem::BF16 || e == qtk::Elem::F32)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ggml_and_hub_files_in_shared_data() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ggml/types.gguf");
    if !p.exists() {
        eprintln!("skipped: {} is not here (a user's clone has no shared data)", p.display());
        return;
    }
    let c = Checkpoint::open(&p).unwrap();
    let mut quantized = 0;
    for t in c.tensors() {
        if let TensorKind::Quantized(s) = &t.kind {
            quantized += 1;
            let tensor = c.tensor(&t.name).unwrap();
            assert_eq!(tensor.scheme(), s);
            assert_eq!(tensor.nbytes(), t.nbytes);
            let v = c.read_f32(&t.name).unwrap();
            assert_eq!(v, tensor.dequantize().unwrap(), "{}", t.name);
            assert!(t.file_type.is_some());
        }
    }
    assert!(quantized >= 10, "{} quantized tensors", quantized);
}
