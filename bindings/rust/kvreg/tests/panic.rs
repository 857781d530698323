//! A panicking event handler must not unwind through the C library: the binding catches it and
//! re-raises it from the Rust call that caused the events, after the C call has returned.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kvreg::{hash_blocks, BlockDesc, Event, EventKind, Registry, Stat, ROUTER_SALT};

fn descs() -> Vec<BlockDesc<'static>> {
    let tokens: Vec<u32> = (1..=8).collect();
    hash_blocks(&tokens, 4, ROUTER_SALT).unwrap().iter().map(BlockDesc::from).collect()
}

fn payload_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast::<&str>().map(|s| s.to_string()).unwrap_or_default(),
    }
}

#[test]
fn panic_in_handler_is_reraised_by_the_causing_call() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let registry = Registry::builder()
        .on_events(move |_: &[Event]| {
            // Panic on the first delivery only, to check the registry still works afterwards.
            if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("handler failed on purpose");
            }
        })
        .build()
        .unwrap();
    let pool = registry.pool("gpu").unwrap();
    let d = descs();

    let caught = catch_unwind(AssertUnwindSafe(|| pool.register(&d[0])));
    let text = payload_text(caught.expect_err("the handler's panic must reach the caller"));
    assert_eq!(text, "handler failed on purpose");
    // The C call completed before the panic was raised: the block is registered.
    assert!(pool.contains(d[0].sequence_hash));

    // Later calls deliver normally and do not re-raise the old panic.
    let handle = pool.register(&d[1]).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    pool.release(handle).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn panic_during_pool_drop_is_reraised_by_drop() {
    let registry = Registry::builder()
        .on_events(|events: &[Event]| {
            if events.iter().any(|e| e.kind == EventKind::Remove) {
                panic!("remove rejected");
            }
        })
        .build()
        .unwrap();
    let pool = registry.pool("gpu").unwrap();
    pool.register(&descs()[0]).unwrap();
    let caught = catch_unwind(AssertUnwindSafe(move || drop(pool)));
    assert_eq!(payload_text(caught.unwrap_err()), "remove rejected");
    // The pool was freed all the same.
    assert_eq!(registry.stat(Stat::Pools).unwrap(), 0);
    assert_eq!(registry.stat(Stat::Hashes).unwrap(), 0);
}

/// Panics when dropped: stands for a handler whose captured state fails in Drop.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("handler state failed in drop");
    }
}

#[test]
fn panic_in_handler_drop_is_reraised_by_replacement() {
    let registry = Registry::new().unwrap();
    let state = PanicOnDrop;
    registry
        .set_event_handler(move |_: &[Event]| {
            let _keep = &state;
        })
        .unwrap();
    // The library runs destroy-notify inside set_event_fn; the Drop panic must surface here.
    let caught = catch_unwind(AssertUnwindSafe(|| registry.set_event_handler(|_: &[Event]| {})));
    assert_eq!(payload_text(caught.unwrap_err()), "handler state failed in drop");
    // The replacement took effect before the panic was raised.
    let pool = registry.pool("gpu").unwrap();
    pool.register(&descs()[0]).unwrap();
    assert_eq!(registry.stat(Stat::EventsDropped).unwrap(), 0);
}
