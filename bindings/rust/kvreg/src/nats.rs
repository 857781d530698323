//! The NATS JetStream event plane (include/kvreg_nats.h, docs/nats.md): an engine's
//! [`NatsPublisher`] publishes a [`Registry`]'s events into a stream; a router replica's
//! [`NatsConsumer`] reads the stream into an [`Index`]. [`available`] says whether the loaded
//! library was built with NATS; without it every call fails with [`ErrorKind::NotSupported`].
//!
//! Ownership: a publisher keeps a clone of its registry and a consumer a clone of its index,
//! so what they lend to the library lives as long as they do. Options are the header's
//! numbers (the `ffi::KVREG_NATS_*` constants re-exported here as `opt`, `stat`). Notices are
//! not bound: the consumer's counters count what they would say.
//!
//! [`ErrorKind::NotSupported`]: crate::ErrorKind::NotSupported

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kvreg_sys as ffi;

use crate::error::{check, Error, Result};
use crate::registry::Registry;

/// The option and stat numbers of include/kvreg_nats.h and kvreg_index.h.
pub use kvreg_sys::{
    KVREG_INDEX_HASHES_ENGINE, KVREG_INDEX_HASHES_OWN, KVREG_INDEX_OPT_BLOCK_SIZE,
    KVREG_INDEX_OPT_EXPECTED_ENTRIES, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_OPT_SALT,
    KVREG_INDEX_STAT_ENTRIES, KVREG_INDEX_STAT_MEMORY_BYTES, KVREG_INDEX_STAT_WORKERS,
    KVREG_NATS_COMPONENT, KVREG_NATS_CON_OPT_ACK_WAIT_MS, KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS,
    KVREG_NATS_CON_OPT_FETCH_BATCH, KVREG_NATS_CON_OPT_MAX_ACK_PENDING, KVREG_NATS_CON_OPT_MAX_HELD_BYTES,
    KVREG_NATS_CON_OPT_MAX_MSG_BYTES, KVREG_NATS_CON_OPT_REORDER_MS,
    KVREG_NATS_CON_OPT_REORDER_WINDOW, KVREG_NATS_CON_OPT_RESUME, KVREG_NATS_CON_STAT_BATCHES,
    KVREG_NATS_CON_STAT_DUPLICATES, KVREG_NATS_CON_STAT_EVENTS, KVREG_NATS_CON_STAT_FETCH_ERRORS,
    KVREG_NATS_CON_STAT_HELD, KVREG_NATS_CON_STAT_LOST, KVREG_NATS_CON_STAT_MALFORMED,
    KVREG_NATS_CON_STAT_MESSAGES, KVREG_NATS_CON_STAT_RESETS, KVREG_NATS_CON_STAT_STALE,
    KVREG_NATS_CON_OPT_RESTORE, KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS, KVREG_NATS_CON_OPT_SNAPSHOT_KEEP,
    KVREG_NATS_CON_OPT_SNAPSHOT_MS, KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS,
    KVREG_NATS_CON_OPT_SNAPSHOT_PURGE, KVREG_NATS_CON_STAT_SNAPSHOT_ORPHANS,
    KVREG_NATS_CON_STAT_RESTORED, KVREG_NATS_CON_STAT_SNAPSHOTS, KVREG_NATS_CON_STAT_SNAPSHOT_SEQ,
    KVREG_NATS_CON_STAT_RESTORE_LOAD_US, KVREG_NATS_CON_STAT_RESTORE_READ_US, KVREG_NATS_CON_STAT_START_US,
    KVREG_NATS_LIVENESS_BUCKET, KVREG_NATS_SNAPSHOT_BUCKET, KVREG_NATS_SNAPSHOT_NAME,
    KVREG_NATS_DURABLE, KVREG_NATS_FILTER, KVREG_NATS_LORA_NAME, KVREG_NATS_NAMESPACE,
    KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS, KVREG_NATS_PUB_OPT_BATCH_US, KVREG_NATS_PUB_OPT_BLOCK_SIZE,
    KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS, KVREG_NATS_PUB_OPT_CREATE_STREAM,
    KVREG_NATS_PUB_OPT_DP_RANK, KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS, KVREG_NATS_PUB_OPT_FORMAT,
    KVREG_NATS_PUB_OPT_INSTANCE, KVREG_NATS_PUB_OPT_LINGER_MS, KVREG_NATS_PUB_OPT_MAX_AGE_S,
    KVREG_NATS_PUB_OPT_MAX_EVENTS, KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT, KVREG_NATS_PUB_OPT_RETRY_MS,
    KVREG_NATS_PUB_OPT_WORKER_ID, KVREG_NATS_PUB_STAT_ACKED, KVREG_NATS_PUB_STAT_BATCHES,
    KVREG_NATS_PUB_STAT_BATCHES_REFUSED, KVREG_NATS_PUB_STAT_BATCHES_UNACKED, KVREG_NATS_PUB_STAT_DUPLICATES,
    KVREG_NATS_PUB_STAT_ERRORS, KVREG_NATS_PUB_STAT_EVENTS_HANDLED,
    KVREG_NATS_PUB_STAT_EVENTS_LOST, KVREG_NATS_PUB_STAT_EVENTS_SENT,
    KVREG_NATS_PUB_STAT_EVENTS_SKIPPED, KVREG_NATS_PUB_STAT_EVENTS_UNSENT,
    KVREG_NATS_PUB_STAT_IN_FLIGHT, KVREG_NATS_PUB_STAT_RESYNCS, KVREG_NATS_PUB_STAT_RETRIES,
    KVREG_NATS_STREAM, KVREG_NATS_SUBJECT, KVREG_NATS_SUBJECT_PREFIX, KVREG_NATS_URL,
};

/// Whether the loaded libkvreg was built with NATS (the Meson feature `nats`).
pub fn available() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { ffi::kvreg_nats_available() != 0 }
}

fn c_string(value: &str) -> Result<CString> {
    CString::new(value).map_err(|_| Error::from_code(ffi::KVREG_EINVAL))
}

struct IndexInner {
    raw: NonNull<ffi::kvreg_index>,
}

// SAFETY: the index serialises its own updates and queries; only its free must not race, and
// that runs once, when the last handle (index or consumer) is dropped.
unsafe impl Send for IndexInner {}
unsafe impl Sync for IndexInner {}

impl Drop for IndexInner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone: no consumer feeds it any more.
        unsafe { ffi::kvreg_index_free(self.raw.as_ptr()) };
    }
}

/// A router's index (kvreg_index), what a [`NatsConsumer`] feeds: a clonable handle, freed
/// with its last clone or consumer.
#[derive(Clone)]
pub struct Index {
    inner: Arc<IndexInner>,
}

impl Index {
    /// An index with options (`KVREG_INDEX_OPT_*`, value pairs; empty: the defaults).
    pub fn new(options: &[(u32, u64)]) -> Result<Index> {
        let mut cfg: *mut ffi::kvreg_index_config = ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check(unsafe { ffi::kvreg_index_config_new(&mut cfg) })?;
        let mut out: *mut ffi::kvreg_index = ptr::null_mut();
        let mut status = ffi::KVREG_OK;
        for &(opt, value) in options {
            // SAFETY: cfg is live until freed below.
            status = unsafe { ffi::kvreg_index_config_set(cfg, opt, value) };
            if status < 0 {
                break;
            }
        }
        if status >= 0 {
            // SAFETY: cfg is live; out is a local.
            status = unsafe { ffi::kvreg_index_new(&mut out, cfg) };
        }
        // SAFETY: made above, freed once.
        unsafe { ffi::kvreg_index_config_free(cfg) };
        check(status)?;
        let raw = NonNull::new(out).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(Index { inner: Arc::new(IndexInner { raw }) })
    }

    /// One counter (`KVREG_INDEX_STAT_*`).
    pub fn stat(&self, stat: u32) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: the index is live while self is.
        check(unsafe { ffi::kvreg_index_stat(self.inner.raw.as_ptr(), stat, &mut v) })?;
        Ok(v)
    }
}

impl Index {
    /// `kvreg_index_digest`: equal for equal contents (workers with their next seqs, entries
    /// and tiers), whatever order the events came in.
    pub fn digest(&self) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: the index is live while self is.
        check(unsafe { ffi::kvreg_index_digest(self.inner.raw.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// The index's dump (`kvreg_index_dump`: versioned, checksummed).
    pub fn dump(&self) -> Result<Vec<u8>> {
        let mut data: *mut std::os::raw::c_void = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: out-pointers to locals; the buffer is malloc'd and freed below.
        check(unsafe { ffi::kvreg_index_dump_alloc(self.inner.raw.as_ptr(), &mut data, &mut len) })?;
        // SAFETY: data holds len bytes until freed.
        let out = unsafe { std::slice::from_raw_parts(data as *const u8, len) }.to_vec();
        // SAFETY: allocated by the library with malloc, freed once.
        unsafe { ffi::free(data) };
        Ok(out)
    }

    /// Load a dump into this index, which must know no worker (`Protocol`: corrupt;
    /// `InvalidArgument`: another configuration; `InvalidState`: not empty). Nothing else may
    /// change the index meanwhile, so this handle must be its only one (no clone, no
    /// consumer): `InvalidState` otherwise.
    pub fn load(&mut self, dump: &[u8]) -> Result<()> {
        let inner = Arc::get_mut(&mut self.inner)
            .ok_or_else(|| Error::from_code(ffi::KVREG_ESTATE))?;
        // SAFETY: the only handle, so no other thread uses the index; dump is valid for its
        // length during the call.
        check(unsafe {
            ffi::kvreg_index_load(inner.raw.as_ptr(), dump.as_ptr() as *const _, dump.len())
        })
        .map(|_| ())
    }
}

/// An engine's NATS publisher: takes its registry's events (the registry must deliver in
/// [`Delivery::Poll`](crate::Delivery::Poll)) on its own thread and publishes them into a
/// JetStream stream. Stopped and freed on drop. From `new` until it is dropped it is the
/// registry's only poller: [`Registry::poll`], `poll_max` and `poll_wait` return
/// [`ErrorKind::Busy`](crate::ErrorKind::Busy) meanwhile (the library refuses them), and
/// events stay queued for the publisher.
pub struct NatsPublisher {
    raw: NonNull<ffi::kvreg_nats_publisher>,
    _registry: Registry, // lent to the C publisher: dropped after it
}

// SAFETY: the C publisher's calls are safe from any thread (its sender thread is its own).
unsafe impl Send for NatsPublisher {}
unsafe impl Sync for NatsPublisher {}

impl NatsPublisher {
    /// A publisher of registry's events (not connected yet: set options, then `start`).
    /// `InvalidArgument` for a registry in inline delivery; `Busy` when another publisher
    /// (ZeroMQ or NATS) already takes its events.
    pub fn new(registry: &Registry) -> Result<NatsPublisher> {
        let mut out: *mut ffi::kvreg_nats_publisher = ptr::null_mut();
        // SAFETY: the registry is live; the clone kept below keeps it so.
        check(unsafe { ffi::kvreg_nats_publisher_new(&mut out, registry.raw_ptr()) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(NatsPublisher { raw, _registry: registry.clone() })
    }

    /// A numeric option (`KVREG_NATS_PUB_OPT_*`), before `start`.
    pub fn set(&mut self, option: u32, value: u64) -> Result<()> {
        // SAFETY: live pointer.
        check(unsafe { ffi::kvreg_nats_publisher_set(self.raw.as_ptr(), option, value) })
            .map(|_| ())
    }

    /// A string option (`KVREG_NATS_URL`, `_STREAM`, `_SUBJECT_PREFIX`, ...), before `start`.
    pub fn set_string(&mut self, option: u32, value: &str) -> Result<()> {
        let s = c_string(value)?;
        // SAFETY: live pointer; the library copies the string.
        check(unsafe { ffi::kvreg_nats_publisher_set_string(self.raw.as_ptr(), option, s.as_ptr()) })
            .map(|_| ())
    }

    /// Connect, make sure the stream exists, start the sender thread.
    pub fn start(&mut self) -> Result<()> {
        // SAFETY: live pointer.
        check(unsafe { ffi::kvreg_nats_publisher_start(self.raw.as_ptr()) }).map(|_| ())
    }

    /// Publish what is queued and wait for the acks (bounded by the linger option), stop.
    pub fn stop(&mut self) -> Result<()> {
        // SAFETY: live pointer.
        check(unsafe { ffi::kvreg_nats_publisher_stop(self.raw.as_ptr()) }).map(|_| ())
    }

    /// One counter (`KVREG_NATS_PUB_STAT_*`).
    pub fn stat(&self, stat: u32) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: live pointer.
        check(unsafe { ffi::kvreg_nats_publisher_stat(self.raw.as_ptr(), stat, &mut v) })?;
        Ok(v)
    }
}

impl Drop for NatsPublisher {
    fn drop(&mut self) {
        // SAFETY: freed once; the registry clone is dropped after this.
        unsafe { ffi::kvreg_nats_publisher_free(self.raw.as_ptr()) };
    }
}

/// A router replica: a durable pull consumer of the stream applying its batches to an
/// [`Index`]. `run` fetches and applies on the caller's thread, one run at a time (another
/// `run` meanwhile is [`ErrorKind::Busy`](crate::ErrorKind::Busy)); `stop` and `stat` work
/// from any thread, also during a run, so share the consumer (`&NatsConsumer`, an `Arc`) to
/// stop a `run(-1)`:
///
/// ```no_run
/// use kvreg::nats::{self, Index, NatsConsumer};
///
/// let index = Index::new(&[])?;
/// let mut consumer = NatsConsumer::new(&index)?;
/// consumer.set_string(nats::KVREG_NATS_URL, "nats://127.0.0.1:4222")?;
/// consumer.start()?;
/// std::thread::scope(|s| {
///     let runner = s.spawn(|| consumer.run(-1)); // until stopped
///     // ... later, from this thread:
///     consumer.stop().unwrap();
///     runner.join().unwrap()
/// })?;
/// # Ok::<(), kvreg::Error>(())
/// ```
///
/// Configuring (`set*`, `start`) and `snapshot`/`worker` take `&mut self`, so they never
/// overlap a run.
pub struct NatsConsumer {
    raw: NonNull<ffi::kvreg_nats_consumer>,
    /// Set while a `run` is in the library: the header allows one runner at a time and does
    /// not check it, so the binding refuses a second one (`Busy`).
    running: AtomicBool,
    _index: Index, // lent to the C consumer: dropped after it
}

// SAFETY: `run` takes `&self` but lets one thread at a time into the library (`running`), as
// the header asks; `stop` and `stat` are documented as callable from any thread, also during a
// run; everything else takes `&mut self`, so it never overlaps a run or another call.
unsafe impl Send for NatsConsumer {}
unsafe impl Sync for NatsConsumer {}

/// Clears `NatsConsumer::running` when the run ends.
struct Running<'a>(&'a AtomicBool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl NatsConsumer {
    /// A consumer feeding index (not connected yet: set options, then `start`).
    pub fn new(index: &Index) -> Result<NatsConsumer> {
        let mut out: *mut ffi::kvreg_nats_consumer = ptr::null_mut();
        // SAFETY: the index is live; the clone kept below keeps it so.
        check(unsafe { ffi::kvreg_nats_consumer_new(&mut out, index.inner.raw.as_ptr()) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(NatsConsumer { raw, running: AtomicBool::new(false), _index: index.clone() })
    }

    /// A numeric option (`KVREG_NATS_CON_OPT_*`), before `start`.
    pub fn set(&mut self, option: u32, value: u64) -> Result<()> {
        // SAFETY: live pointer.
        check(unsafe { ffi::kvreg_nats_consumer_set(self.raw.as_ptr(), option, value) })
            .map(|_| ())
    }

    /// `KVREG_NATS_URL`, `_STREAM`, `_DURABLE` or `_FILTER`, before `start`.
    pub fn set_string(&mut self, option: u32, value: &str) -> Result<()> {
        let s = c_string(value)?;
        // SAFETY: live pointer; the library copies the string.
        check(unsafe { ffi::kvreg_nats_consumer_set_string(self.raw.as_ptr(), option, s.as_ptr()) })
            .map(|_| ())
    }

    /// Connect and (re)create the durable consumer.
    pub fn start(&mut self) -> Result<()> {
        // SAFETY: live pointer.
        check(unsafe { ffi::kvreg_nats_consumer_start(self.raw.as_ptr()) }).map(|_| ())
    }

    /// Fetch and apply for `timeout_ms` (0: one fetch of what is ready; -1: until `stop`),
    /// on this thread. One run at a time: `Busy` while another thread's `run` is in progress.
    /// `InvalidState` before `start`; `InvalidArgument` for `timeout_ms < -1`.
    pub fn run(&self, timeout_ms: i32) -> Result<()> {
        if self
            .running
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(Error::from_code(ffi::KVREG_EBUSY));
        }
        let _running = Running(&self.running);
        // SAFETY: live pointer; `running` lets one run at a time into the library, and the
        // calls that may not overlap a run take &mut self.
        check(unsafe { ffi::kvreg_nats_consumer_run(self.raw.as_ptr(), timeout_ms as c_int) })
            .map(|_| ())
    }

    /// Make the `run` in progress return within one fetch wait (about 100 ms). A stop no run
    /// has seen yet (none was in progress, or it was returning anyway) makes the next `run`
    /// return at once. Any thread.
    pub fn stop(&self) -> Result<()> {
        // SAFETY: live pointer; any thread.
        check(unsafe { ffi::kvreg_nats_consumer_stop(self.raw.as_ptr()) }).map(|_| ())
    }

    /// One counter (`KVREG_NATS_CON_STAT_*`).
    pub fn stat(&self, stat: u32) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: live pointer; any thread.
        check(unsafe { ffi::kvreg_nats_consumer_stat(self.raw.as_ptr(), stat, &mut v) })?;
        Ok(v)
    }

    /// Write a snapshot now (needs `KVREG_NATS_SNAPSHOT_BUCKET`; between runs): the stream
    /// sequence it covers. A consumer started with the same bucket restores it.
    pub fn snapshot(&mut self) -> Result<u64> {
        let mut seq = 0u64;
        // SAFETY: live pointer; &mut self: not during a run.
        check(unsafe { ffi::kvreg_nats_consumer_snapshot(self.raw.as_ptr(), &mut seq) })?;
        Ok(seq)
    }

    /// `(instance, next_seq)` the consumer follows for a worker; `None` if it has not seen it.
    /// Takes &mut self: not while a run is in progress.
    pub fn worker(&mut self, worker_id: u64, dp_rank: u32) -> Result<Option<(u64, u64)>> {
        let (mut instance, mut next) = (0u64, 0u64);
        // SAFETY: live pointer, out-pointers to locals.
        let rc = unsafe {
            ffi::kvreg_nats_consumer_worker(self.raw.as_ptr(), worker_id, dp_rank, &mut instance,
                                            &mut next)
        };
        if rc == ffi::KVREG_ENOENT {
            return Ok(None);
        }
        check(rc)?;
        Ok(Some((instance, next)))
    }
}

impl Drop for NatsConsumer {
    fn drop(&mut self) {
        // SAFETY: freed once; the index clone is dropped after this.
        unsafe { ffi::kvreg_nats_consumer_free(self.raw.as_ptr()) };
    }
}
