//! The repr(C) structs must have exactly the C layout: a wrong field order or width would make
//! the library read garbage without any compile error. Expected numbers are worked out by hand
//! from the C declarations in include/kvreg.h (LP64: pointers and size_t are 8 bytes).
//! `offset_of!` needs rustc 1.77, so offsets come from raw field addresses instead.

use super::*;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::addr_of;

/// Byte offset of a field, computed without creating a reference to uninitialised memory.
macro_rules! offset {
    ($ty:ty, $field:ident) => {{
        let v = MaybeUninit::<$ty>::uninit();
        let base = v.as_ptr();
        // SAFETY: addr_of! only computes the address; nothing is read.
        let field = unsafe { addr_of!((*base).$field) };
        field as usize - base as usize
    }};
}

#[test]
#[cfg(target_pointer_width = "64")]
fn block_info_layout() {
    assert_eq!(size_of::<kvreg_block_info>(), 32);
    assert_eq!(align_of::<kvreg_block_info>(), 8);
    assert_eq!(offset!(kvreg_block_info, block_hash), 0);
    assert_eq!(offset!(kvreg_block_info, sequence_hash), 8);
    assert_eq!(offset!(kvreg_block_info, parent_sequence_hash), 16);
    assert_eq!(offset!(kvreg_block_info, has_parent), 24);
    assert_eq!(offset!(kvreg_block_info, position), 28);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn event_layout() {
    assert_eq!(size_of::<kvreg_event>(), 88);
    assert_eq!(align_of::<kvreg_event>(), 8);
    assert_eq!(offset!(kvreg_event, kind), 0);
    assert_eq!(offset!(kvreg_event, pool_id), 4);
    assert_eq!(offset!(kvreg_event, event_id), 8);
    assert_eq!(offset!(kvreg_event, sequence_hash), 16);
    assert_eq!(offset!(kvreg_event, block_hash), 24);
    assert_eq!(offset!(kvreg_event, parent_sequence_hash), 32);
    assert_eq!(offset!(kvreg_event, has_parent), 40);
    assert_eq!(offset!(kvreg_event, n_tokens), 44);
    assert_eq!(offset!(kvreg_event, tokens), 48);
    // 0.3: medium and reserved32 took reserved[0] of 0.2; the size did not change.
    assert_eq!(offset!(kvreg_event, medium), 56);
    assert_eq!(offset!(kvreg_event, reserved32), 60);
    assert_eq!(offset!(kvreg_event, reserved), 64);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn wire_event_layout() {
    assert_eq!(size_of::<kvreg_wire_event>(), 152);
    assert_eq!(align_of::<kvreg_wire_event>(), 8);
    assert_eq!(offset!(kvreg_wire_event, type_), 0);
    assert_eq!(offset!(kvreg_wire_event, medium), 4);
    assert_eq!(offset!(kvreg_wire_event, block_hashes), 8);
    assert_eq!(offset!(kvreg_wire_event, n_block_hashes), 16);
    assert_eq!(offset!(kvreg_wire_event, parent_block_hash), 24);
    assert_eq!(offset!(kvreg_wire_event, has_parent), 32);
    assert_eq!(offset!(kvreg_wire_event, block_size), 36);
    assert_eq!(offset!(kvreg_wire_event, token_ids), 40);
    assert_eq!(offset!(kvreg_wire_event, n_token_ids), 48);
    assert_eq!(offset!(kvreg_wire_event, medium_name), 56);
    assert_eq!(offset!(kvreg_wire_event, lora_name), 64);
    assert_eq!(offset!(kvreg_wire_event, group_idx), 72);
    assert_eq!(offset!(kvreg_wire_event, has_group_idx), 80);
    assert_eq!(offset!(kvreg_wire_event, has_dp_rank), 84);
    assert_eq!(offset!(kvreg_wire_event, dp_rank), 88);
    assert_eq!(offset!(kvreg_wire_event, ts), 96);
    assert_eq!(offset!(kvreg_wire_event, worker_id), 104);
    assert_eq!(offset!(kvreg_wire_event, event_id), 112);
    assert_eq!(offset!(kvreg_wire_event, tokens_hashes), 120);
    assert_eq!(offset!(kvreg_wire_event, reserved), 128);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn block_desc_layout() {
    assert_eq!(size_of::<kvreg_block_desc>(), 48);
    assert_eq!(align_of::<kvreg_block_desc>(), 8);
    assert_eq!(offset!(kvreg_block_desc, sequence_hash), 0);
    assert_eq!(offset!(kvreg_block_desc, block_hash), 8);
    assert_eq!(offset!(kvreg_block_desc, parent_sequence_hash), 16);
    assert_eq!(offset!(kvreg_block_desc, has_parent), 24);
    assert_eq!(offset!(kvreg_block_desc, block_size), 28);
    assert_eq!(offset!(kvreg_block_desc, tokens), 32);
    assert_eq!(offset!(kvreg_block_desc, n_tokens), 40);
}

#[test]
fn handle_and_callback_widths() {
    // kvreg_block is uint64_t on every target; the callbacks are nullable C function pointers,
    // which Option<fn> represents with no extra tag.
    assert_eq!(size_of::<kvreg_block>(), 8);
    assert_eq!(size_of::<kvreg_event_fn>(), size_of::<*const c_void>());
    assert_eq!(size_of::<kvreg_destroy_fn>(), size_of::<*const c_void>());
}

#[test]
fn strerror_links_and_names_codes() {
    // One real call proves the declarations link against the library under test.
    // SAFETY: kvreg_strerror returns a static NUL-terminated string for any input.
    let known = unsafe { std::ffi::CStr::from_ptr(kvreg_strerror(KVREG_EEXIST)) };
    let unknown = unsafe { std::ffi::CStr::from_ptr(kvreg_strerror(-12345)) };
    assert!(!known.to_bytes().is_empty());
    assert_eq!(unknown.to_str().unwrap(), "unknown error");
}

#[test]
#[cfg(target_pointer_width = "64")]
fn wire_event_ext_layout() {
    assert_eq!(size_of::<kvreg_wire_event_ext>(), 248);
    assert_eq!(offset!(kvreg_wire_event_ext, extra_keys_len), 112);
    assert_eq!(offset!(kvreg_wire_event_ext, reserved32), 164);
    assert_eq!(offset!(kvreg_wire_event_ext, start_position_form), 168);
    assert_eq!(offset!(kvreg_wire_event_ext, mm_extra_info_forms), 176);
    assert_eq!(offset!(kvreg_wire_event_ext, n_mm_offsets), 208);
    assert_eq!(offset!(kvreg_wire_event_ext, residency_domain_form), 224);
    assert_eq!(offset!(kvreg_wire_event_ext, state_source_len), 240);
    assert_eq!(size_of::<kvreg_wire_mm_object>(), 24);
    assert_eq!(offset!(kvreg_wire_mm_object, first_offset), 16);
}
