//! Register/Remove events, and the bridge that lets a Rust closure be the C callback.
//!
//! The closure travels as `Box<Box<dyn FnMut(&[Event]) + Send>>` turned into a thin raw pointer
//! (`Box::into_raw`): the outer box exists because `dyn` pointers are fat and `void *` is not.
//! The library owns that pointer from registration on and hands it back to `destroy`, which
//! frees it exactly once.
//!
//! Panics: unwinding out of an `extern "C"` function is undefined behaviour on rustc 1.63 (it
//! aborts only since 1.81), so the trampoline catches every panic, parks it in a thread-local
//! slot and returns normally. The method that called into the library then re-raises it with
//! `resume_unwind` once the C call has returned. Inline callbacks run on the thread whose call
//! caused the events, so the thread-local slot is the right one to check afterwards.

use std::any::Any;
use std::cell::RefCell;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::slice;

use kvreg_sys as ffi;

/// What happened to a hash.
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The hash became registered in its first pool.
    Register,
    /// The hash left its last pool.
    Remove,
    /// A kind added by a newer library.
    Other(u32),
}

/// One event, with its tokens copied out of library memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    pub kind: EventKind,
    /// Id of the pool whose call caused the event (`Pool::id`).
    pub pool_id: u32,
    /// 0, 1, 2, ... per registry; a gap means events were dropped (full poll queue).
    pub event_id: u64,
    pub sequence_hash: u64,
    pub block_hash: u64,
    /// None for the first block of a sequence.
    pub parent_sequence_hash: Option<u64>,
    /// The block's tokens; empty when the library does not know them (see KEEP_TOKENS).
    pub tokens: Vec<u32>,
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
        }
    }
}

/// The closure type stored behind the C user_data pointer.
pub(crate) type Handler = Box<dyn FnMut(&[Event]) + Send>;

thread_local! {
    /// A panic caught in a callback on this thread, waiting to be re-raised.
    static PENDING_PANIC: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
}

/// Boxes a closure into the user_data pointer the library will own.
pub(crate) fn into_user_data(handler: Handler) -> *mut c_void {
    Box::into_raw(Box::new(handler)) as *mut c_void
}

/// Frees a pointer made by `into_user_data` that the library did not take over.
///
/// # Safety
/// `user_data` comes from `into_user_data` and is freed only once.
pub(crate) unsafe fn free_user_data(user_data: *mut c_void) {
    drop(Box::from_raw(user_data as *mut Handler));
}

fn park_panic(payload: Box<dyn Any + Send>) {
    let mut payload = Some(payload);
    let _ = PENDING_PANIC.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        // Keep the first panic: it is the cause, later ones are usually consequences.
        if slot.is_none() {
            *slot = payload.take();
        }
    });
    // A payload that could not be parked is leaked: dropping it runs arbitrary Drop code,
    // which could panic again inside an extern "C" frame.
    std::mem::forget(payload);
}

fn panic_pending() -> bool {
    PENDING_PANIC
        .try_with(|slot| slot.borrow().is_some())
        .unwrap_or(false)
}

/// Re-raises a panic parked by a callback on this thread. Call after every C call that can
/// deliver events or run a destroy-notify.
pub(crate) fn resume_pending_panic() {
    let payload = PENDING_PANIC
        .try_with(|slot| slot.borrow_mut().take())
        .ok()
        .flatten();
    if let Some(payload) = payload {
        panic::resume_unwind(payload);
    }
}

/// As `resume_pending_panic`, for Drop impls: a second panic while unwinding would abort the
/// process, so when the thread is already panicking the parked one is discarded.
pub(crate) fn resume_pending_panic_in_drop() {
    if std::thread::panicking() {
        let payload = PENDING_PANIC
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten();
        std::mem::forget(payload);
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
    // Once a panic is parked on this thread, the closure is not called again before the panic
    // reaches the caller: its state may be half-updated (git2-rs does the same).
    if panic_pending() {
        return;
    }
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let raw: &[ffi::kvreg_event] = if n_events == 0 || events.is_null() {
            &[]
        } else {
            // SAFETY: the library passes n_events valid events, alive during this call.
            slice::from_raw_parts(events, n_events)
        };
        // SAFETY: each event's tokens are valid during the callback.
        let converted: Vec<Event> = raw.iter().map(|e| Event::from_raw(e)).collect();
        // SAFETY: user_data is our Box<Handler>; the library never calls the callback of one
        // registry concurrently with itself, nor nested, so this &mut is unique.
        let handler = &mut *(user_data as *mut Handler);
        handler(&converted);
    }));
    if let Err(payload) = result {
        park_panic(payload);
    }
}

/// The C destroy-notify: frees the closure. Never unwinds (a panicking Drop is parked).
pub(crate) unsafe extern "C" fn destroy(user_data: *mut c_void) {
    // SAFETY: the library calls destroy exactly once for the pointer it took over.
    let result = panic::catch_unwind(AssertUnwindSafe(|| free_user_data(user_data)));
    if let Err(payload) = result {
        park_panic(payload);
    }
}
