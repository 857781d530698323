//! Registry and pools shared between threads. Exact event counts hold whatever the
//! interleaving: a hash is announced once when it enters its first pool and once when it leaves
//! its last. With several threads a call may return before its events reach the handler
//! (another thread may be delivering them), so every test flushes before it reads what the
//! handler collected.

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use kvreg::{hash_blocks, BlockDesc, BlockInfo, Event, EventKind, Registry, Sequence, Stat};

const THREADS: usize = 4;
const BLOCKS: usize = 200;

fn chain(salt: u64) -> Vec<BlockInfo> {
    let tokens: Vec<u32> = (0..(BLOCKS as u32 * 4)).collect();
    hash_blocks(&tokens, 4, salt).unwrap()
}

#[test]
fn scoped_threads_register_the_same_hashes_in_their_own_pools() {
    let log = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&log);
    let registry = Registry::builder()
        .on_events(move |events| sink.lock().unwrap().extend_from_slice(events))
        .build()
        .unwrap();
    let infos = chain(7);
    let pools: Vec<_> = (0..THREADS).map(|i| registry.pool(&format!("tier{}", i)).unwrap()).collect();
    // Start together so registrations really overlap.
    let start = Barrier::new(THREADS);

    thread::scope(|s| {
        for pool in &pools {
            let (infos, start) = (&infos, &start);
            s.spawn(move || {
                start.wait();
                let handles: Vec<_> =
                    infos.iter().map(|i| pool.register(&BlockDesc::from(i)).unwrap()).collect();
                for h in handles {
                    pool.release(h).unwrap();
                }
            });
        }
    });

    registry.flush().unwrap();
    let events = std::mem::take(&mut *log.lock().unwrap());
    // Hashes may come and go several times (one thread's release can empty the registry before
    // another registers), but every Register is matched by one later Remove, and ids are dense.
    let mut ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..events.len() as u64).collect::<Vec<_>>());
    let mut balance: HashMap<u64, i64> = HashMap::new();
    let mut by_id = events.clone();
    by_id.sort_by_key(|e| e.event_id);
    for ev in &by_id {
        let b = balance.entry(ev.sequence_hash).or_insert(0);
        *b += if ev.kind == EventKind::Register { 1 } else { -1 };
        assert!((0..=1).contains(&*b), "Register/Remove out of order for {:x}", ev.sequence_hash);
    }
    assert_eq!(balance.len(), BLOCKS);
    assert!(balance.values().all(|&b| b == 0));
    assert_eq!(registry.stat(Stat::Hashes).unwrap(), 0);
}

#[test]
fn all_threads_hold_then_release_gives_exactly_one_event_each() {
    let log = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&log);
    let registry = Registry::builder()
        .on_events(move |events| sink.lock().unwrap().extend_from_slice(events))
        .build()
        .unwrap();
    let infos = chain(11);
    let pools: Vec<_> = (0..THREADS).map(|i| registry.pool(&format!("tier{}", i)).unwrap()).collect();
    let registered = Barrier::new(THREADS);

    thread::scope(|s| {
        for pool in &pools {
            let (infos, registered) = (&infos, &registered);
            s.spawn(move || {
                let handles: Vec<_> =
                    infos.iter().map(|i| pool.register(&BlockDesc::from(i)).unwrap()).collect();
                // Nobody releases until every pool holds every hash.
                registered.wait();
                for h in handles {
                    pool.release(h).unwrap();
                }
            });
        }
    });

    registry.flush().unwrap();
    let events = log.lock().unwrap();
    let count = |kind| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count(EventKind::Register), BLOCKS);
    assert_eq!(count(EventKind::Remove), BLOCKS);
}

#[test]
fn one_pool_shared_by_threads() {
    let registry = Registry::new().unwrap();
    let pool = registry.pool("gpu").unwrap();
    thread::scope(|s| {
        for t in 0..THREADS {
            let pool = &pool;
            s.spawn(move || {
                // Distinct salts give each thread its own hashes in the shared pool.
                for info in chain(100 + t as u64) {
                    pool.register(&BlockDesc::from(&info)).unwrap();
                }
            });
        }
    });
    assert_eq!(pool.size(), THREADS * BLOCKS);
}

#[test]
fn registry_clones_with_spawned_threads() {
    let registry = Registry::builder().delivery(kvreg::Delivery::Poll).build().unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let registry = registry.clone();
            thread::spawn(move || {
                let pool = registry.pool(&format!("worker{}", t)).unwrap();
                // A Sequence is Send: build it here, hash it, register its blocks.
                let tokens: Vec<u32> = (0..40).map(|i| i * (t as u32 + 1)).collect();
                let seq = Sequence::from_tokens(&tokens, 8, 5).unwrap();
                let handles = pool.register_sequence(&seq, 0, seq.num_blocks()).unwrap();
                assert!(handles.iter().all(|h| h.is_ok()));
                pool.size()
            })
        })
        .collect();
    let sizes: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(sizes, vec![5; THREADS]);
    assert_eq!(registry.stat(Stat::Pools).unwrap(), 0, "each pool dropped with its thread");
    // Poll mode: a finished call's events may still be on their way into the queue.
    registry.flush().unwrap();
    // Poll from several threads at once: every event goes to exactly one poller.
    let polled: Vec<Vec<Event>> = thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|_| s.spawn(|| registry.poll().unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ids: Vec<u64> = polled.iter().flatten().map(|e| e.event_id).collect();
    ids.sort_unstable();
    let next = registry.stat(Stat::NextEventId).unwrap();
    assert_eq!(ids, (0..next).collect::<Vec<_>>());
}

#[test]
fn thread_safety_markers() {
    // Compile-time: the header calls registries and pools thread-safe, sequences single-owner.
    // (That Sequence is not Sync is a compile_fail doctest in src/lib.rs.)
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Registry>();
    send_sync::<kvreg::Pool>();
    send_sync::<kvreg::WeakRegistry>();
    send::<Sequence>();
    send_sync::<kvreg::Error>();
}

#[test]
fn sequence_moves_between_threads() {
    let mut seq = Sequence::new(4, 0).unwrap();
    seq.extend(&[1, 2, 3]).unwrap();
    let seq = thread::spawn(move || {
        seq.append(4).unwrap();
        seq
    })
    .join()
    .unwrap();
    assert_eq!(seq.num_blocks(), 1);
}

#[test]
fn pools_moved_into_threads_with_the_registry_dropped_first() {
    // Owned pools: no scope and no Arc needed, and the registry handle may go first; the
    // registry lives until the last pool is dropped.
    let log = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&log);
    let registry = Registry::builder()
        .on_events(move |events| sink.lock().unwrap().extend_from_slice(events))
        .build()
        .unwrap();
    let pools: Vec<kvreg::Pool> =
        (0..THREADS).map(|i| registry.pool(&format!("tier{}", i)).unwrap()).collect();
    let keeper = pools[0].registry().downgrade();
    drop(registry);
    let workers: Vec<_> = pools
        .into_iter()
        .enumerate()
        .map(|(t, pool)| {
            thread::spawn(move || {
                for info in chain(300 + t as u64) {
                    pool.register(&BlockDesc::from(&info)).unwrap();
                }
                pool.registry().flush().unwrap();
                pool // hand it back, still holding its blocks
            })
        })
        .collect();
    let pools: Vec<kvreg::Pool> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let registry = keeper.upgrade().expect("the pools keep the registry alive");
    registry.flush().unwrap();
    assert_eq!(log.lock().unwrap().len(), THREADS * BLOCKS);
    drop(registry);
    drop(pools); // the last handles: Remove events, then the registry and its handler go
    assert!(keeper.upgrade().is_none());
    let events = log.lock().unwrap();
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::Remove).count(), THREADS * BLOCKS);
    assert_eq!(Arc::strong_count(&log), 1, "the handler was dropped with the registry");
}
