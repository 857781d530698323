/* Worked examples of vLLM's KVEventBatch, written out byte by byte by hand from vLLM's msgspec
 * rules (docs/design/wire.md): ts 1.5, DP rank 0; BlockStored of H1, H2 (block size 2, tokens 1 2 3 4, no
 * parent, GPU); BlockRemoved([H2], GPU); AllBlocksCleared. And the kvreg events they encode. */
#ifndef WIRE_EXAMPLES_H
#define WIRE_EXAMPLES_H

#include <kvreg.h>

#define EX_H1 UINT64_C(15760518052499183552) /* 0xdab89baa7b5857c0 */
#define EX_H2 UINT64_C(0x1f2e3d4c5b6a7988)

/* A: current vLLM, map events, 285 bytes. */
static const char EXAMPLE_A[] =
    "93 cb3ff8000000000000 93"
    " 8b a4 \"type\" ab \"BlockStored\""
    "  ac \"block_hashes\" 92 cfdab89baa7b5857c0 cf1f2e3d4c5b6a7988"
    "  b1 \"parent_block_hash\" c0"
    "  a9 \"token_ids\" 94 01 02 03 04"
    "  aa \"block_size\" 02"
    "  a7 \"lora_id\" c0"
    "  a6 \"medium\" a3 \"GPU\""
    "  a9 \"lora_name\" c0"
    "  aa \"extra_keys\" 92 c0 c0"
    "  a9 \"group_idx\" 00"
    "  b2 \"kv_cache_spec_kind\" ae \"full_attention\""
    " 84 a4 \"type\" ac \"BlockRemoved\" ac \"block_hashes\" 91 cf1f2e3d4c5b6a7988"
    "  a6 \"medium\" a3 \"GPU\" a9 \"group_idx\" 00"
    " 81 a4 \"type\" b0 \"AllBlocksCleared\""
    " 00";
#define EXAMPLE_A_LEN 285

/* B: vLLM before map events, positional, 124 bytes. */
static const char EXAMPLE_B[] =
    "93 cb3ff8000000000000 93"
    " 9c ab \"BlockStored\" 92 cfdab89baa7b5857c0 cf1f2e3d4c5b6a7988 c0 94 01 02 03 04 02 c0"
    "  a3 \"GPU\" c0 92 c0 c0 00 ae \"full_attention\" c0"
    " 94 ac \"BlockRemoved\" 91 cf1f2e3d4c5b6a7988 a3 \"GPU\" 00"
    " 91 b0 \"AllBlocksCleared\""
    " 00";
#define EXAMPLE_B_LEN 124

static const uint32_t EX_TOKENS[4] = {1, 2, 3, 4};

/* Register H1 (tokens 1 2), Register H2 child of H1 (tokens 3 4), Remove H2, Cleared.
 * block_hash values are arbitrary (vLLM formats do not carry them). */
static inline void example_events(kvreg_event ev[4])
{
    memset(ev, 0, 4 * sizeof *ev);
    ev[0].kind = KVREG_EVENT_REGISTER, ev[0].event_id = 10, ev[0].sequence_hash = EX_H1;
    ev[0].block_hash = 111, ev[0].n_tokens = 2, ev[0].tokens = EX_TOKENS;
    ev[1].kind = KVREG_EVENT_REGISTER, ev[1].event_id = 11, ev[1].sequence_hash = EX_H2;
    ev[1].block_hash = 222, ev[1].has_parent = 1, ev[1].parent_sequence_hash = EX_H1;
    ev[1].n_tokens = 2, ev[1].tokens = EX_TOKENS + 2;
    ev[2].kind = KVREG_EVENT_REMOVE, ev[2].event_id = 12, ev[2].sequence_hash = EX_H2;
    ev[2].block_hash = 222;
    ev[3].kind = KVREG_EVENT_CLEARED, ev[3].event_id = 13;
}

#endif
