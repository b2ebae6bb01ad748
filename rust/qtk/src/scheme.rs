//! [`Scheme`]: a quantization scheme in Burn's own vocabulary (`QuantScheme`'s fields, name by
//! name), plus qtk's extensions, converted to and from the C library's `qtk_scheme`.
use crate::error::{check, cstring, Error, Result, Status};
use crate::sys;
use std::fmt;
use std::os::raw::c_char;
use std::str::FromStr;

/// The logical type of the quantized values: Burn's `QuantValue`, then qtk's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuantValue {
    /// 8-bit integer, full range [-128, 127]
    Q8F,
    /// 8-bit integer, symmetric range [-127, 127]
    Q8S,
    /// 4-bit integer, full range [-8, 7]
    Q4F,
    /// 4-bit integer, symmetric range [-7, 7]
    Q4S,
    /// 2-bit integer, full range [-2, 1]
    Q2F,
    /// 2-bit integer, symmetric range [-1, 1] (ternary)
    Q2S,
    /// FP8 E4M3FN
    E4M3,
    /// FP8 E5M2
    E5M2,
    /// FP4 E2M1
    E2M1,
    /// qtk's extension: unsigned 8-bit field of the affine mode (docs/affine.md)
    U8,
    /// qtk's extension: unsigned 5-bit field of the affine mode
    U5,
    /// qtk's extension: unsigned 4-bit field of the affine mode
    U4,
    /// qtk's extension: unsigned 3-bit field of the affine mode
    U3,
    /// qtk's extension: unsigned 2-bit field of the affine mode
    U2,
    /// qtk's extension: signed 6-bit integer (ggml's Q6_K)
    Q6F,
    /// qtk's extension: signed 5-bit integer (ggml's Q5_0)
    Q5F,
    /// qtk's extension: signed 3-bit integer (ggml's Q3_K)
    Q3F,
}

const VALUES: [(QuantValue, sys::qtk_value); 17] = [
    (QuantValue::Q8F, sys::qtk_value_QTK_VALUE_Q8F),
    (QuantValue::Q8S, sys::qtk_value_QTK_VALUE_Q8S),
    (QuantValue::Q4F, sys::qtk_value_QTK_VALUE_Q4F),
    (QuantValue::Q4S, sys::qtk_value_QTK_VALUE_Q4S),
    (QuantValue::Q2F, sys::qtk_value_QTK_VALUE_Q2F),
    (QuantValue::Q2S, sys::qtk_value_QTK_VALUE_Q2S),
    (QuantValue::E4M3, sys::qtk_value_QTK_VALUE_E4M3),
    (QuantValue::E5M2, sys::qtk_value_QTK_VALUE_E5M2),
    (QuantValue::E2M1, sys::qtk_value_QTK_VALUE_E2M1),
    (QuantValue::U8, sys::qtk_value_QTK_VALUE_U8),
    (QuantValue::U5, sys::qtk_value_QTK_VALUE_U5),
    (QuantValue::U4, sys::qtk_value_QTK_VALUE_U4),
    (QuantValue::U3, sys::qtk_value_QTK_VALUE_U3),
    (QuantValue::U2, sys::qtk_value_QTK_VALUE_U2),
    (QuantValue::Q6F, sys::qtk_value_QTK_VALUE_Q6F),
    (QuantValue::Q5F, sys::qtk_value_QTK_VALUE_Q5F),
    (QuantValue::Q3F, sys::qtk_value_QTK_VALUE_Q3F),
];

impl QuantValue {
    /// Field width in bits (8, 6, 5, 4, 3 or 2).
    pub fn size_bits(self) -> usize {
        // SAFETY: a valid qtk_value.
        unsafe { sys::qtk_value_bits(self.to_c()) as usize }
    }
    /// Whether Burn's `QuantValue` has this variant (the first nine).
    pub fn is_burn(self) -> bool {
        self.to_c() <= sys::qtk_value_QTK_VALUE_E2M1
    }
    pub(crate) fn to_c(self) -> sys::qtk_value {
        VALUES.iter().find(|(v, _)| *v == self).map(|(_, c)| *c).unwrap_or(0)
    }
    fn from_c(c: sys::qtk_value) -> Result<QuantValue> {
        VALUES.iter().find(|(_, x)| *x == c).map(|(v, _)| *v).ok_or_else(|| unknown("qtk_value", c))
    }
}

/// How the values are stored: Burn's `QuantStore`, then qtk's extension. The packing dimension
/// counts from the innermost (0 = the last axis), as in Burn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuantStore {
    /// One field per byte.
    Native,
    /// The value's native packing (E2M1: two per byte) along that dimension.
    PackedNative(usize),
    /// 32 / bits fields per little-endian u32 word along that dimension (Burn's default).
    PackedU32(usize),
    /// qtk's extension: ggml's block structs verbatim (`store=ggml`: Q4_1, Q5_0, Q5_1, the
    /// K-quants and the lattice types; docs/affine.md, docs/lattice.md).
    Ggml,
}

/// How a field becomes a value: Burn's `QuantMode`, then qtk's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuantMode {
    /// value = field × scale
    Symmetric,
    /// value = table\[field\] × scale (the table is [`Scheme::table`]; Burn names none)
    Lookup,
    /// qtk's extension: an offset per scale group ([`Scheme::offset`]; docs/affine.md)
    Affine,
    /// qtk's extension: a vector codebook, each code selecting 4 or 8 values at once (the
    /// codebook's name is [`Scheme::table`]; ggml's IQ1/IQ2/IQ3 types, `store=ggml` only;
    /// docs/lattice.md)
    Lattice,
}

/// The dtype of stored scales: Burn's `ScaleDtype`, then qtk's integer dtypes (the sub-scales of
/// ggml's block structs, and integer zero points).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScaleDtype {
    /// IEEE binary32
    F32,
    /// IEEE binary16
    F16,
    /// bfloat16
    BF16,
    /// unsigned exponent-only, 2^(e-127)
    UE8M0,
    /// E4M3 with the sign bit 0
    UE4M3,
    /// qtk's extension: unsigned 8-bit integer (zero points: `zero=u8`)
    U8,
    /// qtk's extension: unsigned 6-bit integer (ggml's sub-scales)
    U6,
    /// qtk's extension: unsigned 4-bit integer (ggml's sub-scales)
    U4,
    /// qtk's extension: signed 8-bit integer (ggml's sub-scales)
    I8,
    /// qtk's extension: signed 6-bit integer (ggml's Q3_K sub-scales)
    I6,
}

const DTYPES: [(ScaleDtype, sys::qtk_dtype); 10] = [
    (ScaleDtype::F32, sys::qtk_dtype_QTK_DTYPE_F32),
    (ScaleDtype::F16, sys::qtk_dtype_QTK_DTYPE_F16),
    (ScaleDtype::BF16, sys::qtk_dtype_QTK_DTYPE_BF16),
    (ScaleDtype::UE8M0, sys::qtk_dtype_QTK_DTYPE_UE8M0),
    (ScaleDtype::UE4M3, sys::qtk_dtype_QTK_DTYPE_UE4M3),
    (ScaleDtype::U8, sys::qtk_dtype_QTK_DTYPE_U8),
    (ScaleDtype::U6, sys::qtk_dtype_QTK_DTYPE_U6),
    (ScaleDtype::U4, sys::qtk_dtype_QTK_DTYPE_U4),
    (ScaleDtype::I8, sys::qtk_dtype_QTK_DTYPE_I8),
    (ScaleDtype::I6, sys::qtk_dtype_QTK_DTYPE_I6),
];

impl ScaleDtype {
    /// Whether Burn's `ScaleDtype` has this variant (the first five).
    pub fn is_burn(self) -> bool {
        matches!(self, ScaleDtype::F32 | ScaleDtype::F16 | ScaleDtype::BF16 | ScaleDtype::UE8M0 | ScaleDtype::UE4M3)
    }
    pub(crate) fn to_c(self) -> sys::qtk_dtype {
        DTYPES.iter().find(|(v, _)| *v == self).map(|(_, c)| *c).unwrap_or(0)
    }
    fn from_c(c: sys::qtk_dtype) -> Result<ScaleDtype> {
        DTYPES.iter().find(|(_, x)| *x == c).map(|(v, _)| *v).ok_or_else(|| unknown("qtk_dtype", c))
    }
    fn opt_from_c(c: sys::qtk_dtype) -> Result<Option<ScaleDtype>> {
        if c == sys::qtk_dtype_QTK_DTYPE_NONE {
            Ok(None)
        } else {
            ScaleDtype::from_c(c).map(Some)
        }
    }
}

/// The extent of a scale block, outermost first and right-aligned on the tensor's last
/// dimensions, as Burn's `BlockSize` (`[32]` on a `[64, 70]` tensor is `1 × 32`). qtk holds up
/// to 5 dims of 1..65535, and 0 ([`BlockSize::WHOLE`], `*` in a spec) for the whole extent;
/// Burn's holds dims up to 255.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockSize {
    dims: Vec<u32>,
}

impl BlockSize {
    /// A block dim meaning "the whole extent of that dimension" (`*`).
    pub const WHOLE: u32 = 0;
    /// A block of these dims (checked when the scheme is used: 1 to 5 dims).
    pub fn new(dims: impl AsRef<[u32]>) -> BlockSize {
        BlockSize { dims: dims.as_ref().to_vec() }
    }
    /// The dims, outermost first.
    pub fn as_slice(&self) -> &[u32] {
        &self.dims
    }
    /// The number of dims.
    pub fn len(&self) -> usize {
        self.dims.len()
    }
    /// Whether there are no dims (never valid in a scheme).
    pub fn is_empty(&self) -> bool {
        self.dims.is_empty()
    }
    /// Elements in one block (a `*` dim counts 1).
    pub fn num_elems(&self) -> usize {
        self.dims.iter().map(|&d| d.max(1) as usize).product()
    }
}

/// Burn's `BlockScale`: one scale per block of `size`, stored as `dtype`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockScale {
    /// The block of values sharing one scale.
    pub size: BlockSize,
    /// The dtype the block scales are stored in.
    pub dtype: ScaleDtype,
}

/// How the affine mode's offset enters a value (qtk's extension; s the scale, q the field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OffsetKind {
    /// `offset=`: x = s·q + o (o the group's minimum; ggml's Q4_1, Q5_1)
    Add,
    /// `min=`: x = s·q − m (ggml's K-quants)
    Min,
    /// `zero=`: x = s·(q − z) (a zero point; GPTQ, AWQ)
    Zero,
}

/// The affine mode's offset: its kind and the dtype it is stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Offset {
    /// How it enters the value.
    pub kind: OffsetKind,
    /// Its stored dtype (F32, F16, BF16, or U8 for zero points).
    pub dtype: ScaleDtype,
}

/// ggml's super-block scale (`store=ggml` only): `size` elements (256) under one scale of `dtype`
/// (F16) that multiplies the integer block scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SuperBlock {
    /// Elements under one super-block scale.
    pub size: u32,
    /// The super-block scales' dtype.
    pub dtype: ScaleDtype,
}

/// A quantization scheme. The first five fields are Burn's `QuantScheme`, name by name (in
/// Burn `tensor` and `block` are private and set with [`per_tensor`](Scheme::per_tensor) and
/// [`per_block`](Scheme::per_block), which exist here too); the rest are qtk's extensions, `None`
/// for every scheme Burn can say.
///
/// `tensor: None` and `Some(ScaleDtype::F32)` are different schemes, as in Burn's serialized
/// form, although both store one f32 scale when there is no block level.
///
/// ```
/// use qtk::{QuantValue, ScaleDtype, Scheme};
/// let s = Scheme::default().with_value(QuantValue::Q4F).per_block([32], ScaleDtype::F16);
/// assert_eq!(s.to_string(), "q4f,block=32:f16");
/// assert_eq!("q4f,block=32:f16".parse::<Scheme>()?, s);
/// assert_eq!(s.nbytes(&[64, 128])?, 64 * 128 / 2 + 64 * 4 * 2);
/// # Ok::<(), qtk::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scheme {
    /// The logical type of the quantized values.
    pub value: QuantValue,
    /// How the values are stored.
    pub store: QuantStore,
    /// Symmetric, lookup (or qtk's affine).
    pub mode: QuantMode,
    /// The per-tensor scale level (the global of a two-level scheme), or `None`.
    pub tensor: Option<ScaleDtype>,
    /// The per-block scale level, or `None`.
    pub block: Option<BlockScale>,
    /// qtk: the lookup table's name (`"nf4"`, `"iq4nl"`, a registered one, or `"fit"`); `None`
    /// for symmetric schemes and for a lookup scheme read from Burn, which names none.
    pub table: Option<String>,
    /// qtk: the affine mode's offset.
    pub offset: Option<Offset>,
    /// qtk: ggml's super-block scale (`store=ggml`).
    pub super_block: Option<SuperBlock>,
}

impl Default for Scheme {
    /// Burn's default: Q8F, `PackedU32(0)`, symmetric, no level (one f32 scale for the tensor).
    fn default() -> Scheme {
        Scheme {
            value: QuantValue::Q8F,
            store: QuantStore::PackedU32(0),
            mode: QuantMode::Symmetric,
            tensor: None,
            block: None,
            table: None,
            offset: None,
            super_block: None,
        }
    }
}

/// Which of Burn's two serialized shapes of `QuantScheme` (formats/BURNPACK.md §1.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BurnForm {
    /// `{value, store, mode, tensor, block}`: Burn since 2026-08-19 (cubecl PR #1514).
    Current,
    /// `{value, param, store, level, mode}`: Burn before that.
    Legacy,
}

impl BurnForm {
    fn to_c(self) -> sys::qtk_burn_form {
        match self {
            BurnForm::Current => sys::qtk_burn_form_QTK_BURN_CURRENT,
            BurnForm::Legacy => sys::qtk_burn_form_QTK_BURN_LEGACY,
        }
    }
    fn from_c(c: sys::qtk_burn_form) -> BurnForm {
        if c == sys::qtk_burn_form_QTK_BURN_LEGACY {
            BurnForm::Legacy
        } else {
            BurnForm::Current
        }
    }
}

fn unknown(what: &str, v: u32) -> Error {
    Error::new(Status::UNSUPPORTED, format!("the C library returned {} {}, which this version of the qtk crate does not know", what, v))
}

impl Scheme {
    /// Parses a spec string or a preset (`"q4f,block=32:f16"`, `"nvfp4"`, `"q4_k"`;
    /// case-insensitive): the grammar of `qtk scheme --help`.
    pub fn parse(spec: &str) -> Result<Scheme> {
        let c = cstring(spec, "the scheme spec")?;
        let mut s = std::mem::MaybeUninit::<sys::qtk_scheme>::zeroed();
        // SAFETY: c is NUL-terminated; s is writable and all-zero is a valid qtk_scheme.
        check(unsafe { sys::qtk_scheme_parse(c.as_ptr(), s.as_mut_ptr()) })?;
        Scheme::from_c(unsafe { &s.assume_init() })
    }

    /// A preset by name (the same as [`parse`](Scheme::parse)).
    pub fn preset(name: &str) -> Result<Scheme> {
        Scheme::parse(name)
    }

    /// NVFP4: E2M1 packed two per byte, UE4M3 scales per 16 values under an f32 global (Burn's
    /// `QuantScheme::nvfp4()`).
    pub fn nvfp4() -> Scheme {
        Scheme::default()
            .with_value(QuantValue::E2M1)
            .with_store(QuantStore::PackedNative(0))
            .per_block([16], ScaleDtype::UE4M3)
            .per_tensor(ScaleDtype::F32)
    }

    /// MXFP4 (OCP): E2M1 packed two per byte, UE8M0 scales per 32.
    pub fn mxfp4() -> Scheme {
        Scheme::default()
            .with_value(QuantValue::E2M1)
            .with_store(QuantStore::PackedNative(0))
            .per_block([32], ScaleDtype::UE8M0)
    }

    /// MXFP8 (OCP): E4M3, one per byte, UE8M0 scales per 32.
    pub fn mxfp8() -> Scheme {
        Scheme::default().with_value(QuantValue::E4M3).with_store(QuantStore::Native).per_block([32], ScaleDtype::UE8M0)
    }

    /// NF4 (bitsandbytes): a 4-bit lookup of the nf4 table, f32 scales per 64.
    pub fn nf4() -> Scheme {
        Scheme::default().with_value(QuantValue::Q4F).with_table("nf4").per_block([64], ScaleDtype::F32)
    }

    /// Sets the value type.
    pub fn with_value(mut self, value: QuantValue) -> Scheme {
        self.value = value;
        self
    }
    /// Sets the store.
    pub fn with_store(mut self, store: QuantStore) -> Scheme {
        self.store = store;
        self
    }
    /// Sets the mode.
    pub fn with_mode(mut self, mode: QuantMode) -> Scheme {
        self.mode = mode;
        self
    }
    /// Sets the per-tensor scale level (with a block level: the two-level global).
    pub fn per_tensor(mut self, dtype: ScaleDtype) -> Scheme {
        self.tensor = Some(dtype);
        self
    }
    /// Sets the per-block scale level: one scale per block of `block` values, stored as `dtype`.
    pub fn per_block(mut self, block: impl AsRef<[u32]>, dtype: ScaleDtype) -> Scheme {
        self.block = Some(BlockScale { size: BlockSize::new(block), dtype });
        self
    }
    /// qtk: the lookup mode with a table (sets `mode` to [`QuantMode::Lookup`]).
    pub fn with_table(mut self, name: &str) -> Scheme {
        self.mode = QuantMode::Lookup;
        self.table = Some(name.to_string());
        self
    }
    /// qtk: the affine mode with an offset (sets `mode` to [`QuantMode::Affine`]).
    pub fn with_offset(mut self, kind: OffsetKind, dtype: ScaleDtype) -> Scheme {
        self.mode = QuantMode::Affine;
        self.offset = Some(Offset { kind, dtype });
        self
    }

    /// The per-tensor level as Burn's `tensor_scale()` resolves it: `Some(F32)` for a scheme
    /// with no level at all.
    pub fn tensor_scale(&self) -> Option<ScaleDtype> {
        if self.tensor.is_none() && self.block.is_none() {
            Some(ScaleDtype::F32)
        } else {
            self.tensor
        }
    }

    /// Whether Burn's `QuantScheme` can hold this scheme exactly (no qtk extension).
    pub fn is_burn(&self) -> bool {
        self.value.is_burn()
            && !matches!(self.store, QuantStore::Ggml)
            && !matches!(self.mode, QuantMode::Affine)
            && self.offset.is_none()
            && self.super_block.is_none()
            && self.tensor.map_or(true, |d| d.is_burn())
            && self.block.as_ref().map_or(true, |b| b.dtype.is_burn() && b.size.as_slice().iter().all(|&d| (1..=255).contains(&d)))
    }

    /// Checks the scheme on its own (value, store and level combinations; a table present).
    pub fn validate(&self) -> Result<()> {
        let c = self.to_c()?;
        // SAFETY: c is a complete qtk_scheme.
        check(unsafe { sys::qtk_scheme_validate(&c) })
    }

    /// The canonical spec string (`Display` prints the same).
    pub fn spec(&self) -> Result<String> {
        let c = self.to_c()?;
        let mut buf = vec![0 as c_char; 256];
        let mut needed = 0usize;
        // SAFETY: buf holds buf.len() bytes.
        let st = unsafe { sys::qtk_scheme_format(&c, buf.as_mut_ptr(), buf.len(), &mut needed) };
        if st != sys::qtk_status_QTK_OK && needed > buf.len() {
            buf = vec![0 as c_char; needed];
            check(unsafe { sys::qtk_scheme_format(&c, buf.as_mut_ptr(), buf.len(), &mut needed) })?;
        } else {
            check(st)?;
        }
        let bytes: Vec<u8> = buf.iter().take_while(|&&b| b != 0).map(|&b| b as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The preset the scheme equals (`"nvfp4"`, `"q4_k"`, ...), if any.
    pub fn preset_name(&self) -> Option<&'static str> {
        let c = self.to_c().ok()?;
        // SAFETY: c is complete; the name is static or NULL.
        let p = unsafe { sys::qtk_scheme_preset_name(&c) };
        if p.is_null() {
            None
        } else {
            Some(unsafe { crate::error::static_str(p) })
        }
    }

    fn layout(&self, shape: &[usize]) -> Result<sys::qtk_layout> {
        let c = self.to_c()?;
        let rank = crate::tensor::rank_of(shape)?;
        let mut l = std::mem::MaybeUninit::<sys::qtk_layout>::zeroed();
        // SAFETY: shape holds rank entries; l is writable.
        check(unsafe { sys::qtk_layout_compute(&c, shape.as_ptr(), rank, l.as_mut_ptr()) })?;
        Ok(unsafe { l.assume_init() })
    }

    /// The exact byte length of a tensor of this shape in Burn's layout (values, scales,
    /// global, table).
    pub fn nbytes(&self, shape: &[usize]) -> Result<usize> {
        Ok(self.layout(shape)?.total_bytes)
    }

    /// Storage bits per element on this shape, scales included.
    pub fn bits_per_element(&self, shape: &[usize]) -> Result<f64> {
        let l = self.layout(shape)?;
        // SAFETY: l was filled by qtk_layout_compute.
        Ok(unsafe { sys::qtk_layout_bits_per_element(&l) })
    }

    /// Reads Burn's QuantScheme as ciborium serializes it (burnpack metadata): either shape Burn
    /// has used, the scheme alone or a whole `{"QFloat": scheme}` dtype. A lookup scheme comes
    /// back with `table: None` (Burn names no table).
    pub fn from_burn_cbor(bytes: &[u8]) -> Result<Scheme> {
        Scheme::from_burn_cbor_form(bytes).map(|(s, _)| s)
    }

    /// [`from_burn_cbor`](Scheme::from_burn_cbor), also telling which shape it was.
    pub fn from_burn_cbor_form(bytes: &[u8]) -> Result<(Scheme, BurnForm)> {
        let mut s = std::mem::MaybeUninit::<sys::qtk_scheme>::zeroed();
        let mut form: sys::qtk_burn_form = 0;
        // SAFETY: bytes is readable for its length; s and form are writable.
        check(unsafe { sys::qtk_scheme_from_burn_cbor(bytes.as_ptr().cast(), bytes.len(), s.as_mut_ptr(), &mut form) })?;
        Ok((Scheme::from_c(unsafe { &s.assume_init() })?, BurnForm::from_c(form)))
    }

    /// Reads the JSON serde_json writes for Burn's QuantScheme (either shape, or a whole
    /// `{"QFloat": ...}` dtype).
    pub fn from_burn_json(json: &str) -> Result<Scheme> {
        Scheme::from_burn_json_form(json).map(|(s, _)| s)
    }

    /// [`from_burn_json`](Scheme::from_burn_json), also telling which shape it was.
    pub fn from_burn_json_form(json: &str) -> Result<(Scheme, BurnForm)> {
        let mut s = std::mem::MaybeUninit::<sys::qtk_scheme>::zeroed();
        let mut form: sys::qtk_burn_form = 0;
        // SAFETY: json is readable for its length; s and form are writable.
        check(unsafe { sys::qtk_scheme_from_burn_json(json.as_ptr().cast(), json.len(), s.as_mut_ptr(), &mut form) })?;
        Ok((Scheme::from_c(unsafe { &s.assume_init() })?, BurnForm::from_c(form)))
    }

    /// Burn's QuantScheme in CBOR, byte for byte as ciborium writes it (the current shape). A
    /// `*` block dim needs a shape: use [`to_burn_cbor_with`](Scheme::to_burn_cbor_with).
    pub fn to_burn_cbor(&self) -> Result<Vec<u8>> {
        self.to_burn_cbor_with(None, BurnForm::Current)
    }

    /// Burn's QuantScheme in CBOR in either shape, block dims resolved on `shape` when given.
    pub fn to_burn_cbor_with(&self, shape: Option<&[usize]>, form: BurnForm) -> Result<Vec<u8>> {
        let c = self.to_c()?;
        let (sp, rank) = shape_arg(shape)?;
        let mut buf = vec![0u8; 256];
        let mut needed = 0usize;
        // SAFETY: buf holds buf.len() bytes; sp holds rank entries or is NULL with rank 0.
        check(unsafe { sys::qtk_scheme_to_burn_cbor(&c, sp, rank, form.to_c(), buf.as_mut_ptr().cast(), buf.len(), &mut needed) })?;
        buf.truncate(needed);
        Ok(buf)
    }

    /// Burn's QuantScheme as serde_json writes it (compact, the current shape); what
    /// `serde_json::from_str::<QuantScheme>` reads.
    pub fn to_burn_json(&self) -> Result<String> {
        self.to_burn_json_with(None, BurnForm::Current)
    }

    /// Burn's QuantScheme in JSON in either shape, block dims resolved on `shape` when given.
    pub fn to_burn_json_with(&self, shape: Option<&[usize]>, form: BurnForm) -> Result<String> {
        let c = self.to_c()?;
        let (sp, rank) = shape_arg(shape)?;
        let mut buf = vec![0u8; 512];
        let mut needed = 0usize;
        // SAFETY: as in to_burn_cbor_with.
        check(unsafe { sys::qtk_scheme_to_burn_json(&c, sp, rank, form.to_c(), buf.as_mut_ptr().cast(), buf.len(), &mut needed) })?;
        buf.truncate(needed.saturating_sub(1));
        String::from_utf8(buf).map_err(|_| Error::new(Status::INTERNAL, "qtk wrote JSON that is not UTF-8"))
    }

    /// The C library's form of the scheme.
    pub fn to_c(&self) -> Result<sys::qtk_scheme> {
        // SAFETY: all-zero is a valid qtk_scheme (Burn's default).
        let mut c: sys::qtk_scheme = unsafe { std::mem::zeroed() };
        c.value = self.value.to_c();
        let (store, dim) = match self.store {
            QuantStore::Native => (sys::qtk_store_QTK_STORE_NATIVE, 0),
            QuantStore::PackedNative(d) => (sys::qtk_store_QTK_STORE_PACKED, d),
            QuantStore::PackedU32(d) => (sys::qtk_store_QTK_STORE_U32, d),
            QuantStore::Ggml => (sys::qtk_store_QTK_STORE_GGML, 0),
        };
        c.store = store;
        c.pack_dim = u8::try_from(dim)
            .ok()
            .filter(|&d| (d as u32) < sys::QTK_MAX_RANK)
            .ok_or_else(|| Error::new(Status::SCHEME, format!("packing dimension {} is not 0..{}", dim, sys::QTK_MAX_RANK - 1)))?;
        c.mode = match self.mode {
            QuantMode::Symmetric => sys::qtk_mode_QTK_MODE_SYMMETRIC,
            QuantMode::Lookup => sys::qtk_mode_QTK_MODE_LOOKUP,
            QuantMode::Affine => sys::qtk_mode_QTK_MODE_AFFINE,
            QuantMode::Lattice => sys::qtk_mode_QTK_MODE_LATTICE,
        };
        if let Some(b) = &self.block {
            let dims = b.size.as_slice();
            if dims.is_empty() || dims.len() > sys::QTK_MAX_BLOCK_DIMS as usize {
                return Err(Error::new(Status::SCHEME, format!("a block has 1 to {} dims, not {}", sys::QTK_MAX_BLOCK_DIMS, dims.len())));
            }
            for (i, &d) in dims.iter().enumerate() {
                if d > sys::QTK_BLOCK_MAX_EXTENT {
                    return Err(Error::new(Status::SCHEME, format!("block dim {} is {}; qtk's block dims are 1..{} (0: the whole extent)", i, d, sys::QTK_BLOCK_MAX_EXTENT)));
                }
                c.block[i] = d;
            }
            c.block_rank = dims.len() as u8;
            c.block_dtype = b.dtype.to_c();
        }
        c.tensor_dtype = self.tensor.map_or(sys::qtk_dtype_QTK_DTYPE_NONE, |d| d.to_c());
        if let Some(t) = &self.table {
            let b = t.as_bytes();
            if b.len() >= sys::QTK_TABLE_NAME_MAX as usize || b.contains(&0) {
                return Err(Error::new(Status::SCHEME, format!("table name {:?}: at most {} bytes, no NUL", t, sys::QTK_TABLE_NAME_MAX - 1)));
            }
            for (i, &ch) in b.iter().enumerate() {
                c.table[i] = ch as c_char;
            }
        }
        if let Some(o) = self.offset {
            c.offset = match o.kind {
                OffsetKind::Add => sys::qtk_offset_QTK_OFFSET_ADD,
                OffsetKind::Min => sys::qtk_offset_QTK_OFFSET_MIN,
                OffsetKind::Zero => sys::qtk_offset_QTK_OFFSET_ZERO,
            };
            c.offset_dtype = o.dtype.to_c();
        }
        if let Some(sb) = self.super_block {
            c.super_block = sb.size;
            c.super_dtype = sb.dtype.to_c();
        }
        Ok(c)
    }

    /// The scheme of a C `qtk_scheme` (Err for an enum value this crate does not know).
    pub fn from_c(c: &sys::qtk_scheme) -> Result<Scheme> {
        let value = QuantValue::from_c(c.value)?;
        let d = c.pack_dim as usize;
        let store = match c.store {
            x if x == sys::qtk_store_QTK_STORE_NATIVE => QuantStore::Native,
            x if x == sys::qtk_store_QTK_STORE_PACKED => QuantStore::PackedNative(d),
            x if x == sys::qtk_store_QTK_STORE_U32 => QuantStore::PackedU32(d),
            x if x == sys::qtk_store_QTK_STORE_GGML => QuantStore::Ggml,
            x => return Err(unknown("qtk_store", x)),
        };
        let mode = match c.mode {
            x if x == sys::qtk_mode_QTK_MODE_SYMMETRIC => QuantMode::Symmetric,
            x if x == sys::qtk_mode_QTK_MODE_LOOKUP => QuantMode::Lookup,
            x if x == sys::qtk_mode_QTK_MODE_AFFINE => QuantMode::Affine,
            x if x == sys::qtk_mode_QTK_MODE_LATTICE => QuantMode::Lattice,
            x => return Err(unknown("qtk_mode", x)),
        };
        let block = if c.block_rank == 0 {
            None
        } else {
            let n = (c.block_rank as usize).min(c.block.len());
            Some(BlockScale { size: BlockSize::new(&c.block[..n]), dtype: ScaleDtype::from_c(c.block_dtype)? })
        };
        let name: Vec<u8> = c.table.iter().take_while(|&&b| b != 0).map(|&b| b as u8).collect();
        let table = if name.is_empty() { None } else { Some(String::from_utf8_lossy(&name).into_owned()) };
        let offset = match ScaleDtype::opt_from_c(c.offset_dtype)? {
            None => None,
            Some(dtype) => Some(Offset {
                kind: match c.offset {
                    x if x == sys::qtk_offset_QTK_OFFSET_ADD => OffsetKind::Add,
                    x if x == sys::qtk_offset_QTK_OFFSET_MIN => OffsetKind::Min,
                    x if x == sys::qtk_offset_QTK_OFFSET_ZERO => OffsetKind::Zero,
                    x => return Err(unknown("qtk_offset", x)),
                },
                dtype,
            }),
        };
        let super_block = match ScaleDtype::opt_from_c(c.super_dtype)? {
            Some(dtype) if c.super_block != 0 => Some(SuperBlock { size: c.super_block, dtype }),
            _ => None,
        };
        Ok(Scheme { value, store, mode, tensor: ScaleDtype::opt_from_c(c.tensor_dtype)?, block, table, offset, super_block })
    }
}

fn shape_arg(shape: Option<&[usize]>) -> Result<(*const usize, i32)> {
    match shape {
        None => Ok((std::ptr::null(), 0)),
        Some(s) => Ok((s.as_ptr(), crate::tensor::rank_of(s)?)),
    }
}

impl fmt::Display for Scheme {
    /// The canonical spec (`q4f,block=32:f16`); a scheme qtk cannot format prints as
    /// `<invalid scheme: reason>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spec() {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "<invalid scheme: {}>", e.message()),
        }
    }
}

impl FromStr for Scheme {
    type Err = Error;
    fn from_str(s: &str) -> Result<Scheme> {
        Scheme::parse(s)
    }
}
