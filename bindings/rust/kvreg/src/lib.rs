//! Safe Rust API for libkvreg: name, register and track KV-cache blocks with Dynamo-compatible
//! chained XXH3 hashes, in pools (tiers) that share one registry, with Register/Remove events.
//!
//! Ownership follows the C library: a [`Registry`] owns its pools, so a [`Pool`] borrows the
//! registry it came from and cannot outlive it. A [`Block`] is a plain handle value; misuse
//! (double release, another pool's handle) is reported as [`ErrorKind::Stale`].
//!
//! Threads: `Registry` and `Pool` are `Send + Sync` (the C objects are thread-safe);
//! `Sequence` is `Send` but not `Sync` (single owner in C).
//!
//! ```
//! use kvreg::{hash_blocks, BlockDesc, Registry, ROUTER_SALT};
//!
//! let registry = Registry::new()?;
//! let gpu = registry.pool("gpu")?;
//! let blocks = hash_blocks(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4, ROUTER_SALT)?;
//! assert_eq!(blocks.len(), 2); // tokens 9 and 10 are the partial block
//! let handle = gpu.register(&BlockDesc::from(&blocks[0]))?;
//! assert!(registry.contains(blocks[0].sequence_hash));
//! gpu.release(handle)?;
//! assert!(!registry.contains(blocks[0].sequence_hash));
//! # Ok::<(), kvreg::Error>(())
//! ```
//!
//! A `Sequence` may move between threads but not be shared:
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<kvreg::Sequence>();
//! ```
//!
//! and a pool cannot outlive its registry:
//!
//! ```compile_fail
//! let pool = {
//!     let registry = kvreg::Registry::new().unwrap();
//!     registry.pool("gpu").unwrap()
//! };
//! ```

mod error;
mod event;
mod hash;
mod pool;
mod registry;
mod sequence;

use std::ffi::CStr;

use kvreg_sys as ffi;

pub use crate::error::{Error, ErrorKind, Result};
pub use crate::event::{Event, EventKind};
pub use crate::hash::{block_hash, hash_blocks, sequence_hash, BlockInfo, ROUTER_SALT};
pub use crate::pool::{Block, BlockDesc, Pool};
pub use crate::registry::{Delivery, Registry, RegistryBuilder, Stat};
pub use crate::sequence::Sequence;

/// Compiles and runs the README's example as a doctest, so it cannot rot.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Version of the library actually loaded: (MAJOR*10000 + MINOR*100 + PATCH, "MAJOR.MINOR.PATCH").
pub fn version() -> (u32, &'static str) {
    // SAFETY: both functions are pure; the string is static and NUL-terminated.
    let number = unsafe { ffi::kvreg_version_number() };
    let string = unsafe { CStr::from_ptr(ffi::kvreg_version_string()) };
    (number, string.to_str().unwrap_or(""))
}
