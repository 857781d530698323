//! Register/Remove events with two pools sharing hashes: one Register when a hash enters its
//! first pool, one Remove when it leaves its last, in both delivery modes.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kvreg::{
    hash_blocks, BlockDesc, BlockInfo, Delivery, ErrorKind, Event, EventKind, Pool, Registry,
    Stat, ROUTER_SALT,
};

const BLOCK: u32 = 4;

fn workload() -> (Vec<u32>, Vec<BlockInfo>) {
    let tokens: Vec<u32> = (1..=12).collect();
    let infos = hash_blocks(&tokens, BLOCK, ROUTER_SALT).unwrap();
    assert_eq!(infos.len(), 3);
    (tokens, infos)
}

fn register_all(pool: &Pool, tokens: &[u32], infos: &[BlockInfo], with_tokens: bool) -> Vec<kvreg::Block> {
    infos
        .iter()
        .zip(tokens.chunks(BLOCK as usize))
        .map(|(info, chunk)| {
            let desc = BlockDesc::from(info);
            let desc = if with_tokens { desc.with_tokens(chunk, BLOCK) } else { desc };
            pool.register(&desc).unwrap()
        })
        .collect()
}

/// The shared scenario; `drain` returns the events delivered since its last call.
fn two_pools_share_hashes(registry: &Registry, drain: &mut dyn FnMut() -> Vec<Event>) {
    let (tokens, infos) = workload();
    let gpu = registry.pool("gpu").unwrap();
    let host = registry.pool("host").unwrap();
    assert_ne!(gpu.id(), host.id());
    assert_eq!((gpu.name(), host.name()), ("gpu".to_string(), "host".to_string()));

    let on_gpu = register_all(&gpu, &tokens, &infos, true);
    let on_host = register_all(&host, &tokens, &infos, false);
    let registered = drain();
    assert_eq!(registered.len(), 3, "second pool must not re-announce: {:?}", registered);
    for (i, (ev, info)) in registered.iter().zip(&infos).enumerate() {
        assert_eq!(ev.kind, EventKind::Register);
        assert_eq!(ev.event_id, i as u64);
        assert_eq!(ev.pool_id, gpu.id());
        assert_eq!((ev.sequence_hash, ev.block_hash), (info.sequence_hash, info.block_hash));
        assert_eq!(ev.parent_sequence_hash, info.parent_sequence_hash);
        assert_eq!(ev.tokens, tokens[i * 4..i * 4 + 4].to_vec(), "Register carries its tokens");
    }

    for h in on_gpu {
        gpu.release(h).unwrap();
    }
    assert!(drain().is_empty(), "host still holds every hash");
    assert!(infos.iter().all(|i| registry.contains(i.sequence_hash).unwrap()));

    for h in on_host {
        host.release(h).unwrap();
    }
    let removed = drain();
    assert_eq!(removed.len(), 3);
    let mut seen: Vec<u64> = removed.iter().map(|e| e.sequence_hash).collect();
    seen.sort_unstable();
    let mut want: Vec<u64> = infos.iter().map(|i| i.sequence_hash).collect();
    want.sort_unstable();
    assert_eq!(seen, want, "one Remove per hash");
    for (i, ev) in removed.iter().enumerate() {
        assert_eq!(ev.kind, EventKind::Remove);
        assert_eq!(ev.event_id, 3 + i as u64);
        assert_eq!(ev.pool_id, host.id());
    }
    assert!(!infos.iter().any(|i| registry.contains(i.sequence_hash).unwrap()));
    assert_eq!(registry.stat(Stat::EventsRegister).unwrap(), 3);
    assert_eq!(registry.stat(Stat::EventsRemove).unwrap(), 3);
    assert_eq!(registry.stat(Stat::NextEventId).unwrap(), 6);
}

fn collecting_registry() -> (Registry, Arc<Mutex<Vec<Event>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&log);
    let registry = Registry::builder()
        .on_events(move |events| sink.lock().unwrap().extend_from_slice(events))
        .build()
        .unwrap();
    (registry, log)
}

#[test]
fn inline_two_pools() {
    let (registry, log) = collecting_registry();
    two_pools_share_hashes(&registry, &mut || std::mem::take(&mut *log.lock().unwrap()));
}

#[test]
fn poll_two_pools() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    assert!(registry.poll().unwrap().is_empty());
    two_pools_share_hashes(&registry, &mut || registry.poll().unwrap());
    assert_eq!(registry.stat(Stat::EventsQueued).unwrap(), 0);
}

#[test]
fn poll_max_takes_oldest_first() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    register_all(&pool, &tokens, &infos, false);
    let first = registry.poll_max(2).unwrap();
    assert_eq!(first.iter().map(|e| e.event_id).collect::<Vec<_>>(), vec![0, 1]);
    let rest = registry.poll_max(10).unwrap();
    assert_eq!(rest.iter().map(|e| e.event_id).collect::<Vec<_>>(), vec![2]);
}

#[test]
fn full_poll_queue_drops_and_leaves_a_gap() {
    let registry = Registry::builder().delivery(Delivery::Poll).poll_capacity(2).build().unwrap();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    let handles = register_all(&pool, &tokens, &infos, false);
    assert_eq!(registry.stat(Stat::EventsDropped).unwrap(), 1);
    assert_eq!(registry.poll().unwrap().len(), 2);
    pool.release(handles[0]).unwrap();
    // Event 2 was dropped, so the next one delivered is 3.
    assert_eq!(registry.poll().unwrap()[0].event_id, 3);
}

#[test]
fn dropping_a_pool_removes_what_it_held() {
    let (registry, log) = collecting_registry();
    let (tokens, infos) = workload();
    {
        let pool = registry.pool("gpu").unwrap();
        register_all(&pool, &tokens, &infos, false);
        log.lock().unwrap().clear();
    }
    let events = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.kind == EventKind::Remove));
    assert_eq!(registry.stat(Stat::Pools).unwrap(), 0);
}

#[test]
fn keep_tokens_puts_tokens_in_remove_events() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&log);
    let registry = Registry::builder()
        .keep_tokens(true)
        .on_events(move |events: &[Event]| sink.lock().unwrap().extend_from_slice(events))
        .build()
        .unwrap();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    let handles = register_all(&pool, &tokens, &infos, true);
    assert_eq!(pool.block_tokens(handles[2]).unwrap(), vec![9, 10, 11, 12]);
    pool.release(handles[2]).unwrap();
    let last = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!((last.kind, last.tokens), (EventKind::Remove, vec![9, 10, 11, 12]));
}

#[test]
fn mode_mismatches_are_invalid() {
    let inline = Registry::new().unwrap();
    assert_eq!(inline.poll().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let polled = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let err = polled.set_event_handler(|_: &[Event]| {}).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn a_rejected_handler_is_dropped_exactly_once() {
    // Whether the library keeps the user_data of a failed call or runs its destroy-notify at
    // once, the binding must drop the closure once: not leak it, not free it twice.
    let state = Arc::new(());
    let captured = Arc::clone(&state);
    let polled = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let err = polled.set_event_handler(move |_: &[Event]| {
        let _keep = &captured;
    }).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(Arc::strong_count(&state), 1);

    // A config with both a handler and poll delivery: the registry is refused.
    let captured = Arc::clone(&state);
    let err = Registry::builder()
        .delivery(Delivery::Poll)
        .on_events(move |_: &[Event]| {
        let _keep = &captured;
    })
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(Arc::strong_count(&state), 1);

    // From inside a handler: Busy, and the rejected one is dropped there and then.
    let registry = Registry::new().unwrap();
    let (weak, inner_state) = (registry.downgrade(), Arc::clone(&state));
    registry
        .set_event_handler(move |_: &[Event]| {
            let captured = Arc::clone(&inner_state);
            let err = weak.upgrade().unwrap().set_event_handler(move |_: &[Event]| {
        let _keep = &captured;
    });
            assert_eq!(err.unwrap_err().kind(), ErrorKind::Busy);
            assert_eq!(Arc::strong_count(&inner_state), 2, "only this handler's own copy left");
        })
        .unwrap();
    let (_, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    pool.register(&BlockDesc::from(&infos[0])).unwrap();
    drop((pool, registry));
    assert_eq!(Arc::strong_count(&state), 1);
}

#[test]
fn handler_can_be_replaced_and_cleared() {
    let (registry, first_log) = collecting_registry();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    let second_log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&second_log);
    registry
        .set_event_handler(move |events: &[Event]| sink.lock().unwrap().extend_from_slice(events))
        .unwrap();
    // The old closure was dropped by the library's destroy-notify: only our Arc is left.
    assert_eq!(Arc::strong_count(&first_log), 1);
    let handles = register_all(&pool, &tokens, &infos, false);
    assert!(first_log.lock().unwrap().is_empty());
    assert_eq!(second_log.lock().unwrap().len(), 3);

    registry.clear_event_handler().unwrap();
    assert_eq!(Arc::strong_count(&second_log), 1);
    pool.release(handles[0]).unwrap();
    assert_eq!(second_log.lock().unwrap().len(), 3);
    assert_eq!(registry.stat(Stat::EventsDropped).unwrap(), 1);
}

#[test]
fn replacing_the_handler_from_inside_it_is_busy() {
    let registry = Registry::new().unwrap();
    let results: Arc<Mutex<Vec<ErrorKind>>> = Arc::new(Mutex::new(Vec::new()));
    let (weak, sink) = (registry.downgrade(), Arc::clone(&results));
    registry
        .set_event_handler(move |_: &[Event]| {
            // Weak: a strong reference would make the registry own itself.
            let reg = weak.upgrade().unwrap();
            let err = reg.set_event_handler(|_: &[Event]| {}).unwrap_err();
            sink.lock().unwrap().push(err.kind());
        })
        .unwrap();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    register_all(&pool, &tokens[..4], &infos[..1], false);
    assert_eq!(*results.lock().unwrap(), vec![ErrorKind::Busy]);
}

#[test]
fn events_are_distinct_per_hash_in_batches() {
    let (registry, log) = collecting_registry();
    let (_, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    let descs: Vec<BlockDesc> = infos.iter().map(BlockDesc::from).collect();
    let mut twice = descs.clone();
    twice.push(descs[0]);
    let results = pool.register_batch(&twice).unwrap();
    assert!(results[..3].iter().all(|r| r.is_ok()));
    assert_eq!(results[3].unwrap_err().kind(), ErrorKind::AlreadyExists);
    let handles: Vec<_> = results[..3].iter().map(|r| r.unwrap()).collect();
    let statuses = pool.release_batch(&[handles[0], handles[0], handles[1], handles[2]]).unwrap();
    assert!(statuses[0].is_ok() && statuses[2].is_ok() && statuses[3].is_ok());
    assert_eq!(statuses[1].unwrap_err().kind(), ErrorKind::Stale);

    let mut per_hash: HashMap<(u64, EventKind), usize> = HashMap::new();
    for ev in log.lock().unwrap().iter() {
        *per_hash.entry((ev.sequence_hash, ev.kind)).or_insert(0) += 1;
    }
    assert_eq!(per_hash.len(), 6);
    assert!(per_hash.values().all(|&n| n == 1));
}

#[test]
fn handler_may_call_back_into_its_registry() {
    // The handler holds the mirror pool weakly: a Pool inside the handler would keep the
    // registry (which owns the handler) alive forever.
    let registry = Registry::new().unwrap();
    let mirror = Arc::new(registry.pool("mirror").unwrap());
    let gpu = registry.pool("gpu").unwrap();
    let (gpu_id, mirror_id) = (gpu.id(), mirror.id());
    let log = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&log);
    let weak_mirror = Arc::downgrade(&mirror);
    registry
        .set_event_handler(move |events: &[Event]| {
            for e in events {
                sink.lock().unwrap().push(e.clone());
                if e.pool_id == gpu_id && e.kind == EventKind::Register {
                    // A new hash: its Register event is caused from inside this handler and
                    // must arrive in a later, separate call (never nested in this one).
                    let desc = BlockDesc {
                        sequence_hash: e.sequence_hash ^ 1,
                        block_hash: e.block_hash,
                        parent_sequence_hash: None,
                        block_size: 0,
                        tokens: &[],
                    };
                    if let Some(mirror) = weak_mirror.upgrade() {
                        mirror.register(&desc).unwrap();
                    }
                }
            }
        })
        .unwrap();
    let (_, infos) = workload();
    gpu.register(&BlockDesc::from(&infos[0])).unwrap();
    let events = std::mem::take(&mut *log.lock().unwrap());
    let summary: Vec<(u64, u32, u64)> =
        events.iter().map(|e| (e.event_id, e.pool_id, e.sequence_hash)).collect();
    let hash = infos[0].sequence_hash;
    assert_eq!(summary, vec![(0, gpu_id, hash), (1, mirror_id, hash ^ 1)]);
    assert!(mirror.contains(hash ^ 1).unwrap());

    // No cycle: dropping our handles frees the registry, which drops the handler.
    drop((mirror, gpu, registry));
    assert_eq!(Arc::strong_count(&log), 1, "the handler was dropped with its registry");
}

#[test]
fn poll_wait_returns_queued_events_without_waiting() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    register_all(&pool, &tokens, &infos, true);
    let start = Instant::now();
    let events = registry.poll_wait(2, None).unwrap();
    assert_eq!(events.iter().map(|e| e.event_id).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(events[1].tokens, vec![5, 6, 7, 8]);
    let rest = registry.poll_wait(10, Some(Duration::from_secs(10))).unwrap();
    assert_eq!(rest.iter().map(|e| e.event_id).collect::<Vec<_>>(), vec![2]);
    assert!(start.elapsed() < Duration::from_secs(5), "queued events must not wait");
    assert!(registry.poll_wait(0, None).unwrap().is_empty(), "max 0 returns at once");
}

#[test]
fn poll_wait_times_out_empty() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let start = Instant::now();
    assert!(registry.poll_wait(10, Some(Duration::ZERO)).unwrap().is_empty());
    assert!(registry.poll_wait(10, Some(Duration::from_millis(30))).unwrap().is_empty());
    assert!(start.elapsed() >= Duration::from_millis(25), "{:?}", start.elapsed());
    let inline = Registry::new().unwrap();
    let err = inline.poll_wait(10, Some(Duration::ZERO)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn poll_wait_wakes_when_another_thread_emits() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let pool = registry.pool("gpu").unwrap();
    let consumer = {
        let registry = registry.clone();
        thread::spawn(move || registry.poll_wait(10, Some(Duration::from_secs(30))).unwrap())
    };
    thread::sleep(Duration::from_millis(50));
    let (_, infos) = workload();
    pool.register(&BlockDesc::from(&infos[0])).unwrap();
    let got = consumer.join().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].sequence_hash, infos[0].sequence_hash);
}

#[test]
fn wakeup_ends_a_waiting_poll_and_is_not_lost() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let consumer = {
        let registry = registry.clone();
        thread::spawn(move || {
            let start = Instant::now();
            let got = registry.poll_wait(10, None).unwrap();
            (got, start.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(50));
    registry.wakeup().unwrap();
    let (got, _) = consumer.join().unwrap();
    assert!(got.is_empty());
    // With nobody waiting, the wake-up is kept for the next poll_wait.
    registry.wakeup().unwrap();
    let start = Instant::now();
    assert!(registry.poll_wait(10, Some(Duration::from_secs(30))).unwrap().is_empty());
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn wakeup_reaches_every_waiting_poller() {
    // Pollers are serialised by the binding: one sleeps in the library, the others wait for
    // it. One wakeup() must end all their waits, not only the one in the library.
    const POLLERS: usize = 3;
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let (done, finished) = mpsc::channel();
    for _ in 0..POLLERS {
        let (registry, done) = (registry.clone(), done.clone());
        thread::spawn(move || {
            // Bounded, so a poller the wake-up misses fails the test instead of hanging it.
            let got = registry.poll_wait(10, Some(Duration::from_secs(20))).unwrap();
            done.send(got.len()).unwrap();
        });
    }
    thread::sleep(Duration::from_millis(300)); // let every poller start waiting
    let woken = Instant::now();
    registry.wakeup().unwrap();
    for _ in 0..POLLERS {
        assert_eq!(finished.recv().unwrap(), 0);
    }
    assert!(woken.elapsed() < Duration::from_secs(10), "a poller slept through the wake-up");
}

#[test]
fn flush_in_both_modes_and_busy_in_a_handler() {
    let (registry, log) = collecting_registry();
    let (tokens, infos) = workload();
    let pool = registry.pool("gpu").unwrap();
    register_all(&pool, &tokens, &infos, false);
    registry.flush().unwrap();
    assert_eq!(log.lock().unwrap().len(), 3);

    let polled = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let pool = polled.pool("gpu").unwrap();
    register_all(&pool, &tokens, &infos, false);
    polled.flush().unwrap();
    assert_eq!(polled.stat(Stat::EventsQueued).unwrap(), 3);

    let inside = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&inside);
    let weak = registry.downgrade();
    registry
        .set_event_handler(move |_: &[Event]| {
            let result = weak.upgrade().unwrap().flush();
            sink.lock().unwrap().push(result.map_err(|e| e.kind()));
        })
        .unwrap();
    let fresh = BlockDesc { sequence_hash: 0xf1f1, ..BlockDesc::from(&infos[0]) };
    let host = registry.pool("host").unwrap();
    host.register(&fresh).unwrap();
    assert_eq!(*inside.lock().unwrap(), vec![Err(ErrorKind::Busy)], "flush would wait for itself");
}
