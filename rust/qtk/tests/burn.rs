//! Burn's own vectors and vocabulary: its quantize case, BURNPACK.md's serialized schemes, the
//! builder and presets of cubecl's QuantScheme, both serialized shapes, and a burnpack with a
//! Q4S block-32 tensor in Burn's layout read back as Burn writes it.
mod common;
use common::*;
use qtk::{BlockScale, BlockSize, BurnForm, QuantMode, QuantStore, QuantValue, ScaleDtype, Scheme};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{:02x}", x)).collect()
}

// BURNPACK.md §2.6 (a)-(c): the dtype {"QFloat": scheme}; the scheme alone follows the 8-byte head
const HEX_A: &str = "a16651466c6f6174a56576616c7565635134466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f665626c6f636ba26473697a65a26773746f7261676585182001010101636c656e0165647479706563463136";
const HEX_B: &str = "a16651466c6f6174a56576616c75656445324d316573746f7265a16c5061636b65644e617469766500646d6f64656953796d6d65747269636674656e736f726346333265626c6f636ba26473697a65a26773746f72616765851001010101636c656e01656474797065655545344d33";
const HEX_C: &str = "a16651466c6f6174a56576616c7565635138466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f665626c6f636bf6";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn burn_quantize_with_given_scale() {
    // Burn's case: [-1.8, -1, 0, 0.5] with scale 0.014173228 -> [-127, -71, 0, 35]
    let s = Scheme::default().with_value(QuantValue::Q8S);
    let scales = [0.014173228f32];
    let t = qtk::quantize(&[-1.8, -1.0, 0.0, 0.5], &[4], &s, &qtk::QuantizeOptions::default().scales(&scales)).unwrap();
    let b = t.as_bytes();
    assert_eq!(&b[..4], &[0x81, 0xb9, 0x00, 0x23]);
    assert_eq!(f32::from_le_bytes([b[4], b[5], b[6], b[7]]), 0.014173228);
    assert_eq!(t.scales().unwrap(), vec![0.014173228]);
    // dynamic: scale = max|x| / 127
    let t = qtk::quantize(&[-12.7, 3.0, 0.0, 6.35], &[4], &s, &Default::default()).unwrap();
    assert_eq!(t.scales().unwrap()[0], 12.7f32 / 127.0);
    assert_eq!(&t.as_bytes()[..4], &[(-127i8) as u8, 30, 0, 64]);
}

#[test]
fn burnpack_cbor_worked_examples() {
    let a = Scheme::default().with_value(QuantValue::Q4F).per_block([32], ScaleDtype::F16);
    let c = a.to_burn_cbor().unwrap();
    assert_eq!(hex(&c), HEX_A[16..]);
    assert_eq!(c.len(), 95);
    assert_eq!(Scheme::from_burn_cbor(&c).unwrap(), a);
    assert_eq!(Scheme::from_burn_cbor(&unhex(HEX_A)).unwrap(), a); // the whole dtype
    assert_eq!(hex(&Scheme::nvfp4().to_burn_cbor().unwrap()), HEX_B[16..]);
    assert_eq!(Scheme::from_burn_cbor(&unhex(HEX_B)).unwrap(), Scheme::nvfp4());
    assert_eq!(hex(&Scheme::default().to_burn_cbor().unwrap()), HEX_C[16..]);
    assert_eq!(Scheme::from_burn_cbor(&unhex(HEX_C)).unwrap(), Scheme::default());
}

#[test]
fn tensor_none_is_not_some_f32() {
    let none = Scheme::default();
    let f32s = Scheme::default().per_tensor(ScaleDtype::F32);
    assert_ne!(none, f32s);
    assert_eq!(none.tensor_scale(), Some(ScaleDtype::F32));
    assert_eq!(none.to_string(), "q8f");
    assert_eq!(f32s.to_string(), "q8f,tensor=f32");
    assert!(none.to_burn_json().unwrap().contains("\"tensor\":null"));
    assert!(f32s.to_burn_json().unwrap().contains("\"tensor\":\"F32\""));
    assert_eq!(Scheme::from_burn_json(&f32s.to_burn_json().unwrap()).unwrap(), f32s);
    assert_eq!(Scheme::from_burn_json(&none.to_burn_json().unwrap()).unwrap(), none);
    // the same bytes either way
    let x = weights(&[8, 16], 1);
    let a = qtk::quantize(&x, &[8, 16], &none, &Default::default()).unwrap();
    let b = qtk::quantize(&x, &[8, 16], &f32s, &Default::default()).unwrap();
    assert_eq!(a.as_bytes(), b.as_bytes());
}

#[test]
fn presets_and_fields_mirror_burn() {
    let n = Scheme::nvfp4();
    assert_eq!(n.value, QuantValue::E2M1);
    assert_eq!(n.store, QuantStore::PackedNative(0));
    assert_eq!(n.mode, QuantMode::Symmetric);
    assert_eq!(n.tensor, Some(ScaleDtype::F32));
    assert_eq!(n.block, Some(BlockScale { size: BlockSize::new([16]), dtype: ScaleDtype::UE4M3 }));
    for (name, s) in [("nvfp4", Scheme::nvfp4()), ("mxfp4", Scheme::mxfp4()), ("mxfp8", Scheme::mxfp8()), ("nf4", Scheme::nf4())] {
        assert_eq!(Scheme::preset(name).unwrap(), s, "{}", name);
        assert_eq!(s.preset_name(), Some(name));
    }
    assert!(Scheme::nvfp4().is_burn());
    assert!(!Scheme::parse("q4_k").unwrap().is_burn());
    let k = Scheme::parse("u4,block=128:f16,zero=u8").unwrap();
    assert_eq!(k.mode, QuantMode::Affine);
    assert_eq!(k.value, QuantValue::U4);
    assert_eq!(k.offset, Some(qtk::Offset { kind: qtk::OffsetKind::Zero, dtype: ScaleDtype::U8 }));
    let gg = Scheme::parse("q4_k").unwrap();
    assert_eq!(gg.store, QuantStore::Ggml);
    assert_eq!(gg.super_block, Some(qtk::SuperBlock { size: 256, dtype: ScaleDtype::F16 }));
    assert_eq!(Scheme::parse(&gg.to_string()).unwrap(), gg);
    // ggml's lattice types (docs/lattice.md): their own mode, the codebook's name as the table
    let iq = Scheme::parse("iq2_xxs").unwrap();
    assert_eq!(iq.mode, QuantMode::Lattice);
    assert_eq!(iq.store, QuantStore::Ggml);
    assert_eq!(iq.table.as_deref(), Some("iq2xxs"));
    assert!(!iq.is_burn());
    assert_eq!(Scheme::parse(&iq.to_string()).unwrap(), iq);
    assert_eq!(iq.preset_name(), Some("iq2_xxs"));
    // made by qtk through the same call as every scheme: with importance weights (IQ2_XXS needs them)
    let x: Vec<f32> = weights(&[2, 512], 3).iter().map(|v| v.clamp(-0.06, 0.06)).collect(); // 3 sigma: no outliers
    let imp: Vec<f32> = (0..512).map(|j| 0.5 + (j % 7) as f32).collect();
    let e = qtk::quantize(&x, &[2, 512], &iq, &Default::default()).unwrap_err();
    assert_eq!(e.status(), qtk::Status::ARG);
    assert!(e.message().contains("needs an importance matrix"), "{}", e.message());
    let o = qtk::QuantizeOptions::default().calibration(qtk::Calibration::Mse).weights(&imp);
    let t = qtk::quantize(&x, &[2, 512], &iq, &o).unwrap();
    assert_eq!(t.scheme(), &iq);
    let y = t.dequantize().unwrap();
    let (mut sx, mut se) = (0.0f64, 0.0f64);
    for (i, (a, b)) in x.iter().zip(&y).enumerate() {
        let w = imp[i % 512] as f64;
        sx += w * (*a as f64) * (*a as f64);
        se += w * ((a - b) as f64) * ((a - b) as f64);
    }
    assert!(10.0 * (sx / se).log10() > 9.0, "weighted SQNR {}", 10.0 * (sx / se).log10());
}

#[test]
fn both_serialized_shapes() {
    let legacy = r#"{"value":"Q4F","param":"F16","store":{"PackedU32":0},"level":{"Block":{"storage":[32,1,1,1,1],"len":1}},"mode":"Symmetric"}"#;
    let s = Scheme::default().with_value(QuantValue::Q4F).per_block([32], ScaleDtype::F16);
    assert_eq!(Scheme::from_burn_json_form(legacy).unwrap(), (s.clone(), BurnForm::Legacy));
    assert_eq!(s.to_burn_json_with(None, BurnForm::Legacy).unwrap(), legacy);
    let cb = s.to_burn_cbor_with(None, BurnForm::Legacy).unwrap();
    assert_eq!(Scheme::from_burn_cbor_form(&cb).unwrap(), (s.clone(), BurnForm::Legacy));
    let two = Scheme::nvfp4().to_burn_json_with(None, BurnForm::Legacy).unwrap();
    assert!(two.contains(r#""level":{"BlockTensor":{"block":{"storage":[16,1,1,1,1],"len":1},"global":"F32"}}"#), "{}", two);
    for spec in SCHEMES.iter().filter(|s| Scheme::parse(s).unwrap().is_burn() && !s.contains('*')) {
        let s = Scheme::parse(spec).unwrap();
        for form in [BurnForm::Current, BurnForm::Legacy] {
            let j = s.to_burn_json_with(None, form).unwrap();
            let c = s.to_burn_cbor_with(None, form).unwrap();
            let mut want = s.clone();
            if s.mode == QuantMode::Lookup {
                want.table = None; // Burn names no table
            }
            if form == BurnForm::Legacy && s.block.is_none() && s.tensor.is_none() {
                want.tensor = Some(ScaleDtype::F32); // the old "Tensor" level with param F32
            }
            assert_eq!(Scheme::from_burn_json_form(&j).unwrap(), (want.clone(), form), "{} {:?}", spec, form);
            assert_eq!(Scheme::from_burn_cbor_form(&c).unwrap(), (want, form), "{} {:?}", spec, form);
        }
    }
    // '*' needs the shape to be written as Burn stores it
    let w = Scheme::parse("q8s,block=*:f32").unwrap();
    assert_eq!(w.to_burn_cbor().unwrap_err().status(), qtk::Status::SHAPE);
    let j = w.to_burn_json_with(Some(&[4, 64]), BurnForm::Current).unwrap();
    assert!(j.contains(r#""storage":[64,1,1,1,1]"#), "{}", j);
}

/// The seed scenario: a burnpack holding a Q4S block-32 tensor in Burn's layout, written, then
/// opened and listed with its Burn scheme, dequantized, and the bytes and the dtype Burn reads.
#[test]
fn burnpack_with_a_q4s_block32_tensor() {
    let dir = scratch("burn-q4s");
    let path = dir.join("model.bpk");
    let s = Scheme::default().with_value(QuantValue::Q4S).per_block([32], ScaleDtype::F32);
    let x = weights(&[64, 96], 9);
    let t = qtk::quantize(&x, &[64, 96], &s, &Default::default()).unwrap();
    let bias: Vec<f32> = (0..64).map(|i| i as f32 / 64.0).collect();
    let mut w = qtk::Writer::create(&path, &Default::default()).unwrap();
    w.add_tensor("fc.weight", &t).unwrap();
    w.add_f32("fc.bias", &[64], &bias).unwrap();
    w.add_meta("format", "burnpack").unwrap();
    w.commit().unwrap();
    // the file holds Burn's serialized dtype for the tensor, byte for byte
    let file = std::fs::read(&path).unwrap();
    let want = s.to_burn_cbor().unwrap();
    assert!(file.windows(want.len()).any(|win| win == &want[..]), "the burnpack does not hold Burn's QuantScheme bytes");
    let c = qtk::Checkpoint::open(&path).unwrap();
    assert_eq!(c.format(), Some(qtk::Format::Burnpack));
    let infos: Vec<_> = c.tensors().collect();
    assert_eq!(infos.len(), 2);
    let wi = c.info("fc.weight").unwrap();
    assert_eq!(wi.scheme(), Some(&s));
    assert_eq!(wi.shape, vec![64, 96]);
    assert_eq!(wi.nbytes, 64 * 96 / 2 + 64 * 3 * 4);
    assert_eq!(c.read_bytes("fc.weight").unwrap(), t.as_bytes());
    assert_eq!(c.read_f32("fc.weight").unwrap(), t.dequantize().unwrap());
    assert_eq!(qtk::burn::dequantize_qfloat(t.as_bytes(), &[64, 96], &s).unwrap(), t.dequantize().unwrap());
    let json = s.to_burn_json().unwrap();
    assert_eq!(qtk::burn::dequantize_qfloat_json(t.as_bytes(), &[64, 96], &json).unwrap(), t.dequantize().unwrap());
    assert_eq!(c.read_f32("fc.bias").unwrap(), bias);
    assert_eq!(c.meta("format").as_deref(), Some("burnpack"));
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn burn_files_in_shared_data() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/burn/model.bpk");
    if !p.exists() {
        eprintln!("skipped: {} is not here (a user's clone has no shared data)", p.display());
        return;
    }
    let c = qtk::Checkpoint::open(&p).unwrap();
    assert_eq!(c.len(), 18);
    let fc1 = c.info("fc1.weight").unwrap();
    assert_eq!(fc1.kind, qtk::TensorKind::Raw(qtk::Elem::F32));
    assert_eq!(fc1.shape, vec![1600, 128]);
    let v = c.read_f32("fc1.weight").unwrap();
    assert_eq!(v.len(), 1600 * 128);
    assert!(v.iter().all(|x| x.is_finite()));
    // a raw tensor is not a qtk::Tensor
    let e = c.tensor("fc1.weight").unwrap_err();
    assert_eq!(e.status(), qtk::Status::ARG);
}
