/* The public header alone, compiled as strict C99 and C11 with -pedantic -Werror (see
 * tests/abi/meson.build), and its ABI layout pinned: the structs below are shared with
 * bindings by layout, so a changed offset is an ABI break even when every symbol stays. */
#include <kvreg.h>
#include <kvreg_wire.h>
#include <kvreg_index.h>
#include <kvreg_net.h>

#include <stddef.h>
#include <string.h>

#define KVREG_CHECK(name, cond) typedef char kvreg_check_##name[(cond) ? 1 : -1]

#if UINTPTR_MAX == UINT64_MAX /* LP64: the sizes the header documents */
KVREG_CHECK(event_size, sizeof(kvreg_event) == 88);
KVREG_CHECK(event_id, offsetof(kvreg_event, event_id) == 8);
KVREG_CHECK(event_seq, offsetof(kvreg_event, sequence_hash) == 16);
KVREG_CHECK(event_has_parent, offsetof(kvreg_event, has_parent) == 40);
KVREG_CHECK(event_tokens, offsetof(kvreg_event, tokens) == 48);
KVREG_CHECK(event_medium, offsetof(kvreg_event, medium) == 56);
KVREG_CHECK(event_reserved32, offsetof(kvreg_event, reserved32) == 60);
KVREG_CHECK(event_reserved, offsetof(kvreg_event, reserved) == 64);
KVREG_CHECK(desc_size, sizeof(kvreg_block_desc) == 48);
KVREG_CHECK(desc_block_size, offsetof(kvreg_block_desc, block_size) == 28);
KVREG_CHECK(desc_n_tokens, offsetof(kvreg_block_desc, n_tokens) == 40);
KVREG_CHECK(info_size, sizeof(kvreg_block_info) == 32);
KVREG_CHECK(info_position, offsetof(kvreg_block_info, position) == 28);
KVREG_CHECK(wire_event_size, sizeof(kvreg_wire_event) == 152);
KVREG_CHECK(wire_event_ts, offsetof(kvreg_wire_event, ts) == 96);
KVREG_CHECK(wire_event_tokens_hashes, offsetof(kvreg_wire_event, tokens_hashes) == 120);
KVREG_CHECK(wire_event_reserved, offsetof(kvreg_wire_event, reserved) == 128);
KVREG_CHECK(wire_event_ext_size, sizeof(kvreg_wire_event_ext) == 248);
KVREG_CHECK(wire_event_ext_v05_end, offsetof(kvreg_wire_event_ext, start_position_form) == 168);
KVREG_CHECK(wire_event_ext_state_len, offsetof(kvreg_wire_event_ext, state_source_len) == 240);
KVREG_CHECK(wire_mm_object_size, sizeof(kvreg_wire_mm_object) == 24);
KVREG_CHECK(wire_event_ext_extra_len, offsetof(kvreg_wire_event_ext, extra_keys_len) == 112);
KVREG_CHECK(sub_batch_size, sizeof(kvreg_sub_batch) == 120);
KVREG_CHECK(sub_batch_events, offsetof(kvreg_sub_batch, events) == 72);
KVREG_CHECK(sub_notice_size, sizeof(kvreg_sub_notice) == 80);
KVREG_CHECK(sub_notice_message, offsetof(kvreg_sub_notice, message) == 56);
#endif
#if UINTPTR_MAX == UINT64_MAX /* the router-side index's structs (kvreg_index.h) */
KVREG_CHECK(index_match_size, sizeof(kvreg_index_match) == 72);
KVREG_CHECK(index_match_score, offsetof(kvreg_index_match, score) == 48);
KVREG_CHECK(index_depth_size, sizeof(kvreg_index_depth) == 16);
KVREG_CHECK(index_depth_depth, offsetof(kvreg_index_depth, depth) == 12);
KVREG_CHECK(index_info_size, sizeof(kvreg_index_apply_info) == 80);
KVREG_CHECK(index_info_unknown, offsetof(kvreg_index_apply_info, removes_unknown) == 48);
#endif
KVREG_CHECK(block_is_u64, sizeof(kvreg_block) == 8);
KVREG_CHECK(version, KVREG_VERSION_NUMBER == KVREG_VERSION_MAJOR * 10000 +
                         KVREG_VERSION_MINOR * 100 + KVREG_VERSION_PATCH);

int main(void)
{
    /* linked and run: the runtime agrees with the header it was built against */
    if (kvreg_version_number() != KVREG_VERSION_NUMBER)
        return 1;
    if (strcmp(kvreg_version_string(), KVREG_VERSION_STRING) != 0)
        return 1;
    return kvreg_block_hash(NULL, 0, KVREG_ROUTER_SALT) == kvreg_block_hash(NULL, 0, 0) ? 1 : 0;
}
