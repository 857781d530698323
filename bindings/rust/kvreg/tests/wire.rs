//! kvreg::wire: the spec's worked example A decoded field for field, bad payloads with their
//! offsets, encode -> decode round trips in every format, and what encode refuses.

use kvreg::wire::{
    Decoder, DecoderLimit, DecoderStats, Encoder, EventIds, Field, Format, MmObject, WireEventKind,
};
use kvreg::{
    features, hash_blocks, BlockDesc, BlockInfo, Delivery, ErrorKind, Event, Medium, Registry,
    FEATURE_WIRE, ROUTER_SALT,
};

/// A vLLM KVEventBatch written out by hand from vLLM's msgspec rules (285 bytes; as
/// tests/wire/wire_examples.h has it):
/// [1.5, [BlockStored(H1, H2; tokens 1..4; block_size 2; GPU), BlockRemoved([H2], GPU),
/// AllBlocksCleared], 0] with current vLLM's map events.
const EXAMPLE_A: &str = "93 cb 3f f8 00 00 00 00 00 00 93 \
    8b \
    a4 74797065 ab 426c6f636b53746f726564 \
    ac 626c6f636b5f686173686573 92 cf dab89baa7b5857c0 cf 1f2e3d4c5b6a7988 \
    b1 706172656e745f626c6f636b5f68617368 c0 \
    a9 746f6b656e5f696473 94 01 02 03 04 \
    aa 626c6f636b5f73697a65 02 \
    a7 6c6f72615f6964 c0 \
    a6 6d656469756d a3 475055 \
    a9 6c6f72615f6e616d65 c0 \
    aa 65787472615f6b657973 92 c0 c0 \
    a9 67726f75705f696478 00 \
    b2 6b765f63616368655f737065635f6b696e64 ae 66756c6c5f617474656e74696f6e \
    84 \
    a4 74797065 ac 426c6f636b52656d6f766564 ac 626c6f636b5f686173686573 91 cf 1f2e3d4c5b6a7988 \
    a6 6d656469756d a3 475055 a9 67726f75705f696478 00 \
    81 a4 74797065 b0 416c6c426c6f636b73436c6561726564 \
    00";
const H1: u64 = 0xdab8_9baa_7b58_57c0;
const H2: u64 = 0x1f2e_3d4c_5b6a_7988;

fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn example_a() -> Vec<u8> {
    let a = unhex(EXAMPLE_A);
    assert_eq!(a.len(), 285);
    a
}

/// True when the library has the wire feature; otherwise checks NotSupported and says so.
fn wire_built() -> bool {
    if features() & FEATURE_WIRE != 0 {
        return true;
    }
    assert_eq!(Encoder::new(Format::Vllm).unwrap_err().kind(), ErrorKind::NotSupported);
    assert_eq!(Decoder::new(Format::Vllm).unwrap_err().kind(), ErrorKind::NotSupported);
    eprintln!("libkvreg built without the wire feature: NotSupported checked, nothing else");
    false
}

/// n chained Registers (tokens kept) from a pool on `medium`, then, with `remove`, their
/// Removes; the polled events and the blocks.
fn chain_events(n: usize, medium: Medium, remove: bool) -> (Vec<Event>, Vec<u32>, Vec<BlockInfo>) {
    let registry = Registry::builder().delivery(Delivery::Poll).keep_tokens(true).build().unwrap();
    let pool = registry.pool_on("p", medium).unwrap();
    let tokens: Vec<u32> = (1000..1000 + 4 * n as u32).collect();
    let infos = hash_blocks(&tokens, 4, ROUTER_SALT).unwrap();
    let held: Vec<_> = infos
        .iter()
        .enumerate()
        .map(|(i, info)| pool.register(&BlockDesc::from(info).with_tokens(&tokens[i * 4..i * 4 + 4], 4)).unwrap())
        .collect();
    if remove {
        for b in held {
            pool.release(b).unwrap();
        }
    }
    (registry.poll().unwrap(), tokens, infos)
}

#[test]
fn not_supported_is_its_own_kind() {
    let e = kvreg::Error::from_code(-10);
    assert_eq!(e.kind(), ErrorKind::NotSupported);
    assert_eq!(kvreg::Error::from_code(-11).kind(), ErrorKind::Protocol);
    assert_ne!(e.message(), "unknown error");
    wire_built();
}

#[test]
fn decodes_example_a_field_for_field() {
    if !wire_built() {
        return;
    }
    let mut dec = Decoder::new(Format::Vllm).unwrap();
    let evs = dec.decode(&example_a()).unwrap();
    let kinds: Vec<_> = evs.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [WireEventKind::Stored, WireEventKind::Removed, WireEventKind::Cleared]);
    let st = &evs[0];
    assert_eq!(st.block_hashes, [H1, H2]);
    assert_eq!(st.block_hashes[0], 15760518052499183552);
    assert_eq!((st.parent_block_hash, st.block_size), (None, 2));
    assert_eq!(st.token_ids, [1, 2, 3, 4]);
    assert_eq!((st.medium, st.medium_name.as_deref(), st.lora_name.as_deref()), (Medium::Gpu, Some("GPU"), None));
    assert_eq!((st.group_idx, st.dp_rank, st.ts), (Some(0), Some(0), 1.5));
    assert_eq!((st.worker_id, st.event_id, st.tokens_hashes.len()), (0, 0, 0));
    let rm = &evs[1];
    assert_eq!((rm.block_hashes.as_slice(), rm.medium_name.as_deref(), rm.group_idx), (&[H2][..], Some("GPU"), Some(0)));
    assert!(rm.token_ids.is_empty());
    assert!(evs[2].block_hashes.is_empty());
    assert_eq!(dec.stats().unwrap(), DecoderStats { batches: 1, rejected: 0, events: 3, skipped: 0 });
}

#[test]
fn malformed_payloads_report_their_offset() {
    if !wire_built() {
        return;
    }
    let a = example_a();
    // block_size's value 0x02 becomes the string "x" (a1 78): a known field of the wrong type.
    let key = unhex("aa626c6f636b5f73697a65");
    let at = a.windows(key.len()).position(|w| w == key.as_slice()).unwrap() + key.len();
    assert_eq!(a[at], 0x02);
    let mut bad = a[..at].to_vec();
    bad.extend_from_slice(&[0xa1, b'x']);
    bad.extend_from_slice(&a[at + 1..]);
    let mut dec = Decoder::new(Format::Vllm).unwrap();
    for (payload, offset) in [(&bad[..], at), (&a[..a.len() - 1], a.len() - 1), (&[][..], 0)] {
        let err = dec.decode(payload).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol);
        assert_eq!(err.offset, offset, "{}", err);
        assert!(!err.detail.is_empty());
        assert!(err.to_string().contains(&err.detail));
    }
    assert_eq!(dec.stats().unwrap().rejected, 3);
    assert_eq!(dec.decode(&a).unwrap().len(), 3, "the decoder stays usable");
}

#[test]
fn vllm_round_trip() {
    if !wire_built() {
        return;
    }
    let (evs, tokens, infos) = chain_events(3, Medium::Cpu, true);
    for format in [Format::Vllm, Format::VllmLegacy] {
        let mut enc = Encoder::new(format).unwrap();
        enc.set_dp_rank(3).unwrap();
        enc.set_block_size(4).unwrap();
        enc.set_lora_name(Some("ad")).unwrap();
        let payloads = enc.encode(&evs, Some(12.25)).unwrap();
        assert_eq!(payloads.len(), 1);
        let got = Decoder::new(Format::Vllm).unwrap().decode(&payloads[0]).unwrap();
        assert_eq!(got.len(), 2, "{:?}: one stored event for the chain, one removed", format);
        let st = &got[0];
        assert_eq!(st.kind, WireEventKind::Stored);
        assert_eq!(st.block_hashes, infos.iter().map(|b| b.sequence_hash).collect::<Vec<_>>());
        assert_eq!(st.token_ids, tokens);
        assert_eq!((st.block_size, st.parent_block_hash), (4, None));
        assert_eq!((st.medium, st.medium_name.as_deref(), st.lora_name.as_deref()), (Medium::Cpu, Some("CPU"), Some("ad")));
        assert_eq!((st.dp_rank, st.ts), (Some(3), 12.25));
        assert_eq!((got[1].kind, got[1].block_hashes.len()), (WireEventKind::Removed, 3));
    }
}

#[test]
fn dynamo_round_trip() {
    if !wire_built() {
        return;
    }
    let (evs, _, infos) = chain_events(2, Medium::Storage, false);
    for format in [Format::DynamoJson, Format::DynamoMsgpack] {
        let mut enc = Encoder::new(format).unwrap();
        enc.set_worker_id((1 << 63) + 5).unwrap();
        let mut dec = Decoder::new(format).unwrap();
        let got: Vec<_> = enc.encode(&evs, None).unwrap().iter().flat_map(|p| dec.decode(p).unwrap()).collect();
        assert_eq!(got.len(), 1, "{:?}", got);
        assert_eq!((got[0].kind, got[0].worker_id, got[0].medium), (WireEventKind::Stored, (1 << 63) + 5, Medium::Storage));
        assert_eq!(got[0].block_hashes, infos.iter().map(|b| b.sequence_hash).collect::<Vec<_>>());
        assert_eq!(got[0].tokens_hashes, infos.iter().map(|b| b.block_hash).collect::<Vec<_>>());
    }
}

#[test]
fn encode_splits_and_stops_cleanly() {
    if !wire_built() {
        return;
    }
    let (evs, _, infos) = chain_events(5, Medium::Gpu, true);
    let mut enc = Encoder::new(Format::Vllm).unwrap();
    enc.set_max_events(2).unwrap();
    let payloads = enc.encode(&evs, Some(1.0)).unwrap();
    assert_eq!(payloads.len(), 5, "10 events, at most 2 per payload");
    let mut dec = Decoder::new(Format::Vllm).unwrap();
    let stored: Vec<u64> = payloads
        .iter()
        .flat_map(|p| dec.decode(p).unwrap())
        .filter(|e| e.kind == WireEventKind::Stored)
        .flat_map(|e| e.block_hashes)
        .collect();
    assert_eq!(stored, infos.iter().map(|b| b.sequence_hash).collect::<Vec<_>>());

    // A Register without tokens cannot go out as vLLM: the payload before it comes back.
    let mut hash_only = evs[1].clone();
    hash_only.tokens.clear();
    let err = enc.encode(&[evs[0].clone(), hash_only.clone()], Some(1.0)).unwrap_err();
    assert_eq!((err.kind(), err.index, err.payloads.len()), (ErrorKind::InvalidState, 1, 1));
    let mut bad = evs[0].clone();
    bad.medium = Medium::Other(9);
    assert_eq!(enc.encode(&[bad], None).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert!(enc.encode(&[], None).unwrap().is_empty());
    // Dynamo carries no tokens: the same events are fine there.
    let mut dynamo = Encoder::new(Format::DynamoJson).unwrap();
    assert_eq!(dynamo.encode(&[evs[0].clone(), hash_only], None).unwrap().len(), 1);

    assert_eq!(Encoder::new(Format::Sglang).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(enc.set_max_events(0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(enc.set_dp_rank(1 << 40).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(enc.set_lora_name(Some("a\0b")).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn snapshot_and_cleared_encode() {
    if !wire_built() {
        return;
    }
    let registry = Registry::builder().delivery(Delivery::Poll).keep_tokens(true).build().unwrap();
    let pool = registry.pool("g").unwrap();
    let tokens: Vec<u32> = (1..=8).collect();
    let infos = hash_blocks(&tokens, 4, 0).unwrap();
    for (i, info) in infos.iter().enumerate() {
        pool.register(&BlockDesc::from(info).with_tokens(&tokens[i * 4..i * 4 + 4], 4)).unwrap();
    }
    let snap = registry.snapshot().unwrap();
    registry.clear().unwrap();
    let cleared = registry.poll().unwrap().pop().unwrap();
    let mut events = snap.into_events();
    events.push(cleared);
    let payloads = Encoder::new(Format::Vllm).unwrap().encode(&events, Some(2.0)).unwrap();
    let got = Decoder::new(Format::Vllm).unwrap().decode(&payloads[0]).unwrap();
    let kinds: Vec<_> = got.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [WireEventKind::Stored, WireEventKind::Cleared]);
    assert_eq!(got[0].block_hashes, infos.iter().map(|b| b.sequence_hash).collect::<Vec<_>>());
}

/// 0.6: a Dynamo payload (Python-style named msgpack, written out by hand) decodes with its
/// extended fields, and re-encodes to the same bytes; the decoder limits are settable.
#[test]
fn dynamo_ext_and_reencode() {
    if features() & FEATURE_WIRE == 0 {
        return;
    }
    // {"worker_id": 1, "residency_domain": "worker", "event": {"event_id": 5, "data":
    //  {"stored": {"parent_hash": nil, "start_position": 9, "blocks": [{"block_hash": 1,
    //  "tokens_hash": 2, "mm_extra_info": {"mm_objects": [{"mm_hash": 3, "offsets":
    //  [[0, 1]]}]}}]}}, "dp_rank": 0}}
    let mut p = vec![0x83];
    let s = |p: &mut Vec<u8>, t: &str| {
        p.push(0xa0 | t.len() as u8);
        p.extend_from_slice(t.as_bytes());
    };
    s(&mut p, "worker_id");
    p.push(1);
    s(&mut p, "residency_domain");
    s(&mut p, "worker");
    s(&mut p, "event");
    p.push(0x83);
    s(&mut p, "event_id");
    p.push(5);
    s(&mut p, "data");
    p.push(0x81);
    s(&mut p, "stored");
    p.push(0x83);
    s(&mut p, "parent_hash");
    p.push(0xc0);
    s(&mut p, "start_position");
    p.push(9);
    s(&mut p, "blocks");
    p.extend_from_slice(&[0x91, 0x83]);
    s(&mut p, "block_hash");
    p.push(1);
    s(&mut p, "tokens_hash");
    p.push(2);
    s(&mut p, "mm_extra_info");
    p.push(0x81);
    s(&mut p, "mm_objects");
    p.extend_from_slice(&[0x91, 0x82]);
    s(&mut p, "mm_hash");
    p.push(3);
    s(&mut p, "offsets");
    p.extend_from_slice(&[0x91, 0x92, 0x00, 0x01]);
    s(&mut p, "dp_rank");
    p.push(0);

    let mut dec = Decoder::new(Format::DynamoMsgpack).unwrap();
    dec.set_limit(DecoderLimit::MaxDepth, 16).unwrap();
    assert_eq!(dec.set_limit(DecoderLimit::MaxDepth, 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let evs = dec.decode(&p).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].block_hashes, vec![1]);
    assert_eq!(evs[0].tokens_hashes, vec![2]);
    let x = dec.event_ext(0).unwrap();
    assert_eq!(x.tag.as_deref(), Some("stored"));
    assert_eq!(x.start_position, Field::Set(9));
    assert_eq!(x.residency_domain, Field::Set("worker".to_string()));
    assert_eq!(x.state_source, Field::Absent);
    assert_eq!(x.mm_objects, vec![MmObject { block: 0, mm_hash: 3, offsets: vec![(0, 1)] }]);
    assert_eq!(dec.event_ext(1).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(dec.reencode().unwrap(), p);
    // a payload with a key the decoder does not read cannot be re-encoded whole
    let mut q = p.clone();
    q[0] = 0x84;
    s(&mut q, "zz");
    q.push(0);
    dec.decode(&q).unwrap();
    assert_eq!(dec.reencode().unwrap_err().kind(), ErrorKind::InvalidState);
}

/// 0.6: Dynamo event ids are contiguous by default, and can be read and set.
#[test]
fn dynamo_event_ids() {
    if features() & FEATURE_WIRE == 0 {
        return;
    }
    let mut enc = Encoder::new(Format::DynamoJson).unwrap();
    assert_eq!(enc.next_event_id().unwrap(), 0);
    enc.set_next_event_id(10).unwrap();
    let reg = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let pool = reg.pool("p").unwrap();
    let hash_only = |h: u64| BlockDesc {
        sequence_hash: h,
        block_hash: h,
        parent_sequence_hash: None,
        block_size: 0,
        tokens: &[],
    };
    let a = pool.register(&hash_only(1)).unwrap();
    let _b = pool.register(&hash_only(2)).unwrap();
    pool.release(a).unwrap();
    let evs = reg.poll().unwrap();
    enc.encode(&evs, Some(1.0)).unwrap();
    let after = enc.next_event_id().unwrap();
    assert!(after > 10);
    enc.set_event_ids(EventIds::Kvreg).unwrap();
    enc.set_next_event_id(0).unwrap();
    let out = enc.encode(&evs, Some(1.0)).unwrap();
    let mut dec = Decoder::new(Format::DynamoJson).unwrap();
    let back = dec.decode(&out[0]).unwrap();
    assert_eq!(back[0].event_id, evs[0].event_id);
}
