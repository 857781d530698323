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
/// 0.5 name of KVREG_WIRE_OPT_NEXT_EVENT_ID (the same option).
pub const KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID: u32 = 5;
pub const KVREG_WIRE_OPT_NEXT_EVENT_ID: u32 = 5;
pub const KVREG_WIRE_OPT_EVENT_IDS: u32 = 6;
pub const KVREG_WIRE_EVENT_IDS_CONTIGUOUS: u64 = 0;
pub const KVREG_WIRE_EVENT_IDS_KVREG: u64 = 1;

pub const KVREG_WIRE_DEC_OPT_MAX_PAYLOAD: u32 = 1;
pub const KVREG_WIRE_DEC_OPT_MAX_DEPTH: u32 = 2;
pub const KVREG_WIRE_DEC_OPT_MAX_EVENTS: u32 = 3;

pub const KVREG_WIRE_FIELD_ABSENT: u32 = 0;
pub const KVREG_WIRE_FIELD_NIL: u32 = 1;
pub const KVREG_WIRE_FIELD_SET: u32 = 2;

pub const KVREG_WIRE_SHAPE_MAP: u32 = 1;
pub const KVREG_WIRE_SHAPE_ARRAY: u32 = 2;
pub const KVREG_WIRE_SHAPE_DYNAMO: u32 = 3;

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

/// One multimodal object of a Dynamo stored block (0.6).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct kvreg_wire_mm_object {
    pub mm_hash: u64,
    pub block: u32,
    pub n_offsets: u32,
    pub first_offset: usize,
}

/// Decoded fields beyond kvreg_wire_event (size-versioned: set struct_size). 248 bytes on
/// LP64 since 0.6 (168 in 0.5, a prefix of this).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct kvreg_wire_event_ext {
    pub struct_size: u32,
    pub shape: u32,
    pub tag: *const c_char,
    pub n_fields: u32,
    pub medium_form: u32,
    pub lora_name_form: u32,
    pub lora_id_form: u32,
    pub lora_id: i64,
    pub token_pairs: u32,
    pub group_idx_form: u32,
    pub pair_token_ids: *const u32,
    pub n_pair_token_ids: usize,
    pub cache_salt: *const c_char,
    pub cache_salt_form: u32,
    pub kv_cache_spec_kind_form: u32,
    pub kv_cache_spec_kind: *const c_char,
    pub sliding_window_form: u32,
    pub extra_keys_form: u32,
    pub kv_cache_spec_sliding_window: i64,
    pub extra_keys: *const u8,
    pub extra_keys_len: usize,
    pub locality: *const c_char,
    pub ownership: *const c_char,
    pub session_id: *const c_char,
    pub locality_form: u32,
    pub ownership_form: u32,
    pub session_id_form: u32,
    pub block_size_form: u32,
    pub parent_form: u32,
    pub reserved32: u32,
    pub start_position_form: u32,
    pub start_position: u32,
    pub mm_extra_info_forms: *const u8,
    pub mm_objects: *const kvreg_wire_mm_object,
    pub n_mm_objects: usize,
    pub mm_offsets: *const u64,
    pub n_mm_offsets: usize,
    pub residency_domain: *const c_char,
    pub residency_domain_form: u32,
    pub state_source_form: u32,
    pub state_source: *const u8,
    pub state_source_len: usize,
}

extern "C" {
    /// 0.5
    pub fn kvreg_wire_encoder_get(enc: *const kvreg_wire_encoder, option: u32, value: *mut u64)
        -> c_int;
    /// 0.5
    pub fn kvreg_wire_decoder_set(dec: *mut kvreg_wire_decoder, option: u32, value: u64) -> c_int;
    /// 0.5
    pub fn kvreg_wire_decoder_event_ext(
        dec: *const kvreg_wire_decoder,
        index: usize,
        ext: *mut kvreg_wire_event_ext,
    ) -> c_int;
    /// 0.5 (Dynamo formats since 0.6)
    pub fn kvreg_wire_decoder_reencode(
        dec: *mut kvreg_wire_decoder,
        payload: *mut *const u8,
        payload_len: *mut usize,
    ) -> c_int;

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
