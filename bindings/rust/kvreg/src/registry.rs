//! The registry shared by pools, its configuration and event delivery.

use std::ffi::CString;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::Mutex;

use kvreg_sys as ffi;

use crate::error::{check, Error, Result};
use crate::event::{self, Event, Handler};
use crate::pool::Pool;

/// How events reach the application.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The event handler runs on the thread whose call caused the events, before that call
    /// returns (default).
    Inline,
    /// Events wait in a bounded queue for `Registry::poll`.
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
        }
    }
}

/// Options for a new registry; `Registry::builder()` starts from the library defaults.
pub struct RegistryBuilder {
    delivery: Delivery,
    keep_tokens: bool,
    poll_capacity: Option<u64>,
    shards: Option<u64>,
    handler: Option<Handler>,
}

impl RegistryBuilder {
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

    /// The inline event handler the registry starts with. It gets each batch of events in
    /// event_id order, is never run concurrently with itself, and may run on any thread that
    /// uses the registry, hence `Send`. A panic in it is re-raised from the call that caused
    /// the events.
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

        let user_data = match self.handler {
            Some(handler) => {
                let user_data = event::into_user_data(handler);
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
                    // SAFETY: the config did not take the pointer; we still own it.
                    unsafe { event::free_user_data(user_data) };
                    return Err(e);
                }
                user_data
            }
            None => ptr::null_mut(),
        };

        let mut raw = ptr::null_mut();
        // SAFETY: live config, valid out pointer.
        let status = unsafe { ffi::kvreg_registry_new(&mut raw, cfg.0.as_ptr()) };
        match check(status).ok().and_then(|_| NonNull::new(raw)) {
            Some(raw) => Ok(Registry { raw, poll_lock: Mutex::new(()) }),
            None => {
                if !user_data.is_null() {
                    // SAFETY: on failure the registry did not take the pointer over.
                    unsafe { event::free_user_data(user_data) };
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

/// The global registry shared by pools. Thread-safe (`Send + Sync`): share it by reference
/// (scoped threads) or in an `Arc`. Pools borrow it, so it cannot be dropped while a pool is
/// alive.
pub struct Registry {
    raw: NonNull<ffi::kvreg_registry>,
    /// Poll hands out tokens that live only until the next poll on the registry, by any
    /// thread; polls are serialised so each one copies its tokens before the next may start.
    poll_lock: Mutex<()>,
}

// SAFETY: the header documents kvreg_registry as thread-safe; the only unsynchronised
// lifetime it hands out (poll tokens) is guarded by poll_lock.
unsafe impl Send for Registry {}
unsafe impl Sync for Registry {}

impl Registry {
    /// A registry with default options (inline delivery, no handler).
    pub fn new() -> Result<Registry> {
        Registry::builder().build()
    }

    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            delivery: Delivery::Inline,
            keep_tokens: false,
            poll_capacity: None,
            shards: None,
            handler: None,
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::kvreg_registry {
        self.raw.as_ptr()
    }

    /// A new pool (at most 255 live per registry: `Overflow` beyond). A name containing NUL
    /// is `InvalidArgument`.
    pub fn pool(&self, name: &str) -> Result<Pool<'_>> {
        let name = CString::new(name).map_err(|_| Error::from_code(ffi::KVREG_EINVAL))?;
        let mut raw = ptr::null_mut();
        // SAFETY: live registry (thread-safe), valid out pointer, name copied by the library.
        check(unsafe { ffi::kvreg_pool_new(&mut raw, self.as_ptr(), name.as_ptr()) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))?;
        Ok(Pool::from_raw(raw, PhantomData))
    }

    /// Replaces the inline event handler. When this returns the old handler is dropped and
    /// will not run again. `Busy` from inside a handler; `InvalidArgument` in poll mode.
    pub fn set_event_handler<F>(&self, handler: F) -> Result<()>
    where
        F: FnMut(&[Event]) + Send + 'static,
    {
        let user_data = event::into_user_data(Box::new(handler));
        // SAFETY: live registry; trampoline/destroy match the user_data type.
        let status = unsafe {
            ffi::kvreg_registry_set_event_fn(
                self.as_ptr(),
                Some(event::trampoline),
                user_data,
                Some(event::destroy),
            )
        };
        if status < 0 {
            // SAFETY: on failure the registry did not take the pointer over.
            unsafe { event::free_user_data(user_data) };
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

    /// Poll mode: takes every queued event, oldest first (empty when none).
    /// `InvalidArgument` in inline mode.
    pub fn poll(&self) -> Result<Vec<Event>> {
        self.poll_max(usize::MAX)
    }

    /// Poll mode: takes up to `max` queued events, oldest first.
    pub fn poll_max(&self, max: usize) -> Result<Vec<Event>> {
        const CHUNK: usize = 256;
        if max == 0 {
            return Ok(Vec::new());
        }
        let _serial = self.poll_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let mut buf: Vec<ffi::kvreg_event> = Vec::with_capacity(CHUNK);
        loop {
            let want = (max - out.len()).min(CHUNK);
            let mut n: usize = 0;
            // SAFETY: buf has room for `want` events; the library writes n <= want of them.
            check(unsafe { ffi::kvreg_registry_poll(self.as_ptr(), buf.as_mut_ptr(), want, &mut n) })?;
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

    /// True if the hash is registered in any pool of this registry.
    pub fn contains(&self, sequence_hash: u64) -> bool {
        // SAFETY: live registry.
        unsafe { ffi::kvreg_registry_contains(self.as_ptr(), sequence_hash) == 1 }
    }

    pub fn stat(&self, stat: Stat) -> Result<u64> {
        let mut value: u64 = 0;
        // SAFETY: live registry, valid out pointer.
        check(unsafe { ffi::kvreg_registry_stat(self.as_ptr(), stat.key(), &mut value) })?;
        Ok(value)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // SAFETY: we own the registry; pools borrow it, so none is alive, and no other thread
        // can be using it. Nor can this run inside the registry's own callback (which the C
        // side forbids): every call that delivers events holds a borrow of the registry,
        // directly or through a Pool, so the registry cannot be dropped until it returns.
        unsafe { ffi::kvreg_registry_free(self.raw.as_ptr()) };
        // The handler's Drop ran in destroy and may have panicked.
        event::resume_pending_panic_in_drop();
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("raw", &self.raw).finish()
    }
}
