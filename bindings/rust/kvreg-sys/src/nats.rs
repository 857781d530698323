//! Raw declarations of include/kvreg_index.h (the index a consumer feeds: new, free, stat)
//! and include/kvreg_nats.h (NATS JetStream publisher and consumer). The NATS symbols exist in
//! every libkvreg >= 0.5; built without NATS they return KVREG_ENOTSUP and
//! `kvreg_nats_available()` returns 0.

use std::os::raw::{c_char, c_int, c_void};

use crate::kvreg_registry;

/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_index {
    _private: [u8; 0],
}
/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_index_config {
    _private: [u8; 0],
}
/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_nats_publisher {
    _private: [u8; 0],
}
/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_nats_consumer {
    _private: [u8; 0],
}

pub const KVREG_INDEX_OPT_BLOCK_SIZE: u32 = 1;
pub const KVREG_INDEX_OPT_HASHES: u32 = 2;
pub const KVREG_INDEX_HASHES_ENGINE: u64 = 0;
pub const KVREG_INDEX_HASHES_OWN: u64 = 1;
pub const KVREG_INDEX_OPT_PROFILE: u32 = 3;
pub const KVREG_INDEX_OPT_SALT: u32 = 4;
pub const KVREG_INDEX_OPT_SHARDS: u32 = 5;
pub const KVREG_INDEX_OPT_EXPECTED_ENTRIES: u32 = 6;
pub const KVREG_INDEX_STAT_ENTRIES: u32 = 1;
pub const KVREG_INDEX_STAT_WORKERS: u32 = 2;
pub const KVREG_INDEX_STAT_MEMORY_BYTES: u32 = 3;

pub const KVREG_NATS_PUB_OPT_FORMAT: u32 = 1;
pub const KVREG_NATS_PUB_OPT_WORKER_ID: u32 = 2;
pub const KVREG_NATS_PUB_OPT_DP_RANK: u32 = 3;
pub const KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT: u32 = 4;
pub const KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS: u32 = 5;
pub const KVREG_NATS_PUB_OPT_RETRY_MS: u32 = 6;
pub const KVREG_NATS_PUB_OPT_MAX_EVENTS: u32 = 7;
pub const KVREG_NATS_PUB_OPT_BLOCK_SIZE: u32 = 8;
pub const KVREG_NATS_PUB_OPT_BATCH_US: u32 = 9;
pub const KVREG_NATS_PUB_OPT_LINGER_MS: u32 = 10;
pub const KVREG_NATS_PUB_OPT_INSTANCE: u32 = 11;
pub const KVREG_NATS_PUB_OPT_CREATE_STREAM: u32 = 12;
pub const KVREG_NATS_PUB_OPT_MAX_AGE_S: u32 = 13;
pub const KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS: u32 = 14;
pub const KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS: u32 = 15;

pub const KVREG_NATS_URL: u32 = 1;
pub const KVREG_NATS_STREAM: u32 = 2;
pub const KVREG_NATS_SUBJECT_PREFIX: u32 = 3;
pub const KVREG_NATS_NAMESPACE: u32 = 4;
pub const KVREG_NATS_COMPONENT: u32 = 5;
pub const KVREG_NATS_SUBJECT: u32 = 6;
pub const KVREG_NATS_LORA_NAME: u32 = 7;
pub const KVREG_NATS_DURABLE: u32 = 8;
pub const KVREG_NATS_FILTER: u32 = 9;

pub const KVREG_NATS_PUB_STAT_BATCHES: u32 = 1;
pub const KVREG_NATS_PUB_STAT_ACKED: u32 = 2;
pub const KVREG_NATS_PUB_STAT_DUPLICATES: u32 = 3;
pub const KVREG_NATS_PUB_STAT_RETRIES: u32 = 4;
pub const KVREG_NATS_PUB_STAT_IN_FLIGHT: u32 = 5;
pub const KVREG_NATS_PUB_STAT_EVENTS_SENT: u32 = 6;
pub const KVREG_NATS_PUB_STAT_EVENTS_LOST: u32 = 7;
pub const KVREG_NATS_PUB_STAT_RESYNCS: u32 = 8;
pub const KVREG_NATS_PUB_STAT_EVENTS_SKIPPED: u32 = 9;
pub const KVREG_NATS_PUB_STAT_EVENTS_UNSENT: u32 = 10;
pub const KVREG_NATS_PUB_STAT_BATCHES_UNACKED: u32 = 11;
pub const KVREG_NATS_PUB_STAT_ERRORS: u32 = 12;
pub const KVREG_NATS_PUB_STAT_EVENTS_HANDLED: u32 = 13;
pub const KVREG_NATS_PUB_STAT_BATCHES_REFUSED: u32 = 14;

pub const KVREG_NATS_CON_OPT_FETCH_BATCH: u32 = 1;
pub const KVREG_NATS_CON_OPT_ACK_WAIT_MS: u32 = 2;
pub const KVREG_NATS_CON_OPT_MAX_ACK_PENDING: u32 = 3;
pub const KVREG_NATS_CON_OPT_REORDER_WINDOW: u32 = 4;
pub const KVREG_NATS_CON_OPT_REORDER_MS: u32 = 5;
pub const KVREG_NATS_CON_OPT_MAX_MSG_BYTES: u32 = 6;
pub const KVREG_NATS_CON_OPT_RESUME: u32 = 7;
pub const KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS: u32 = 8;
pub const KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS: u32 = 9;
pub const KVREG_NATS_CON_OPT_SNAPSHOT_MS: u32 = 10;
pub const KVREG_NATS_CON_OPT_SNAPSHOT_KEEP: u32 = 11;
pub const KVREG_NATS_CON_OPT_SNAPSHOT_PURGE: u32 = 12;
pub const KVREG_NATS_CON_OPT_SNAPSHOT_CHUNK_BYTES: u32 = 13;
pub const KVREG_NATS_CON_OPT_RESTORE: u32 = 14;
pub const KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS: u32 = 15;
pub const KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS: u32 = 16;
pub const KVREG_NATS_CON_OPT_MAX_HELD_BYTES: u32 = 17;
pub const KVREG_NATS_SNAPSHOT_BUCKET: u32 = 10;
pub const KVREG_NATS_SNAPSHOT_NAME: u32 = 11;
pub const KVREG_NATS_LIVENESS_BUCKET: u32 = 12;

pub const KVREG_NATS_CON_STAT_MESSAGES: u32 = 1;
pub const KVREG_NATS_CON_STAT_BATCHES: u32 = 2;
pub const KVREG_NATS_CON_STAT_EVENTS: u32 = 3;
pub const KVREG_NATS_CON_STAT_DUPLICATES: u32 = 4;
pub const KVREG_NATS_CON_STAT_LOST: u32 = 5;
pub const KVREG_NATS_CON_STAT_RESETS: u32 = 6;
pub const KVREG_NATS_CON_STAT_MALFORMED: u32 = 7;
pub const KVREG_NATS_CON_STAT_STALE: u32 = 8;
pub const KVREG_NATS_CON_STAT_HELD: u32 = 9;
pub const KVREG_NATS_CON_STAT_FETCH_ERRORS: u32 = 10;
pub const KVREG_NATS_CON_STAT_SNAPSHOTS: u32 = 11;
pub const KVREG_NATS_CON_STAT_SNAPSHOT_SEQ: u32 = 12;
pub const KVREG_NATS_CON_STAT_RESTORED: u32 = 13;
pub const KVREG_NATS_CON_STAT_SNAPSHOTS_REJECTED: u32 = 14;
pub const KVREG_NATS_CON_STAT_EXPIRED: u32 = 15;
pub const KVREG_NATS_CON_STAT_SNAPSHOT_ERRORS: u32 = 16;
pub const KVREG_NATS_CON_STAT_SNAPSHOT_ORPHANS: u32 = 17;
pub const KVREG_NATS_CON_STAT_START_US: u32 = 18;
pub const KVREG_NATS_CON_STAT_RESTORE_READ_US: u32 = 19;
pub const KVREG_NATS_CON_STAT_RESTORE_LOAD_US: u32 = 20;

pub const KVREG_NATS_NOTICE_LOSS: u32 = 1;
pub const KVREG_NATS_NOTICE_RESET: u32 = 2;
pub const KVREG_NATS_NOTICE_MALFORMED: u32 = 3;
pub const KVREG_NATS_NOTICE_APPLY: u32 = 4;
pub const KVREG_NATS_NOTICE_SNAPSHOT: u32 = 5;
pub const KVREG_NATS_NOTICE_EXPIRED: u32 = 6;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct kvreg_nats_notice {
    pub kind: u32,
    pub dp_rank: u32,
    pub worker_id: u64,
    pub instance: u64,
    pub first: u64,
    pub last: u64,
    pub count: u64,
    pub stream_seq: u64,
    pub has_seq: u32,
    pub reserved32: u32,
    pub subject: *const c_char,
    pub message: *const c_char,
    pub reserved: [u64; 2],
}

pub type kvreg_nats_notice_fn =
    Option<unsafe extern "C" fn(notice: *const kvreg_nats_notice, user_data: *mut c_void)>;

extern "C" {
    pub fn kvreg_index_config_new(out: *mut *mut kvreg_index_config) -> c_int;
    pub fn kvreg_index_config_free(cfg: *mut kvreg_index_config);
    pub fn kvreg_index_config_set(cfg: *mut kvreg_index_config, option: u32, value: u64) -> c_int;
    pub fn kvreg_index_new(out: *mut *mut kvreg_index, cfg: *const kvreg_index_config) -> c_int;
    pub fn kvreg_index_free(idx: *mut kvreg_index);
    pub fn kvreg_index_stat(idx: *const kvreg_index, stat: u32, value: *mut u64) -> c_int;
    /// 0.6: the index dump (a versioned, checksummed snapshot) and its digest.
    pub fn kvreg_index_digest(idx: *const kvreg_index, out: *mut u64) -> c_int;
    pub fn kvreg_index_dump_alloc(idx: *const kvreg_index, data: *mut *mut c_void, len: *mut usize)
        -> c_int;
    pub fn kvreg_index_load(idx: *mut kvreg_index, data: *const c_void, len: usize) -> c_int;
    pub fn free(ptr: *mut c_void);

    pub fn kvreg_nats_available() -> c_int;
    pub fn kvreg_nats_publisher_new(
        out: *mut *mut kvreg_nats_publisher,
        reg: *mut kvreg_registry,
    ) -> c_int;
    pub fn kvreg_nats_publisher_free(publisher: *mut kvreg_nats_publisher);
    pub fn kvreg_nats_publisher_set(
        publisher: *mut kvreg_nats_publisher,
        option: u32,
        value: u64,
    ) -> c_int;
    pub fn kvreg_nats_publisher_set_string(
        publisher: *mut kvreg_nats_publisher,
        option: u32,
        value: *const c_char,
    ) -> c_int;
    pub fn kvreg_nats_publisher_start(publisher: *mut kvreg_nats_publisher) -> c_int;
    pub fn kvreg_nats_publisher_stop(publisher: *mut kvreg_nats_publisher) -> c_int;
    pub fn kvreg_nats_publisher_stat(
        publisher: *const kvreg_nats_publisher,
        stat: u32,
        value: *mut u64,
    ) -> c_int;

    pub fn kvreg_nats_consumer_new(out: *mut *mut kvreg_nats_consumer, idx: *mut kvreg_index)
        -> c_int;
    pub fn kvreg_nats_consumer_free(con: *mut kvreg_nats_consumer);
    pub fn kvreg_nats_consumer_set(con: *mut kvreg_nats_consumer, option: u32, value: u64)
        -> c_int;
    pub fn kvreg_nats_consumer_set_string(
        con: *mut kvreg_nats_consumer,
        option: u32,
        value: *const c_char,
    ) -> c_int;
    pub fn kvreg_nats_consumer_set_notice_fn(
        con: *mut kvreg_nats_consumer,
        f: kvreg_nats_notice_fn,
        user_data: *mut c_void,
    ) -> c_int;
    pub fn kvreg_nats_consumer_start(con: *mut kvreg_nats_consumer) -> c_int;
    pub fn kvreg_nats_consumer_run(con: *mut kvreg_nats_consumer, timeout_ms: c_int) -> c_int;
    pub fn kvreg_nats_consumer_stop(con: *mut kvreg_nats_consumer) -> c_int;
    pub fn kvreg_nats_consumer_stat(con: *const kvreg_nats_consumer, stat: u32, value: *mut u64)
        -> c_int;
    /// 0.6: write a snapshot now (needs KVREG_NATS_SNAPSHOT_BUCKET).
    pub fn kvreg_nats_consumer_snapshot(con: *mut kvreg_nats_consumer, out_seq: *mut u64)
        -> c_int;
    pub fn kvreg_nats_consumer_worker(
        con: *const kvreg_nats_consumer,
        worker_id: u64,
        dp_rank: u32,
        instance: *mut u64,
        next_seq: *mut u64,
    ) -> c_int;
}
