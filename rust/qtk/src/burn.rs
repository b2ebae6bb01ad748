//! What a Burn program needs to load quantized tensors its CPU backend refuses.
//!
//! Burn's `burn-ndarray` panics with `from_data not supported for scheme ...` in
//! `Tensor::from_data` for every quantized scheme but 8-bit ints. A `TensorData` of dtype
//! `QFloat(scheme)` holds exactly the bytes qtk reads (SPEC §5), so an adapter can swap such a
//! snapshot for qtk's dequantized f32 values before it reaches the backend; rust/README.md has
//! the adapter, in the style of burn-store's `FloatCastAdapter`. These are the calls it makes.
use crate::error::{check, Error, Result, Status};
use crate::scheme::Scheme;
use crate::sys;
use crate::tensor::{numel, rank_of};

/// The f32 values of a quantized `TensorData`: its bytes (`data.as_bytes()`), its shape, and
/// its `QuantScheme` (here as a [`Scheme`]; [`Scheme::from_burn_json`] takes
/// `serde_json::to_string(&scheme)`). The bytes are validated and read in place.
///
/// ```
/// // Burn's own case: Q8S per-tensor, values [-127, -71, 0, 35] then the f32 scale
/// let mut bytes = vec![0x81u8, 0xb9, 0x00, 0x23];
/// bytes.extend_from_slice(&0.014173228f32.to_le_bytes());
/// let s = qtk::Scheme::from_burn_json(r#"{"value":"Q8S","store":{"PackedU32":0},"mode":"Symmetric","tensor":null,"block":null}"#)?;
/// let v = qtk::burn::dequantize_qfloat(&bytes, &[4], &s)?;
/// assert_eq!(v, [-127.0 * 0.014173228f32, -71.0 * 0.014173228, 0.0, 35.0 * 0.014173228]);
/// # Ok::<(), qtk::Error>(())
/// ```
pub fn dequantize_qfloat(bytes: &[u8], shape: &[usize], scheme: &Scheme) -> Result<Vec<f32>> {
    let n = numel(shape)?;
    let mut out = vec![0f32; n];
    let c = scheme.to_c()?;
    let rank = rank_of(shape)?;
    // SAFETY: bytes and shape are readable for their lengths; out holds numel values.
    check(unsafe {
        sys::qtk_dequantize_bytes(bytes.as_ptr().cast(), bytes.len(), shape.as_ptr(), rank, &c, sys::qtk_dtype_QTK_DTYPE_F32, out.as_mut_ptr().cast(), n)
    })?;
    Ok(out)
}

/// [`dequantize_qfloat`] with the scheme as Burn serializes it to JSON (`serde_json`), either
/// shape Burn has used. A lookup scheme needs a table, which Burn does not name: give it
/// with [`dequantize_qfloat`] and [`Scheme::with_table`].
pub fn dequantize_qfloat_json(bytes: &[u8], shape: &[usize], scheme_json: &str) -> Result<Vec<f32>> {
    let s = Scheme::from_burn_json(scheme_json)?;
    if s.table.is_none() && matches!(s.mode, crate::QuantMode::Lookup) {
        return Err(Error::new(Status::SCHEME, "Burn's Lookup mode names no table: give the scheme with its table (Scheme::with_table)"));
    }
    dequantize_qfloat(bytes, shape, &s)
}
