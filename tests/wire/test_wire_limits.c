/* The decoders' limits (kvreg_wire.h, "Decoder limits"), each at its edge: at the limit the
 * payload decodes, one past it is KVREG_EPROTO at the byte offset of the value that passed
 * it (offsets recorded while the test writes the payload, not taken from the decoder). Also
 * repeated map keys: the second occurrence of a key the decoder reads is an error at its
 * offset, in every decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg_wire.h>
#include <string.h>

/* A payload under construction. */
typedef struct {
    uint8_t b[8192];
    size_t n;
} buf_t;

static void put(buf_t *p, const void *s, size_t n)
{
    assert_true(p->n + n <= sizeof p->b);
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void put1(buf_t *p, uint8_t c) { put(p, &c, 1); }
static void puts_(buf_t *p, const char *s) { put(p, s, strlen(s)); }
/* msgpack fixstr (names used here are < 32 bytes) */
static void mstr(buf_t *p, const char *s)
{
    put1(p, (uint8_t)(0xa0 | strlen(s)));
    puts_(p, s);
}

/* Decode with options (0 = default); returns the status, *off the error offset. */
static int decode(uint32_t format, const buf_t *p, uint32_t opt, uint64_t value, size_t *n,
                  size_t *off)
{
    kvreg_wire_decoder *dec;
    assert_int_equal(kvreg_wire_decoder_new(&dec, format), KVREG_OK);
    if (opt)
        assert_int_equal(kvreg_wire_decoder_set(dec, opt, value), KVREG_OK);
    const kvreg_wire_event *ev;
    *n = 0, *off = SIZE_MAX;
    int rc = kvreg_wire_decode(dec, p->b, p->n, &ev, n, off);
    if (rc == KVREG_EPROTO)
        assert_true(strlen(kvreg_wire_decoder_error(dec)) > 0);
    kvreg_wire_decoder_free(dec);
    return rc;
}

/* vLLM: [1, [BlockRemoved{block_hashes:[1]} * events], 0] with `nest` empty arrays nested
 * under the first event's key "x" (levels 4, 5, ...); *deep = offset of the deepest array. */
static void vllm_payload(buf_t *p, unsigned events, unsigned nest, size_t *deep,
                         size_t *event_off)
{
    p->n = 0;
    put1(p, 0x93), put1(p, 0x01), put1(p, (uint8_t)(0x90 | events));
    for (unsigned e = 0; e < events; e++) {
        if (event_off)
            event_off[e] = p->n;
        put1(p, e == 0 && nest ? 0x83 : 0x82);
        mstr(p, "type"), mstr(p, "BlockRemoved");
        mstr(p, "block_hashes"), put1(p, 0x91), put1(p, 0x01);
        if (e == 0 && nest) {
            mstr(p, "x");
            for (unsigned k = 0; k < nest; k++) {
                if (deep)
                    *deep = p->n;
                put1(p, k + 1 < nest ? 0x91 : 0x90);
            }
        }
    }
    put1(p, 0x00);
}

static void test_max_payload(void **state)
{
    (void)state;
    buf_t p;
    vllm_payload(&p, 1, 0, NULL, NULL);
    size_t n, off;
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, p.n, &n, &off),
                     KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(
        decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, p.n - 1, &n, &off),
        KVREG_EPROTO);
    assert_int_equal(off, p.n - 1);
    /* the same for Dynamo JSON */
    p.n = 0;
    puts_(&p, "{\"event\":{\"data\":\"cleared\"}}");
    assert_int_equal(
        decode(KVREG_WIRE_DYNAMO_JSON, &p, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, p.n, &n, &off),
        KVREG_OK);
    assert_int_equal(
        decode(KVREG_WIRE_DYNAMO_JSON, &p, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, p.n - 1, &n, &off),
        KVREG_EPROTO);
    assert_int_equal(off, p.n - 1);

    /* the default: 16 MiB exactly is read (and judged on its bytes), one more byte is not */
    static uint8_t big[KVREG_WIRE_DEC_DEFAULT_MAX_PAYLOAD + 1];
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    memset(big, 0xc1, sizeof big); /* 0xc1 is never valid: the first byte is the error */
    assert_int_equal(kvreg_wire_decode(dec, big, sizeof big - 1, &ev, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, 0);
    assert_int_equal(kvreg_wire_decode(dec, big, sizeof big, &ev, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, KVREG_WIRE_DEC_DEFAULT_MAX_PAYLOAD);
    /* option ranges */
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, 1ull << 32),
                     KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, UINT32_MAX),
                     KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 65), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 64), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_set(dec, 99, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_set(NULL, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 1), KVREG_EINVAL);
    kvreg_wire_decoder_free(dec);
}

static void test_max_depth_vllm(void **state)
{
    (void)state;
    buf_t p;
    size_t deep, n, off;
    /* default 32: arrays at levels 4 .. 32 decode; one more level fails at the deepest */
    vllm_payload(&p, 1, 29, &deep, NULL);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_OK);
    assert_int_equal(n, 1);
    vllm_payload(&p, 1, 30, &deep, NULL);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, deep);
    /* set to 4: block_hashes (level 4) is fine, the batch needs no more */
    vllm_payload(&p, 1, 0, NULL, NULL);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 4, &n, &off),
                     KVREG_OK);
    /* 3: the block_hashes array (at offset 3 + 1 + 5 + 13 + 13) is one level too deep */
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 3, &n, &off),
                     KVREG_EPROTO);
    assert_int_equal(off, 3 + 1 + 5 + 13 + 13);
    /* the cap, 64 */
    vllm_payload(&p, 1, 61, &deep, NULL);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 64, &n, &off),
                     KVREG_OK);
    vllm_payload(&p, 1, 62, &deep, NULL);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 64, &n, &off),
                     KVREG_EPROTO);
    assert_int_equal(off, deep);
}

/* Dynamo: [ {"event":{"data":"cleared"},"x":<nest arrays>} ]: root level 1, the RouterEvent
 * 2, the arrays under "x" 3, 4, ... */
static void dynamo_nested(buf_t *p, int json, unsigned nest, size_t *deep)
{
    p->n = 0;
    if (json) {
        puts_(p, "[{\"event\":{\"data\":\"cleared\"},\"x\":");
        for (unsigned k = 0; k < nest; k++)
            *deep = p->n, puts_(p, "[");
        for (unsigned k = 0; k < nest; k++)
            puts_(p, "]");
        puts_(p, "}]");
        return;
    }
    put1(p, 0x91), put1(p, 0x82);
    mstr(p, "event"), put1(p, 0x81), mstr(p, "data"), mstr(p, "cleared");
    mstr(p, "x");
    for (unsigned k = 0; k < nest; k++)
        *deep = p->n, put1(p, k + 1 < nest ? 0x91 : 0x90);
}

static void test_max_depth_dynamo(void **state)
{
    (void)state;
    for (int json = 0; json < 2; json++) {
        uint32_t f = json ? KVREG_WIRE_DYNAMO_JSON : KVREG_WIRE_DYNAMO_MSGPACK;
        buf_t p;
        size_t deep = 0, n, off;
        dynamo_nested(&p, json, 30, &deep); /* deepest at level 32 */
        assert_int_equal(decode(f, &p, 0, 0, &n, &off), KVREG_OK);
        assert_int_equal(n, 1);
        dynamo_nested(&p, json, 31, &deep);
        assert_int_equal(decode(f, &p, 0, 0, &n, &off), KVREG_EPROTO);
        assert_int_equal(off, deep);
        dynamo_nested(&p, json, 2, &deep); /* level 4 */
        assert_int_equal(decode(f, &p, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 4, &n, &off), KVREG_OK);
        assert_int_equal(decode(f, &p, KVREG_WIRE_DEC_OPT_MAX_DEPTH, 3, &n, &off), KVREG_EPROTO);
        assert_int_equal(off, deep);
    }
}

static void test_max_events(void **state)
{
    (void)state;
    buf_t p;
    size_t at[4], n, off;
    vllm_payload(&p, 3, 0, NULL, at);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 3, &n, &off),
                     KVREG_OK);
    assert_int_equal(n, 3);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 2, &n, &off),
                     KVREG_EPROTO);
    assert_int_equal(off, at[2]);
    /* Dynamo: three RouterEvents; the offset is the third one's own (it was its "data" value's,
     * where the vLLM decoder already gave the event's start) */
    for (int json = 0; json < 2; json++) {
        p.n = 0;
        if (json) {
            puts_(&p, "[");
            for (int k = 0; k < 3; k++) {
                if (k)
                    puts_(&p, ",");
                at[k] = p.n;
                puts_(&p, "{\"event\":{\"data\":\"cleared\"}}");
            }
            puts_(&p, "]");
        } else {
            put1(&p, 0x93);
            for (int k = 0; k < 3; k++) {
                at[k] = p.n;
                put1(&p, 0x81), mstr(&p, "event"), put1(&p, 0x81), mstr(&p, "data");
                mstr(&p, "cleared");
            }
        }
        uint32_t f = json ? KVREG_WIRE_DYNAMO_JSON : KVREG_WIRE_DYNAMO_MSGPACK;
        assert_int_equal(decode(f, &p, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 3, &n, &off), KVREG_OK);
        assert_int_equal(n, 3);
        assert_int_equal(decode(f, &p, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 2, &n, &off), KVREG_EPROTO);
        assert_int_equal(off, at[2]);
    }
}

/* A count claiming more elements than bytes remain fails at its head, before any sizing. */
static void test_counts_against_bytes_left(void **state)
{
    (void)state;
    buf_t p;
    size_t n, off;
    p.n = 0;
    put1(&p, 0x93), put1(&p, 0x01), put1(&p, 0x91), put1(&p, 0x92), mstr(&p, "BlockRemoved");
    size_t head = p.n;
    /* array32 of 5 elements with 5 bytes left: fine; of 6: fails at its head */
    put1(&p, 0xdd), put1(&p, 0), put1(&p, 0), put1(&p, 0), put1(&p, 5);
    for (int k = 0; k < 4; k++)
        put1(&p, 0x01);
    put1(&p, 0x01);
    /* no dp rank: 5 hashes then the end -> the batch's third element is missing; use 2
     * elements instead */
    p.b[0] = 0x92;
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_OK);
    p.b[head + 4] = 6;
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, head);
    /* a string claiming 2^32-1 bytes */
    p.n = 0;
    put1(&p, 0x92), put1(&p, 0x01), put1(&p, 0x91), put1(&p, 0x92);
    head = p.n;
    put1(&p, 0xdb), put1(&p, 0xff), put1(&p, 0xff), put1(&p, 0xff), put1(&p, 0xff);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, head);
}

static void test_repeated_keys(void **state)
{
    (void)state;
    buf_t p;
    size_t n, off, second;
    /* vLLM map event: block_hashes twice (was accepted by concatenating the two lists) */
    p.n = 0;
    put1(&p, 0x93), put1(&p, 0x01), put1(&p, 0x91), put1(&p, 0x83);
    mstr(&p, "type"), mstr(&p, "BlockRemoved");
    mstr(&p, "block_hashes"), put1(&p, 0x91), put1(&p, 0x01);
    second = p.n;
    mstr(&p, "block_hashes"), put1(&p, 0x91), put1(&p, 0x02);
    put1(&p, 0x00);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, second);
    /* a repeated key the decoder does not read is skipped */
    p.n = 0;
    put1(&p, 0x93), put1(&p, 0x01), put1(&p, 0x91), put1(&p, 0x84);
    mstr(&p, "type"), mstr(&p, "BlockRemoved");
    mstr(&p, "block_hashes"), put1(&p, 0x91), put1(&p, 0x01);
    mstr(&p, "zz"), put1(&p, 0x01), mstr(&p, "zz"), put1(&p, 0x02);
    put1(&p, 0x00);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_OK);
    assert_int_equal(n, 1);
    /* vLLM batch map: "ts" twice */
    p.n = 0;
    put1(&p, 0x83), mstr(&p, "ts"), put1(&p, 0x01);
    second = p.n;
    mstr(&p, "ts"), put1(&p, 0x02), mstr(&p, "events"), put1(&p, 0x90);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, second);
    /* vLLM batch map: dp_rank under two of its names */
    p.n = 0;
    put1(&p, 0x84), mstr(&p, "ts"), put1(&p, 0x01), mstr(&p, "events"), put1(&p, 0x90);
    mstr(&p, "dp_rank"), put1(&p, 0x01);
    second = p.n;
    mstr(&p, "attn_dp_rank"), put1(&p, 0x02);
    assert_int_equal(decode(KVREG_WIRE_VLLM, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, second);
    /* SGLang metadata map at position 7 with cache_salt twice */
    p.n = 0;
    put1(&p, 0x93), put1(&p, 0x01), put1(&p, 0x91), put1(&p, 0x98);
    mstr(&p, "BlockStored"), put1(&p, 0x91), put1(&p, 0x01), put1(&p, 0xc0), put1(&p, 0x90);
    put1(&p, 0x00), put1(&p, 0xc0), mstr(&p, "GPU"), put1(&p, 0x82);
    mstr(&p, "cache_salt"), mstr(&p, "a");
    second = p.n;
    mstr(&p, "cache_salt"), mstr(&p, "b");
    put1(&p, 0x00);
    assert_int_equal(decode(KVREG_WIRE_SGLANG, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, second);
    /* Dynamo JSON: "event" twice in a RouterEvent; "block_hashes" twice in removed */
    const char *js = "{\"event\":{\"data\":\"cleared\"},\"event\":{\"data\":\"cleared\"}}";
    p.n = 0, puts_(&p, js);
    assert_int_equal(decode(KVREG_WIRE_DYNAMO_JSON, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, strlen("{\"event\":{\"data\":\"cleared\"},"));
    const char *js2 = "{\"event\":{\"data\":{\"removed\":{\"block_hashes\":[1],"
                      "\"block_hashes\":[2]}}}}";
    p.n = 0, puts_(&p, js2);
    assert_int_equal(decode(KVREG_WIRE_DYNAMO_JSON, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, strlen("{\"event\":{\"data\":{\"removed\":{\"block_hashes\":[1],"));
    /* a key spelt with an escape is the same key */
    const char *js3 = "{\"event\":{\"event_id\":1,\"event\\u005fid\":2,\"data\":\"cleared\"}}";
    p.n = 0, puts_(&p, js3);
    assert_int_equal(decode(KVREG_WIRE_DYNAMO_JSON, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, strlen("{\"event\":{\"event_id\":1,"));
    /* Dynamo msgpack: "worker_id" twice */
    p.n = 0;
    put1(&p, 0x83), mstr(&p, "worker_id"), put1(&p, 0x01);
    second = p.n;
    mstr(&p, "worker_id"), put1(&p, 0x02);
    mstr(&p, "event"), put1(&p, 0x81), mstr(&p, "data"), mstr(&p, "cleared");
    assert_int_equal(decode(KVREG_WIRE_DYNAMO_MSGPACK, &p, 0, 0, &n, &off), KVREG_EPROTO);
    assert_int_equal(off, second);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_payload),
        cmocka_unit_test(test_max_depth_vllm),
        cmocka_unit_test(test_max_depth_dynamo),
        cmocka_unit_test(test_max_events),
        cmocka_unit_test(test_counts_against_bytes_left),
        cmocka_unit_test(test_repeated_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
