//! [`matmul`]: y = x · Wᵀ (+ bias) with a quantized W, never expanded to f32 as a whole.
use crate::error::{check, Error, Result, Status};
use crate::sys;
use crate::tensor::{threads_arg, Tensor};

/// What the result means (qtk_matmul.h has the error bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// f32 activations times exactly the dequantized weights, f32 sums (the default).
    #[default]
    Exact,
    /// Allows the int8-activation integer path where the scheme has one (GEMV and small M):
    /// each row of x quantized on the fly in blocks of 32, integer block sums.
    Fast,
}

/// W's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MatmulLayout {
    /// W is [N, K] (a linear layer's [out, in]): y = x · Wᵀ
    #[default]
    Nk,
    /// W is [K, N] (Burn's `Linear` stores [in, out]): y = x · W
    Kn,
}

/// The kernel family a product runs ([`matmul_path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulPath {
    /// portable C: decode a block, multiply-accumulate in order of k
    Reference,
    /// SIMD, weights decoded on the fly from their packed fields
    Exact,
    /// SIMD multiply of tiles decoded by the element codecs
    Generic,
    /// int8 activations × integer weights ([`Precision::Fast`])
    Integer,
}

/// Options of [`matmul_with`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MatmulOptions<'a> {
    /// W's layout.
    pub layout: MatmulLayout,
    /// Exact or fast.
    pub precision: Precision,
    /// Threads; 0: the library default.
    pub threads: usize,
    /// N values added to every row of y.
    pub bias: Option<&'a [f32]>,
}

impl<'a> MatmulOptions<'a> {
    fn to_c(self) -> Result<sys::qtk_matmul_options> {
        Ok(sys::qtk_matmul_options {
            layout: match self.layout {
                MatmulLayout::Nk => sys::qtk_mm_layout_QTK_MM_NK,
                MatmulLayout::Kn => sys::qtk_mm_layout_QTK_MM_KN,
            },
            precision: match self.precision {
                Precision::Exact => sys::qtk_precision_QTK_PRECISION_EXACT,
                Precision::Fast => sys::qtk_precision_QTK_PRECISION_FAST,
            },
            threads: threads_arg(self.threads)?,
        })
    }
}

fn dims(w: &Tensor, layout: MatmulLayout) -> Result<(usize, usize)> {
    match (w.shape(), layout) {
        (&[n, k], MatmulLayout::Nk) => Ok((k, n)),
        (&[k, n], MatmulLayout::Kn) => Ok((k, n)),
        (s, _) => Err(Error::new(Status::SHAPE, format!("matmul needs a rank-2 weight; this one has shape {:?}", s))),
    }
}

/// y[M, N] = x[M, K] · Wᵀ for W [N, K]: `x` is M rows of K values, row-major.
///
/// ```
/// let w: Vec<f32> = (0..64 * 128).map(|i| ((i % 17) as f32 - 8.0) / 16.0).collect();
/// let t = qtk::quantize(&w, &[64, 128], &qtk::Scheme::parse("q8s,block=32:f16")?, &Default::default())?;
/// let x = vec![1.0f32; 2 * 128];
/// let y = qtk::matmul(&t, &x, 2, qtk::Precision::Exact)?;
/// assert_eq!(y.len(), 2 * 64);
/// # Ok::<(), qtk::Error>(())
/// ```
pub fn matmul(w: &Tensor, x: &[f32], m: usize, precision: Precision) -> Result<Vec<f32>> {
    matmul_with(w, x, m, &MatmulOptions { precision, ..Default::default() })
}

/// [`matmul`] with a layout, a bias and a thread count.
pub fn matmul_with(w: &Tensor, x: &[f32], m: usize, opts: &MatmulOptions<'_>) -> Result<Vec<f32>> {
    let (_, n) = dims(w, opts.layout)?;
    let len = m.checked_mul(n).ok_or_else(|| Error::new(Status::SHAPE, "M × N overflows"))?;
    let mut y = vec![0f32; len];
    matmul_into(w, x, m, &mut y, opts)?;
    Ok(y)
}

/// [`matmul_with`] into caller memory: `y` holds exactly M × N values.
pub fn matmul_into(w: &Tensor, x: &[f32], m: usize, y: &mut [f32], opts: &MatmulOptions<'_>) -> Result<()> {
    let (k, n) = dims(w, opts.layout)?;
    let want_x = m.checked_mul(k).ok_or_else(|| Error::new(Status::SHAPE, "M × K overflows"))?;
    if x.len() != want_x {
        return Err(Error::new(Status::LENGTH, format!("x holds {} values; M = {} rows of K = {} take {}", x.len(), m, k, want_x)));
    }
    let want_y = m.checked_mul(n).ok_or_else(|| Error::new(Status::SHAPE, "M × N overflows"))?;
    if y.len() != want_y {
        return Err(Error::new(Status::LENGTH, format!("y holds {} values; M × N = {}", y.len(), want_y)));
    }
    let bias = match opts.bias {
        Some(b) if b.len() != n => return Err(Error::new(Status::LENGTH, format!("the bias holds {} values; N = {}", b.len(), n))),
        Some(b) => b.as_ptr(),
        None => std::ptr::null(),
    };
    let o = opts.to_c()?;
    // SAFETY: x holds M·K values, y M·N, bias N (checked above); y is a unique borrow, so it
    // overlaps nothing.
    check(unsafe { sys::qtk_matmul(w.as_ptr(), x.as_ptr().cast(), sys::qtk_dtype_QTK_DTYPE_F32, m, k, bias, y.as_mut_ptr(), n, &o) })
}

/// Which kernel family `matmul_with(w, .., m, opts)` runs on this CPU.
pub fn matmul_path(w: &Tensor, m: usize, opts: &MatmulOptions<'_>) -> Result<MatmulPath> {
    let o = opts.to_c()?;
    let mut p: sys::qtk_mm_path = 0;
    // SAFETY: reads w; p is writable.
    check(unsafe { sys::qtk_matmul_path(w.as_ptr(), m, &o, &mut p) })?;
    Ok(match p {
        x if x == sys::qtk_mm_path_QTK_MM_PATH_EXACT => MatmulPath::Exact,
        x if x == sys::qtk_mm_path_QTK_MM_PATH_GENERIC => MatmulPath::Generic,
        x if x == sys::qtk_mm_path_QTK_MM_PATH_INTEGER => MatmulPath::Integer,
        _ => MatmulPath::Reference,
    })
}
