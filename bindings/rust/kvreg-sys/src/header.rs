//! The integer consts must equal the header's #defines: a wrong value compiles fine and then
//! means something else to the library. The header is the one pkg-config points at (build.rs
//! passes its path as KVREG_SYS_HEADER); with KVREG_LIB_DIR there is no header and the test
//! only says so.

use super::*;

/// Value of `#define NAME value` in the header text, for the forms kvreg.h uses:
/// `1u`, `(-1)`, `UINT64_C(1337)`, `UINT32_MAX`.
fn define(header: &str, name: &str) -> Option<i128> {
    let line = header.lines().find(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some("#define") && words.next() == Some(name)
    })?;
    let value = line.split_whitespace().nth(2)?;
    let value = value.trim_start_matches("UINT64_C(").trim_start_matches('(').trim_end_matches(')');
    if value == "UINT32_MAX" {
        return Some(u32::MAX as i128);
    }
    value.trim_end_matches('u').parse().ok()
}

#[test]
fn consts_match_the_header() {
    let path = match option_env!("KVREG_SYS_HEADER") {
        Some(p) if !p.is_empty() => p,
        _ => {
            eprintln!("kvreg.h not located (KVREG_LIB_DIR build): header comparison skipped");
            return;
        }
    };
    let header = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {}", path, e));
    let ours: &[(&str, i128)] = &[
        ("KVREG_OK", KVREG_OK as i128),
        ("KVREG_EINVAL", KVREG_EINVAL as i128),
        ("KVREG_ENOMEM", KVREG_ENOMEM as i128),
        ("KVREG_ERANGE", KVREG_ERANGE as i128),
        ("KVREG_ESTATE", KVREG_ESTATE as i128),
        ("KVREG_EEXIST", KVREG_EEXIST as i128),
        ("KVREG_ENOENT", KVREG_ENOENT as i128),
        ("KVREG_ESTALE", KVREG_ESTALE as i128),
        ("KVREG_EBUSY", KVREG_EBUSY as i128),
        ("KVREG_EOVERFLOW", KVREG_EOVERFLOW as i128),
        ("KVREG_ROUTER_SALT", KVREG_ROUTER_SALT as i128),
        ("KVREG_POSITION_UNKNOWN", KVREG_POSITION_UNKNOWN as i128),
        ("KVREG_EVENT_REGISTER", KVREG_EVENT_REGISTER as i128),
        ("KVREG_EVENT_REMOVE", KVREG_EVENT_REMOVE as i128),
        ("KVREG_OPT_DELIVERY", KVREG_OPT_DELIVERY as i128),
        ("KVREG_DELIVERY_INLINE", KVREG_DELIVERY_INLINE as i128),
        ("KVREG_DELIVERY_POLL", KVREG_DELIVERY_POLL as i128),
        ("KVREG_OPT_KEEP_TOKENS", KVREG_OPT_KEEP_TOKENS as i128),
        ("KVREG_OPT_POLL_CAPACITY", KVREG_OPT_POLL_CAPACITY as i128),
        ("KVREG_OPT_SHARDS", KVREG_OPT_SHARDS as i128),
        ("KVREG_OPT_RESERVE_BLOCKS", KVREG_OPT_RESERVE_BLOCKS as i128),
        ("KVREG_OPT_EVENT_MODE", KVREG_OPT_EVENT_MODE as i128),
        ("KVREG_EVENTS_GLOBAL", KVREG_EVENTS_GLOBAL as i128),
        ("KVREG_EVENTS_PER_TIER", KVREG_EVENTS_PER_TIER as i128),
        ("KVREG_STAT_HASHES", KVREG_STAT_HASHES as i128),
        ("KVREG_STAT_POOLS", KVREG_STAT_POOLS as i128),
        ("KVREG_STAT_EVENTS_REGISTER", KVREG_STAT_EVENTS_REGISTER as i128),
        ("KVREG_STAT_EVENTS_REMOVE", KVREG_STAT_EVENTS_REMOVE as i128),
        ("KVREG_STAT_EVENTS_DROPPED", KVREG_STAT_EVENTS_DROPPED as i128),
        ("KVREG_STAT_EVENTS_QUEUED", KVREG_STAT_EVENTS_QUEUED as i128),
        ("KVREG_STAT_NEXT_EVENT_ID", KVREG_STAT_NEXT_EVENT_ID as i128),
        ("KVREG_STAT_TOKEN_BYTES", KVREG_STAT_TOKEN_BYTES as i128),
        ("KVREG_BLOCK_NONE", KVREG_BLOCK_NONE as i128),
        ("KVREG_ENOTSUP", KVREG_ENOTSUP as i128),
        ("KVREG_EPROTO", KVREG_EPROTO as i128),
        ("KVREG_FEATURE_WIRE", KVREG_FEATURE_WIRE as i128),
        ("KVREG_FEATURE_ZMQ", KVREG_FEATURE_ZMQ as i128),
        ("KVREG_EVENT_CLEARED", KVREG_EVENT_CLEARED as i128),
        ("KVREG_MEDIUM_GPU", KVREG_MEDIUM_GPU as i128),
        ("KVREG_MEDIUM_CPU", KVREG_MEDIUM_CPU as i128),
        ("KVREG_MEDIUM_STORAGE", KVREG_MEDIUM_STORAGE as i128),
        ("KVREG_MEDIUM_EXTERNAL", KVREG_MEDIUM_EXTERNAL as i128),
        ("KVREG_MEDIUM_COUNT", KVREG_MEDIUM_COUNT as i128),
        ("KVREG_STAT_EVENTS_CLEARED", KVREG_STAT_EVENTS_CLEARED as i128),
    ];
    for &(name, value) in ours {
        assert_eq!(define(&header, name), Some(value), "{} in {}", name, path);
    }
    // UINT64_MAX is not a form define() reads; check the spelling instead.
    assert!(header.contains("#define KVREG_EVENT_ID_SNAPSHOT UINT64_MAX"));
    assert_eq!(KVREG_EVENT_ID_SNAPSHOT, u64::MAX);
}

#[test]
fn wire_consts_match_the_header() {
    let path = match option_env!("KVREG_SYS_HEADER") {
        Some(p) if !p.is_empty() => p.replace("kvreg.h", "kvreg_wire.h"),
        _ => {
            eprintln!("kvreg_wire.h not located (KVREG_LIB_DIR build): header comparison skipped");
            return;
        }
    };
    let header = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {}", path, e));
    let ours: &[(&str, i128)] = &[
        ("KVREG_WIRE_VLLM", KVREG_WIRE_VLLM as i128),
        ("KVREG_WIRE_VLLM_LEGACY", KVREG_WIRE_VLLM_LEGACY as i128),
        ("KVREG_WIRE_DYNAMO_JSON", KVREG_WIRE_DYNAMO_JSON as i128),
        ("KVREG_WIRE_DYNAMO_MSGPACK", KVREG_WIRE_DYNAMO_MSGPACK as i128),
        ("KVREG_WIRE_SGLANG", KVREG_WIRE_SGLANG as i128),
        ("KVREG_WIRE_OPT_DP_RANK", KVREG_WIRE_OPT_DP_RANK as i128),
        ("KVREG_WIRE_OPT_MAX_EVENTS", KVREG_WIRE_OPT_MAX_EVENTS as i128),
        ("KVREG_WIRE_OPT_WORKER_ID", KVREG_WIRE_OPT_WORKER_ID as i128),
        ("KVREG_WIRE_OPT_BLOCK_SIZE", KVREG_WIRE_OPT_BLOCK_SIZE as i128),
        ("KVREG_WIRE_STORED", KVREG_WIRE_STORED as i128),
        ("KVREG_WIRE_REMOVED", KVREG_WIRE_REMOVED as i128),
        ("KVREG_WIRE_CLEARED", KVREG_WIRE_CLEARED as i128),
        ("KVREG_MEDIUM_UNKNOWN", KVREG_MEDIUM_UNKNOWN as i128),
        ("KVREG_WIRE_STAT_BATCHES", KVREG_WIRE_STAT_BATCHES as i128),
        ("KVREG_WIRE_STAT_REJECTED", KVREG_WIRE_STAT_REJECTED as i128),
        ("KVREG_WIRE_STAT_EVENTS", KVREG_WIRE_STAT_EVENTS as i128),
        ("KVREG_WIRE_STAT_SKIPPED", KVREG_WIRE_STAT_SKIPPED as i128),
    ];
    for &(name, value) in ours {
        assert_eq!(define(&header, name), Some(value), "{} in {}", name, path);
    }
}
