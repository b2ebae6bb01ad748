//! Helpers shared by the integration tests: deterministic data, .npy files, the qtk CLI.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every scheme family, as the Python tests list them: each value type, symmetric and lookup,
/// u32 / native / packed stores along either dimension, per-tensor, 1-D, 2-D, 3-D and '*'
/// blocks, every scale dtype, two-level; and qtk's affine extension.
pub const SCHEMES: &[&str] = &[
    "q8f", "q8s", "q4f", "q4s", "q2f", "q2s", "e4m3", "e5m2", "e2m1",
    "q8s,block=32:f16", "q8f,block=32:f32,store=native", "q4f,block=32:f16", "q4s,block=64:bf16,store=native",
    "q2s,block=32:f16", "q2f,block=16:f32,store=u32:1", "q4f,block=32:f16,store=packed",
    "e4m3,block=32:f16", "e5m2,block=32:bf16", "e4m3,block=128x128:f32,store=native", "e2m1,block=32:ue8m0",
    "e5m2,block=16:ue8m0,store=u32:1", "e2m1,block=32:f16,store=native",
    "nvfp4", "mxfp4", "mxfp8", "nf4", "q4f,table=iq4nl,block=32:f32",
    "q8s,block=*:f32", "q4s,block=*x1:f16", "q4f,block=4x8:f16", "q8s,block=2x3x8:f32",
    "e2m1,block=16:ue4m3,tensor=f32,store=packed:1", "q4s,block=16:f16,tensor=f32", "q8s,block=32:ue4m3,tensor=f32",
    "q4_0", "q8_0", "q4_1", "q4_k", "q6_k", "q2_k", "u4,block=128:f16,zero=u8", "u4,block=32:f16,min=f16",
];

/// The shape a scheme is tested on.
pub fn shape_for(spec: &str) -> Vec<usize> {
    match spec {
        "q8s,block=2x3x8:f32" => vec![5, 7, 70],
        "e4m3,block=128x128:f32,store=native" => vec![130, 260],
        s if s.contains('_') || s.starts_with('u') => vec![6, 512], // ggml's types, affine blocks
        _ => vec![37, 70],
    }
}

/// xorshift64*
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Gaussian weights with a few outliers, zeros, a negative zero and an exact half.
pub fn weights(shape: &[usize], seed: u64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let mut r = Rng::new(seed);
    let mut x: Vec<f32> = (0..n).map(|_| (r.normal() * 0.02) as f32).collect();
    if n >= 8 {
        for i in 0..(n / 50 + 1) {
            let j = (r.next_u64() % n as u64) as usize;
            x[j] *= 40.0;
            let _ = i;
        }
        x[1] = 0.0;
        x[2] = -0.0;
        x[3] = 0.5;
    }
    x
}

/// Writes a C-order little-endian float32 .npy file.
pub fn write_npy(path: &Path, shape: &[usize], x: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", tuple);
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    for v in x {
        b.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// The data of a version-1 .npy file (little-endian, C order), as raw bytes.
pub fn read_npy_bytes(path: &Path) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hl..].to_vec()
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qtk-rust-{}-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The qtk CLI: QTK_BIN, else the one beside the libraries the build found. None when there
/// is none (the caller says it skips); QTK_BIN set to a missing file fails.
pub fn cli() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("QTK_BIN").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(b);
        assert!(p.is_file(), "QTK_BIN={} does not exist", p.display());
        return Some(p);
    }
    let p = PathBuf::from(option_env!("QTK_SYS_BIN_DIR")?).join("qtk");
    if p.is_file() {
        Some(p)
    } else {
        None
    }
}

/// Runs the CLI on the scalar reference kernels; panics with its stderr on failure.
pub fn run_cli(bin: &Path, args: &[&str]) {
    let out = Command::new(bin).args(args).env("QTK_ISA", "scalar").output().unwrap();
    assert!(out.status.success(), "qtk {:?} failed: {}", args, String::from_utf8_lossy(&out.stderr));
}

/// f16 bits -> f32 (for comparisons).
pub fn f16_to_f32(h: u16) -> f32 {
    let s = ((h >> 15) as u32) << 31;
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as u32;
    let bits = if e == 0 {
        if m == 0 {
            s
        } else {
            return if s != 0 { -(m as f32) * 2f32.powi(-24) } else { m as f32 * 2f32.powi(-24) };
        }
    } else if e == 31 {
        s | 0x7f80_0000 | (m << 13)
    } else {
        s | (((e - 15 + 127) as u32) << 23) | (m << 13)
    };
    f32::from_bits(bits)
}
