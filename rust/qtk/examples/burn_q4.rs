//! The seed scenario: a Burn checkpoint with quantized tensors, loaded on a plain CPU.
//!
//!     cargo run --example burn_q4 [MODEL.bpk]
//!
//! With no argument it first writes `burn_q4.bpk` (in the system's temporary directory): a
//! linear layer whose weight is Q4S with f32 scales per block of 32 in Burn's exact layout
//! (`QuantScheme::default().with_value(QuantValue::Q4S).per_block([32], ScaleDtype::F32)`), the
//! kind of tensor burn-ndarray refuses with "from_data not supported for scheme". Then it opens
//! the file, prints every tensor with its Burn scheme, and dequantizes the quantized ones.
//!
//! In a Burn program the dequantized values become a `TensorData` for any backend (Burn's
//! crates cannot be built here, so this part is not compiled):
//!
//! ```ignore
//! use burn::tensor::{Tensor, TensorData};
//! let values = ckpt.read_f32(&info.name)?;                   // what this example prints
//! let data = TensorData::new(values, info.shape.clone());      // DType::F32
//! let w: Tensor<NdArray, 2> = Tensor::from_data(data, &device); // no panic: it is f32 now
//! ```
use qtk::{Checkpoint, QuantValue, ScaleDtype, Scheme, TensorKind};

fn write_sample(path: &std::path::Path) -> qtk::Result<()> {
    let (out, inp) = (16usize, 64usize);
    let w: Vec<f32> = (0..out * inp).map(|i| ((i * 2654435761usize % 1000) as f32 - 500.0) / 5000.0).collect();
    let b: Vec<f32> = (0..out).map(|i| i as f32 / 100.0).collect();
    let scheme = Scheme::default().with_value(QuantValue::Q4S).per_block([32], ScaleDtype::F32);
    let t = qtk::quantize(&w, &[out, inp], &scheme, &Default::default())?;
    let mut wr = qtk::Writer::create(path, &qtk::WriteOptions { force: true, ..Default::default() })?;
    wr.add_tensor("linear.weight", &t)?;
    wr.add_f32("linear.bias", &[out], &b)?;
    wr.commit()
}

fn run() -> qtk::Result<()> {
    let path = match std::env::args_os().nth(1) {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let p = std::env::temp_dir().join("burn_q4.bpk");
            write_sample(&p)?;
            println!("wrote {}", p.display());
            p
        }
    };
    let ckpt = Checkpoint::open(&path)?;
    println!("{}: {:?}, {} tensors", path.display(), ckpt.format(), ckpt.len());
    for info in ckpt.tensors() {
        match &info.kind {
            TensorKind::Quantized(s) => {
                // Burn's own form of the scheme, as its burnpack metadata holds it
                let burn = s.to_burn_json_with(Some(&info.shape), qtk::BurnForm::Current).unwrap_or_else(|e| format!("(not a Burn scheme: {})", e));
                let values = ckpt.read_f32(&info.name)?;
                let rms = (values.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / values.len().max(1) as f64).sqrt();
                println!("  {} {:?} {} = {}", info.name, info.shape, s, burn);
                println!("    dequantized: {} f32 values, rms {:.5}, first {:?}", values.len(), rms, &values[..values.len().min(4)]);
            }
            TensorKind::Raw(e) => println!("  {} {:?} {}", info.name, info.shape, e),
        }
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("burn_q4: {} [{}]", e, e.status());
        std::process::exit(1);
    }
}
