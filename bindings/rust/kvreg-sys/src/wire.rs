//! Raw declarations of include/kvreg_wire.h (vLLM / Dynamo wire formats). The symbols exist in
//! every libkvreg >= 0.3; built without the wire feature they return KVREG_ENOTSUP.

use std::os::raw::{c_char, c_int, c_void};

use crate::kvreg_event;

pub const KVREG_WIRE_VLLM: u32 = 1;
pub const KVREG_WIRE_VLLM_LEGACY: u32 = 2;
pub const KVREG_WIRE_DYNAMO_JSON: u32 = 3;
pub const KVREG_WIRE_DYNAMO_MSGPACK: u32 = 4;
pub const KVREG_WIRE_SGLANG: u32 = 5;

pub const KVREG_WIRE_OPT_DP_RANK: u32 = 1;
pub const KVREG_WIRE_OPT_MAX_EVENTS: u32 = 2;
pub const KVREG_WIRE_OPT_WORKER_ID: u32 = 3;
pub const KVREG_WIRE_OPT_BLOCK_SIZE: u32 = 4;

pub const KVREG_WIRE_STORED: u32 = 1;
pub const KVREG_WIRE_REMOVED: u32 = 2;
pub const KVREG_WIRE_CLEARED: u32 = 3;

pub const KVREG_MEDIUM_UNKNOWN: u32 = u32::MAX;

pub const KVREG_WIRE_STAT_BATCHES: u32 = 1;
pub const KVREG_WIRE_STAT_REJECTED: u32 = 2;
pub const KVREG_WIRE_STAT_EVENTS: u32 = 3;
pub const KVREG_WIRE_STAT_SKIPPED: u32 = 4;

/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_wire_encoder {
    _private: [u8; 0],
}

/// Opaque; only ever used behind a pointer.
#[repr(C)]
pub struct kvreg_wire_decoder {
    _private: [u8; 0],
}

/// One decoded event; its pointers are borrowed from the decoder until its next call.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct kvreg_wire_event {
    pub type_: u32,
    pub medium: u32,
    pub block_hashes: *const u64,
    pub n_block_hashes: usize,
    pub parent_block_hash: u64,
    pub has_parent: u32,
    pub block_size: u32,
    pub token_ids: *const u32,
    pub n_token_ids: usize,
    pub medium_name: *const c_char,
    pub lora_name: *const c_char,
    pub group_idx: i64,
    pub has_group_idx: u32,
    pub has_dp_rank: u32,
    pub dp_rank: i64,
    pub ts: f64,
    pub worker_id: u64,
    pub event_id: u64,
    pub tokens_hashes: *const u64,
    pub reserved: [u64; 3],
}

extern "C" {
    pub fn kvreg_wire_encoder_new(out: *mut *mut kvreg_wire_encoder, format: u32) -> c_int;
    pub fn kvreg_wire_encoder_free(enc: *mut kvreg_wire_encoder);
    pub fn kvreg_wire_encoder_set(enc: *mut kvreg_wire_encoder, option: u32, value: u64) -> c_int;
    pub fn kvreg_wire_encoder_set_lora_name(
        enc: *mut kvreg_wire_encoder,
        lora_name: *const c_char,
    ) -> c_int;
    pub fn kvreg_wire_encode(
        enc: *mut kvreg_wire_encoder,
        events: *const kvreg_event,
        n: usize,
        ts: f64,
        n_consumed: *mut usize,
        payload: *mut *const u8,
        payload_len: *mut usize,
    ) -> c_int;

    pub fn kvreg_wire_decoder_new(out: *mut *mut kvreg_wire_decoder, format: u32) -> c_int;
    pub fn kvreg_wire_decoder_free(dec: *mut kvreg_wire_decoder);
    pub fn kvreg_wire_decode(
        dec: *mut kvreg_wire_decoder,
        payload: *const c_void,
        len: usize,
        events: *mut *const kvreg_wire_event,
        n_events: *mut usize,
        error_offset: *mut usize,
    ) -> c_int;
    pub fn kvreg_wire_decoder_error(dec: *const kvreg_wire_decoder) -> *const c_char;
    pub fn kvreg_wire_decoder_stat(dec: *const kvreg_wire_decoder, stat: u32, value: *mut u64)
        -> c_int;
}
