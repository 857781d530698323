/* Decoders on every shape the spec lists (vLLM map and positional events of each generation,
 * SGLang's three, the outer batch as 2/3/4-element array or map, hashes as u64 / small ints /
 * signed / bytes, unknown keys and event types, Dynamo JSON and msgpack) and on bad payloads
 * (status and exact byte offset). Payloads and expected values are written by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg_wire.h>
#include <string.h>

#include "wire_bytes.h"
#include "wire_examples.h"

static uint8_t buf[4096];

/* Decode spec with format; returns the events (n in *n). */
static const kvreg_wire_event *decode(kvreg_wire_decoder **dec, uint32_t format,
                                      const char *spec, size_t *n)
{
    size_t len = wire_bytes(spec, buf, sizeof buf);
    const kvreg_wire_event *ev = NULL;
    size_t off = 0;
    assert_int_equal(kvreg_wire_decoder_new(dec, format), KVREG_OK);
    int rc = kvreg_wire_decode(*dec, buf, len, &ev, n, &off);
    if (rc != KVREG_OK)
        fail_msg("decode failed: %s", kvreg_wire_decoder_error(*dec));
    return ev;
}

/* Expect KVREG_EPROTO at byte offset want_off (JSON specs are the payload's text). */
static void reject(uint32_t format, const char *spec, size_t want_off)
{
    kvreg_wire_decoder *dec;
    size_t len = strlen(spec);
    if (format == KVREG_WIRE_DYNAMO_JSON)
        memcpy(buf, spec, len);
    else
        len = wire_bytes(spec, buf, sizeof buf);
    const kvreg_wire_event *ev;
    size_t n = 99, off = 12345;
    assert_int_equal(kvreg_wire_decoder_new(&dec, format), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, buf, len, &ev, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, want_off);
    assert_true(strlen(kvreg_wire_decoder_error(dec)) > 0);
    uint64_t rejected = 0;
    assert_int_equal(kvreg_wire_decoder_stat(dec, KVREG_WIRE_STAT_REJECTED, &rejected), KVREG_OK);
    assert_int_equal(rejected, 1);
    kvreg_wire_decoder_free(dec);
}

static void check_example(const kvreg_wire_event *ev, size_t n)
{
    assert_int_equal(n, 3);
    assert_int_equal(ev[0].type, KVREG_WIRE_STORED);
    assert_int_equal(ev[0].n_block_hashes, 2);
    assert_true(ev[0].block_hashes[0] == EX_H1);
    assert_true(ev[0].block_hashes[1] == EX_H2);
    assert_int_equal(ev[0].has_parent, 0);
    assert_int_equal(ev[0].n_token_ids, 4);
    assert_int_equal(ev[0].token_ids[3], 4);
    assert_int_equal(ev[0].block_size, 2);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_GPU);
    assert_string_equal(ev[0].medium_name, "GPU");
    assert_null(ev[0].lora_name);
    assert_int_equal(ev[0].has_group_idx, 1);
    assert_int_equal(ev[0].group_idx, 0);
    assert_int_equal(ev[0].has_dp_rank, 1);
    assert_int_equal(ev[0].dp_rank, 0);
    assert_true(ev[0].ts == 1.5);
    assert_int_equal(ev[1].type, KVREG_WIRE_REMOVED);
    assert_int_equal(ev[1].n_block_hashes, 1);
    assert_true(ev[1].block_hashes[0] == EX_H2);
    assert_int_equal(ev[2].type, KVREG_WIRE_CLEARED);
}

static void test_example_a(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev = decode(&dec, KVREG_WIRE_VLLM, EXAMPLE_A, &n);
    check_example(ev, n);
    kvreg_wire_decoder_free(dec);
    ev = decode(&dec, KVREG_WIRE_SGLANG, EXAMPLE_A, &n);
    check_example(ev, n);
    kvreg_wire_decoder_free(dec);
}

static void test_example_b(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev = decode(&dec, KVREG_WIRE_VLLM, EXAMPLE_B, &n);
    check_example(ev, n);
    kvreg_wire_decoder_free(dec);
}

/* Outer batch: 2 elements (old vLLM / SGLang), 4 (extra ignored), nil DP rank, a map with
 * keys in another order, an int ts. */
static void test_outer_shapes(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev;
    ev = decode(&dec, KVREG_WIRE_VLLM, "92 cb3ff8000000000000 91 91 b0 \"AllBlocksCleared\"", &n);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].has_dp_rank, 0);
    kvreg_wire_decoder_free(dec);
    ev = decode(&dec, KVREG_WIRE_VLLM,
                "94 05 91 91 b0 \"AllBlocksCleared\" 07 a3 \"xyz\"", &n);
    assert_int_equal(n, 1);
    assert_true(ev[0].ts == 5.0);
    assert_int_equal(ev[0].dp_rank, 7);
    kvreg_wire_decoder_free(dec);
    ev = decode(&dec, KVREG_WIRE_VLLM, "93 ca3fc00000 91 91 b0 \"AllBlocksCleared\" c0", &n);
    assert_true(ev[0].ts == 1.5); /* float32 */
    assert_int_equal(ev[0].has_dp_rank, 0);
    kvreg_wire_decoder_free(dec);
    ev = decode(&dec, KVREG_WIRE_VLLM,
                "84 a5 \"extra\" 90 b2 \"data_parallel_rank\" 03"
                " a6 \"events\" 91 81 a4 \"type\" b0 \"AllBlocksCleared\" a2 \"ts\" 02",
                &n);
    assert_int_equal(n, 1);
    assert_true(ev[0].ts == 2.0);
    assert_int_equal(ev[0].dp_rank, 3);
    kvreg_wire_decoder_free(dec);
}

/* Hashes: small uint, negative fixint, int64, 32-byte digest, 2-byte bytes. */
static void test_hash_forms(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev = decode(&dec, KVREG_WIRE_VLLM,
        "93 00 91 82 a4 \"type\" ac \"BlockRemoved\" ac \"block_hashes\" 95"
        " 05 ff d3fffffffffffffffe"
        " c420 00000000000000000000000000000000000000000000000002258717921a4881"
        " c402 0102 00", &n);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].n_block_hashes, 5);
    assert_true(ev[0].block_hashes[0] == 5);
    assert_true(ev[0].block_hashes[1] == UINT64_MAX);
    assert_true(ev[0].block_hashes[2] == UINT64_MAX - 1);
    assert_true(ev[0].block_hashes[3] == UINT64_C(154678297519343745));
    assert_true(ev[0].block_hashes[4] == 0x0102);
    /* no medium key: GPU, medium_name NULL */
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_GPU);
    assert_null(ev[0].medium_name);
    kvreg_wire_decoder_free(dec);
}

/* Every unsigned integer width the format has (fixint, uint 8/16/32/64), for hashes and token
 * ids, beside the general forms: the decoder reads these widths on a shorter path, which must
 * give the same values. Expected values are the bytes read by hand. */
static void test_integer_widths(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev = decode(&dec, KVREG_WIRE_VLLM,
        "93 00 91 94 ab \"BlockStored\""
        " 96 7f cc80 cdbeef ce89abcdef cf0123456789abcdef ff"   /* hashes */
        " c0"
        " 96 00 7f ccff cd1234 cefedcba98 cf00000000ffffffff 00", &n); /* tokens */
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].n_block_hashes, 6);
    assert_true(ev[0].block_hashes[0] == 0x7f);
    assert_true(ev[0].block_hashes[1] == 0x80);
    assert_true(ev[0].block_hashes[2] == 0xbeef);
    assert_true(ev[0].block_hashes[3] == UINT64_C(0x89abcdef));
    assert_true(ev[0].block_hashes[4] == UINT64_C(0x0123456789abcdef));
    assert_true(ev[0].block_hashes[5] == UINT64_MAX);
    assert_int_equal(ev[0].n_token_ids, 6);
    assert_int_equal(ev[0].token_ids[0], 0);
    assert_int_equal(ev[0].token_ids[1], 0x7f);
    assert_int_equal(ev[0].token_ids[2], 0xff);
    assert_int_equal(ev[0].token_ids[3], 0x1234);
    assert_int_equal(ev[0].token_ids[4], 0xfedcba98u);
    assert_int_equal(ev[0].token_ids[5], UINT32_MAX);
    kvreg_wire_decoder_free(dec);

    /* A uint 64 token (read one at a time) between others (read in a run), and forms again
     * after it; the last ones within 5 bytes of the payload's end. */
    ev = decode(&dec, KVREG_WIRE_VLLM,
        "93 00 91 94 ab \"BlockStored\" 91 01 c0"
        " 99 cf0000000000000001 05 cd0102 ce00010000 cc10 cf00000000fffffffe 7f cd8000 0a 00", &n);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].n_token_ids, 9);
    assert_int_equal(ev[0].token_ids[0], 1);
    assert_int_equal(ev[0].token_ids[1], 5);
    assert_int_equal(ev[0].token_ids[2], 0x0102);
    assert_int_equal(ev[0].token_ids[3], 0x10000);
    assert_int_equal(ev[0].token_ids[4], 0x10);
    assert_int_equal(ev[0].token_ids[5], 0xfffffffeu);
    assert_int_equal(ev[0].token_ids[6], 0x7f);
    assert_int_equal(ev[0].token_ids[7], 0x8000);
    assert_int_equal(ev[0].token_ids[8], 0x0a);
    kvreg_wire_decoder_free(dec);

    /* A bad token after good ones: the bad one's offset (header 3 + tag 1 + 11, hashes 2, parent
     * 1, token array head 1, tokens 1 + 5). */
    reject(KVREG_WIRE_VLLM, "93 00 91 94 ab \"BlockStored\" 91 01 c0 93 05 ce00000001 cf0000000100000000 00", 26);
    /* Truncated inside a uint 64 hash and a uint 16 token: the value's own offset. */
    reject(KVREG_WIRE_VLLM, "93 00 91 92 ac \"BlockRemoved\" 92 01 cf00010203", 19);
    reject(KVREG_WIRE_VLLM, "93 00 91 94 ab \"BlockStored\" 91 01 c0 92 01 cd00", 21);
}

/* Map events: "type" not first, unknown keys (locality, session_id, a non-string key),
 * unknown types skipped and counted (BlockInactive, Ignored), a newer medium. */
static void test_map_events_tolerance(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev = decode(&dec, KVREG_WIRE_VLLM,
        "93 00 94"
        " 82 a4 \"type\" ad \"BlockInactive\" ac \"block_hashes\" 91 a1 \"x\""
        " 86 a8 \"locality\" a5 \"LOCAL\" ac \"block_hashes\" 91 01 a4 \"type\" ac \"BlockRemoved\""
        "    a6 \"medium\" a7 \"STORAGE\" 07 c0 aa \"session_id\" a1 \"s\""
        " 81 a4 \"type\" a7 \"Ignored\""
        " 84 a4 \"type\" ab \"BlockStored\" ac \"block_hashes\" 91 02"
        "    a9 \"lora_name\" a4 \"lora\" a6 \"medium\" a4 \"TAPE\""
        " 00", &n);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].type, KVREG_WIRE_REMOVED);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_STORAGE);
    assert_true(ev[0].block_hashes[0] == 1);
    assert_int_equal(ev[1].type, KVREG_WIRE_STORED);
    assert_string_equal(ev[1].lora_name, "lora");
    assert_int_equal(ev[1].medium, KVREG_MEDIUM_UNKNOWN);
    assert_string_equal(ev[1].medium_name, "TAPE");
    assert_int_equal(ev[1].n_token_ids, 0); /* SGLang map events may lack tokens */
    uint64_t skipped = 0, events = 0;
    assert_int_equal(kvreg_wire_decoder_stat(dec, KVREG_WIRE_STAT_SKIPPED, &skipped), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_stat(dec, KVREG_WIRE_STAT_EVENTS, &events), KVREG_OK);
    assert_int_equal(skipped, 2);
    assert_int_equal(events, 2);
    kvreg_wire_decoder_free(dec);
    /* Keys that are arrays or maps (msgpack allows any key) are skipped whole, with their
     * values: in the batch map, before and after "type" in an event, and in an event that
     * does not start with "type". Each was refused before ("bytes after the end of the
     * batch"): the key's elements were read as its value. */
    ev = decode(&dec, KVREG_WIRE_VLLM,
        "84 a2 \"ts\" 00 92 01 02 a1 \"v\" a6 \"events\" 92"
        "  83 a4 \"type\" ac \"BlockRemoved\" ac \"block_hashes\" 91 05 92 01 02 a1 \"v\""
        "  83 81 01 02 91 03 a4 \"type\" ac \"BlockRemoved\" ac \"block_hashes\" 91 06"
        " 91 81 01 02 c0", &n);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].type, KVREG_WIRE_REMOVED);
    assert_true(ev[0].block_hashes[0] == 5);
    assert_int_equal(ev[1].type, KVREG_WIRE_REMOVED);
    assert_true(ev[1].block_hashes[0] == 6);
    kvreg_wire_decoder_free(dec);
}

/* Positional generations: vLLM's first (tag + 5), SGLang's 7 with and without the metadata
 * map at position 7, SGLang's BlockRemoved with CPU_PINNED, group_idx in a trailing slot. */
static void test_positional_generations(void **state)
{
    (void)state;
    for (uint32_t format = KVREG_WIRE_VLLM; format <= KVREG_WIRE_SGLANG; format += 4) {
        kvreg_wire_decoder *dec;
        size_t n;
        const kvreg_wire_event *ev = decode(&dec, format,
            "93 00 94"
            " 96 ab \"BlockStored\" 91 01 c0 92 07 08 02 c0"
            " 97 ab \"BlockStored\" 91 02 01 92 09 0a 02 c0 a3 \"GPU\""
            " 98 ab \"BlockStored\" 91 03 02 92 0b 0c 02 c0 a3 \"CPU\" 81 aa \"cache_salt\" a1 \"s\""
            " 93 ac \"BlockRemoved\" 91 d0f0 aa \"CPU_PINNED\""
            " 01", &n);
        assert_int_equal(n, 4);
        assert_true(ev[0].block_hashes[0] == 1);
        assert_int_equal(ev[0].has_parent, 0);
        assert_int_equal(ev[0].token_ids[1], 8);
        assert_int_equal(ev[0].block_size, 2);
        assert_int_equal(ev[1].has_parent, 1);
        assert_true(ev[1].parent_block_hash == 1);
        assert_string_equal(ev[1].medium_name, "GPU");
        assert_int_equal(ev[2].medium, KVREG_MEDIUM_CPU);
        assert_null(ev[2].lora_name);
        assert_int_equal(ev[3].type, KVREG_WIRE_REMOVED);
        assert_int_equal(ev[3].medium, KVREG_MEDIUM_CPU);
        assert_true(ev[3].block_hashes[0] == (uint64_t)-16);
        assert_int_equal(ev[3].dp_rank, 1);
        kvreg_wire_decoder_free(dec);
    }
}

/* Dynamo JSON: the serde representation of spec §2.2 (with start_position, mm_extra_info,
 * residency_domain), removed, "cleared" both ways, an unknown variant; one bare object. */
static void test_dynamo_json(void **state)
{
    (void)state;
    const char *json =
        "[{\"worker_id\":7,\"storage_tier\":\"device\",\"residency_domain\":\"worker\",\n"
        " \"event\":{\"event_id\":42,\"data\":{\"stored\":{\"parent_hash\":null,\"start_position\":null,\n"
        "   \"blocks\":[{\"block_hash\":15760518052499183552,\"tokens_hash\":13226331709069118873,"
        "\"mm_extra_info\":null}]}},\"dp_rank\":0}},\n"
        " {\"worker_id\":7,\"storage_tier\":\"host_pinned\",\"event\":{\"event_id\":43,"
        "\"data\":{\"removed\":{\"block_hashes\":[1,18446744073709551615]}},\"dp_rank\":1}},\n"
        " {\"event\":{\"event_id\":44,\"data\":\"cleared\"}},"
        " {\"event\":{\"data\":{\"cleared\":null}}},"
        " {\"event\":{\"data\":{\"moved\":{}}}}]";
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, json, strlen(json), &ev, &n, NULL), KVREG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ev[0].type, KVREG_WIRE_STORED);
    assert_true(ev[0].worker_id == 7);
    assert_true(ev[0].event_id == 42);
    assert_true(ev[0].block_hashes[0] == UINT64_C(15760518052499183552));
    assert_true(ev[0].tokens_hashes[0] == UINT64_C(13226331709069118873));
    assert_int_equal(ev[0].has_parent, 0);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_GPU);
    assert_int_equal(ev[1].type, KVREG_WIRE_REMOVED);
    assert_int_equal(ev[1].medium, KVREG_MEDIUM_CPU);
    assert_string_equal(ev[1].medium_name, "host_pinned");
    assert_true(ev[1].block_hashes[1] == UINT64_MAX);
    assert_int_equal(ev[1].dp_rank, 1);
    assert_null(ev[1].tokens_hashes);
    assert_int_equal(ev[2].type, KVREG_WIRE_CLEARED);
    assert_true(ev[2].event_id == 44);
    assert_int_equal(ev[3].type, KVREG_WIRE_CLEARED);
    uint64_t skipped = 0;
    kvreg_wire_decoder_stat(dec, KVREG_WIRE_STAT_SKIPPED, &skipped);
    assert_int_equal(skipped, 1);
    const char *one = "{\"worker_id\":1,\"event\":{\"event_id\":2,\"data\":{\"stored\":"
                      "{\"parent_hash\":5,\"blocks\":[]}}}}";
    assert_int_equal(kvreg_wire_decode(dec, one, strlen(one), &ev, &n, NULL), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].has_parent, 1);
    assert_true(ev[0].parent_block_hash == 5);
    kvreg_wire_decoder_free(dec);
}

static void test_dynamo_msgpack(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    size_t n;
    const kvreg_wire_event *ev = decode(&dec, KVREG_WIRE_DYNAMO_MSGPACK,
        "92 83 a9 \"worker_id\" 05 ac \"storage_tier\" a4 \"disk\""
        "  a5 \"event\" 83 a8 \"event_id\" 09 a4 \"data\" 81 a6 \"stored\""
        "   82 ab \"parent_hash\" 03 a6 \"blocks\" 91 82 aa \"block_hash\" 04 ab \"tokens_hash\" 06"
        "  a7 \"dp_rank\" 02"
        " 81 a5 \"event\" 81 a4 \"data\" a7 \"cleared\"", &n);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_STORAGE);
    assert_true(ev[0].parent_block_hash == 3);
    assert_true(ev[0].block_hashes[0] == 4);
    assert_true(ev[0].tokens_hashes[0] == 6);
    assert_int_equal(ev[0].dp_rank, 2);
    assert_int_equal(ev[1].type, KVREG_WIRE_CLEARED);
    kvreg_wire_decoder_free(dec);
}

/* Bad payloads: status KVREG_EPROTO and the offset of the first problem (counted by hand). */
static void test_rejections(void **state)
{
    (void)state;
    reject(KVREG_WIRE_VLLM, "", 0);
    reject(KVREG_WIRE_VLLM, "91 00", 0);                        /* outer of 1 */
    reject(KVREG_WIRE_VLLM, "a3 \"abc\"", 0);                   /* outer a string */
    reject(KVREG_WIRE_VLLM, "81 a2 \"ts\" 00", 0);              /* map without events */
    reject(KVREG_WIRE_VLLM, "93 a1 \"x\" 90 00", 1);            /* ts a string */
    reject(KVREG_WIRE_VLLM, "93 00 90 00 00", 4);               /* trailing byte */
    reject(KVREG_WIRE_VLLM, "93 00 91 05 00", 3);               /* event an int */
    reject(KVREG_WIRE_VLLM, "93 00 91 81 a1 \"x\" 00 00", 3);   /* map event without type */
    reject(KVREG_WIRE_VLLM, "93 00 91 92 ac \"BlockRemoved\" 91 a1 \"h\" 00", 18); /* str hash */
    reject(KVREG_WIRE_VLLM, "93 00 91 92 ac \"BlockRemoved\" 91 c1 00", 18);      /* 0xc1 */
    reject(KVREG_WIRE_VLLM, "93 00 91 92 ac \"BlockRemoved\" dd ffffffff", 17); /* huge array */
    reject(KVREG_WIRE_VLLM, "93 00 91 91 ac \"BlockRemoved\" 00", 3); /* no hashes */
    reject(KVREG_WIRE_VLLM, "93 00 91 94 ab \"BlockStored\" 91 01 c0 91 cf0000000100000000 00", 20);
    reject(KVREG_WIRE_VLLM, "93 00 91 94 ab \"BlockStored\" 91 01 c0 91 ff 00", 20);
    reject(KVREG_WIRE_VLLM, "93 00 91 94 ab \"BlockStored\" 91 01 c0 91 ce0000", 20);
    reject(KVREG_WIRE_VLLM, "93 00 91 92 ac \"BlockRemoved\" 91 da0005 \"ab\"", 18); /* truncated str */
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"event\":{\"data\":\"cleared\"}} x", 30);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"event\":{\"data\":{\"removed\":{\"block_hashes\":[1.5]}}}}]", 46);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"event\":{}}]", 10);
    reject(KVREG_WIRE_DYNAMO_JSON, "[18446744073709551616]", 1);
    /* Numbers outside RFC 8259's grammar, which serde_json and Python's json refuse: a leading
     * zero (accepted before, "-01" as worker 2^64 - 1), no digits after '.' or in the
     * exponent. The offset is the number's. */
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"worker_id\":01,\"event\":{\"data\":\"cleared\"}}]", 14);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"worker_id\":-01,\"event\":{\"data\":\"cleared\"}}]", 14);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"worker_id\":00,\"event\":{\"data\":\"cleared\"}}]", 14);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"worker_id\":1.,\"event\":{\"data\":\"cleared\"}}]", 14);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"worker_id\":1e,\"event\":{\"data\":\"cleared\"}}]", 14);
    reject(KVREG_WIRE_DYNAMO_JSON, "[{\"worker_id\":1e+,\"event\":{\"data\":\"cleared\"}}]", 14);
    reject(KVREG_WIRE_DYNAMO_MSGPACK, "91 81 a5 \"event\" 81 a4 \"data\" 05", 14);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    uint64_t v;
    assert_int_equal(kvreg_wire_decoder_new(&dec, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_new(&dec, 6), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, NULL, 3, &ev, &n, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decode(dec, buf, 0, NULL, &n, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_stat(dec, 0, &v), KVREG_EINVAL);
    assert_string_equal(kvreg_wire_decoder_error(dec), "");
    kvreg_wire_decoder_free(dec);
    kvreg_wire_decoder_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_a),
        cmocka_unit_test(test_example_b),
        cmocka_unit_test(test_outer_shapes),
        cmocka_unit_test(test_hash_forms),
        cmocka_unit_test(test_integer_widths),
        cmocka_unit_test(test_map_events_tolerance),
        cmocka_unit_test(test_positional_generations),
        cmocka_unit_test(test_dynamo_json),
        cmocka_unit_test(test_dynamo_msgpack),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
