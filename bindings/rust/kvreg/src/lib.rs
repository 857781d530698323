//! Safe Rust API for libkvreg: name, register and track KV-cache blocks with Dynamo-compatible
//! chained XXH3 hashes, in pools (tiers) that share one registry, with Register/Remove events.
//!
//! Ownership: a [`Registry`] is a cheap, clonable handle (an `Arc` inside) and every [`Pool`]
//! holds one, so pools are `'static` values that keep their registry alive: an engine can keep
//! the registry and its pools in one struct, or move a pool into a thread. The C registry is
//! freed when its last handle (registry clone or pool) is dropped. A [`Block`] is a plain
//! handle value; misuse (double release, another pool's handle) is reported as
//! [`ErrorKind::Stale`].
//!
//! Threads: `Registry` and `Pool` are `Send + Sync` (the C objects are thread-safe);
//! `Sequence` is `Send` but not `Sync` (single owner in C).
//!
//! Events (inline mode): the handler runs inside the library calls that emit events, one call
//! at a time per registry, in event_id order. With several threads, whichever thread is
//! delivering may run the handler for other threads' events, and a call can return before its
//! own events were handled: call [`Registry::flush`] before reading what the handler keeps.
//!
//! Panics in the handler never cross the C library: each is caught, and re-raised on the
//! thread that ran the handler, when the library call during which it ran (a `Pool` method,
//! `Registry::flush`, ...) has returned. The handler is still offered every later event (the
//! library delivers each event once, so skipping it would lose it); if it panics more than once
//! in one call, the first panic is re-raised. A `register*`/`acquire*` call that re-raises a
//! panic first releases the references it took, since it cannot return their handles.
//!
//! ```
//! use kvreg::{hash_blocks, BlockDesc, Registry, ROUTER_SALT};
//!
//! let registry = Registry::new()?;
//! let gpu = registry.pool("gpu")?;
//! let blocks = hash_blocks(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4, ROUTER_SALT)?;
//! assert_eq!(blocks.len(), 2); // tokens 9 and 10 are the partial block
//! let handle = gpu.register(&BlockDesc::from(&blocks[0]))?;
//! assert!(registry.contains(blocks[0].sequence_hash)?);
//! gpu.release(handle)?;
//! assert!(!registry.contains(blocks[0].sequence_hash)?);
//! # Ok::<(), kvreg::Error>(())
//! ```
//!
//! An engine owns its registry and pools together (no borrow between them):
//!
//! ```
//! use kvreg::{Pool, Registry};
//!
//! struct Engine {
//!     gpu: Pool,
//!     host: Pool,
//!     registry: Registry,
//! }
//!
//! fn engine() -> Result<Engine, kvreg::Error> {
//!     let registry = Registry::new()?;
//!     Ok(Engine { gpu: registry.pool("gpu")?, host: registry.pool("host")?, registry })
//! }
//!
//! let engine = engine()?;
//! std::thread::spawn(move || assert_ne!(engine.gpu.id(), engine.host.id())).join().unwrap();
//! # Ok::<(), kvreg::Error>(())
//! ```
//!
//! A `Sequence` may move between threads but not be shared:
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<kvreg::Sequence>();
//! ```

mod error;
mod event;
mod hash;
mod pool;
mod registry;
mod sequence;
pub mod wire;
pub mod nats;

use std::ffi::CStr;

use kvreg_sys as ffi;

pub use crate::error::{Error, ErrorKind, Result};
pub use crate::event::{Event, EventKind, Medium};
pub use crate::hash::{block_hash, hash_blocks, sequence_hash, BlockInfo, ROUTER_SALT};
pub use crate::pool::{Block, BlockDesc, Pool};
pub use crate::registry::{
    Delivery, EventMode, Registry, RegistryBuilder, Snapshot, Stat, WeakRegistry,
};
pub use crate::sequence::Sequence;

/// Compiles and runs the README's example as a doctest, so it cannot rot.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// `features()` bit: the wire formats ([`wire`]) are built in (the library has msgpack-c).
pub const FEATURE_WIRE: u32 = ffi::KVREG_FEATURE_WIRE;
/// `features()` bit: the ZeroMQ publisher and subscriber are built in.
pub const FEATURE_ZMQ: u32 = ffi::KVREG_FEATURE_ZMQ;
/// event_id of the events a [`Snapshot`] carries (they were never emitted).
pub const EVENT_ID_SNAPSHOT: u64 = ffi::KVREG_EVENT_ID_SNAPSHOT;

/// Bitwise OR of the `FEATURE_*` built into the loaded library. Without `FEATURE_WIRE`,
/// `wire::Encoder::new` and `wire::Decoder::new` fail with `ErrorKind::NotSupported`.
pub fn features() -> u32 {
    // SAFETY: pure function.
    unsafe { ffi::kvreg_features() }
}

/// Version of the library actually loaded: (MAJOR*10000 + MINOR*100 + PATCH, "MAJOR.MINOR.PATCH").
pub fn version() -> (u32, &'static str) {
    // SAFETY: both functions are pure; the string is static and NUL-terminated.
    let number = unsafe { ffi::kvreg_version_number() };
    let string = unsafe { CStr::from_ptr(ffi::kvreg_version_string()) };
    (number, string.to_str().unwrap_or(""))
}
