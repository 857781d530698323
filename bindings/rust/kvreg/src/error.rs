//! Status codes as a Rust error. The code is kept as-is so nothing is lost when the library
//! returns a code newer than this crate (it shows up as `ErrorKind::Other`).

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use kvreg_sys as ffi;

/// What went wrong, by the header's KVREG_E* codes.
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// KVREG_EINVAL: bad argument (zero size, unknown option, bad value, NUL in a name).
    InvalidArgument,
    /// KVREG_ENOMEM: allocation failed; the call changed nothing.
    OutOfMemory,
    /// KVREG_ERANGE: index or count out of range.
    OutOfRange,
    /// KVREG_ESTATE: wrong state (partial block, empty sequence).
    InvalidState,
    /// KVREG_EEXIST: the hash is already registered in this pool.
    AlreadyExists,
    /// KVREG_ENOENT: no such hash in this pool, nothing stored.
    NotFound,
    /// KVREG_ESTALE: released, double-released or foreign handle.
    Stale,
    /// KVREG_EBUSY: not allowed now: from inside an event callback of this registry
    /// (`flush`, replacing the handler); polling a registry, or making a second publisher
    /// for it, while a [`NatsPublisher`](crate::nats::NatsPublisher) takes its events; a
    /// [`NatsConsumer::run`](crate::nats::NatsConsumer::run) while another is in progress.
    Busy,
    /// KVREG_EOVERFLOW: a counter would overflow (reference count, pool ids).
    Overflow,
    /// KVREG_ENOTSUP: the feature was not built into the loaded library (see
    /// [`features`](crate::features); the wire formats need a library built with msgpack-c).
    NotSupported,
    /// KVREG_EPROTO: malformed input from outside (a wire payload that does not decode; a
    /// [`DecodeError`](crate::wire::DecodeError) has its byte offset).
    Protocol,
    /// A code this crate does not know (a newer library).
    Other(i32),
}

impl ErrorKind {
    /// Maps a negative status code; unknown codes are kept in `Other`.
    pub fn from_code(code: i32) -> ErrorKind {
        match code {
            ffi::KVREG_EINVAL => ErrorKind::InvalidArgument,
            ffi::KVREG_ENOMEM => ErrorKind::OutOfMemory,
            ffi::KVREG_ERANGE => ErrorKind::OutOfRange,
            ffi::KVREG_ESTATE => ErrorKind::InvalidState,
            ffi::KVREG_EEXIST => ErrorKind::AlreadyExists,
            ffi::KVREG_ENOENT => ErrorKind::NotFound,
            ffi::KVREG_ESTALE => ErrorKind::Stale,
            ffi::KVREG_EBUSY => ErrorKind::Busy,
            ffi::KVREG_EOVERFLOW => ErrorKind::Overflow,
            ffi::KVREG_ENOTSUP => ErrorKind::NotSupported,
            ffi::KVREG_EPROTO => ErrorKind::Protocol,
            other => ErrorKind::Other(other),
        }
    }
}

/// A failed libkvreg call: the status code it returned.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Error {
    code: i32,
}

impl Error {
    /// Wraps a negative status code.
    pub fn from_code(code: i32) -> Error {
        Error { code }
    }

    /// The raw KVREG_E* value.
    pub fn code(&self) -> i32 {
        self.code
    }

    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    /// The library's name for the code (kvreg_strerror).
    pub fn message(&self) -> &'static str {
        // SAFETY: kvreg_strerror returns a static, NUL-terminated string for any input.
        let s = unsafe { CStr::from_ptr(ffi::kvreg_strerror(self.code)) };
        s.to_str().unwrap_or("unknown error")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (kvreg status {})", self.message(), self.code)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.code)
            .field("kind", &self.kind())
            .field("message", &self.message())
            .finish()
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Status to Result: non-negative is success (predicates return 1 or 0).
pub(crate) fn check(status: c_int) -> Result<c_int> {
    if status >= 0 {
        Ok(status)
    } else {
        Err(Error::from_code(status))
    }
}
