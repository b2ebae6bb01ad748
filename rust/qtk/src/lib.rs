//! qtk, the quantized tensor kit, from Rust.
//!
//! Every scheme of Burn's `QuantScheme` family (Q8F/Q8S/Q4F/Q4S/Q2F/Q2S, E4M3/E5M2/E2M1;
//! symmetric and lookup modes; native, packed and u32 stores along any dimension; per-tensor,
//! N-D block and two-level scales) and qtk's extensions (affine blocks: ggml's K-quants,
//! GPTQ/AWQ zero points), bit-exact to qtk's SPEC and byte-compatible with Burn's `TensorData`:
//! quantize, dequantize, convert, multiply, and read or write whole checkpoints (Burn's
//! burnpack, safetensors with the Hugging Face Hub's quantized layouts, llama.cpp's GGUF).
//!
//! A safe layer over qtk's C library (linked statically by default; see rust/README.md for
//! how the build finds it). Every failure is an [`Error`] with the C status and message;
//! nothing here panics on any input.
//!
//! ```
//! use qtk::{QuantValue, ScaleDtype, Scheme};
//! let w: Vec<f32> = (0..32 * 64).map(|i| ((i * 37 % 101) as f32 - 50.0) / 100.0).collect();
//! let s = Scheme::default().with_value(QuantValue::Q4S).per_block(&[32], ScaleDtype::F16);
//! let t = qtk::quantize(&w, &[32, 64], &s, &Default::default())?;
//! let bytes = t.as_bytes();                 // Burn's TensorData bytes for QFloat(s)
//! let back = qtk::Tensor::from_bytes(bytes, &[32, 64], &s)?;
//! assert_eq!(back.dequantize()?, t.dequantize()?);
//! let y = qtk::matmul(&t, &vec![1.0; 64], 1, qtk::Precision::Exact)?;
//! assert_eq!(y.len(), 32);
//! # Ok::<(), qtk::Error>(())
//! ```
#![deny(missing_docs)]

pub mod burn;
mod ckpt;
mod convert;
mod error;
mod matmul;
mod scheme;
/// The raw C API, as Debian's bindgen generates it from include/qtk.h, qtk_matmul.h and
/// qtk_ckpt.h (rust/qtk/bindgen.sh; the headers document every item). C enums are integer
/// constants (`qtk_status_QTK_E_SHAPE`). Everything here is `unsafe` to call; the rest of the
/// crate is the safe API over it.
#[allow(missing_docs)]
pub mod sys;
mod tensor;
mod writer;

pub use ckpt::{Checkpoint, Elem, Format, HubLayout, TensorInfo, TensorKind};
pub use convert::{convert, convert_check, Action, ConvertOptions, ConvertSummary, FloatType, Notice, PlanEntry, Progress};
pub use error::{Error, Result, Status};
pub use matmul::{matmul, matmul_into, matmul_path, matmul_with, MatmulLayout, MatmulOptions, MatmulPath, Precision};
pub use scheme::{BlockScale, BlockSize, BurnForm, Offset, OffsetKind, QuantMode, QuantStore, QuantValue, ScaleDtype, Scheme, SuperBlock};
pub use tensor::{quantize, Calibration, QuantizeOptions, Tensor, TensorRef};
pub use writer::{WriteOptions, Writer};

use error::{check, cstring, static_str};

/// rust/README.md's examples, run as doctests (the program is compiled, the session run).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The qtk C library's version (`"0.1.0"`).
pub fn version() -> &'static str {
    // SAFETY: a static string.
    unsafe { static_str(sys::qtk_version()) }
}

/// An instruction-set level of the kernels. Every level gives the same bits as `Scalar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// the best level this CPU supports
    Auto,
    /// portable C, one element at a time: the reference
    Scalar,
    /// portable C vectors
    Portable,
    /// x86-64 AVX2 + FMA + F16C
    Avx2,
    /// x86-64 AVX-512 F/BW/DQ/VL
    Avx512,
    /// 64-bit ARM Advanced SIMD (sdot where the CPU has the dot product)
    Neon,
}

impl Isa {
    fn to_c(self) -> sys::qtk_isa {
        match self {
            Isa::Auto => sys::qtk_isa_QTK_ISA_AUTO,
            Isa::Scalar => sys::qtk_isa_QTK_ISA_SCALAR,
            Isa::Portable => sys::qtk_isa_QTK_ISA_PORTABLE,
            Isa::Avx2 => sys::qtk_isa_QTK_ISA_AVX2,
            Isa::Avx512 => sys::qtk_isa_QTK_ISA_AVX512,
            Isa::Neon => sys::qtk_isa_QTK_ISA_NEON,
        }
    }
    fn from_c(c: sys::qtk_isa) -> Isa {
        match c {
            x if x == sys::qtk_isa_QTK_ISA_SCALAR => Isa::Scalar,
            x if x == sys::qtk_isa_QTK_ISA_PORTABLE => Isa::Portable,
            x if x == sys::qtk_isa_QTK_ISA_AVX2 => Isa::Avx2,
            x if x == sys::qtk_isa_QTK_ISA_AVX512 => Isa::Avx512,
            x if x == sys::qtk_isa_QTK_ISA_NEON => Isa::Neon,
            _ => Isa::Auto,
        }
    }
    /// The level's name (`"avx2"`).
    pub fn name(self) -> &'static str {
        // SAFETY: a static string.
        unsafe { static_str(sys::qtk_isa_name(self.to_c())) }
    }
}

/// Forces a kernel level for the process (`Isa::Auto` restores detection); a level this CPU
/// lacks is an error.
pub fn set_isa(isa: Isa) -> Result<()> {
    // SAFETY: any value is checked.
    check(unsafe { sys::qtk_set_isa(isa.to_c()) })
}

/// The kernel level in use.
pub fn isa() -> Isa {
    // SAFETY: no arguments.
    Isa::from_c(unsafe { sys::qtk_get_isa() })
}

/// The best level this CPU and build support.
pub fn detect_isa() -> Isa {
    // SAFETY: no arguments.
    Isa::from_c(unsafe { sys::qtk_detect_isa() })
}

/// Sets the default thread count (0: the number of available cores).
pub fn set_threads(n: usize) {
    // SAFETY: any value is accepted.
    unsafe { sys::qtk_set_threads(i32::try_from(n).unwrap_or(i32::MAX)) }
}

/// The default thread count.
pub fn threads() -> usize {
    // SAFETY: no arguments.
    unsafe { sys::qtk_get_threads() }.max(0) as usize
}

/// Registers (or replaces) a lookup table of 2, 4, 16 or 256 finite entries for `table=NAME`
/// schemes (thread-safe). The built-in `nf4` and `iq4nl` cannot be replaced.
pub fn register_table(name: &str, entries: &[f32]) -> Result<()> {
    let c = cstring(name, "the table name")?;
    // SAFETY: entries is readable for its length.
    check(unsafe { sys::qtk_table_register(c.as_ptr(), entries.as_ptr(), entries.len()) })
}

/// A registered table's entries.
pub fn table(name: &str) -> Result<Vec<f32>> {
    let c = cstring(name, "the table name")?;
    let mut v = vec![0f32; 256];
    let mut n = 0usize;
    // SAFETY: v holds 256 entries, the largest table.
    check(unsafe { sys::qtk_table_get(c.as_ptr(), v.as_mut_ptr(), v.len(), &mut n) })?;
    v.truncate(n);
    Ok(v)
}
