//! [`Tensor`]: a quantized tensor in Burn's byte layout (SPEC §5), and [`quantize`].
use crate::error::{check, Error, Result, Status};
use crate::scheme::Scheme;
use crate::sys;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// How [`quantize`] chooses the scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Calibration {
    /// alpha = max |x| over each scale group (Burn's)
    #[default]
    MinMax,
    /// alpha = mean |x| (BitNet b1.58); not for two-level schemes
    AbsMean,
    /// the stored scale (and offset) of least (weighted) squared error per group
    Mse,
}

impl Calibration {
    pub(crate) fn to_c(self) -> sys::qtk_calibration {
        match self {
            Calibration::MinMax => sys::qtk_calibration_QTK_CALIB_MINMAX,
            Calibration::AbsMean => sys::qtk_calibration_QTK_CALIB_ABSMEAN,
            Calibration::Mse => sys::qtk_calibration_QTK_CALIB_MSE,
        }
    }
}

/// Options of [`quantize`] and [`Tensor::convert`]; `QuantizeOptions::default()` is minmax
/// calibration on the default thread count.
///
/// ```
/// let w: Vec<f32> = (0..64 * 256).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 1e4).collect();
/// let imp = vec![1.0f32; 256]; // one importance per column, as llama.cpp's imatrix
/// let o = qtk::QuantizeOptions::default().calibration(qtk::Calibration::Mse).weights(&imp).threads(2);
/// let t = qtk::quantize(&w, &[64, 256], &qtk::Scheme::parse("q4_k")?, &o)?;
/// assert_eq!(t.shape(), &[64, 256]);
/// # Ok::<(), qtk::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct QuantizeOptions<'a> {
    /// How the scales are chosen.
    pub calibration: Calibration,
    /// Caller-given scales (Burn's quantize with qparams): one per scale group, row-major over
    /// the block grid. `None`: calibrate.
    pub scales: Option<&'a [f32]>,
    /// The two-level global scale, with given scales of a two-level scheme.
    pub global_scale: Option<f32>,
    /// The affine mode's given offsets, one per scale group (with given scales).
    pub offsets: Option<&'a [f32]>,
    /// Importance weights of the squared error (calibration mse, `table=fit`): one per element,
    /// one per column (the last dimension), or per first index and column.
    pub weights: Option<&'a [f32]>,
    /// Threads; 0: the library default ([`set_threads`](crate::set_threads)).
    pub threads: usize,
}

impl<'a> QuantizeOptions<'a> {
    /// Sets the calibration.
    pub fn calibration(mut self, c: Calibration) -> Self {
        self.calibration = c;
        self
    }
    /// Sets given scales.
    pub fn scales(mut self, s: &'a [f32]) -> Self {
        self.scales = Some(s);
        self
    }
    /// Sets the given two-level global.
    pub fn global_scale(mut self, g: f32) -> Self {
        self.global_scale = Some(g);
        self
    }
    /// Sets given offsets.
    pub fn offsets(mut self, o: &'a [f32]) -> Self {
        self.offsets = Some(o);
        self
    }
    /// Sets importance weights.
    pub fn weights(mut self, w: &'a [f32]) -> Self {
        self.weights = Some(w);
        self
    }
    /// Sets the thread count.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    pub(crate) fn to_c(&self, global: &f32) -> Result<sys::qtk_quantize_options> {
        // SAFETY: all-zero is valid (NULL pointers, minmax, default threads).
        let mut o: sys::qtk_quantize_options = unsafe { std::mem::zeroed() };
        o.calibration = self.calibration.to_c();
        if let Some(s) = self.scales {
            o.scales = s.as_ptr();
            o.n_scales = s.len();
        }
        if self.global_scale.is_some() {
            o.global = global;
        }
        if let Some(w) = self.weights {
            o.weights = w.as_ptr();
            o.n_weights = w.len();
        }
        if let Some(x) = self.offsets {
            o.offsets = x.as_ptr();
            o.n_offsets = x.len();
        }
        o.threads = threads_arg(self.threads)?;
        Ok(o)
    }
}

pub(crate) fn threads_arg(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| Error::new(Status::ARG, format!("{} threads", n)))
}

pub(crate) fn rank_of(shape: &[usize]) -> Result<i32> {
    if shape.len() > sys::QTK_MAX_RANK as usize {
        return Err(Error::new(Status::SHAPE, format!("rank {}: qtk's tensors have rank 0..{}", shape.len(), sys::QTK_MAX_RANK)));
    }
    Ok(shape.len() as i32)
}

pub(crate) fn numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::new(Status::SHAPE, format!("shape {:?} has more elements than usize holds", shape)))
}

/// A quantized tensor: its scheme, its shape and its bytes in Burn's layout (values, then
/// scales, then the two-level global, then a fitted table: SPEC §5), which are exactly Burn's
/// `TensorData` bytes for the same scheme. Immutable; `Send` and `Sync` (every C function on a
/// tensor only reads it), so one tensor serves many threads.
pub struct Tensor {
    ptr: NonNull<sys::qtk_tensor>,
    scheme: Scheme,
    shape: Vec<usize>,
}

// SAFETY: a qtk_tensor is never modified after it is made, and every function taking one reads
// it only; its memory is freed by exactly one owner (Drop).
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl Drop for Tensor {
    fn drop(&mut self) {
        // SAFETY: ptr is the tensor this value owns.
        unsafe { sys::qtk_tensor_free(self.ptr.as_ptr()) }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "qtk::Tensor(shape={:?}, scheme='{}', nbytes={})", self.shape, self.scheme, self.nbytes())
    }
}

/// A [`Tensor`] that borrows its bytes instead of copying them
/// ([`Tensor::from_bytes_borrowed`]); it dereferences to a `Tensor`.
pub struct TensorRef<'a> {
    inner: Tensor,
    _bytes: PhantomData<&'a [u8]>,
}

impl<'a> Deref for TensorRef<'a> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.inner
    }
}

impl<'a> std::fmt::Debug for TensorRef<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Tensor {
    /// Takes ownership of a tensor the C library made.
    ///
    /// # Safety
    /// ptr is a valid qtk_tensor that nothing else frees.
    pub(crate) unsafe fn from_raw(ptr: *mut sys::qtk_tensor) -> Result<Tensor> {
        let ptr = NonNull::new(ptr).ok_or_else(|| Error::new(Status::INTERNAL, "qtk returned no tensor"))?;
        let l = &*sys::qtk_tensor_layout(ptr.as_ptr());
        let shape = l.shape[..(l.rank.max(0) as usize).min(l.shape.len())].to_vec();
        match Scheme::from_c(&*sys::qtk_tensor_scheme(ptr.as_ptr())) {
            Ok(scheme) => Ok(Tensor { ptr, scheme, shape }),
            Err(e) => {
                sys::qtk_tensor_free(ptr.as_ptr());
                Err(e)
            }
        }
    }

    pub(crate) fn as_ptr(&self) -> *const sys::qtk_tensor {
        self.ptr.as_ptr()
    }

    /// A tensor from Burn-layout bytes (a quantized `TensorData`'s bytes), validated and copied:
    /// the length must be exactly [`Scheme::nbytes`], scales finite, fields in range.
    pub fn from_bytes(bytes: &[u8], shape: &[usize], scheme: &Scheme) -> Result<Tensor> {
        let c = scheme.to_c()?;
        let rank = rank_of(shape)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: bytes and shape are readable for their lengths; out is writable.
        check(unsafe { sys::qtk_tensor_from_bytes(bytes.as_ptr().cast(), bytes.len(), shape.as_ptr(), rank, &c, &mut out) })?;
        unsafe { Tensor::from_raw(out) }
    }

    /// The same without a copy: the tensor borrows `bytes` for its lifetime.
    pub fn from_bytes_borrowed<'a>(bytes: &'a [u8], shape: &[usize], scheme: &Scheme) -> Result<TensorRef<'a>> {
        let c = scheme.to_c()?;
        let rank = rank_of(shape)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: the bytes outlive the TensorRef ('a) and are not changed (shared borrow); no
        // release callback.
        check(unsafe { sys::qtk_tensor_wrap(bytes.as_ptr().cast(), bytes.len(), shape.as_ptr(), rank, &c, None, std::ptr::null_mut(), &mut out) })?;
        Ok(TensorRef { inner: unsafe { Tensor::from_raw(out) }?, _bytes: PhantomData })
    }

    /// Validates Burn-layout bytes without making a tensor (what `from_bytes` checks).
    pub fn check_bytes(bytes: &[u8], shape: &[usize], scheme: &Scheme) -> Result<()> {
        let c = scheme.to_c()?;
        let rank = rank_of(shape)?;
        // SAFETY: as in from_bytes.
        check(unsafe { sys::qtk_bytes_check(bytes.as_ptr().cast(), bytes.len(), shape.as_ptr(), rank, &c) })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }
    /// The bytes in Burn's layout, borrowed from the tensor.
    pub fn as_bytes(&self) -> &[u8] {
        let mut n = 0usize;
        // SAFETY: the tensor owns (or borrows for its lifetime) exactly n bytes there.
        unsafe {
            let p = sys::qtk_tensor_bytes(self.as_ptr(), &mut n);
            if p.is_null() || n == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(p, n)
            }
        }
    }
    /// The bytes in Burn's layout, copied (`TensorData::from_bytes_vec` takes them as they are).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    /// The byte length.
    pub fn nbytes(&self) -> usize {
        self.as_bytes().len()
    }
    /// Storage bits per element, scales included.
    pub fn bits_per_element(&self) -> f64 {
        // SAFETY: the layout lives as long as the tensor.
        unsafe { sys::qtk_layout_bits_per_element(sys::qtk_tensor_layout(self.as_ptr())) }
    }
    fn n_scales(&self) -> usize {
        // SAFETY: as above.
        unsafe { (*sys::qtk_tensor_layout(self.as_ptr())).n_scales }
    }
    /// The stored scales decoded to f32, row-major over the block grid (store=ggml: each
    /// sub-block's d × sc).
    pub fn scales(&self) -> Result<Vec<f32>> {
        let mut v = vec![0f32; self.n_scales()];
        // SAFETY: v holds n_scales values.
        check(unsafe { sys::qtk_tensor_scales(self.as_ptr(), v.as_mut_ptr(), v.len()) })?;
        Ok(v)
    }
    /// The affine mode's offsets (o, m or z as the scheme stores them), one per scale group.
    pub fn offsets(&self) -> Result<Vec<f32>> {
        let mut v = vec![0f32; self.n_scales()];
        // SAFETY: as in scales.
        check(unsafe { sys::qtk_tensor_offsets(self.as_ptr(), v.as_mut_ptr(), v.len()) })?;
        Ok(v)
    }
    /// The two-level global scale (1.0 when there is none).
    pub fn global_scale(&self) -> f32 {
        // SAFETY: reads the tensor.
        unsafe { sys::qtk_tensor_global(self.as_ptr()) }
    }

    fn deq(&self, dtype: sys::qtk_dtype, out: *mut std::os::raw::c_void, n: usize) -> Result<()> {
        if n != self.numel() {
            return Err(Error::new(Status::LENGTH, format!("the output holds {} values; the tensor has {}", n, self.numel())));
        }
        // SAFETY: out holds n elements of dtype's size (checked by the callers' types).
        check(unsafe { sys::qtk_dequantize(self.as_ptr(), dtype, out, n) })
    }
    /// The values as f32.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let mut v = vec![0f32; self.numel()];
        self.dequantize_into(&mut v)?;
        Ok(v)
    }
    /// The values as f32 into `out` (exactly numel long).
    pub fn dequantize_into(&self, out: &mut [f32]) -> Result<()> {
        self.deq(sys::qtk_dtype_QTK_DTYPE_F32, out.as_mut_ptr().cast(), out.len())
    }
    /// The values as IEEE f16 bit patterns (round to nearest even).
    pub fn dequantize_f16(&self) -> Result<Vec<u16>> {
        let mut v = vec![0u16; self.numel()];
        self.dequantize_f16_into(&mut v)?;
        Ok(v)
    }
    /// The values as f16 bits into `out`.
    pub fn dequantize_f16_into(&self, out: &mut [u16]) -> Result<()> {
        self.deq(sys::qtk_dtype_QTK_DTYPE_F16, out.as_mut_ptr().cast(), out.len())
    }
    /// The values as bfloat16 bit patterns (round to nearest even).
    pub fn dequantize_bf16(&self) -> Result<Vec<u16>> {
        let mut v = vec![0u16; self.numel()];
        self.dequantize_bf16_into(&mut v)?;
        Ok(v)
    }
    /// The values as bf16 bits into `out`.
    pub fn dequantize_bf16_into(&self, out: &mut [u16]) -> Result<()> {
        self.deq(sys::qtk_dtype_QTK_DTYPE_BF16, out.as_mut_ptr().cast(), out.len())
    }

    /// Re-quantizes under another scheme: the same as quantizing the dequantized values.
    pub fn convert(&self, scheme: &Scheme, opts: &QuantizeOptions<'_>) -> Result<Tensor> {
        let c = scheme.to_c()?;
        let g = opts.global_scale.unwrap_or(0.0);
        let o = opts.to_c(&g)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: o's pointers borrow opts' slices for the call.
        check(unsafe { sys::qtk_convert(self.as_ptr(), &c, &o, &mut out) })?;
        unsafe { Tensor::from_raw(out) }
    }
}

/// Quantizes `x` (row-major, `shape`) under `scheme`.
///
/// ```
/// let x: Vec<f32> = (0..256).map(|i| (i as f32 - 128.0) / 64.0).collect();
/// let t = qtk::quantize(&x, &[4, 64], &qtk::Scheme::nvfp4(), &Default::default())?;
/// assert_eq!(t.nbytes(), 256 / 2 + 256 / 16 + 4);
/// let y = t.dequantize()?;
/// assert!((y[200] - x[200]).abs() < 0.2);
/// # Ok::<(), qtk::Error>(())
/// ```
pub fn quantize(x: &[f32], shape: &[usize], scheme: &Scheme, opts: &QuantizeOptions<'_>) -> Result<Tensor> {
    let n = numel(shape)?;
    if x.len() != n {
        return Err(Error::new(Status::LENGTH, format!("{} values for shape {:?}, which has {}", x.len(), shape, n)));
    }
    let c = scheme.to_c()?;
    let rank = rank_of(shape)?;
    let g = opts.global_scale.unwrap_or(0.0);
    let o = opts.to_c(&g)?;
    let mut out = std::ptr::null_mut();
    // SAFETY: x holds numel(shape) values; o's pointers borrow opts' slices for the call.
    check(unsafe { sys::qtk_quantize(x.as_ptr(), shape.as_ptr(), rank, &c, &o, &mut out) })?;
    unsafe { Tensor::from_raw(out) }
}
