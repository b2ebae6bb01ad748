//! [`Writer`]: a .bpk, .safetensors or .gguf file made from Rust tensors, all or nothing.
use crate::ckpt::{path_arg, Elem, Format, HubLayout};
use crate::error::{check, cstring, Error, Result, Status};
use crate::sys;
use crate::tensor::{numel, rank_of, Tensor};
use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::Path;

/// Options of [`Writer::create`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// The format (`None`: by the path's extension; no extension: a directory of shards).
    pub format: Option<Format>,
    /// safetensors: qtk's convention (AUTO) or a Hub layout.
    pub layout: HubLayout,
    /// safetensors shards of at most this many tensor bytes (0: one file).
    pub max_shard_bytes: usize,
    /// Replace an existing output.
    pub force: bool,
}

/// Writes a checkpoint: declare the tensors and metadata, then [`commit`](Writer::commit).
/// Nothing appears at the path before the commit; dropping a writer without committing leaves
/// nothing behind. The tensors' bytes are borrowed until the commit (`'a`).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("qtk-doc-writer-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("w.bpk");
/// let x: Vec<f32> = (0..64 * 32).map(|i| (i % 13) as f32 / 13.0 - 0.5).collect();
/// let t = qtk::quantize(&x, &[64, 32], &qtk::Scheme::parse("q4s,block=32:f16")?, &Default::default())?;
/// let bias = vec![0f32; 64];
/// let mut w = qtk::Writer::create(&path, &Default::default())?;
/// w.add_tensor("fc.weight", &t)?;
/// w.add_f32("fc.bias", &[64], &bias)?;
/// w.add_meta("producer", "doc test")?;
/// w.commit()?;
/// let c = qtk::Checkpoint::open(&path)?;
/// assert_eq!(c.tensor("fc.weight")?.as_bytes(), t.as_bytes());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), qtk::Error>(())
/// ```
pub struct Writer<'a> {
    ptr: *mut sys::qtk_writer,
    pending: Vec<Cow<'a, [u8]>>,
    _borrow: PhantomData<&'a [u8]>,
}

// SAFETY: a qtk_writer may move between threads (one uses it at a time: no Sync); the bytes it
// borrows are shared slices of Sync data.
unsafe impl<'a> Send for Writer<'a> {}

impl<'a> std::fmt::Debug for Writer<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "qtk::Writer({} tensors declared)", self.pending.len())
    }
}

impl<'a> Drop for Writer<'a> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the writer this value owns, not yet committed.
            unsafe { sys::qtk_writer_abort(self.ptr) }
        }
    }
}

impl<'a> Writer<'a> {
    /// Starts an output at `path`.
    pub fn create(path: impl AsRef<Path>, opts: &WriteOptions) -> Result<Writer<'a>> {
        let c = path_arg(path.as_ref())?;
        // SAFETY: all-zero is valid (no source, notice, cancel).
        let mut o: sys::qtk_write_options = unsafe { std::mem::zeroed() };
        o.format = Format::to_c(opts.format);
        o.layout = opts.layout.0;
        o.max_shard_bytes = opts.max_shard_bytes;
        o.force = opts.force as std::os::raw::c_int;
        let mut out = std::ptr::null_mut();
        // SAFETY: c is NUL-terminated; out writable.
        check(unsafe { sys::qtk_writer_create(c.as_ptr(), &o, &mut out) })?;
        Ok(Writer { ptr: out, pending: Vec::new(), _borrow: PhantomData })
    }

    /// Declares a quantized tensor (its bytes written at the commit).
    pub fn add_tensor(&mut self, name: &str, t: &'a Tensor) -> Result<()> {
        let c = cstring(name, "the tensor name")?;
        let sch = t.scheme().to_c()?;
        // SAFETY: all-zero is valid; the fields set point to live data for the call.
        let mut d: sys::qtk_ckpt_tensor = unsafe { std::mem::zeroed() };
        d.name = c.as_ptr();
        d.quantized = true;
        d.scheme = sch;
        d.rank = rank_of(t.shape())?;
        d.shape = t.shape().as_ptr();
        check(unsafe { sys::qtk_writer_add(self.ptr, &d, std::ptr::null()) })?;
        self.pending.push(Cow::Borrowed(t.as_bytes()));
        Ok(())
    }

    /// Declares a raw tensor of `elem` elements given as little-endian bytes (the length is
    /// checked at the commit).
    pub fn add_raw(&mut self, name: &str, elem: Elem, shape: &[usize], bytes: &'a [u8]) -> Result<()> {
        self.add_raw_cow(name, elem, shape, Cow::Borrowed(bytes))
    }

    fn add_raw_cow(&mut self, name: &str, elem: Elem, shape: &[usize], bytes: Cow<'a, [u8]>) -> Result<()> {
        let c = cstring(name, "the tensor name")?;
        let rank = rank_of(shape)?;
        // SAFETY: c and shape are live for the call; the data come later (NULL).
        check(unsafe { sys::qtk_writer_add_raw(self.ptr, c.as_ptr(), elem.0, shape.as_ptr(), rank, std::ptr::null()) })?;
        self.pending.push(bytes);
        Ok(())
    }

    /// Declares an f32 tensor.
    pub fn add_f32(&mut self, name: &str, shape: &[usize], values: &'a [f32]) -> Result<()> {
        let n = numel(shape)?;
        if values.len() != n {
            return Err(Error::new(Status::LENGTH, format!("tensor '{}': {} values for shape {:?}, which has {}", name, values.len(), shape, n)));
        }
        #[cfg(target_endian = "little")]
        // SAFETY: f32 has no padding; the byte view covers exactly the slice.
        let bytes = Cow::Borrowed(unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), values.len() * 4) });
        #[cfg(not(target_endian = "little"))]
        let bytes = Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect());
        self.add_raw_cow(name, Elem::F32, shape, bytes)
    }

    /// Adds a metadata key/value.
    pub fn add_meta(&mut self, key: &str, value: &str) -> Result<()> {
        let k = cstring(key, "the key")?;
        let v = cstring(value, "the value")?;
        // SAFETY: both NUL-terminated.
        check(unsafe { sys::qtk_writer_add_meta(self.ptr, k.as_ptr(), v.as_ptr()) })
    }

    /// Writes every tensor's bytes in declaration order (each length checked), then moves the
    /// output into place. On any error nothing is left behind.
    pub fn commit(mut self) -> Result<()> {
        let p = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        for b in &self.pending {
            // SAFETY: b is readable for its length; the writer checks it is the tensor's.
            let st = unsafe { sys::qtk_writer_write(p, b.as_ptr().cast(), b.len()) };
            if st != sys::qtk_status_QTK_OK {
                let e = Error::last(st);
                unsafe { sys::qtk_writer_abort(p) };
                return Err(e);
            }
        }
        // SAFETY: commit frees the writer whatever the result.
        check(unsafe { sys::qtk_writer_commit(p) })
    }
}
