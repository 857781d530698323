//! The registry shared by pools, its configuration and event delivery.

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kvreg_sys as ffi;

use crate::error::{check, Error, Result};
use crate::event::{self, Event, Handler, HandlerRef, Medium};
use crate::pool::Pool;

/// How events reach the application.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The event handler runs inside the library calls that emit events (default). With one
    /// thread, a call's events are handled before it returns; with several, whichever thread
    /// is delivering may handle other threads' events too (see `Registry::flush`).
    Inline,
    /// Events wait in a bounded queue for `Registry::poll` / `Registry::poll_wait`.
    Poll,
}

/// Counters of `Registry::stat`.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum Stat {
    Hashes,
    Pools,
    EventsRegister,
    EventsRemove,
    EventsDropped,
    EventsQueued,
    NextEventId,
    TokenBytes,
    EventsCleared,
}

impl Stat {
    fn key(self) -> u32 {
        match self {
            Stat::Hashes => ffi::KVREG_STAT_HASHES,
            Stat::Pools => ffi::KVREG_STAT_POOLS,
            Stat::EventsRegister => ffi::KVREG_STAT_EVENTS_REGISTER,
            Stat::EventsRemove => ffi::KVREG_STAT_EVENTS_REMOVE,
            Stat::EventsDropped => ffi::KVREG_STAT_EVENTS_DROPPED,
            Stat::EventsQueued => ffi::KVREG_STAT_EVENTS_QUEUED,
            Stat::NextEventId => ffi::KVREG_STAT_NEXT_EVENT_ID,
            Stat::TokenBytes => ffi::KVREG_STAT_TOKEN_BYTES,
            Stat::EventsCleared => ffi::KVREG_STAT_EVENTS_CLEARED,
        }
    }
}

/// What a Register and a Remove stand for when pools on several media (tiers) hold a hash
/// (`KVREG_OPT_EVENT_MODE` in kvreg.h).
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash, Default)]
pub enum EventMode {
    /// One Register when a hash first enters any pool, one Remove when it leaves the last;
    /// the Remove carries its Register's medium (the default).
    #[default]
    Global,
    /// A Register and a Remove per medium, as vLLM's offloading connector and Dynamo's block
    /// manager emit: a copy on another tier is stored there, and removed on its own.
    PerTier,
}

/// Options for a new registry; `Registry::builder()` starts from the library defaults.
pub struct RegistryBuilder {
    event_mode: EventMode,
    delivery: Delivery,
    keep_tokens: bool,
    poll_capacity: Option<u64>,
    shards: Option<u64>,
    reserve_blocks: Option<u64>,
    handler: Option<Handler>,
}

impl RegistryBuilder {
    /// Tier semantics of the events (`EventMode::Global` by default).
    pub fn event_mode(mut self, mode: EventMode) -> Self {
        self.event_mode = mode;
        self
    }

    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Keep a copy of each block's tokens (`Pool::block_tokens`, tokens in Remove events).
    pub fn keep_tokens(mut self, keep: bool) -> Self {
        self.keep_tokens = keep;
        self
    }

    /// Poll queue capacity in events (1 ..= 2^32).
    pub fn poll_capacity(mut self, events: u64) -> Self {
        self.poll_capacity = Some(events);
        self
    }

    /// Lock shards of the hash table, a power of two (1 ..= 4096).
    pub fn shards(mut self, shards: u64) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Blocks (one pool's hold on a hash) to set memory aside for when the registry is built:
    /// up to that many held, registering allocates nothing (`KVREG_OPT_RESERVE_BLOCKS`).
    pub fn reserve_blocks(mut self, blocks: u64) -> Self {
        self.reserve_blocks = Some(blocks);
        self
    }

    /// The inline event handler the registry starts with. It gets each batch of events in
    /// event_id order, is never run concurrently with itself, and may run on any thread that
    /// uses the registry, hence `Send`. A panic in it is re-raised, on the thread that ran it,
    /// from the call during which it ran (see the crate docs on panics).
    pub fn on_events<F>(mut self, handler: F) -> Self
    where
        F: FnMut(&[Event]) + Send + 'static,
    {
        self.handler = Some(Box::new(handler));
        self
    }

    pub fn build(self) -> Result<Registry> {
        let cfg = Config::new()?;
        let delivery = match self.delivery {
            Delivery::Inline => ffi::KVREG_DELIVERY_INLINE,
            Delivery::Poll => ffi::KVREG_DELIVERY_POLL,
        };
        cfg.set(ffi::KVREG_OPT_DELIVERY, delivery)?;
        cfg.set(ffi::KVREG_OPT_KEEP_TOKENS, u64::from(self.keep_tokens))?;
        if let Some(n) = self.poll_capacity {
            cfg.set(ffi::KVREG_OPT_POLL_CAPACITY, n)?;
        }
        if let Some(n) = self.shards {
            cfg.set(ffi::KVREG_OPT_SHARDS, n)?;
        }
        if let Some(n) = self.reserve_blocks {
            cfg.set(ffi::KVREG_OPT_RESERVE_BLOCKS, n)?;
        }
        if self.event_mode == EventMode::PerTier {
            cfg.set(ffi::KVREG_OPT_EVENT_MODE, ffi::KVREG_EVENTS_PER_TIER)?;
        }

        let handler = self.handler.map(HandlerRef::new);
        if let Some(user_data) = handler.as_ref().map(HandlerRef::user_data) {
            // SAFETY: live config; trampoline/destroy match the user_data type.
            let status = unsafe {
                ffi::kvreg_config_set_event_fn(
                    cfg.0.as_ptr(),
                    Some(event::trampoline),
                    user_data,
                    Some(event::destroy),
                )
            };
            if let Err(e) = check(status) {
                drop(cfg);
                if let Some(handler) = handler {
                    handler.not_taken();
                }
                return Err(e);
            }
        }

        let mut raw = ptr::null_mut();
        // SAFETY: live config, valid out pointer.
        let status = unsafe { ffi::kvreg_registry_new(&mut raw, cfg.0.as_ptr()) };
        // Free the config first: a library that shares the callback between the config and
        // its registries drops the config's reference here.
        drop(cfg);
        match check(status).ok().and_then(|_| NonNull::new(raw)) {
            Some(raw) => Ok(Registry {
                inner: Arc::new(Inner { raw, poll_lock: Mutex::new(()), wakeups: AtomicU64::new(0) }),
            }),
            None => {
                if let Some(handler) = handler {
                    handler.not_taken();
                }
                Err(Error::from_code(if status < 0 { status } else { ffi::KVREG_ENOMEM }))
            }
        }
    }
}

/// Owns a kvreg_config for the duration of `build`.
struct Config(NonNull<ffi::kvreg_config>);

impl Config {
    fn new() -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: valid out pointer.
        check(unsafe { ffi::kvreg_config_new(&mut raw) })?;
        NonNull::new(raw)
            .map(Config)
            .ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))
    }

    fn set(&self, option: u32, value: u64) -> Result<()> {
        // SAFETY: live config, used by one thread.
        check(unsafe { ffi::kvreg_config_set(self.0.as_ptr(), option, value) }).map(drop)
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: we own the config; the registry copied what it needed.
        unsafe { ffi::kvreg_config_free(self.0.as_ptr()) }
    }
}

/// The state every handle to one registry shares; dropping the last handle frees the registry.
struct Inner {
    raw: NonNull<ffi::kvreg_registry>,
    /// Poll hands out tokens that live only until the next poll on the registry, by any
    /// thread; polls are serialised so each one copies its tokens before the next may start.
    poll_lock: Mutex<()>,
    /// Incremented by every `wakeup()`, so pollers that wait for `poll_lock` (rather than in
    /// the library) also notice a wake-up that happened while they waited.
    wakeups: AtomicU64,
}

// SAFETY: the header documents kvreg_registry as thread-safe; the only unsynchronised
// lifetime it hands out (poll tokens) is guarded by poll_lock.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: the last handle is gone, and every Pool holds a handle, so no pool or other
        // thread can use the registry any more. Nor can this run inside the registry's own
        // callback (which C forbids): a callback runs inside a library call made through a
        // Registry or Pool method, and that method's `&self` keeps a handle alive until the
        // call has returned, so a handle the handler drops is never the last one.
        unsafe { ffi::kvreg_registry_free(self.raw.as_ptr()) };
        // The handler's Drop ran in destroy and may have panicked.
        event::resume_pending_panic_in_drop();
    }
}

/// The global registry shared by pools: a cheap, clonable handle (an `Arc` inside). Clones are
/// the same registry; the C registry is freed when the last handle is dropped, and every
/// [`Pool`] holds one, so a pool keeps its registry alive. Thread-safe (`Send + Sync`).
///
/// An event handler that needs its registry should capture a [`WeakRegistry`]
/// (`Registry::downgrade`): a strong handle (or a `Pool`) inside the handler is a cycle
/// through the library, and the registry would never be freed.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl Registry {
    /// The C registry, for the crate's wrappers that lend it to the library (a NATS
    /// publisher keeps a clone of this handle, so the pointer outlives it).
    pub(crate) fn raw_ptr(&self) -> *mut ffi::kvreg_registry {
        self.inner.raw.as_ptr()
    }
}

/// A handle that does not keep the registry alive; `upgrade` gives a `Registry` while one
/// exists. For event handlers that call back into their registry.
#[derive(Clone)]
pub struct WeakRegistry {
    inner: Weak<Inner>,
}

impl WeakRegistry {
    /// The registry, unless every strong handle (and every pool) has been dropped.
    pub fn upgrade(&self) -> Option<Registry> {
        self.inner.upgrade().map(|inner| Registry { inner })
    }
}

impl std::fmt::Debug for WeakRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakRegistry")
    }
}

/// Milliseconds for kvreg_registry_poll_wait: None (and anything from i32::MAX ms, about 24.8
/// days, up) waits without limit; a non-zero duration below 1 ms is rounded up, so that it
/// still waits.
fn timeout_ms(timeout: Option<Duration>) -> c_int {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().saturating_add(999_999) / 1_000_000;
            if ms >= c_int::MAX as u128 {
                -1
            } else {
                ms as c_int
            }
        }
    }
}

impl Registry {
    /// A registry with default options (inline delivery, no handler).
    pub fn new() -> Result<Registry> {
        Registry::builder().build()
    }

    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            event_mode: EventMode::Global,
            delivery: Delivery::Inline,
            keep_tokens: false,
            poll_capacity: None,
            shards: None,
            reserve_blocks: None,
            handler: None,
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::kvreg_registry {
        self.inner.raw.as_ptr()
    }

    /// A handle that does not keep the registry alive (for handlers; see [`WeakRegistry`]).
    pub fn downgrade(&self) -> WeakRegistry {
        WeakRegistry { inner: Arc::downgrade(&self.inner) }
    }

    /// True when both handles are the same registry.
    pub fn ptr_eq(&self, other: &Registry) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A new pool. It holds a handle to this registry, so it is `'static` and may be stored
    /// next to the registry, moved to another thread, or outlive this handle. The number of
    /// live pools per registry is limited by the library (KVREG_MAX_POOLS in kvreg.h, which
    /// grows between versions; `Overflow` beyond). A name containing NUL is `InvalidArgument`.
    pub fn pool(&self, name: &str) -> Result<Pool> {
        self.pool_on(name, Medium::Gpu)
    }

    /// A new pool on the given medium (tier), which its events carry; otherwise as `pool`.
    /// `InvalidArgument` for a medium the library does not know.
    pub fn pool_on(&self, name: &str, medium: Medium) -> Result<Pool> {
        let name = CString::new(name).map_err(|_| Error::from_code(ffi::KVREG_EINVAL))?;
        let mut raw = ptr::null_mut();
        // SAFETY: live registry (thread-safe), valid out pointer, name copied by the library.
        check(unsafe {
            ffi::kvreg_pool_new_medium(&mut raw, self.as_ptr(), name.as_ptr(), medium.raw())
        })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(Pool::from_raw(raw, self.clone()))
    }

    /// Replaces the inline event handler. When this returns the old handler is dropped and
    /// will not run again. `Busy` from inside a handler; `InvalidArgument` in poll mode.
    pub fn set_event_handler<F>(&self, handler: F) -> Result<()>
    where
        F: FnMut(&[Event]) + Send + 'static,
    {
        let handler = HandlerRef::new(Box::new(handler));
        // SAFETY: live registry; trampoline/destroy match the user_data type.
        let status = unsafe {
            ffi::kvreg_registry_set_event_fn(
                self.as_ptr(),
                Some(event::trampoline),
                handler.user_data(),
                Some(event::destroy),
            )
        };
        if status < 0 {
            // Dropping the rejected closure runs its Drop, which may panic: park that panic
            // like one from destroy, so there is a single place it comes out of.
            event::park_panic_of(|| handler.not_taken());
        } else {
            drop(handler);
        }
        // The old handler's Drop ran in destroy and may have panicked.
        event::resume_pending_panic();
        check(status).map(drop)
    }

    /// Removes the handler; in inline mode events are then counted and dropped.
    pub fn clear_event_handler(&self) -> Result<()> {
        // SAFETY: live registry; NULL fn clears.
        let status =
            unsafe { ffi::kvreg_registry_set_event_fn(self.as_ptr(), None, ptr::null_mut(), None) };
        event::resume_pending_panic();
        check(status).map(drop)
    }

    /// Waits until every event emitted before this call has been delivered: the handler has
    /// returned for it (inline mode) or it is queued or dropped (poll mode). With several
    /// threads, a call can return before its own events reach the handler (another thread may
    /// be delivering them), so call this before reading anything the handler keeps, and at
    /// shutdown. A panic of the handler while it ran on this thread during the flush is
    /// re-raised here. `Busy` from inside a handler (it would wait for itself).
    pub fn flush(&self) -> Result<()> {
        // SAFETY: live registry.
        let status = unsafe { ffi::kvreg_registry_flush(self.as_ptr()) };
        event::resume_pending_panic();
        check(status).map(drop)
    }

    /// Poll mode: takes every queued event, oldest first (empty when none).
    /// `InvalidArgument` in inline mode. `Busy` while a publisher
    /// ([`NatsPublisher`](crate::nats::NatsPublisher)) takes this registry's events, from its
    /// `new` until it is dropped: it must be their only poller (the library refuses other polls).
    pub fn poll(&self) -> Result<Vec<Event>> {
        self.poll_max(usize::MAX)
    }

    /// Poll mode: takes up to `max` queued events, oldest first. Errors as `poll`.
    pub fn poll_max(&self, max: usize) -> Result<Vec<Event>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let _serial = self.inner.poll_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.take_events(max, None)
    }

    /// Poll mode: takes up to `max` queued events, oldest first; when none is queued, sleeps
    /// (after a short spin that yields the CPU, in the kernel) until one is, until `wakeup()` is called, or until
    /// `timeout` has passed (`None`: no limit; `Some(Duration::ZERO)`: no wait; a timeout of
    /// about 24.8 days or more counts as no limit). Returns an empty Vec after a wake-up or a
    /// timeout. `InvalidArgument` in inline mode; `Busy` while a publisher takes the events
    /// (see `poll`); `max == 0` returns at once.
    ///
    /// Pollers are serialised (see `poll`), so while one thread sleeps here, other pollers wait
    /// for it; `wakeup()` ends all of those waits.
    pub fn poll_wait(&self, max: usize, timeout: Option<Duration>) -> Result<Vec<Event>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let seen = self.inner.wakeups.load(Ordering::SeqCst);
        let _serial = self.inner.poll_lock.lock().unwrap_or_else(|e| e.into_inner());
        // A wakeup() while we waited for the lock is ours too: do not go to sleep. (Polling
        // with timeout 0 also consumes the library's pending wake-up, if nobody did.)
        let woken = self.inner.wakeups.load(Ordering::SeqCst) != seen;
        let wait = if woken { 0 } else { timeout_ms(timeout) };
        self.take_events(max, Some(wait))
    }

    /// Makes every `poll_wait` in progress on this registry return now, and, if none is
    /// waiting in the library, the next one too (the wake-up is not lost). Safe from any
    /// thread and from a handler. To stop a consumer thread: set your own stop flag, then call
    /// `wakeup()`; with several consumers, one may check the flag just before you set it and
    /// start waiting after the wake-up was used, so call `wakeup()` again until all have exited
    /// (or give `poll_wait` a timeout).
    pub fn wakeup(&self) -> Result<()> {
        self.inner.wakeups.fetch_add(1, Ordering::SeqCst);
        // SAFETY: live registry; the call is thread-safe.
        check(unsafe { ffi::kvreg_registry_wakeup(self.as_ptr()) }).map(drop)
    }

    /// Copies up to `max` events out of the queue; the first chunk waits `wait` ms when given.
    /// The caller holds poll_lock.
    fn take_events(&self, max: usize, mut wait: Option<c_int>) -> Result<Vec<Event>> {
        const CHUNK: usize = 256;
        let mut out = Vec::new();
        let mut buf: Vec<ffi::kvreg_event> = Vec::with_capacity(CHUNK);
        loop {
            let want = (max - out.len()).min(CHUNK);
            let mut n: usize = 0;
            // SAFETY: buf has room for `want` events; the library writes n <= want of them.
            let status = unsafe {
                match wait.take() {
                    Some(ms) => ffi::kvreg_registry_poll_wait(
                        self.as_ptr(),
                        buf.as_mut_ptr(),
                        want,
                        &mut n,
                        ms,
                    ),
                    None => ffi::kvreg_registry_poll(self.as_ptr(), buf.as_mut_ptr(), want, &mut n),
                }
            };
            if status < 0 {
                // Events already taken are the caller's: return them, and the next poll
                // reports the error (e.g. `Busy`: a publisher was created since).
                return if out.is_empty() { Err(Error::from_code(status)) } else { Ok(out) };
            }
            // SAFETY: the first n elements were just initialised by the library.
            unsafe { buf.set_len(n.min(want)) };
            // SAFETY: tokens stay valid until the next poll, which poll_lock holds off.
            out.extend(buf.iter().map(|e| unsafe { Event::from_raw(e) }));
            buf.clear();
            if n < want || out.len() >= max {
                return Ok(out);
            }
        }
    }

    /// Whether the hash is registered in any pool of this registry. An error from the library
    /// is an error, never a "no".
    pub fn contains(&self, sequence_hash: u64) -> Result<bool> {
        let mut present: c_int = 0;
        // SAFETY: live registry, valid out pointer.
        check(unsafe { ffi::kvreg_registry_contains(self.as_ptr(), sequence_hash, &mut present) })?;
        Ok(present != 0)
    }

    /// Empties every pool at once (vLLM's reset_prefix_cache): every reference is dropped,
    /// every `Block` of this registry becomes `Stale` for good, and ONE `EventKind::Cleared`
    /// event is emitted instead of a Remove per hash. Pools stay usable. Events with a lower
    /// event_id happened before the clear, higher ones after it. A panic of the handler that
    /// ran for the Cleared event on this thread is re-raised here.
    pub fn clear(&self) -> Result<()> {
        // SAFETY: live registry; the call is thread-safe.
        let status = unsafe { ffi::kvreg_registry_clear(self.as_ptr()) };
        event::resume_pending_panic();
        check(status).map(drop)
    }

    /// The registered set at one position of the event stream, for a consumer that joined
    /// late or lost events. Emits no event. See [`Snapshot`].
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut raw = ptr::null_mut();
        // SAFETY: live registry, valid out pointer.
        check(unsafe { ffi::kvreg_registry_snapshot(self.as_ptr(), &mut raw) })?;
        // Freed on every path out, after the events (and their tokens) were copied.
        struct Owned(*mut ffi::kvreg_snapshot);
        impl Drop for Owned {
            fn drop(&mut self) {
                // SAFETY: the snapshot came from kvreg_registry_snapshot and is freed once.
                unsafe { ffi::kvreg_snapshot_free(self.0) }
            }
        }
        let snap = Owned(raw);
        let mut evs: *const ffi::kvreg_event = ptr::null();
        let mut n: usize = 0;
        // SAFETY: live snapshot, valid out pointers.
        check(unsafe { ffi::kvreg_snapshot_events(snap.0, &mut evs, &mut n) })?;
        let events = if n == 0 || evs.is_null() {
            Vec::new()
        } else {
            // SAFETY: n events (and their tokens) stay valid until kvreg_snapshot_free.
            unsafe { std::slice::from_raw_parts(evs, n) }
                .iter()
                .map(|e| unsafe { Event::from_raw(e) })
                .collect()
        };
        // SAFETY: live snapshot.
        let position = unsafe { ffi::kvreg_snapshot_position(snap.0) };
        Ok(Snapshot { position, events })
    }

    pub fn stat(&self, stat: Stat) -> Result<u64> {
        let mut value: u64 = 0;
        // SAFETY: live registry, valid out pointer.
        check(unsafe { ffi::kvreg_registry_stat(self.as_ptr(), stat.key(), &mut value) })?;
        Ok(value)
    }
}

/// What [`Registry::snapshot`] returns: one `EventKind::Register` event per registered hash,
/// parents before children (when both are in it), with event_id
/// [`EVENT_ID_SNAPSHOT`](crate::EVENT_ID_SNAPSHOT) and the pool_id and medium of a pool holding
/// it (tokens with `keep_tokens`), and the position it was taken at.
///
/// Resync: apply the snapshot's events, then every event with `event_id >= position()` (older
/// ones are already in it). The events are copied out of the library when it is taken: the
/// snapshot owns them and outlives the registry. Iterate with `iter()` or `into_iter()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    position: u64,
    events: Vec<Event>,
}

impl Snapshot {
    /// The event_id of the first event the snapshot does not contain.
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Event> {
        self.events.iter()
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The events, by value.
    pub fn into_events(self) -> Vec<Event> {
        self.events
    }
}

impl IntoIterator for Snapshot {
    type Item = Event;
    type IntoIter = std::vec::IntoIter<Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.into_iter()
    }
}

impl<'a> IntoIterator for &'a Snapshot {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.iter()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("raw", &self.inner.raw).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    #[test]
    fn timeouts_in_milliseconds() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1, "a non-zero wait stays non-zero");
        assert_eq!(timeout_ms(Some(Duration::from_micros(1500))), 2);
        assert_eq!(timeout_ms(Some(Duration::from_millis(250))), 250);
        assert_eq!(timeout_ms(Some(Duration::from_secs(40 * 86_400))), -1);
        assert_eq!(timeout_ms(Some(Duration::MAX)), -1);
    }

    /// Stands for a library that delivers, during `kvreg_registry_flush`, events whose
    /// handler panics on this thread: the C callback is called here directly, as the library
    /// would call it from inside flush. (The library in this tree delivers each call's events
    /// inside that call, so flush itself has nothing to deliver yet.)
    #[test]
    fn flush_reraises_a_panic_its_delivery_parked() {
        let registry = Registry::new().unwrap();
        let handler: Handler = Box::new(|_: &[Event]| panic!("handler failed during flush"));
        let handler = HandlerRef::new(handler);
        // SAFETY: user_data comes from a live HandlerRef; no events.
        unsafe { event::trampoline(ptr::null(), 0, handler.user_data()) };
        handler.not_taken();
        assert!(event::panic_pending(), "the trampoline must park, not unwind");
        let caught = catch_unwind(AssertUnwindSafe(|| registry.flush()));
        let payload = caught.expect_err("flush must re-raise the parked panic");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"handler failed during flush"));
        assert!(!event::panic_pending());
        registry.flush().unwrap();
    }
}
