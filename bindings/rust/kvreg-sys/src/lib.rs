//! Raw declarations of include/kvreg.h, one for one. Read the header for what each does.
//!
//! Status codes, option keys, stats and event kinds are plain integer consts, never Rust enums:
//! the library may return a value added after this crate was written, and an unknown value in a
//! Rust enum is undefined behaviour.
//!
//! `size_t` is `usize` (true on every target Rust supports, and what the libc crate uses).

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

// ---- Status codes -----------------------------------------------------------------------
pub const KVREG_OK: c_int = 0;
pub const KVREG_EINVAL: c_int = -1;
pub const KVREG_ENOMEM: c_int = -2;
pub const KVREG_ERANGE: c_int = -3;
pub const KVREG_ESTATE: c_int = -4;
pub const KVREG_EEXIST: c_int = -5;
pub const KVREG_ENOENT: c_int = -6;
pub const KVREG_ESTALE: c_int = -7;
pub const KVREG_EBUSY: c_int = -8;
pub const KVREG_EOVERFLOW: c_int = -9;
pub const KVREG_ENOTSUP: c_int = -10;
pub const KVREG_EPROTO: c_int = -11;

/// MAJOR*10000 + MINOR*100 + PATCH of the oldest library these declarations fit (0.3.0: pool
/// media, `kvreg_registry_clear`, snapshots, `kvreg_features` and the wire functions).
pub const KVREG_SYS_MIN_VERSION_NUMBER: c_uint = 300;

// ---- Features -----------------------------------------------------------------------------
pub const KVREG_FEATURE_WIRE: c_uint = 1;
pub const KVREG_FEATURE_ZMQ: c_uint = 2;

// ---- Hashing ----------------------------------------------------------------------------
pub const KVREG_ROUTER_SALT: u64 = 1337;
pub const KVREG_POSITION_UNKNOWN: u32 = u32::MAX;

#[repr(C)]
#[derive(Debug, Copy, Clone, Default, PartialEq, Eq)]
pub struct kvreg_block_info {
    pub block_hash: u64,
    pub sequence_hash: u64,
    pub parent_sequence_hash: u64,
    pub has_parent: u32,
    pub position: u32,
}

// ---- Sequences --------------------------------------------------------------------------
/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_sequence {
    _private: [u8; 0],
}

// ---- Events -----------------------------------------------------------------------------
pub const KVREG_EVENT_REGISTER: u32 = 1;
pub const KVREG_EVENT_REMOVE: u32 = 2;
pub const KVREG_EVENT_CLEARED: u32 = 3;

pub const KVREG_MEDIUM_GPU: u32 = 0;
pub const KVREG_MEDIUM_CPU: u32 = 1;
pub const KVREG_MEDIUM_STORAGE: u32 = 2;
pub const KVREG_MEDIUM_EXTERNAL: u32 = 3;
pub const KVREG_MEDIUM_COUNT: u32 = 4;

pub const KVREG_EVENT_ID_SNAPSHOT: u64 = u64::MAX;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct kvreg_event {
    pub kind: u32,
    pub pool_id: u32,
    pub event_id: u64,
    pub sequence_hash: u64,
    pub block_hash: u64,
    pub parent_sequence_hash: u64,
    pub has_parent: u32,
    pub n_tokens: u32,
    pub tokens: *const u32,
    pub medium: u32,
    pub reserved32: u32,
    pub reserved: [u64; 3],
}

pub type kvreg_event_fn =
    Option<unsafe extern "C" fn(events: *const kvreg_event, n_events: usize, user_data: *mut c_void)>;
pub type kvreg_destroy_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

// ---- Configuration ----------------------------------------------------------------------
#[repr(C)]
pub struct kvreg_config {
    _private: [u8; 0],
}

/// Option keys (`option` argument, uint32_t) and their values (`value` argument, uint64_t).
pub const KVREG_OPT_DELIVERY: u32 = 1;
pub const KVREG_DELIVERY_INLINE: u64 = 0;
pub const KVREG_DELIVERY_POLL: u64 = 1;
pub const KVREG_OPT_KEEP_TOKENS: u32 = 2;
pub const KVREG_OPT_POLL_CAPACITY: u32 = 3;
pub const KVREG_OPT_SHARDS: u32 = 4;
pub const KVREG_OPT_RESERVE_BLOCKS: u32 = 5;
pub const KVREG_OPT_EVENT_MODE: u32 = 6;
pub const KVREG_EVENTS_GLOBAL: u64 = 0;
pub const KVREG_EVENTS_PER_TIER: u64 = 1;

// ---- Registry ---------------------------------------------------------------------------
#[repr(C)]
pub struct kvreg_registry {
    _private: [u8; 0],
}

pub const KVREG_STAT_HASHES: u32 = 1;
pub const KVREG_STAT_POOLS: u32 = 2;
pub const KVREG_STAT_EVENTS_REGISTER: u32 = 3;
pub const KVREG_STAT_EVENTS_REMOVE: u32 = 4;
pub const KVREG_STAT_EVENTS_DROPPED: u32 = 5;
pub const KVREG_STAT_EVENTS_QUEUED: u32 = 6;
pub const KVREG_STAT_NEXT_EVENT_ID: u32 = 7;
pub const KVREG_STAT_TOKEN_BYTES: u32 = 8;
pub const KVREG_STAT_EVENTS_CLEARED: u32 = 9;

/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_snapshot {
    _private: [u8; 0],
}

// ---- Pools and blocks -------------------------------------------------------------------
#[repr(C)]
pub struct kvreg_pool {
    _private: [u8; 0],
}

// KVREG_MAX_POOLS is deliberately not mirrored: the limit grows between library versions that
// keep the same soname (255, then 65535), so a copy compiled into a program would be wrong when it
// runs against a newer library. kvreg_pool_new reports the real limit with KVREG_EOVERFLOW.

pub type kvreg_block = u64;
pub const KVREG_BLOCK_NONE: kvreg_block = 0;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct kvreg_block_desc {
    pub sequence_hash: u64,
    pub block_hash: u64,
    pub parent_sequence_hash: u64,
    pub has_parent: u32,
    pub block_size: u32,
    pub tokens: *const u32,
    pub n_tokens: usize,
}

extern "C" {
    pub fn kvreg_strerror(status: c_int) -> *const c_char;
    pub fn kvreg_version_number() -> c_uint;
    pub fn kvreg_version_string() -> *const c_char;
    pub fn kvreg_features() -> c_uint;

    pub fn kvreg_block_hash(tokens: *const u32, n_tokens: usize, salt: u64) -> u64;
    pub fn kvreg_sequence_hash(parent_sequence_hash: u64, block_hash: u64, salt: u64) -> u64;
    pub fn kvreg_hash_blocks(
        tokens: *const u32,
        n_tokens: usize,
        block_size: u32,
        salt: u64,
        out: *mut kvreg_block_info,
        out_cap: usize,
        n_blocks: *mut usize,
    ) -> c_int;

    pub fn kvreg_sequence_new(out: *mut *mut kvreg_sequence, block_size: u32, salt: u64) -> c_int;
    pub fn kvreg_sequence_free(seq: *mut kvreg_sequence);
    pub fn kvreg_sequence_extend(
        seq: *mut kvreg_sequence,
        tokens: *const u32,
        n_tokens: usize,
        n_completed: *mut usize,
    ) -> c_int;
    pub fn kvreg_sequence_append(seq: *mut kvreg_sequence, token: u32, completed: *mut c_int)
        -> c_int;
    pub fn kvreg_sequence_truncate(seq: *mut kvreg_sequence, n_tokens: usize) -> c_int;
    pub fn kvreg_sequence_unwind(seq: *mut kvreg_sequence, n: usize) -> c_int;
    pub fn kvreg_sequence_pop(seq: *mut kvreg_sequence, token: *mut u32) -> c_int;
    pub fn kvreg_sequence_reset(seq: *mut kvreg_sequence) -> c_int;
    pub fn kvreg_sequence_num_blocks(seq: *const kvreg_sequence) -> usize;
    pub fn kvreg_sequence_total_tokens(seq: *const kvreg_sequence) -> usize;
    pub fn kvreg_sequence_block_size(seq: *const kvreg_sequence) -> u32;
    pub fn kvreg_sequence_salt(seq: *const kvreg_sequence) -> u64;
    pub fn kvreg_sequence_block(
        seq: *const kvreg_sequence,
        index: usize,
        out: *mut kvreg_block_info,
    ) -> c_int;
    pub fn kvreg_sequence_block_tokens(
        seq: *const kvreg_sequence,
        index: usize,
        tokens: *mut *const u32,
        n_tokens: *mut usize,
    ) -> c_int;
    pub fn kvreg_sequence_partial_tokens(
        seq: *const kvreg_sequence,
        tokens: *mut *const u32,
        n_tokens: *mut usize,
    ) -> c_int;

    pub fn kvreg_config_new(out: *mut *mut kvreg_config) -> c_int;
    pub fn kvreg_config_free(cfg: *mut kvreg_config);
    pub fn kvreg_config_set(cfg: *mut kvreg_config, option: u32, value: u64) -> c_int;
    pub fn kvreg_config_set_event_fn(
        cfg: *mut kvreg_config,
        f: kvreg_event_fn,
        user_data: *mut c_void,
        destroy: kvreg_destroy_fn,
    ) -> c_int;

    pub fn kvreg_registry_new(out: *mut *mut kvreg_registry, cfg: *const kvreg_config) -> c_int;
    pub fn kvreg_registry_free(reg: *mut kvreg_registry);
    pub fn kvreg_registry_set_event_fn(
        reg: *mut kvreg_registry,
        f: kvreg_event_fn,
        user_data: *mut c_void,
        destroy: kvreg_destroy_fn,
    ) -> c_int;
    pub fn kvreg_registry_poll(
        reg: *mut kvreg_registry,
        out: *mut kvreg_event,
        cap: usize,
        n_events: *mut usize,
    ) -> c_int;
    pub fn kvreg_registry_poll_wait(
        reg: *mut kvreg_registry,
        out: *mut kvreg_event,
        cap: usize,
        n_events: *mut usize,
        timeout_ms: c_int,
    ) -> c_int;
    pub fn kvreg_registry_wakeup(reg: *mut kvreg_registry) -> c_int;
    pub fn kvreg_registry_flush(reg: *mut kvreg_registry) -> c_int;
    pub fn kvreg_registry_contains(
        reg: *const kvreg_registry,
        sequence_hash: u64,
        present: *mut c_int,
    ) -> c_int;
    pub fn kvreg_registry_stat(reg: *const kvreg_registry, stat: u32, value: *mut u64) -> c_int;
    pub fn kvreg_registry_clear(reg: *mut kvreg_registry) -> c_int;
    pub fn kvreg_registry_snapshot(reg: *mut kvreg_registry, out: *mut *mut kvreg_snapshot)
        -> c_int;
    pub fn kvreg_snapshot_free(snap: *mut kvreg_snapshot);
    pub fn kvreg_snapshot_position(snap: *const kvreg_snapshot) -> u64;
    pub fn kvreg_snapshot_events(
        snap: *const kvreg_snapshot,
        events: *mut *const kvreg_event,
        n_events: *mut usize,
    ) -> c_int;

    pub fn kvreg_pool_new(
        out: *mut *mut kvreg_pool,
        reg: *mut kvreg_registry,
        name: *const c_char,
    ) -> c_int;
    pub fn kvreg_pool_new_medium(
        out: *mut *mut kvreg_pool,
        reg: *mut kvreg_registry,
        name: *const c_char,
        medium: u32,
    ) -> c_int;
    pub fn kvreg_pool_medium(pool: *const kvreg_pool) -> u32;
    pub fn kvreg_pool_free(pool: *mut kvreg_pool);
    pub fn kvreg_pool_id(pool: *const kvreg_pool) -> u32;
    pub fn kvreg_pool_name(pool: *const kvreg_pool) -> *const c_char;
    pub fn kvreg_pool_size(pool: *const kvreg_pool) -> usize;

    pub fn kvreg_register(
        pool: *mut kvreg_pool,
        desc: *const kvreg_block_desc,
        out: *mut kvreg_block,
    ) -> c_int;
    pub fn kvreg_register_batch(
        pool: *mut kvreg_pool,
        descs: *const kvreg_block_desc,
        n: usize,
        out_blocks: *mut kvreg_block,
        out_status: *mut c_int,
        n_registered: *mut usize,
    ) -> c_int;
    pub fn kvreg_register_sequence_block(
        pool: *mut kvreg_pool,
        seq: *const kvreg_sequence,
        index: usize,
        out: *mut kvreg_block,
    ) -> c_int;
    pub fn kvreg_register_sequence(
        pool: *mut kvreg_pool,
        seq: *const kvreg_sequence,
        first: usize,
        count: usize,
        out_blocks: *mut kvreg_block,
        out_status: *mut c_int,
        n_registered: *mut usize,
    ) -> c_int;
    pub fn kvreg_acquire(pool: *mut kvreg_pool, sequence_hash: u64, out: *mut kvreg_block)
        -> c_int;
    pub fn kvreg_acquire_prefix(
        pool: *mut kvreg_pool,
        hashes: *const u64,
        n: usize,
        out_blocks: *mut kvreg_block,
        n_acquired: *mut usize,
    ) -> c_int;
    pub fn kvreg_release(pool: *mut kvreg_pool, block: kvreg_block) -> c_int;
    pub fn kvreg_release_batch(
        pool: *mut kvreg_pool,
        blocks: *const kvreg_block,
        n: usize,
        out_status: *mut c_int,
        n_released: *mut usize,
    ) -> c_int;

    pub fn kvreg_pool_contains(
        pool: *const kvreg_pool,
        sequence_hash: u64,
        present: *mut c_int,
    ) -> c_int;
    pub fn kvreg_pool_match(
        pool: *const kvreg_pool,
        hashes: *const u64,
        n: usize,
        n_matched: *mut usize,
    ) -> c_int;
    pub fn kvreg_block_get_info(
        pool: *const kvreg_pool,
        block: kvreg_block,
        out: *mut kvreg_block_info,
    ) -> c_int;
    pub fn kvreg_block_refcount(
        pool: *const kvreg_pool,
        block: kvreg_block,
        refcount: *mut u32,
    ) -> c_int;
    pub fn kvreg_block_tokens(
        pool: *const kvreg_pool,
        block: kvreg_block,
        out: *mut u32,
        cap: usize,
        n_tokens: *mut usize,
    ) -> c_int;
}

mod wire;
pub use crate::wire::*;
mod nats;
pub use crate::nats::*;

#[cfg(test)]
mod header;
#[cfg(test)]
mod layout;
