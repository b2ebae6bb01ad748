//! [`convert`]: a whole checkpoint into another format and scheme, one tensor at a time, as
//! `qtk convert` does.
use crate::ckpt::{path_arg, Format, HubLayout};
use crate::error::{check, cstring, Error, Result};
use crate::sys;
use crate::tensor::{threads_arg, Calibration};
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::ops::ControlFlow;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Progress after each tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Tensors done.
    pub done: usize,
    /// Tensors in all.
    pub total: usize,
    /// Input bytes done.
    pub bytes_done: usize,
    /// Input bytes in all.
    pub bytes_total: usize,
}

/// The dtype of dequantized (or cast) tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FloatType {
    /// f32 (the default)
    #[default]
    F32,
    /// f16
    F16,
    /// bf16
    BF16,
}

type ProgressFn<'a> = dyn FnMut(&Progress) -> ControlFlow<()> + 'a;

/// Options of [`convert`]; the fields mirror `qtk convert`'s flags. Rules are `REGEX=SPEC`
/// strings (SPEC a scheme, a preset, `none` or `keep`), applied first match first.
///
/// ```no_run
/// use std::ops::ControlFlow;
/// let mut o = qtk::ConvertOptions::new().scheme("nvfp4").rule("embed=q8s,block=32:f16");
/// o = o.on_progress(|p| { eprintln!("{}/{}", p.done, p.total); ControlFlow::Continue(()) });
/// let s = qtk::convert("model.safetensors", "model-nvfp4.bpk", &o)?;
/// println!("{} quantized, {} -> {} bytes", s.quantized, s.in_bytes, s.out_bytes);
/// # Ok::<(), qtk::Error>(())
/// ```
#[derive(Default)]
pub struct ConvertOptions<'a> {
    /// The default scheme: a spec, a preset, `"none"` (dequantize everything) or `None` (copy).
    pub scheme: Option<String>,
    /// `REGEX=SPEC` rules, first match first.
    pub rules: Vec<String>,
    /// Only tensors matching this regex are converted.
    pub only: Option<String>,
    /// Tensors matching this regex are copied.
    pub skip: Option<String>,
    /// The default scheme applies to tensors of at least this many elements (0: 1024).
    pub min_elements: usize,
    /// The dtype of dequantized tensors.
    pub dtype: FloatType,
    /// Also cast raw float tensors of other types to `dtype`.
    pub cast_floats: bool,
    /// How quantized tensors choose their scales.
    pub calibration: Calibration,
    /// One of llama.cpp's file types (`"q4_k_m"`, ...) choosing each tensor's ggml type, in
    /// place of `scheme`.
    pub mixture: Option<String>,
    /// A llama.cpp importance matrix (GGUF or .dat) weighing each tensor's error (calibration mse).
    pub imatrix: Option<PathBuf>,
    /// How to read the input (AUTO: detect).
    pub input_layout: HubLayout,
    /// The output format (`None`: by the extension; no extension: a directory of shards).
    pub format: Option<Format>,
    /// The output's Hub layout (safetensors).
    pub layout: HubLayout,
    /// Shards of at most this many tensor bytes (0: one file).
    pub max_shard_bytes: usize,
    /// Replace an existing output.
    pub force: bool,
    /// Threads (0: the library default).
    pub threads: usize,
    progress: Option<RefCell<Box<ProgressFn<'a>>>>,
}

impl<'a> std::fmt::Debug for ConvertOptions<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConvertOptions")
            .field("scheme", &self.scheme)
            .field("rules", &self.rules)
            .field("mixture", &self.mixture)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl<'a> ConvertOptions<'a> {
    /// Copy everything (no scheme, no rules).
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the default scheme.
    pub fn scheme(mut self, s: &str) -> Self {
        self.scheme = Some(s.to_string());
        self
    }
    /// Adds a `REGEX=SPEC` rule.
    pub fn rule(mut self, r: &str) -> Self {
        self.rules.push(r.to_string());
        self
    }
    /// Calls `f` after each tensor; `ControlFlow::Break(())` cancels the conversion (nothing is
    /// written; [`convert`] returns a `CANCELLED` error). A panic in `f` cancels it too and is
    /// then resumed in the caller.
    pub fn on_progress(mut self, f: impl FnMut(&Progress) -> ControlFlow<()> + 'a) -> Self {
        self.progress = Some(RefCell::new(Box::new(f)));
        self
    }
}

/// What happens to a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// copied as it is
    Keep,
    /// quantized, or re-quantized
    Quantize,
    /// dequantized to floats
    Dequantize,
    /// a float tensor cast to the chosen dtype
    Cast,
}

/// One tensor's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanEntry {
    /// The tensor.
    pub name: String,
    /// What happens to it.
    pub action: Action,
    /// Why, in words (`"rule 2 'attn=q8s'"`, `"rank 1"`).
    pub why: String,
    /// Its type in the output (a scheme's spec or preset name, or an element type).
    pub output_type: String,
}

/// A remark the conversion made (a tensor dequantized on read, an inexact global, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The tensor it is about, or `None` for the whole checkpoint.
    pub tensor: Option<String>,
    /// The remark.
    pub text: String,
}

/// What [`convert`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvertSummary {
    /// Tensors in all.
    pub tensors: usize,
    /// Quantized (or re-quantized).
    pub quantized: usize,
    /// Dequantized.
    pub dequantized: usize,
    /// Cast.
    pub cast: usize,
    /// Copied.
    pub kept: usize,
    /// Tensor bytes in the input.
    pub in_bytes: usize,
    /// Tensor bytes in the output.
    pub out_bytes: usize,
    /// The input's format.
    pub in_format: Option<Format>,
    /// The output's format.
    pub out_format: Option<Format>,
    /// Every tensor's plan, in order.
    pub plan: Vec<PlanEntry>,
    /// Each quantized tensor that was re-quantized, with its SQNR in dB against the values it
    /// had (+inf: unchanged).
    pub requantized: Vec<(String, f64)>,
    /// Remarks.
    pub notices: Vec<Notice>,
}

struct Ctx<'o, 'a> {
    progress: Option<&'o RefCell<Box<ProgressFn<'a>>>>,
    plan: Vec<PlanEntry>,
    requantized: Vec<(String, f64)>,
    notices: Vec<Notice>,
    panic: Option<Box<dyn std::any::Any + Send + 'static>>,
}

fn cstr_opt(p: *const std::os::raw::c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: a NUL-terminated string valid for the callback's duration.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

unsafe extern "C" fn progress_tramp(ctx: *mut c_void, p: *const sys::qtk_progress) -> c_int {
    let ctx = &mut *(ctx as *mut Ctx);
    let (cell, p) = match (ctx.progress, p.as_ref()) {
        (Some(c), Some(p)) => (c, p),
        _ => return 0,
    };
    let pr = Progress { done: p.done, total: p.total, bytes_done: p.bytes_done, bytes_total: p.bytes_total };
    match catch_unwind(AssertUnwindSafe(|| match cell.try_borrow_mut() {
        Ok(mut f) => (f)(&pr),
        Err(_) => ControlFlow::Continue(()),
    })) {
        Ok(ControlFlow::Continue(())) => 0,
        Ok(ControlFlow::Break(())) => 1,
        Err(payload) => {
            ctx.panic = Some(payload);
            1
        }
    }
}

unsafe extern "C" fn event_tramp(ctx: *mut c_void, e: *const sys::qtk_convert_event) {
    let ctx = &mut *(ctx as *mut Ctx);
    let e = match e.as_ref() {
        Some(e) => e,
        None => return,
    };
    let name_of = |t: *const sys::qtk_ckpt_tensor| t.as_ref().and_then(|t| cstr_opt(t.name)).unwrap_or_default();
    if e.kind == sys::qtk_event_kind_QTK_EVENT_PLAN {
        let action = match e.action {
            x if x == sys::qtk_action_QTK_ACT_QUANTIZE => Action::Quantize,
            x if x == sys::qtk_action_QTK_ACT_DEQUANTIZE => Action::Dequantize,
            x if x == sys::qtk_action_QTK_ACT_CAST => Action::Cast,
            _ => Action::Keep,
        };
        let output_type = match e.out.as_ref() {
            Some(t) => {
                let mut buf = [0 as std::os::raw::c_char; 256];
                sys::qtk_ckpt_type_string(t, buf.as_mut_ptr(), buf.len());
                cstr_opt(buf.as_ptr()).unwrap_or_default()
            }
            None => String::new(),
        };
        ctx.plan.push(PlanEntry { name: name_of(e.in_), action, why: cstr_opt(e.why).unwrap_or_default(), output_type });
    } else if e.kind == sys::qtk_event_kind_QTK_EVENT_REQUANTIZED {
        ctx.requantized.push((name_of(e.in_), e.sqnr_db));
    } else if e.kind == sys::qtk_event_kind_QTK_EVENT_NOTICE {
        ctx.notices.push(Notice { tensor: cstr_opt(e.tensor), text: cstr_opt(e.text).unwrap_or_default() });
    }
}

struct Imatrix(*mut sys::qtk_imatrix);
impl Drop for Imatrix {
    fn drop(&mut self) {
        // SAFETY: the matrix this value owns (NULL is fine).
        unsafe { sys::qtk_imatrix_close(self.0) }
    }
}

/// Converts the checkpoint at `input` into `output` (its format from the extension), one tensor
/// at a time; `output` appears only when complete.
pub fn convert(input: impl AsRef<Path>, output: impl AsRef<Path>, opts: &ConvertOptions<'_>) -> Result<ConvertSummary> {
    let cin = path_arg(input.as_ref())?;
    let cout = path_arg(output.as_ref())?;
    let imatrix = match &opts.imatrix {
        None => Imatrix(std::ptr::null_mut()),
        Some(p) => {
            let c = path_arg(p)?;
            let mut m = std::ptr::null_mut();
            // SAFETY: c is NUL-terminated; m writable.
            check(unsafe { sys::qtk_imatrix_open(c.as_ptr(), &mut m) })?;
            Imatrix(m)
        }
    };
    let mut ctx = Ctx { progress: opts.progress.as_ref(), plan: vec![], requantized: vec![], notices: vec![], panic: None };
    let mut args = c_options(opts)?;
    args.raw.progress = Some(progress_tramp);
    args.raw.event = Some(event_tramp);
    args.raw.ctx = &mut ctx as *mut Ctx as *mut c_void;
    args.raw.imatrix = imatrix.0;
    let o = args.raw;
    // SAFETY: every pointer in o lives until the call returns; ctx is only used through the
    // callbacks, on this thread, during the call.
    let mut sum: sys::qtk_convert_summary = unsafe { std::mem::zeroed() };
    let st = unsafe { sys::qtk_ckpt_convert(cin.as_ptr(), cout.as_ptr(), &o, &mut sum) };
    let err = if st == sys::qtk_status_QTK_OK { None } else { Some(Error::last(st)) };
    drop(imatrix);
    if let Some(p) = ctx.panic.take() {
        std::panic::resume_unwind(p);
    }
    if let Some(e) = err {
        return Err(e);
    }
    Ok(ConvertSummary {
        tensors: sum.tensors,
        quantized: sum.quantized,
        dequantized: sum.dequantized,
        cast: sum.cast,
        kept: sum.kept,
        in_bytes: sum.in_bytes,
        out_bytes: sum.out_bytes,
        in_format: Format::from_c(sum.in_format),
        out_format: Format::from_c(sum.out_format),
        plan: ctx.plan,
        requantized: ctx.requantized,
        notices: ctx.notices,
    })
}

/// The options as C: `raw` points into the strings, which live as long as this value (moving
/// it moves no string data).
struct COptions {
    _strings: Vec<CString>,
    _rules: Vec<*const std::os::raw::c_char>,
    raw: sys::qtk_convert_options,
}

/// Every field of `qtk_convert_options` but the callbacks, their context and the imatrix.
fn c_options(opts: &ConvertOptions<'_>) -> Result<COptions> {
    let mut strings = Vec::new();
    let mut opt = |v: &Option<String>, what: &str| -> Result<*const std::os::raw::c_char> {
        Ok(match v {
            None => std::ptr::null(),
            Some(s) => {
                strings.push(cstring(s, what)?);
                strings[strings.len() - 1].as_ptr()
            }
        })
    };
    let (scheme, only, skip, mixture) =
        (opt(&opts.scheme, "the scheme")?, opt(&opts.only, "only")?, opt(&opts.skip, "skip")?, opt(&opts.mixture, "the mixture")?);
    let rules: Vec<CString> = opts.rules.iter().map(|r| cstring(r, "a rule")).collect::<Result<_>>()?;
    let rule_ptrs: Vec<*const std::os::raw::c_char> = rules.iter().map(|r| r.as_ptr()).collect();
    strings.extend(rules);
    let raw = sys::qtk_convert_options {
        scheme,
        rules: if rule_ptrs.is_empty() { std::ptr::null() } else { rule_ptrs.as_ptr() },
        n_rules: rule_ptrs.len(),
        only,
        skip,
        min_elements: opts.min_elements,
        dtype: match opts.dtype {
            FloatType::F32 => sys::qtk_dtype_QTK_DTYPE_F32,
            FloatType::F16 => sys::qtk_dtype_QTK_DTYPE_F16,
            FloatType::BF16 => sys::qtk_dtype_QTK_DTYPE_BF16,
        },
        cast_floats: opts.cast_floats,
        calibration: opts.calibration.to_c(),
        input_layout: opts.input_layout.0,
        format: Format::to_c(opts.format),
        layout: opts.layout.0,
        max_shard_bytes: opts.max_shard_bytes,
        force: opts.force as c_int,
        threads: threads_arg(opts.threads)?,
        progress: None,
        event: None,
        ctx: std::ptr::null_mut(),
        cancel: std::ptr::null(),
        imatrix: std::ptr::null(),
        mixture,
    };
    Ok(COptions { _strings: strings, _rules: rule_ptrs, raw })
}

/// Checks convert options (regexes, specs, layout) without touching a file.
pub fn convert_check(opts: &ConvertOptions<'_>) -> Result<()> {
    let args = c_options(opts)?;
    // SAFETY: every pointer in args.raw lives as long as args.
    check(unsafe { sys::qtk_convert_check(&args.raw) })
}
