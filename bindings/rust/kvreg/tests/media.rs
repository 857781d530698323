//! The 0.3 core API: pool media in events, Registry::clear and snapshot resync.

use std::collections::HashSet;

use kvreg::{
    features, hash_blocks, BlockDesc, BlockInfo, Delivery, ErrorKind, EventKind, Medium, Registry,
    Stat, EVENT_ID_SNAPSHOT, FEATURE_WIRE, FEATURE_ZMQ,
};

fn poll_registry(keep_tokens: bool, capacity: Option<u64>) -> Registry {
    let b = Registry::builder().delivery(Delivery::Poll).keep_tokens(keep_tokens);
    let b = match capacity {
        Some(c) => b.poll_capacity(c),
        None => b,
    };
    b.build().unwrap()
}

fn chain(n: usize) -> (Vec<u32>, Vec<BlockInfo>) {
    let tokens: Vec<u32> = (0..(n as u32) * 4).collect();
    let infos = hash_blocks(&tokens, 4, 0).unwrap();
    (tokens, infos)
}

fn desc<'a>(tokens: &'a [u32], infos: &[BlockInfo], i: usize) -> BlockDesc<'a> {
    BlockDesc::from(&infos[i]).with_tokens(&tokens[i * 4..i * 4 + 4], 4)
}

#[test]
fn events_carry_their_pools_medium() {
    let registry = poll_registry(false, None);
    let default = registry.pool("default").unwrap();
    assert_eq!(default.medium(), Medium::Gpu);
    let media = [Medium::Cpu, Medium::Storage, Medium::External];
    let pools: Vec<_> = media.iter().map(|&m| registry.pool_on("p", m).unwrap()).collect();
    for (i, p) in pools.iter().enumerate() {
        assert_eq!(p.medium(), media[i]);
        let h = 100 + i as u64;
        let d = BlockDesc { sequence_hash: h, block_hash: h, parent_sequence_hash: None, block_size: 0, tokens: &[] };
        p.register(&d).unwrap();
    }
    let evs = registry.poll().unwrap();
    assert_eq!(evs.len(), 3);
    for (i, ev) in evs.iter().enumerate() {
        assert_eq!((ev.kind, ev.medium, ev.pool_id), (EventKind::Register, media[i], pools[i].id()));
    }
    let err = registry.pool_on("tape", Medium::Other(4)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(Medium::from_raw(7), Medium::Other(7));
    assert_eq!(Medium::Other(7).raw(), 7);
}

#[test]
fn clear_emits_one_cleared_and_stales_handles() {
    let registry = poll_registry(true, None);
    let gpu = registry.pool("gpu").unwrap();
    let cpu = registry.pool_on("cpu", Medium::Cpu).unwrap();
    let (tokens, infos) = chain(4);
    let held: Vec<_> = (0..4).map(|i| gpu.register(&desc(&tokens, &infos, i)).unwrap()).collect();
    let other = cpu.register(&desc(&tokens, &infos, 0)).unwrap();
    let before = registry.poll().unwrap();
    assert_eq!(before.len(), 4);

    registry.clear().unwrap();
    let evs = registry.poll().unwrap();
    assert_eq!(evs.len(), 1, "one Cleared, no Remove per hash: {:?}", evs);
    let ev = &evs[0];
    assert_eq!(ev.kind, EventKind::Cleared);
    assert_eq!(ev.event_id, before[3].event_id + 1);
    assert_eq!((ev.pool_id, ev.sequence_hash, ev.medium), (0, 0, Medium::Gpu));
    assert_eq!((gpu.size(), cpu.size()), (0, 0));
    assert_eq!(registry.stat(Stat::EventsCleared).unwrap(), 1);
    assert_eq!(registry.stat(Stat::Hashes).unwrap(), 0);
    assert_eq!(registry.stat(Stat::TokenBytes).unwrap(), 0);
    for b in held.iter() {
        assert_eq!(gpu.release(*b).unwrap_err().kind(), ErrorKind::Stale);
    }
    assert_eq!(cpu.release(other).unwrap_err().kind(), ErrorKind::Stale);
    let again = gpu.register(&desc(&tokens, &infos, 0)).unwrap(); // pools stay usable
    assert_eq!(gpu.refcount(held[0]).unwrap_err().kind(), ErrorKind::Stale);
    gpu.release(again).unwrap();
}

#[test]
fn clear_from_an_inline_registry_reaches_the_handler() {
    let (tx, rx) = std::sync::mpsc::channel();
    let registry = Registry::builder()
        .on_events(move |evs| {
            for e in evs {
                tx.send(e.kind).unwrap();
            }
        })
        .build()
        .unwrap();
    registry.clear().unwrap();
    registry.clear().unwrap();
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![EventKind::Cleared; 2]);
}

#[test]
fn snapshot_resync() {
    let registry = poll_registry(true, Some(4));
    let gpu = registry.pool("gpu").unwrap();
    let cpu = registry.pool_on("cpu", Medium::Cpu).unwrap();
    let (tokens, infos) = chain(6);
    let held: Vec<_> = (0..4).map(|i| gpu.register(&desc(&tokens, &infos, i)).unwrap()).collect();
    cpu.register(&desc(&tokens, &infos, 4)).unwrap();
    assert!(registry.stat(Stat::EventsDropped).unwrap() > 0, "the queue must lose events");
    assert_eq!(registry.poll().unwrap().len(), 4); // the consumer sees a gap: resync
    gpu.release(held[3]).unwrap(); // a Remove queued before the snapshot
    let snap = registry.snapshot().unwrap();
    let later = gpu.register(&desc(&tokens, &infos, 5)).unwrap();
    gpu.release(held[2]).unwrap();

    assert_eq!((snap.position(), snap.len()), (6, 4));
    let order: Vec<u64> = snap.iter().map(|e| e.sequence_hash).collect();
    for e in &snap {
        assert_eq!((e.kind, e.event_id, e.tokens.len()), (EventKind::Register, EVENT_ID_SNAPSHOT, 4));
        if let Some(parent) = e.parent_sequence_hash {
            if let Some(p) = order.iter().position(|&h| h == parent) {
                assert!(p < order.iter().position(|&h| h == e.sequence_hash).unwrap());
            }
        }
    }
    let cpu_block = snap.iter().find(|e| e.sequence_hash == infos[4].sequence_hash).unwrap();
    assert_eq!(cpu_block.medium, Medium::Cpu);

    let mut state: HashSet<u64> = snap.iter().map(|e| e.sequence_hash).collect();
    for e in registry.poll().unwrap() {
        if e.event_id < snap.position() {
            continue;
        }
        match e.kind {
            EventKind::Register => {
                state.insert(e.sequence_hash);
            }
            EventKind::Remove => {
                state.remove(&e.sequence_hash);
            }
            _ => {}
        }
    }
    let want: HashSet<u64> = [0, 1, 4, 5].iter().map(|&i| infos[i].sequence_hash).collect();
    assert_eq!(state, want);
    gpu.release(later).unwrap();
    drop((gpu, cpu, registry));
    // Owned copies: usable after the registry is gone.
    let events = snap.into_events();
    assert_eq!(events.len(), 4);
    assert!(events.iter().all(|e| e.tokens.len() == 4));
}

#[test]
fn features_are_known_bits() {
    assert_eq!(features() & !(FEATURE_WIRE | FEATURE_ZMQ), 0);
}

/// KVREG_OPT_EVENT_MODE through the builder: a hash on GPU and CPU, released from both, gives
/// one Register/Remove pair (global) or one per medium (per tier).
#[test]
fn event_mode_option() {
    use kvreg::EventMode;
    for (mode, want) in [
        (EventMode::Global, vec![(EventKind::Register, Medium::Gpu), (EventKind::Remove, Medium::Gpu)]),
        (
            EventMode::PerTier,
            vec![
                (EventKind::Register, Medium::Gpu),
                (EventKind::Register, Medium::Cpu),
                (EventKind::Remove, Medium::Gpu),
                (EventKind::Remove, Medium::Cpu),
            ],
        ),
    ] {
        let reg = Registry::builder().delivery(Delivery::Poll).event_mode(mode).build().unwrap();
        let gpu = reg.pool_on("gpu", Medium::Gpu).unwrap();
        let cpu = reg.pool_on("cpu", Medium::Cpu).unwrap();
        let d = BlockDesc { sequence_hash: 7, block_hash: 7, parent_sequence_hash: None, block_size: 0, tokens: &[] };
        let g = gpu.register(&d).unwrap();
        let c = cpu.register(&d).unwrap();
        gpu.release(g).unwrap();
        cpu.release(c).unwrap();
        let got: Vec<_> = reg.poll().unwrap().iter().map(|e| (e.kind, e.medium)).collect();
        assert_eq!(got, want, "{:?}", mode);
    }
}
