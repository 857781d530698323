/* Encoders: the spec's worked examples byte for byte, the Dynamo shapes, the options, and the
 * events a format cannot carry (a clear status, nothing half-encoded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg_wire.h>
#include <stdio.h>
#include <string.h>

#include "wire_bytes.h"
#include "wire_examples.h"

static void encode_all(uint32_t format, const kvreg_event *ev, size_t n, const uint8_t **p,
                       size_t *len, kvreg_wire_encoder **enc)
{
    size_t used = 0;
    assert_int_equal(kvreg_wire_encoder_new(enc, format), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(*enc, ev, n, 1.5, &used, p, len), KVREG_OK);
    assert_int_equal(used, n);
}

/* The spec's example events through `format` give exactly the bytes of `spec`. */
static void check_example(uint32_t format, const char *spec, size_t spec_len)
{
    uint8_t want[512];
    size_t want_len = wire_bytes(spec, want, sizeof want);
    assert_int_equal(want_len, spec_len); /* the listing was copied right */
    kvreg_event ev[4];
    example_events(ev);
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len;
    encode_all(format, ev, 4, &p, &len, &enc);
    assert_int_equal(len, want_len);
    assert_memory_equal(p, want, len);
    kvreg_wire_encoder_free(enc);
}

static void test_example_a_byte_exact(void **state)
{
    (void)state;
    check_example(KVREG_WIRE_VLLM, EXAMPLE_A, EXAMPLE_A_LEN);
}

static void test_example_b_byte_exact(void **state)
{
    (void)state;
    check_example(KVREG_WIRE_VLLM_LEGACY, EXAMPLE_B, EXAMPLE_B_LEN);
}

/* One CPU Register of sequence hash 5 with n tokens, encoded in the legacy vLLM form with DP
 * rank 300 and LoRA "ad", gives exactly the bytes of `spec`. */
static void check_legacy_one(const uint32_t *tok, uint32_t n, const char *spec)
{
    kvreg_event ev = {0};
    ev.kind = KVREG_EVENT_REGISTER, ev.sequence_hash = 5, ev.n_tokens = n, ev.tokens = tok;
    ev.medium = KVREG_MEDIUM_CPU;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM_LEGACY), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_DP_RANK, 300), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set_lora_name(enc, "ad"), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, &ev, 1, 2.0, &used, &p, &len), KVREG_OK);
    uint8_t want[128];
    size_t want_len = wire_bytes(spec, want, sizeof want);
    assert_int_equal(len, want_len);
    assert_memory_equal(p, want, len);
    kvreg_wire_encoder_free(enc);
}

/* Small hashes still take the 9-byte form; tokens and the DP rank take the smallest. */
static void test_small_hash_uses_u64_form(void **state)
{
    (void)state;
    static const uint32_t tok[1] = {300};
    check_legacy_one(tok, 1,
        "93 cb4000000000000000 91"
        " 9c ab \"BlockStored\" 91 cf0000000000000005 c0 91 cd012c 01 c0 a3 \"CPU\" a2 \"ad\""
        "  91 c0 00 ae \"full_attention\" c0"
        " cd012c");
}

/* Token ids take the smallest unsigned form on each side of every boundary (the encoder writes
 * a block's ids in one loop, not one packer call each). */
static void test_token_forms(void **state)
{
    (void)state;
    static const uint32_t tok[8] = {0, 127, 128, 255, 256, 65535, 65536, 4294967295u};
    check_legacy_one(tok, 8,
        "93 cb4000000000000000 91"
        " 9c ab \"BlockStored\" 91 cf0000000000000005 c0"
        " 98 00 7f cc80 ccff cd0100 cdffff ce00010000 ceffffffff"
        " 08 c0 a3 \"CPU\" a2 \"ad\""
        "  91 c0 00 ae \"full_attention\" c0"
        " cd012c");
}

static void test_dynamo_json(void **state)
{
    (void)state;
    kvreg_event ev[4];
    example_events(ev);
    ev[2].medium = KVREG_MEDIUM_STORAGE;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_WORKER_ID, 7), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_DP_RANK, 2), KVREG_OK);
    /* 0.5's ids: the kvreg event_id of each group's first event */
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_EVENT_IDS,
                                            KVREG_WIRE_EVENT_IDS_KVREG), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, ev, 4, -1.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, 4);
    const char *want =
        "[{\"worker_id\":7,\"storage_tier\":\"device\",\"event\":{\"event_id\":10,\"data\":"
        "{\"stored\":{\"parent_hash\":null,\"blocks\":["
        "{\"block_hash\":15760518052499183552,\"tokens_hash\":111},"
        "{\"block_hash\":2246800662264969608,\"tokens_hash\":222}]}},\"dp_rank\":2}},"
        "{\"worker_id\":7,\"storage_tier\":\"disk\",\"event\":{\"event_id\":12,\"data\":"
        "{\"removed\":{\"block_hashes\":[2246800662264969608]}},\"dp_rank\":2}},"
        "{\"worker_id\":7,\"storage_tier\":\"device\",\"event\":{\"event_id\":13,\"data\":"
        "\"cleared\",\"dp_rank\":2}}]";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(p, want, len);
    kvreg_wire_encoder_free(enc);
}

/* KVREG_WIRE_EVENT_IDS_KVREG (0.5's ids): snapshot events (event_id KVREG_EVENT_ID_SNAPSHOT)
 * get real, contiguous RouterEvent ids from KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, across calls;
 * live events after them keep their own ids (issue 35: they used to go out as
 * 18446744073709551615). */
static void test_dynamo_snapshot_ids(void **state)
{
    (void)state;
    kvreg_event ev[5];
    memset(ev, 0, sizeof ev);
    /* three chains (one block each: no parent links between them) on GPU, then one on CPU */
    for (int k = 0; k < 4; k++) {
        ev[k].kind = KVREG_EVENT_REGISTER;
        ev[k].event_id = KVREG_EVENT_ID_SNAPSHOT;
        ev[k].sequence_hash = 100 + (uint64_t)k;
        ev[k].block_hash = 200 + (uint64_t)k;
        ev[k].medium = k == 3 ? KVREG_MEDIUM_CPU : KVREG_MEDIUM_GPU;
    }
    ev[4].kind = KVREG_EVENT_REMOVE, ev[4].event_id = 44, ev[4].sequence_hash = 100;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    uint64_t next = 99;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_get(enc, KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, &next),
                     KVREG_OK);
    assert_true(next == 0); /* the default */
    assert_int_equal(kvreg_wire_encoder_get(enc, KVREG_WIRE_OPT_EVENT_IDS, &next), KVREG_OK);
    assert_true(next == KVREG_WIRE_EVENT_IDS_CONTIGUOUS); /* the default */
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_EVENT_IDS,
                                            KVREG_WIRE_EVENT_IDS_KVREG), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_EVENT_IDS, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, 40), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, 2), KVREG_OK);
    const char *want[3] = {
        "[{\"worker_id\":0,\"storage_tier\":\"device\",\"event\":{\"event_id\":40,\"data\":"
        "{\"stored\":{\"parent_hash\":null,\"blocks\":[{\"block_hash\":100,\"tokens_hash\":200}]"
        "}},\"dp_rank\":0}},"
        "{\"worker_id\":0,\"storage_tier\":\"device\",\"event\":{\"event_id\":41,\"data\":"
        "{\"stored\":{\"parent_hash\":null,\"blocks\":[{\"block_hash\":101,\"tokens_hash\":201}]"
        "}},\"dp_rank\":0}}]",
        "[{\"worker_id\":0,\"storage_tier\":\"device\",\"event\":{\"event_id\":42,\"data\":"
        "{\"stored\":{\"parent_hash\":null,\"blocks\":[{\"block_hash\":102,\"tokens_hash\":202}]"
        "}},\"dp_rank\":0}},"
        "{\"worker_id\":0,\"storage_tier\":\"host_pinned\",\"event\":{\"event_id\":43,\"data\":"
        "{\"stored\":{\"parent_hash\":null,\"blocks\":[{\"block_hash\":103,\"tokens_hash\":203}]"
        "}},\"dp_rank\":0}}]",
        /* the live event after the snapshot keeps its own id, 44: the caller chose 40 so
         * that the snapshot's four RouterEvents, 40..43, end right before it */
        "[{\"worker_id\":0,\"storage_tier\":\"device\",\"event\":{\"event_id\":44,\"data\":"
        "{\"removed\":{\"block_hashes\":[100]}},\"dp_rank\":0}}]",
    };
    size_t at = 0;
    for (int call = 0; call < 3; call++) {
        assert_int_equal(kvreg_wire_encode(enc, ev + at, 5 - at, 1.0, &used, &p, &len), KVREG_OK);
        assert_int_equal(used, call < 2 ? 2 : 1);
        at += used;
        assert_int_equal(len, strlen(want[call]));
        assert_memory_equal(p, want[call], len);
    }
    assert_int_equal(kvreg_wire_encoder_get(enc, KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, &next),
                     KVREG_OK);
    assert_true(next == 44);
    assert_int_equal(kvreg_wire_encoder_get(enc, 99, &next), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_get(NULL, KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, &next),
                     KVREG_EINVAL);
    kvreg_wire_encoder_free(enc);
}

/* The RouterEvent ids of a JSON payload, in order, as a Dynamo consumer reads them (the
 * "event_id" values; worker and DP rank are fixed in these tests). */
static size_t json_ids(const uint8_t *p, size_t len, uint64_t *ids, size_t cap)
{
    size_t n = 0;
    static const char key[] = "\"event_id\":";
    for (size_t i = 0; i + sizeof key - 1 < len; i++) {
        if (memcmp(p + i, key, sizeof key - 1) != 0)
            continue;
        uint64_t v = 0;
        for (i += sizeof key - 1; i < len && p[i] >= '0' && p[i] <= '9'; i++)
            v = v * 10 + (uint64_t)(p[i] - '0');
        assert_true(n < cap);
        ids[n++] = v;
    }
    return n;
}

/* The default ids (KVREG_WIRE_EVENT_IDS_CONTIGUOUS): a live batch, a snapshot, a live batch
 * give RouterEvent ids that are contiguous and unique, as Dynamo's consumers check them (each
 * the previous + 1). Before 0.6 the snapshot took ids from 0 while live RouterEvents carried
 * kvreg ids: the snapshot's ids repeated the live ones and the run had holes (issue 35). */
static void test_dynamo_ids_contiguous(void **state)
{
    (void)state;
    /* live: a two-block chain (one RouterEvent, kvreg ids 1, 2), a remove (3) */
    kvreg_event live1[3], snap[3], live2[2];
    memset(live1, 0, sizeof live1), memset(snap, 0, sizeof snap), memset(live2, 0, sizeof live2);
    for (int k = 0; k < 2; k++) {
        live1[k].kind = KVREG_EVENT_REGISTER, live1[k].event_id = 1 + (uint64_t)k;
        live1[k].sequence_hash = 10 + (uint64_t)k, live1[k].block_hash = 20 + (uint64_t)k;
        live1[k].has_parent = k > 0, live1[k].parent_sequence_hash = 10;
    }
    live1[2].kind = KVREG_EVENT_REMOVE, live1[2].event_id = 3, live1[2].sequence_hash = 11;
    /* snapshot: Cleared, then two chains of one block each (three RouterEvents) */
    snap[0].kind = KVREG_EVENT_CLEARED;
    for (int k = 0; k < 3; k++)
        snap[k].event_id = KVREG_EVENT_ID_SNAPSHOT;
    for (int k = 1; k < 3; k++) {
        snap[k].kind = KVREG_EVENT_REGISTER;
        snap[k].sequence_hash = 30 + (uint64_t)k, snap[k].block_hash = 40 + (uint64_t)k;
    }
    /* live again: kvreg ids 4, 5 (a register, a remove on another medium) */
    live2[0].kind = KVREG_EVENT_REGISTER, live2[0].event_id = 4, live2[0].sequence_hash = 50;
    live2[1].kind = KVREG_EVENT_REMOVE, live2[1].event_id = 5, live2[1].sequence_hash = 31;
    live2[1].medium = KVREG_MEDIUM_CPU;

    kvreg_wire_encoder *enc;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    const kvreg_event *parts[3] = {live1, snap, live2};
    const size_t counts[3] = {3, 3, 2};
    uint64_t ids[16];
    size_t n_ids = 0;
    for (int b = 0; b < 3; b++) {
        const uint8_t *p;
        size_t len, used;
        assert_int_equal(kvreg_wire_encode(enc, parts[b], counts[b], 1.0, &used, &p, &len),
                         KVREG_OK);
        assert_int_equal(used, counts[b]);
        n_ids += json_ids(p, len, ids + n_ids, 16 - n_ids);
    }
    /* RouterEvents: chain, remove | cleared, stored, stored | stored, removed */
    assert_int_equal(n_ids, 7);
    for (size_t i = 0; i < n_ids; i++)
        assert_true(ids[i] == i); /* from the default start, 0, one up each */
    uint64_t next = 0;
    assert_int_equal(kvreg_wire_encoder_get(enc, KVREG_WIRE_OPT_NEXT_EVENT_ID, &next), KVREG_OK);
    assert_true(next == 7);

    /* a retry of live events (the same first event, cut smaller) reuses their ids */
    kvreg_event live3[2];
    memcpy(live3, live2, sizeof live3);
    live3[0].event_id = 6, live3[1].event_id = 7;
    const uint8_t *p;
    size_t len, used;
    assert_int_equal(kvreg_wire_encode(enc, live3, 2, 1.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(json_ids(p, len, ids, 16), 2);
    assert_true(ids[0] == 7 && ids[1] == 8);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, 1), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, live3, 2, 1.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, 1);
    assert_int_equal(json_ids(p, len, ids, 16), 1);
    assert_true(ids[0] == 7);
    assert_int_equal(kvreg_wire_encode(enc, live3 + 1, 1, 1.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(json_ids(p, len, ids, 16), 1);
    assert_true(ids[0] == 8);
    /* a resuming worker sets where its ids go on */
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_NEXT_EVENT_ID, 1000), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, live3 + 1, 1, 1.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(json_ids(p, len, ids, 16), 1);
    assert_true(ids[0] == 1000);
    kvreg_wire_encoder_free(enc);
}

/* A one-event Dynamo msgpack payload: the named-field maps, written out by hand. */
static void test_dynamo_msgpack(void **state)
{
    (void)state;
    kvreg_event ev = {0};
    ev.kind = KVREG_EVENT_REMOVE, ev.event_id = 3, ev.sequence_hash = 9;
    ev.medium = KVREG_MEDIUM_CPU;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_MSGPACK), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, &ev, 1, 0, &used, &p, &len), KVREG_OK);
    uint8_t want[128];
    size_t want_len = wire_bytes(
        "91 83 a9 \"worker_id\" 00 ac \"storage_tier\" ab \"host_pinned\""
        " a5 \"event\" 83 a8 \"event_id\" 00 a4 \"data\" 81 a7 \"removed\""
        "  81 ac \"block_hashes\" 91 cf0000000000000009 a7 \"dp_rank\" 00", want, sizeof want);
    assert_int_equal(len, want_len);
    assert_memory_equal(p, want, len);
    kvreg_wire_encoder_free(enc);
}

/* Grouping: a chain break (other parent, other medium, other token count) starts a new
 * stored event; removes of a run group per medium in order of first appearance. */
static void test_grouping(void **state)
{
    (void)state;
    static const uint32_t t4[4] = {1, 2, 3, 4};
    kvreg_event ev[8];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 8; i++)
        ev[i].event_id = (uint64_t)i, ev[i].tokens = t4, ev[i].n_tokens = 2;
    for (int i = 0; i < 4; i++)
        ev[i].kind = KVREG_EVENT_REGISTER, ev[i].sequence_hash = 100 + (uint64_t)i;
    ev[1].has_parent = 1, ev[1].parent_sequence_hash = 100;      /* continues 0 */
    ev[2].has_parent = 1, ev[2].parent_sequence_hash = 999;      /* breaks */
    ev[3].has_parent = 1, ev[3].parent_sequence_hash = 102, ev[3].n_tokens = 4; /* breaks */
    for (int i = 4; i < 8; i++)
        ev[i].kind = KVREG_EVENT_REMOVE, ev[i].sequence_hash = 200 + (uint64_t)i,
        ev[i].n_tokens = 0;
    ev[5].medium = KVREG_MEDIUM_CPU;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used, n;
    const kvreg_wire_event *out;
    kvreg_wire_decoder *dec;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, ev, 8, 1, &used, &p, &len), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, p, len, &out, &n, NULL), KVREG_OK);
    assert_int_equal(n, 5);
    assert_int_equal(out[0].n_block_hashes, 2);
    assert_int_equal(out[1].n_block_hashes, 1);
    assert_int_equal(out[1].parent_block_hash, 999);
    assert_int_equal(out[2].n_block_hashes, 1);
    assert_int_equal(out[2].block_size, 4);
    assert_int_equal(out[3].type, KVREG_WIRE_REMOVED);
    assert_int_equal(out[3].medium, KVREG_MEDIUM_GPU);
    assert_int_equal(out[3].n_block_hashes, 3);
    assert_int_equal(out[3].block_hashes[0], 204);
    assert_int_equal(out[3].block_hashes[1], 206);
    assert_int_equal(out[3].block_hashes[2], 207);
    assert_int_equal(out[4].medium, KVREG_MEDIUM_CPU);
    assert_int_equal(out[4].block_hashes[0], 205);
    kvreg_wire_decoder_free(dec);
    kvreg_wire_encoder_free(enc);
}

/* MAX_EVENTS bounds one payload; the rest comes in the next call. */
static void test_max_events(void **state)
{
    (void)state;
    kvreg_event ev[5];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 5; i++)
        ev[i].kind = KVREG_EVENT_REMOVE, ev[i].sequence_hash = (uint64_t)i + 1;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, 2), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, ev, 5, 1, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, 2);
    assert_int_equal(kvreg_wire_encode(enc, ev + 4, 1, 1, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, 1);
    kvreg_wire_encoder_free(enc);
}

/* A Register without tokens: vLLM formats stop before it and then report KVREG_ESTATE for
 * it; Dynamo takes it. A token count other than BLOCK_SIZE is the same. */
static void test_tokenless_and_block_size(void **state)
{
    (void)state;
    static const uint32_t t2[2] = {1, 2};
    kvreg_event ev[3];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 3; i++)
        ev[i].kind = KVREG_EVENT_REGISTER, ev[i].sequence_hash = 10 + (uint64_t)i;
    ev[0].tokens = t2, ev[0].n_tokens = 2;
    ev[2].tokens = t2, ev[2].n_tokens = 1;
    kvreg_wire_encoder *enc;
    const uint8_t *p = NULL;
    size_t len = 0, used = 99;
    for (uint32_t f = KVREG_WIRE_VLLM; f <= KVREG_WIRE_VLLM_LEGACY; f++) {
        assert_int_equal(kvreg_wire_encoder_new(&enc, f), KVREG_OK);
        assert_int_equal(kvreg_wire_encode(enc, ev, 3, 1, &used, &p, &len), KVREG_OK);
        assert_int_equal(used, 1);
        assert_int_equal(kvreg_wire_encode(enc, ev + 1, 2, 1, &used, &p, &len), KVREG_ESTATE);
        assert_int_equal(used, 0);
        assert_int_equal(kvreg_wire_encode(enc, ev + 2, 1, 1, &used, &p, &len), KVREG_OK);
        assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_BLOCK_SIZE, 2), KVREG_OK);
        assert_int_equal(kvreg_wire_encode(enc, ev + 2, 1, 1, &used, &p, &len), KVREG_ESTATE);
        assert_int_equal(kvreg_wire_encode(enc, ev, 1, 1, &used, &p, &len), KVREG_OK);
        kvreg_wire_encoder_free(enc);
    }
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, ev, 3, 1, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, 3);
    kvreg_wire_encoder_free(enc);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    kvreg_event ev = {0};
    assert_int_equal(kvreg_wire_encoder_new(&enc, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_SGLANG), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_new(NULL, KVREG_WIRE_VLLM), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, 99, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_DP_RANK, UINT64_C(1) << 31),
                     KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encode(enc, NULL, 1, 1, &used, &p, &len), KVREG_EINVAL);
    ev.kind = 9;
    assert_int_equal(kvreg_wire_encode(enc, &ev, 1, 1, &used, &p, &len), KVREG_EINVAL);
    ev.kind = KVREG_EVENT_REMOVE, ev.medium = KVREG_MEDIUM_COUNT;
    assert_int_equal(kvreg_wire_encode(enc, &ev, 1, 1, &used, &p, &len), KVREG_EINVAL);
    /* no events: an empty batch */
    assert_int_equal(kvreg_wire_encode(enc, NULL, 0, 1, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, 0);
    assert_int_equal(len, 12);
    kvreg_wire_encoder_free(enc);
    kvreg_wire_encoder_free(NULL);
}

/* A LoRA name is written as a msgpack str, which is UTF-8: a name that is not (bad bytes,
 * overlong forms, surrogates, past U+10FFFF, cut short) is KVREG_EINVAL and the old one
 * stays, where it was taken and every batch with a stored event was then refused whole by
 * msgspec and Python consumers. The same through both publishers' LORA_NAME. */
static void test_lora_name_utf8(void **state)
{
    (void)state;
    static const char *const bad[] = {"lora-\xff\xfe", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",
                                      "\xf4\x90\x80\x80", "ab\xc3", "\xe2\x82", "\x80"};
    static const char *const good[] = {"", "sql-lora", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                       "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf"};
    kvreg_wire_encoder *enc;
    char buf[64];
    size_t len = 0;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set_string(enc, KVREG_WIRE_LORA_NAME, "kept"), KVREG_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(kvreg_wire_encoder_set_string(enc, KVREG_WIRE_LORA_NAME, bad[i]), KVREG_EINVAL);
        assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len), KVREG_OK);
        assert_string_equal(buf, "kept");
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(kvreg_wire_encoder_set_string(enc, KVREG_WIRE_LORA_NAME, good[i]), KVREG_OK);
        assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len), KVREG_OK);
        assert_string_equal(buf, good[i]);
    }
    kvreg_wire_encoder_free(enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_a_byte_exact),
        cmocka_unit_test(test_example_b_byte_exact),
        cmocka_unit_test(test_small_hash_uses_u64_form),
        cmocka_unit_test(test_token_forms),
        cmocka_unit_test(test_dynamo_json),
        cmocka_unit_test(test_dynamo_msgpack),
        cmocka_unit_test(test_dynamo_snapshot_ids),
        cmocka_unit_test(test_dynamo_ids_contiguous),
        cmocka_unit_test(test_grouping),
        cmocka_unit_test(test_max_events),
        cmocka_unit_test(test_tokenless_and_block_size),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_lora_name_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
