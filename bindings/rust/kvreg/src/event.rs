//! Register/Remove events, and the bridge that lets a Rust closure be the C callback.
//!
//! The closure travels in an `Arc<HandlerCell>` whose thin raw pointer is the C user_data (a
//! `dyn` pointer is fat and `void *` is not). The library holds one reference, which its
//! destroy-notify drops; the binding holds a second one across the C call that hands the
//! pointer over. So whether the library keeps the pointer or not when that call fails (it
//! used to leave it to the caller; a library that shares callbacks between a config and its
//! registries runs destroy right away), the binding can tell from the cell's `released` flag,
//! and the closure is freed exactly once, never twice.
//!
//! Panics: unwinding out of an `extern "C"` function is undefined behaviour on rustc 1.63 (it
//! aborts only since 1.81), so the trampoline catches every panic, parks it in a thread-local
//! slot and returns normally. Every method whose C call can run the callback checks that slot
//! once the C call has returned and re-raises the panic with `resume_unwind`. The callback runs
//! on whichever thread is delivering at the moment (the library lets one call deliver other
//! threads' events), and that thread is by construction inside one of those methods: so a
//! panic always surfaces on the thread that ran the handler, from the call that ran it (which
//! can be `Registry::flush`), never on another thread and never nowhere.
//!
//! The handler is still called for every later event after it panicked, even within the same
//! call: the library hands each event to the callback once and cannot hand it again, so
//! skipping a handler call would lose those events for good without anyone knowing. When it
//! panics several times before the call returns, the first panic is re-raised (it is the
//! cause; the panic hook has printed every one of them as it happened).

use std::any::Any;
use std::cell::{RefCell, UnsafeCell};
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::slice;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kvreg_sys as ffi;

/// What happened to a hash.
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The hash became registered in its first pool.
    Register,
    /// The hash left its last pool.
    Remove,
    /// `Registry::clear` emptied every pool at once (no Remove per hash); pool_id, medium and
    /// hashes are 0.
    Cleared,
    /// A kind added by a newer library.
    Other(u32),
}

/// The storage medium (tier) of a pool, carried in its events (KVREG_MEDIUM_*).
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum Medium {
    Gpu,
    Cpu,
    Storage,
    External,
    /// A value this crate does not know: a newer library's, or `KVREG_MEDIUM_UNKNOWN` for a
    /// decoded wire event whose medium name the library does not know.
    Other(u32),
}

impl Medium {
    /// The KVREG_MEDIUM_* value.
    pub fn raw(self) -> u32 {
        match self {
            Medium::Gpu => ffi::KVREG_MEDIUM_GPU,
            Medium::Cpu => ffi::KVREG_MEDIUM_CPU,
            Medium::Storage => ffi::KVREG_MEDIUM_STORAGE,
            Medium::External => ffi::KVREG_MEDIUM_EXTERNAL,
            Medium::Other(v) => v,
        }
    }

    pub fn from_raw(raw: u32) -> Medium {
        match raw {
            ffi::KVREG_MEDIUM_GPU => Medium::Gpu,
            ffi::KVREG_MEDIUM_CPU => Medium::Cpu,
            ffi::KVREG_MEDIUM_STORAGE => Medium::Storage,
            ffi::KVREG_MEDIUM_EXTERNAL => Medium::External,
            other => Medium::Other(other),
        }
    }
}

impl Default for Medium {
    /// GPU: what pools made with `Registry::pool` are, and what Cleared events carry.
    fn default() -> Medium {
        Medium::Gpu
    }
}

impl EventKind {
    /// The KVREG_EVENT_* value.
    pub fn raw(self) -> u32 {
        match self {
            EventKind::Register => ffi::KVREG_EVENT_REGISTER,
            EventKind::Remove => ffi::KVREG_EVENT_REMOVE,
            EventKind::Cleared => ffi::KVREG_EVENT_CLEARED,
            EventKind::Other(v) => v,
        }
    }
}

/// One event, with its tokens copied out of library memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    pub kind: EventKind,
    /// Id of the pool whose call caused the event (`Pool::id`).
    pub pool_id: u32,
    /// 0, 1, 2, ... per registry; a gap means events were dropped (full poll queue).
    /// [`EVENT_ID_SNAPSHOT`](crate::EVENT_ID_SNAPSHOT) for the events of a `Snapshot`.
    pub event_id: u64,
    pub sequence_hash: u64,
    pub block_hash: u64,
    /// None for the first block of a sequence.
    pub parent_sequence_hash: Option<u64>,
    /// The block's tokens; empty when the library does not know them (see KEEP_TOKENS).
    pub tokens: Vec<u32>,
    /// Medium of the pool whose call caused the event (`Medium::Gpu` for Cleared).
    pub medium: Medium,
}

impl Event {
    /// Copies a C event.
    ///
    /// # Safety
    /// `raw.tokens` must point to `raw.n_tokens` readable tokens (or n_tokens be 0).
    pub(crate) unsafe fn from_raw(raw: &ffi::kvreg_event) -> Event {
        let tokens = if raw.n_tokens == 0 || raw.tokens.is_null() {
            Vec::new()
        } else {
            slice::from_raw_parts(raw.tokens, raw.n_tokens as usize).to_vec()
        };
        Event {
            kind: match raw.kind {
                ffi::KVREG_EVENT_REGISTER => EventKind::Register,
                ffi::KVREG_EVENT_REMOVE => EventKind::Remove,
                ffi::KVREG_EVENT_CLEARED => EventKind::Cleared,
                other => EventKind::Other(other),
            },
            pool_id: raw.pool_id,
            event_id: raw.event_id,
            sequence_hash: raw.sequence_hash,
            block_hash: raw.block_hash,
            parent_sequence_hash: if raw.has_parent != 0 {
                Some(raw.parent_sequence_hash)
            } else {
                None
            },
            tokens,
            medium: Medium::from_raw(raw.medium),
        }
    }
}

/// The closure type stored behind the C user_data pointer.
pub(crate) type Handler = Box<dyn FnMut(&[Event]) + Send>;

thread_local! {
    /// A panic caught in a callback on this thread, waiting to be re-raised.
    static PENDING_PANIC: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
}

/// What user_data points to.
struct HandlerCell {
    /// Called only by the library, which never runs one registry's callback concurrently with
    /// itself nor nested.
    handler: UnsafeCell<Handler>,
    /// The library's reference has been dropped (by `destroy`, or by `HandlerRef::not_taken`
    /// on its behalf).
    released: AtomicBool,
}

// SAFETY: the handler (Send) is only reached through the library's callback, which never runs
// concurrently with itself for one registry, and the binding never gives one HandlerCell to two
// registries. Other threads only touch the atomic flag and the Arc count.
unsafe impl Sync for HandlerCell {}

/// The binding's own reference to a handler it offers to the library as user_data.
pub(crate) struct HandlerRef {
    cell: Arc<HandlerCell>,
    user_data: *mut c_void,
}

impl HandlerRef {
    pub(crate) fn new(handler: Handler) -> HandlerRef {
        let cell = Arc::new(HandlerCell {
            handler: UnsafeCell::new(handler),
            released: AtomicBool::new(false),
        });
        // The library's reference, given back in `destroy`.
        let user_data = Arc::into_raw(Arc::clone(&cell)) as *mut c_void;
        HandlerRef { cell, user_data }
    }

    /// The pointer to pass as user_data, with `trampoline` and `destroy`.
    pub(crate) fn user_data(&self) -> *mut c_void {
        self.user_data
    }

    /// The call that offered user_data failed, so the library does not use it: drops the
    /// library's reference unless its destroy-notify already did. Dropping a `HandlerRef`
    /// without this (after a successful call) leaves the library's reference alone.
    pub(crate) fn not_taken(self) {
        if !self.cell.released.swap(true, Ordering::AcqRel) {
            // SAFETY: the library's reference from `new`, which nobody else will drop now.
            unsafe { drop(Arc::from_raw(self.user_data as *const HandlerCell)) };
        }
        // Our reference goes at the end of this function; if it is the last, so does the
        // closure, with an ordinary (Rust-side) panic if its Drop panics.
    }
}

fn take_pending() -> Option<Box<dyn Any + Send>> {
    PENDING_PANIC.try_with(|slot| slot.borrow_mut().take()).ok().flatten()
}

/// Parks a panic unless one is parked already: the first is kept, it is the cause.
fn park_panic(payload: Box<dyn Any + Send>) {
    let mut payload = Some(payload);
    let _ = PENDING_PANIC.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = payload.take();
        }
    });
    if let Some(rejected) = payload {
        discard(rejected);
    }
}

/// Runs `f`, parking its panic (if any) for `resume_pending_panic`.
pub(crate) fn park_panic_of<F: FnOnce()>(f: F) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) {
        park_panic(payload);
    }
}

/// Drops a payload that will not be re-raised. Its Drop is arbitrary code and may panic, which
/// must not escape an extern "C" frame: such a second payload is leaked.
fn discard(payload: Box<dyn Any + Send>) {
    if let Err(again) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// True when a callback on this thread has parked a panic that was not re-raised yet.
pub(crate) fn panic_pending() -> bool {
    PENDING_PANIC
        .try_with(|slot| slot.borrow().is_some())
        .unwrap_or(false)
}

/// Re-raises a panic parked by a callback on this thread. Call after every C call that can
/// deliver events or run a destroy-notify.
pub(crate) fn resume_pending_panic() {
    if let Some(payload) = take_pending() {
        panic::resume_unwind(payload);
    }
}

/// As `resume_pending_panic`, for Drop impls: a second panic while unwinding would abort the
/// process, so when the thread is already panicking the parked one is discarded (leaked, since
/// even dropping it could panic).
pub(crate) fn resume_pending_panic_in_drop() {
    if std::thread::panicking() {
        std::mem::forget(take_pending());
    } else {
        resume_pending_panic();
    }
}

/// The C event callback. Never unwinds.
pub(crate) unsafe extern "C" fn trampoline(
    events: *const ffi::kvreg_event,
    n_events: usize,
    user_data: *mut c_void,
) {
    // A panic an earlier callback of the same call parked stays parked, but out of sight while
    // the handler runs: calls the handler makes into its registry check the slot afterwards
    // and must not re-raise a panic that is not theirs inside the handler.
    let earlier = take_pending();
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let raw: &[ffi::kvreg_event] = if n_events == 0 || events.is_null() {
            &[]
        } else {
            // SAFETY: the library passes n_events valid events, alive during this call.
            slice::from_raw_parts(events, n_events)
        };
        // SAFETY: each event's tokens are valid during the callback.
        let converted: Vec<Event> = raw.iter().map(|e| Event::from_raw(e)).collect();
        // SAFETY: user_data is a HandlerCell the library holds a reference to; the library
        // never calls the callback of one registry concurrently with itself, nor nested, so
        // this &mut is unique.
        let cell = &*(user_data as *const HandlerCell);
        let handler = &mut *cell.handler.get();
        handler(&converted);
    }));
    // Normally empty: calls made inside the handler deliver nothing (their events come after
    // it returns) and re-raise whatever they park.
    let nested = take_pending();
    for payload in [earlier, result.err(), nested].into_iter().flatten() {
        park_panic(payload);
    }
}

/// The C destroy-notify: drops the library's reference to the closure (freeing it if that was
/// the last). Never unwinds (a panicking Drop is parked).
pub(crate) unsafe extern "C" fn destroy(user_data: *mut c_void) {
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the library calls destroy once, for the reference HandlerRef::new gave it.
        let cell = Arc::from_raw(user_data as *const HandlerCell);
        cell.released.store(true, Ordering::Release);
        drop(cell);
    }));
    if let Err(payload) = result {
        park_panic(payload);
    }
}
