//! [`Error`] and [`Status`]: every failure of qtk, with the C library's status code and its
//! message.
use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// A qtk status code, as the C library returns it (`qtk_status`). A plain integer: a code a
/// newer library returns that this crate does not name is still a valid `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub u32);

impl Status {
    /// `QTK_OK`
    pub const OK: Status = Status(sys::qtk_status_QTK_OK);
    /// `QTK_E_ARG`: a bad argument (a length that does not match, a NUL inside a string, ...)
    pub const ARG: Status = Status(sys::qtk_status_QTK_E_ARG);
    /// `QTK_E_SCHEME`: a scheme that is not valid (or not for this shape)
    pub const SCHEME: Status = Status(sys::qtk_status_QTK_E_SCHEME);
    /// `QTK_E_PARSE`: a spec string that does not parse
    pub const PARSE: Status = Status(sys::qtk_status_QTK_E_PARSE);
    /// `QTK_E_SHAPE`: rank, extent or block mismatch; size overflow
    pub const SHAPE: Status = Status(sys::qtk_status_QTK_E_SHAPE);
    /// `QTK_E_LENGTH`: a byte or element count that is not the one expected
    pub const LENGTH: Status = Status(sys::qtk_status_QTK_E_LENGTH);
    /// `QTK_E_VALUE`: a non-finite value, scale or table entry; a field out of range
    pub const VALUE: Status = Status(sys::qtk_status_QTK_E_VALUE);
    /// `QTK_E_NOMEM`: out of memory
    pub const NOMEM: Status = Status(sys::qtk_status_QTK_E_NOMEM);
    /// `QTK_E_IO`: reading or writing a file failed
    pub const IO: Status = Status(sys::qtk_status_QTK_E_IO);
    /// `QTK_E_FORMAT`: a file (or serialized scheme) whose contents are malformed
    pub const FORMAT: Status = Status(sys::qtk_status_QTK_E_FORMAT);
    /// `QTK_E_UNSUPPORTED`: valid, but not something qtk does
    pub const UNSUPPORTED: Status = Status(sys::qtk_status_QTK_E_UNSUPPORTED);
    /// `QTK_E_NOTFOUND`: a named tensor, table or key that does not exist
    pub const NOTFOUND: Status = Status(sys::qtk_status_QTK_E_NOTFOUND);
    /// `QTK_E_INTERNAL`: a bug in qtk
    pub const INTERNAL: Status = Status(sys::qtk_status_QTK_E_INTERNAL);
    /// `QTK_E_CANCELLED`: a progress callback asked to stop
    pub const CANCELLED: Status = Status(sys::qtk_status_QTK_E_CANCELLED);

    /// The stable name of the status (`"QTK_E_SHAPE"`), from the C library.
    pub fn name(self) -> &'static str {
        // SAFETY: qtk_status_name returns a static string for every value, known or not.
        unsafe { static_str(sys::qtk_status_name(self.0)) }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failure: the C library's status and the message it recorded (or one of this crate's
/// checks, with the status the C library would have given).
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with a status and a message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// The status code.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The status as the C library's integer code.
    pub fn code(&self) -> u32 {
        self.status.0
    }

    /// The message, naming what was wrong (qtk's own words).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The calling thread's last qtk message with the status a call returned. Read right after
    /// the call, on the same thread (the C library keeps one message per thread).
    pub(crate) fn last(st: sys::qtk_status) -> Error {
        // SAFETY: qtk_last_error returns a valid NUL-terminated string, "" if none.
        let msg = unsafe { CStr::from_ptr(sys::qtk_last_error()) }.to_string_lossy().into_owned();
        Error { status: Status(st), message: msg }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qtk::Error({}: {:?})", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Ok(()) for QTK_OK, else the thread's last error with that status.
pub(crate) fn check(st: sys::qtk_status) -> Result<()> {
    if st == sys::qtk_status_QTK_OK {
        Ok(())
    } else {
        Err(Error::last(st))
    }
}

/// A static C string as &str ("?" if it is not UTF-8 or NULL).
///
/// # Safety
/// p is NULL or points to a NUL-terminated string that lives for the whole program.
pub(crate) unsafe fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    if p.is_null() {
        return "?";
    }
    CStr::from_ptr(p).to_str().unwrap_or("?")
}

/// A C string argument; a NUL inside is an Err naming `what`.
pub(crate) fn cstring(s: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::new(Status::ARG, format!("{} holds a NUL byte: {:?}", what, s)))
}
