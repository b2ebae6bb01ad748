//! [`Checkpoint`]: Burn's burnpack, safetensors (with every Hugging Face Hub layout qtk reads),
//! GGUF, `*.safetensors.index.json` and directories of shards, opened and read.
use crate::error::{check, cstring, static_str, Error, Result, Status};
use crate::scheme::Scheme;
use crate::sys;
use crate::tensor::Tensor;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::NonNull;

/// A raw tensor's element type (`qtk_elem`): an integer code with the names the formats use.
/// Compare with the constants (`Elem::F32`, ...); a code this crate does not name prints as
/// what the C library calls it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Elem(pub u32);

impl Elem {
    /// f64
    pub const F64: Elem = Elem(sys::qtk_elem_QTK_ELEM_F64);
    /// f32
    pub const F32: Elem = Elem(sys::qtk_elem_QTK_ELEM_F32);
    /// Burn's Flex32 (f32 bytes)
    pub const FLEX32: Elem = Elem(sys::qtk_elem_QTK_ELEM_FLEX32);
    /// IEEE f16
    pub const F16: Elem = Elem(sys::qtk_elem_QTK_ELEM_F16);
    /// bfloat16
    pub const BF16: Elem = Elem(sys::qtk_elem_QTK_ELEM_BF16);
    /// i64
    pub const I64: Elem = Elem(sys::qtk_elem_QTK_ELEM_I64);
    /// i32
    pub const I32: Elem = Elem(sys::qtk_elem_QTK_ELEM_I32);
    /// i16
    pub const I16: Elem = Elem(sys::qtk_elem_QTK_ELEM_I16);
    /// i8
    pub const I8: Elem = Elem(sys::qtk_elem_QTK_ELEM_I8);
    /// u64
    pub const U64: Elem = Elem(sys::qtk_elem_QTK_ELEM_U64);
    /// u32
    pub const U32: Elem = Elem(sys::qtk_elem_QTK_ELEM_U32);
    /// u16
    pub const U16: Elem = Elem(sys::qtk_elem_QTK_ELEM_U16);
    /// u8
    pub const U8: Elem = Elem(sys::qtk_elem_QTK_ELEM_U8);
    /// bool, one byte each
    pub const BOOL: Elem = Elem(sys::qtk_elem_QTK_ELEM_BOOL);
    /// FP8 E4M3FN
    pub const F8_E4M3: Elem = Elem(sys::qtk_elem_QTK_ELEM_F8_E4M3);
    /// FP8 E5M2
    pub const F8_E5M2: Elem = Elem(sys::qtk_elem_QTK_ELEM_F8_E5M2);
    /// FP4 E2M1, two per byte
    pub const F4: Elem = Elem(sys::qtk_elem_QTK_ELEM_F4);

    /// The name (`"F32"`, `"Bool(U32)"`, `"F8_E4M3"`; `"?"` if unknown).
    pub fn name(self) -> &'static str {
        // SAFETY: a static string for every value.
        unsafe { static_str(sys::qtk_elem_name(self.0)) }
    }
    /// Parses a name (case-insensitive).
    pub fn parse(name: &str) -> Result<Elem> {
        let c = cstring(name, "the element type")?;
        let mut e: sys::qtk_elem = 0;
        // SAFETY: c is NUL-terminated; e writable.
        check(unsafe { sys::qtk_elem_parse(c.as_ptr(), &mut e) })?;
        Ok(Elem(e))
    }
    /// Bits per element (0 for an unknown code).
    pub fn bits(self) -> u32 {
        // SAFETY: any value is accepted.
        unsafe { sys::qtk_elem_bits(self.0) }
    }
    /// Whether qtk decodes it as floats (and can quantize it or read it as f32).
    pub fn is_float(self) -> bool {
        // SAFETY: any value is accepted.
        unsafe { sys::qtk_elem_is_float(self.0) }
    }
}

impl std::fmt::Debug for Elem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Elem({})", self.name())
    }
}
impl std::fmt::Display for Elem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A checkpoint container format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Burn's .bpk
    Burnpack,
    /// .safetensors
    Safetensors,
    /// llama.cpp's .gguf
    Gguf,
}

impl Format {
    pub(crate) fn from_c(c: sys::qtk_ckpt_format) -> Option<Format> {
        match c {
            x if x == sys::qtk_ckpt_format_QTK_CKPT_BURNPACK => Some(Format::Burnpack),
            x if x == sys::qtk_ckpt_format_QTK_CKPT_SAFETENSORS => Some(Format::Safetensors),
            x if x == sys::qtk_ckpt_format_QTK_CKPT_GGUF => Some(Format::Gguf),
            _ => None,
        }
    }
    pub(crate) fn to_c(f: Option<Format>) -> sys::qtk_ckpt_format {
        match f {
            None => sys::qtk_ckpt_format_QTK_CKPT_UNKNOWN,
            Some(Format::Burnpack) => sys::qtk_ckpt_format_QTK_CKPT_BURNPACK,
            Some(Format::Safetensors) => sys::qtk_ckpt_format_QTK_CKPT_SAFETENSORS,
            Some(Format::Gguf) => sys::qtk_ckpt_format_QTK_CKPT_GGUF,
        }
    }
}

/// How a safetensors checkpoint arranges quantized tensors (`qtk_hub_layout`): qtk's
/// convention or one of the Hub's layouts. An integer code like [`Elem`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HubLayout(pub u32);

impl HubLayout {
    /// reading: detect; writing: qtk's convention
    pub const AUTO: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_AUTO);
    /// reading: the stored tensors, nothing folded
    pub const NONE: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_NONE);
    /// qtk's convention
    pub const QTK: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_QTK);
    /// gpt-oss MXFP4
    pub const GPT_OSS: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_GPT_OSS);
    /// NVIDIA ModelOpt
    pub const MODELOPT: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_MODELOPT);
    /// compressed-tensors
    pub const COMPRESSED_TENSORS: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_CT);
    /// block FP8 (DeepSeek, Qwen)
    pub const DEEPSEEK: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_DEEPSEEK);
    /// bitsandbytes 4-bit
    pub const BNB: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_BNB);
    /// torchao (read only)
    pub const TORCHAO: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_TORCHAO);
    /// GPTQ
    pub const GPTQ: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_GPTQ);
    /// AWQ (GEMM)
    pub const AWQ: HubLayout = HubLayout(sys::qtk_hub_layout_QTK_LAYOUT_AWQ);

    /// The name (`"gptq"`, `"compressed-tensors"`, ...).
    pub fn name(self) -> &'static str {
        // SAFETY: a static string for every value.
        unsafe { static_str(sys::qtk_hub_layout_name(self.0)) }
    }
    /// Parses a name (case-insensitive; also "ct" and "bitsandbytes").
    pub fn parse(name: &str) -> Result<HubLayout> {
        let c = cstring(name, "the layout")?;
        let mut l: sys::qtk_hub_layout = 0;
        // SAFETY: c is NUL-terminated; l writable.
        check(unsafe { sys::qtk_hub_layout_parse(c.as_ptr(), &mut l) })?;
        Ok(HubLayout(l))
    }
}

impl std::fmt::Debug for HubLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HubLayout({})", self.name())
    }
}

/// What a checkpoint tensor holds.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorKind {
    /// A quantized tensor: its scheme (its bytes are in Burn's layout).
    Quantized(Scheme),
    /// Raw elements, little-endian.
    Raw(Elem),
}

/// One tensor of a checkpoint, as listed (no data read).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its position in the checkpoint (the order of its bytes in the file).
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Quantized (with the scheme) or raw (with the element type).
    pub kind: TensorKind,
    /// Elements.
    pub numel: usize,
    /// The exact length of its bytes as qtk hands them out.
    pub nbytes: usize,
    /// The source's own type (a GGUF tensor's ggml type, a Hub weight's stored tensors).
    pub file_type: Option<String>,
    /// What it takes in the file.
    pub file_bytes: usize,
    /// Burn's parameter id, where the file has one.
    pub param_id: Option<u64>,
}

impl TensorInfo {
    /// The scheme of a quantized tensor.
    pub fn scheme(&self) -> Option<&Scheme> {
        match &self.kind {
            TensorKind::Quantized(s) => Some(s),
            TensorKind::Raw(_) => None,
        }
    }
}

fn opt_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: a NUL-terminated string owned by the checkpoint, read before it can change.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

pub(crate) fn path_arg(p: &Path) -> Result<std::ffi::CString> {
    let s = p.to_str().ok_or_else(|| Error::new(Status::ARG, format!("the path {} is not UTF-8", p.display())))?;
    cstring(s, "the path")
}

/// An open checkpoint. The file is mapped, not read; tensors loaded from it
/// ([`tensor`](Checkpoint::tensor)) stay valid after it is dropped. `Send` but not `Sync`: one
/// thread at a time uses it, as the C library requires.
///
/// ```no_run
/// let c = qtk::Checkpoint::open("model.safetensors")?;
/// for t in c.tensors() {
///     println!("{} {:?} {:?}", t.name, t.shape, t.kind);
/// }
/// let w = c.read_f32("model.layers.0.mlp.down_proj.weight")?;
/// # Ok::<(), qtk::Error>(())
/// ```
pub struct Checkpoint {
    ptr: NonNull<sys::qtk_ckpt>,
}

// SAFETY: a qtk_ckpt may move between threads; it is used by one at a time (no Sync).
unsafe impl Send for Checkpoint {}

impl Drop for Checkpoint {
    fn drop(&mut self) {
        // SAFETY: the checkpoint this value owns.
        unsafe { sys::qtk_ckpt_close(self.ptr.as_ptr()) }
    }
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "qtk::Checkpoint({:?}, {} tensors)", self.format(), self.len())
    }
}

impl Checkpoint {
    /// Opens a .bpk, .safetensors or .gguf file (recognised by content), a
    /// `*.safetensors.index.json`, or a directory of shards; Hub layouts are detected.
    pub fn open(path: impl AsRef<Path>) -> Result<Checkpoint> {
        Checkpoint::open_with(path, HubLayout::AUTO)
    }

    /// [`open`](Checkpoint::open) reading safetensors in a given layout (`HubLayout::NONE`: the
    /// tensors as stored).
    pub fn open_with(path: impl AsRef<Path>, layout: HubLayout) -> Result<Checkpoint> {
        let c = path_arg(path.as_ref())?;
        let o = sys::qtk_open_options { layout: layout.0 };
        let mut out = std::ptr::null_mut();
        // SAFETY: c is NUL-terminated; out writable.
        check(unsafe { sys::qtk_ckpt_open(c.as_ptr(), &o, &mut out) })?;
        let ptr = NonNull::new(out).ok_or_else(|| Error::new(Status::INTERNAL, "qtk returned no checkpoint"))?;
        Ok(Checkpoint { ptr })
    }

    fn raw(&self) -> *mut sys::qtk_ckpt {
        self.ptr.as_ptr()
    }

    /// The container format.
    pub fn format(&self) -> Option<Format> {
        // SAFETY: reads c.
        Format::from_c(unsafe { sys::qtk_ckpt_format_of(self.raw()) })
    }
    /// The Hub layout the tensors were read in (`NONE` for a plain checkpoint).
    pub fn layout(&self) -> HubLayout {
        // SAFETY: all-zero is a valid qtk_hub_info; filled by the call.
        let mut h: sys::qtk_hub_info = unsafe { std::mem::zeroed() };
        unsafe { sys::qtk_ckpt_hub_info(self.raw(), &mut h) };
        HubLayout(h.layout)
    }
    /// The number of tensors.
    pub fn len(&self) -> usize {
        // SAFETY: reads c.
        unsafe { sys::qtk_ckpt_count(self.raw()) }
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn info_at(&self, i: usize) -> Option<TensorInfo> {
        // SAFETY: NULL past the end; else a descriptor the checkpoint owns.
        let t = unsafe { sys::qtk_ckpt_tensor_at(self.raw(), i).as_ref()? };
        let shape = if t.rank <= 0 || t.shape.is_null() {
            Vec::new()
        } else {
            // SAFETY: shape holds rank entries.
            unsafe { std::slice::from_raw_parts(t.shape, t.rank as usize) }.to_vec()
        };
        let kind = if t.quantized {
            match Scheme::from_c(&t.scheme) {
                Ok(s) => TensorKind::Quantized(s),
                Err(_) => return None,
            }
        } else {
            TensorKind::Raw(Elem(t.elem))
        };
        Some(TensorInfo {
            index: i,
            name: opt_string(t.name).unwrap_or_default(),
            shape,
            kind,
            numel: t.numel,
            nbytes: t.nbytes,
            file_type: opt_string(t.file_type),
            file_bytes: t.file_bytes,
            param_id: if t.has_param_id { Some(t.param_id) } else { None },
        })
    }

    /// The tensors in file order (a tensor whose scheme this crate version cannot express is
    /// left out; there is none in this version).
    pub fn tensors(&self) -> impl Iterator<Item = TensorInfo> + '_ {
        (0..self.len()).filter_map(move |i| self.info_at(i))
    }

    /// The index of the tensor named `name`.
    pub fn index_of(&self, name: &str) -> Result<usize> {
        let c = cstring(name, "the tensor name")?;
        let mut i = 0usize;
        // SAFETY: c is NUL-terminated; i writable.
        check(unsafe { sys::qtk_ckpt_find(self.raw(), c.as_ptr(), &mut i) })?;
        Ok(i)
    }

    /// The tensor named `name`, as listed.
    pub fn info(&self, name: &str) -> Result<TensorInfo> {
        let i = self.index_of(name)?;
        self.info_at(i).ok_or_else(|| Error::new(Status::UNSUPPORTED, format!("tensor '{}' has a scheme this crate cannot express", name)))
    }

    /// A quantized tensor as a [`Tensor`] (zero-copy where the file holds qtk's layout: it
    /// borrows the map, which lives until the tensor is dropped too). A raw tensor is an
    /// error: read it with [`read_f32`](Checkpoint::read_f32) or
    /// [`read_bytes`](Checkpoint::read_bytes).
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let i = self.index_of(name)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: i < count; out writable.
        check(unsafe { sys::qtk_ckpt_load_tensor(self.raw(), i, &mut out) })?;
        unsafe { Tensor::from_raw(out) }
    }

    /// A tensor's values as f32: a quantized tensor dequantized (with the stored convention's
    /// own formula where it has one), a float tensor converted.
    pub fn read_f32(&self, name: &str) -> Result<Vec<f32>> {
        let i = self.index_of(name)?;
        let n = self.info_at(i).map(|t| t.numel).unwrap_or(0);
        let mut v = vec![0f32; n];
        // SAFETY: v holds n = numel values.
        check(unsafe { sys::qtk_ckpt_read_values(self.raw(), i, sys::qtk_dtype_QTK_DTYPE_F32, v.as_mut_ptr().cast(), n) })?;
        Ok(v)
    }

    /// A tensor's bytes (raw little-endian elements, or Burn's layout for a quantized one).
    pub fn read_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let i = self.index_of(name)?;
        let n = self.info_at(i).map(|t| t.nbytes).unwrap_or(0);
        let mut v = vec![0u8; n];
        // SAFETY: v holds n = nbytes bytes.
        check(unsafe { sys::qtk_ckpt_read(self.raw(), i, v.as_mut_ptr().cast(), n) })?;
        Ok(v)
    }

    /// The string metadata in file order (GGUF: every KV rendered as text).
    pub fn metadata(&self) -> Vec<(String, String)> {
        // SAFETY: reads c.
        let n = unsafe { sys::qtk_ckpt_meta_count(self.raw()) };
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            let (mut k, mut val) = (std::ptr::null(), std::ptr::null());
            // SAFETY: i < count; the strings are the checkpoint's.
            if unsafe { sys::qtk_ckpt_meta_at(self.raw(), i, &mut k, &mut val) } == sys::qtk_status_QTK_OK {
                v.push((opt_string(k).unwrap_or_default(), opt_string(val).unwrap_or_default()));
            }
        }
        v
    }

    /// The value of one metadata key.
    pub fn meta(&self, key: &str) -> Option<String> {
        let c = cstring(key, "the key").ok()?;
        // SAFETY: c is NUL-terminated.
        opt_string(unsafe { sys::qtk_ckpt_meta_get(self.raw(), c.as_ptr()) })
    }
}
