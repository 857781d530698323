//! A panicking event handler must not unwind through the C library: the binding catches it and
//! re-raises it on the thread that ran the handler, from the Rust call during which it ran,
//! after the C call has returned. Nothing may be lost on the way: no reference a register
//! took, no event the handler should have seen, no panic.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::{self, ThreadId};

use kvreg::{hash_blocks, BlockDesc, Event, EventKind, Registry, Sequence, Stat, ROUTER_SALT};

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
fn panic_in_handler_is_reraised_by_the_call_that_ran_it() {
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

    // Later calls deliver normally and do not re-raise the old panic.
    let handle = pool.register(&d[1]).unwrap();
    pool.release(handle).unwrap();
    // Register (panicked), its rollback's Remove, then Register and Remove of d[1].
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[test]
fn panicking_register_leaves_no_reference_behind() {
    // The register succeeded in C, but a panicking call cannot return the handle: the binding
    // releases it before re-raising, so nobody is left holding a reference nobody knows of.
    let log = Arc::new(Mutex::new(Vec::<(EventKind, u64)>::new()));
    let sink = Arc::clone(&log);
    let registry = Registry::builder()
        .on_events(move |events: &[Event]| {
            sink.lock().unwrap().extend(events.iter().map(|e| (e.kind, e.sequence_hash)));
            if events.iter().any(|e| e.kind == EventKind::Register) {
                panic!("register rejected");
            }
        })
        .build()
        .unwrap();
    let pool = registry.pool("gpu").unwrap();
    let d = descs();

    let caught = catch_unwind(AssertUnwindSafe(|| pool.register(&d[0])));
    assert_eq!(payload_text(caught.unwrap_err()), "register rejected");
    assert_eq!(pool.contains(d[0].sequence_hash), Ok(false), "the handle was released");
    assert_eq!(pool.size(), 0);
    assert_eq!(registry.stat(Stat::Hashes).unwrap(), 0);
    let h = d[0].sequence_hash;
    assert_eq!(*log.lock().unwrap(), vec![(EventKind::Register, h), (EventKind::Remove, h)]);

    // Every handle-returning form does the same.
    let caught = catch_unwind(AssertUnwindSafe(|| pool.register_batch(&d)));
    assert_eq!(payload_text(caught.unwrap_err()), "register rejected");
    let seq = Sequence::from_tokens(&(1..=8).collect::<Vec<u32>>(), 4, ROUTER_SALT).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| pool.register_sequence(&seq, 0, 2))).is_err());
    assert!(catch_unwind(AssertUnwindSafe(|| pool.register_sequence_block(&seq, 1))).is_err());
    assert_eq!(pool.size(), 0);
    assert_eq!(registry.stat(Stat::Hashes).unwrap(), 0);

    // A batch with a failing entry: only what it took is released; an existing reference
    // held elsewhere in the pool is untouched.
    registry.clear_event_handler().unwrap();
    let kept = pool.register(&d[0]).unwrap();
    registry.set_event_handler(|_: &[Event]| panic!("again")).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| pool.register_batch(&d))).is_err());
    assert_eq!(pool.refcount(kept), Ok(1));
    assert_eq!(pool.contains(d[1].sequence_hash), Ok(false));
    registry.clear_event_handler().unwrap(); // dropping the pool emits a Remove for `kept`
}

#[test]
fn a_panicking_handler_still_sees_every_chunk() {
    // More events than one callback call carries (KVREG_EVENTS_PER_CALL), so the call
    // delivers in several chunks; the handler panics in every one of them.
    const N: usize = 2500;
    let tokens: Vec<u32> = (0..(N as u32 * 4)).collect();
    let infos = hash_blocks(&tokens, 4, 99).unwrap();
    let descs: Vec<BlockDesc> = infos.iter().map(BlockDesc::from).collect();
    let ids = Arc::new(Mutex::new(Vec::<u64>::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let (sink, count) = (Arc::clone(&ids), Arc::clone(&calls));
    let registry = Registry::builder()
        .on_events(move |events: &[Event]| {
            sink.lock().unwrap().extend(events.iter().map(|e| e.event_id));
            let k = count.fetch_add(1, Ordering::SeqCst);
            panic!("chunk {}", k);
        })
        .build()
        .unwrap();
    let pool = registry.pool("gpu").unwrap();

    let caught = catch_unwind(AssertUnwindSafe(|| pool.register_batch(&descs)));
    assert_eq!(payload_text(caught.unwrap_err()), "chunk 0", "the first panic is the one raised");
    assert!(calls.load(Ordering::SeqCst) >= 3, "{} handler calls", calls.load(Ordering::SeqCst));
    // N Registers, then N Removes from releasing the handles the panicking call took: the
    // handler saw every one of them, none skipped after it panicked.
    let mut ids = std::mem::take(&mut *ids.lock().unwrap());
    ids.sort_unstable();
    assert_eq!(ids, (0..2 * N as u64).collect::<Vec<_>>());
    assert_eq!(registry.stat(Stat::NextEventId).unwrap(), 2 * N as u64);
    assert_eq!(pool.size(), 0);
}

#[test]
fn panics_surface_on_the_thread_that_ran_the_handler() {
    // Each thread registers and releases its own blocks; the handler panics on the Register
    // of about one hash in five. Whichever thread runs the handler (its own events, or other
    // threads' when the library lets one thread deliver for several), the panic must come out
    // of a call on that same thread: never lost, never on a thread that did not run it.
    const THREADS: usize = 4;
    const ROUNDS: usize = 150;
    let raised = Arc::new(Mutex::new(HashMap::<ThreadId, usize>::new()));
    let log = Arc::new(Mutex::new(Vec::<Event>::new()));
    let (raised_in, sink) = (Arc::clone(&raised), Arc::clone(&log));
    let registry = Registry::builder()
        .on_events(move |events: &[Event]| {
            sink.lock().unwrap().extend_from_slice(events);
            let poisoned = events
                .iter()
                .any(|e| e.kind == EventKind::Register && e.sequence_hash % 5 == 0);
            if poisoned {
                *raised_in.lock().unwrap().entry(thread::current().id()).or_insert(0) += 1;
                panic!("poisoned hash");
            }
        })
        .build()
        .unwrap();
    let start = Barrier::new(THREADS);
    let caught: Vec<(ThreadId, usize)> = thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (registry, start) = (&registry, &start);
                s.spawn(move || {
                    let pool = registry.pool(&format!("tier{}", t)).unwrap();
                    let tokens: Vec<u32> = (0..(ROUNDS as u32 * 4)).collect();
                    let infos = hash_blocks(&tokens, 4, 1000 + t as u64).unwrap();
                    let mut caught = 0;
                    start.wait();
                    for info in &infos {
                        match catch_unwind(AssertUnwindSafe(|| pool.register(&BlockDesc::from(info)))) {
                            Ok(Ok(handle)) => {
                                // The release happens even if a panic comes out of it.
                                if catch_unwind(AssertUnwindSafe(|| pool.release(handle).unwrap())).is_err() {
                                    caught += 1;
                                }
                            }
                            Ok(Err(e)) => panic!("register failed: {}", e),
                            Err(_) => caught += 1,
                        }
                    }
                    if catch_unwind(AssertUnwindSafe(|| registry.flush().unwrap())).is_err() {
                        caught += 1;
                    }
                    assert_eq!(pool.size(), 0, "every reference released or rolled back");
                    (thread::current().id(), caught)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    registry.flush().unwrap();

    let raised = raised.lock().unwrap();
    assert!(raised.values().sum::<usize>() > 0, "no poisoned hash: the test tested nothing");
    for (id, caught) in &caught {
        let ran = raised.get(id).copied().unwrap_or(0);
        // Several panics during one call come out as one; none comes out elsewhere.
        assert!(*caught <= ran, "{:?}: caught {} > raised {}", id, caught, ran);
        assert_eq!(*caught > 0, ran > 0, "{:?}: caught {} raised {}", id, caught, ran);
    }
    assert!(raised.keys().all(|id| caught.iter().any(|(c, _)| c == id)), "handler ran off the workers");
    assert_eq!(registry.stat(Stat::Hashes).unwrap(), 0);
    // No event was skipped: ids are dense and every hash is balanced.
    let mut events = std::mem::take(&mut *log.lock().unwrap());
    events.sort_by_key(|e| e.event_id);
    assert_eq!(events.len() as u64, registry.stat(Stat::NextEventId).unwrap());
    assert!(events.iter().enumerate().all(|(i, e)| e.event_id == i as u64));
    let mut balance = HashMap::<u64, i64>::new();
    for e in &events {
        *balance.entry(e.sequence_hash).or_insert(0) += if e.kind == EventKind::Register { 1 } else { -1 };
    }
    assert_eq!(balance.len(), THREADS * ROUNDS);
    assert!(balance.values().all(|&b| b == 0));
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
