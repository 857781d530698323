/* The round-trip corpus (tests/wire/corpus, written by gen_corpus.py with python3-msgpack
 * following msgspec's rules, not by libkvreg): every payload decodes to what its .expect file
 * says (every field of kvreg_wire_event and kvreg_wire_event_ext, present / nil / absent
 * told apart), and kvreg_wire_decoder_reencode() gives back exactly its bytes. Then what the
 * re-encoder refuses: payloads holding something the decoder does not keep.
 *
 * Usage: test_wire_corpus CORPUS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg_wire.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_bytes.h"

static const char *g_dir;

static char *slurp(const char *name, const char *ext, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", g_dir, name, ext);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Appends printf output to a growing text. */
typedef struct {
    char *s;
    size_t n, cap;
} text_t;

static void add(text_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[4096];
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(k >= 0 && (size_t)k < sizeof tmp);
    if (t->n + (size_t)k + 1 > t->cap) {
        t->cap = (t->n + (size_t)k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    memcpy(t->s + t->n, tmp, (size_t)k + 1);
    t->n += (size_t)k;
}

static const char *form(uint32_t f)
{
    return f == KVREG_WIRE_FIELD_SET ? "set" : f == KVREG_WIRE_FIELD_NIL ? "nil" : "absent";
}

static void str_line(text_t *t, const char *key, const char *v, uint32_t f)
{
    add(t, "%s %s %s\n", key, v ? v : "-", form(f));
}

static void int_line(text_t *t, const char *key, int64_t v, uint32_t f)
{
    if (f == KVREG_WIRE_FIELD_SET)
        add(t, "%s %" PRId64 " %s\n", key, v, form(f));
    else
        add(t, "%s - %s\n", key, form(f));
}

/* The decoded batch in gen_corpus.py's expect format. */
static void describe(const kvreg_wire_decoder *dec, const kvreg_wire_event *ev, size_t n,
                     text_t *t)
{
    add(t, "events %zu\n", n);
    for (size_t k = 0; k < n; k++) {
        const kvreg_wire_event *e = &ev[k];
        kvreg_wire_event_ext x;
        memset(&x, 0xab, sizeof x);
        x.struct_size = sizeof x;
        assert_int_equal(kvreg_wire_decoder_event_ext(dec, k, &x), KVREG_OK);
        assert_int_equal(x.struct_size, sizeof x);
        add(t, "event %zu type %u tag %s shape %s fields %u\n", k, e->type, x.tag,
            x.shape == KVREG_WIRE_SHAPE_MAP ? "map" : "array", x.n_fields);
        add(t, "hashes");
        for (size_t i = 0; i < e->n_block_hashes; i++)
            add(t, " %" PRIu64, e->block_hashes[i]);
        add(t, "\n");
        if (e->has_parent)
            add(t, "parent %" PRIu64 " %s\n", e->parent_block_hash, form(x.parent_form));
        else
            add(t, "parent - %s\n", form(x.parent_form));
        if (x.token_pairs) {
            assert_int_equal(e->n_token_ids, 0);
            assert_null(e->token_ids);
            add(t, "pairs");
            for (size_t i = 0; i < x.n_pair_token_ids; i++)
                add(t, " %u", x.pair_token_ids[i]);
        } else {
            add(t, "tokens");
            for (size_t i = 0; i < e->n_token_ids; i++)
                add(t, " %u", e->token_ids[i]);
        }
        add(t, "\n");
        add(t, "block_size %u %s\n", e->block_size, form(x.block_size_form));
        str_line(t, "medium", e->medium_name, x.medium_form);
        str_line(t, "lora_name", e->lora_name, x.lora_name_form);
        str_line(t, "kv_cache_spec_kind", x.kv_cache_spec_kind, x.kv_cache_spec_kind_form);
        str_line(t, "cache_salt", x.cache_salt, x.cache_salt_form);
        str_line(t, "locality", x.locality, x.locality_form);
        str_line(t, "ownership", x.ownership, x.ownership_form);
        str_line(t, "session_id", x.session_id, x.session_id_form);
        int_line(t, "lora_id", x.lora_id, x.lora_id_form);
        int_line(t, "group_idx", e->group_idx, x.group_idx_form);
        assert_int_equal(e->has_group_idx, x.group_idx_form == KVREG_WIRE_FIELD_SET);
        int_line(t, "kv_cache_spec_sliding_window", x.kv_cache_spec_sliding_window,
                 x.sliding_window_form);
        add(t, "extra_keys ");
        if (x.extra_keys_form == KVREG_WIRE_FIELD_ABSENT)
            add(t, "-");
        for (size_t i = 0; i < x.extra_keys_len; i++)
            add(t, "%02x", x.extra_keys[i]);
        add(t, "\n");
        /* the medium of a payload without one is GPU in the old struct, absent in the new */
        if (x.medium_form != KVREG_WIRE_FIELD_SET) {
            assert_int_equal(e->medium, KVREG_MEDIUM_GPU);
            assert_null(e->medium_name);
        }
    }
}

/* A Dynamo batch in gen_corpus.py's dyn_expect format: every field of kvreg_wire_event and
 * kvreg_wire_event_ext a RouterEvent fills. */
static void describe_dynamo(const kvreg_wire_decoder *dec, const kvreg_wire_event *ev, size_t n,
                            text_t *t)
{
    add(t, "events %zu\n", n);
    for (size_t k = 0; k < n; k++) {
        const kvreg_wire_event *e = &ev[k];
        kvreg_wire_event_ext x;
        memset(&x, 0xab, sizeof x);
        x.struct_size = sizeof x;
        assert_int_equal(kvreg_wire_decoder_event_ext(dec, k, &x), KVREG_OK);
        assert_int_equal(x.struct_size, sizeof x);
        assert_int_equal(x.shape, KVREG_WIRE_SHAPE_DYNAMO);
        add(t, "event %zu type %u tag %s\n", k, e->type, x.tag);
        add(t, "worker_id %" PRIu64 " event_id %" PRIu64 " dp_rank %" PRId64 "\n", e->worker_id,
            e->event_id, e->dp_rank);
        str_line(t, "storage_tier", e->medium_name, x.medium_form);
        str_line(t, "residency_domain", x.residency_domain, x.residency_domain_form);
        add(t, "state_source ");
        if (x.state_source_form != KVREG_WIRE_FIELD_SET)
            add(t, "-");
        for (size_t i = 0; i < x.state_source_len; i++)
            add(t, "%02x", x.state_source[i]);
        add(t, " %s\n", form(x.state_source_form));
        add(t, "hashes");
        for (size_t i = 0; i < e->n_block_hashes; i++)
            add(t, " %" PRIu64, e->block_hashes[i]);
        add(t, "\ntokens_hashes");
        for (size_t i = 0; e->tokens_hashes && i < e->n_block_hashes; i++)
            add(t, " %" PRIu64, e->tokens_hashes[i]);
        add(t, "\n");
        if (e->has_parent)
            add(t, "parent %" PRIu64 " %s\n", e->parent_block_hash, form(x.parent_form));
        else
            add(t, "parent - %s\n", form(x.parent_form));
        int_line(t, "start_position", x.start_position, x.start_position_form);
        add(t, "mm_forms");
        for (size_t i = 0; x.mm_extra_info_forms && i < e->n_block_hashes; i++)
            add(t, " %s", form(x.mm_extra_info_forms[i]));
        add(t, "\n");
        for (size_t o = 0; o < x.n_mm_objects; o++) {
            const kvreg_wire_mm_object *m = &x.mm_objects[o];
            add(t, "mm_object block %u hash %" PRIu64 " offsets", m->block, m->mm_hash);
            assert_true(2 * (m->first_offset + m->n_offsets) <= x.n_mm_offsets);
            for (uint32_t j = 0; j < m->n_offsets; j++)
                add(t, " %" PRIu64 "-%" PRIu64, x.mm_offsets[2 * (m->first_offset + j)],
                    x.mm_offsets[2 * (m->first_offset + j) + 1]);
            add(t, "\n");
        }
        /* the vLLM-only fields stay empty */
        assert_int_equal(x.kv_cache_spec_kind_form, KVREG_WIRE_FIELD_ABSENT);
        assert_null(x.extra_keys);
        assert_int_equal(e->n_token_ids, 0);
    }
}

static void check_one(const char *name, const char *format)
{
    int dyn_json = strcmp(format, "dynamo-json") == 0;
    int dyn_mp = strcmp(format, "dynamo-msgpack") == 0;
    uint32_t f = dyn_json ? KVREG_WIRE_DYNAMO_JSON
                 : dyn_mp ? KVREG_WIRE_DYNAMO_MSGPACK
                 : strcmp(format, "sglang") == 0 ? KVREG_WIRE_SGLANG
                                                 : KVREG_WIRE_VLLM;
    size_t len, elen;
    char *payload = slurp(name, dyn_json ? ".json" : ".msgpack", &len);
    char *expect = slurp(name, ".expect", &elen);
    kvreg_wire_decoder *dec;
    assert_int_equal(kvreg_wire_decoder_new(&dec, f), KVREG_OK);
    const kvreg_wire_event *ev;
    size_t n, off;
    int rc = kvreg_wire_decode(dec, payload, len, &ev, &n, &off);
    if (rc != KVREG_OK)
        fail_msg("%s: %s", name, kvreg_wire_decoder_error(dec));
    text_t t = {0};
    if (dyn_json || dyn_mp)
        describe_dynamo(dec, ev, n, &t);
    else
        describe(dec, ev, n, &t);
    if (strcmp(t.s, expect) != 0) {
        fprintf(stderr, "%s: decoded\n%s\nexpected\n%s\n", name, t.s, expect);
        fail_msg("%s: decoded fields differ from %s.expect", name, name);
    }
    const uint8_t *again;
    size_t again_len;
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &again, &again_len), KVREG_OK);
    if (again_len != len || memcmp(again, payload, len) != 0) {
        size_t at = 0;
        while (at < len && at < again_len && again[at] == (uint8_t)payload[at])
            at++;
        fail_msg("%s: re-encoded %zu bytes, input %zu, first difference at byte %zu", name,
                 again_len, len, at);
    }
    free(t.s);
    kvreg_wire_decoder_free(dec);
    free(payload);
    free(expect);
}

static void test_corpus(void **state)
{
    (void)state;
    size_t mlen;
    char *manifest = slurp("MANIFEST", "", &mlen);
    size_t count = 0;
    for (char *line = strtok(manifest, "\n"); line; line = strtok(NULL, "\n")) {
        char name[256], format[32];
        assert_int_equal(sscanf(line, "%255s %31s", name, format), 2);
        check_one(name, format);
        count++;
    }
    assert_true(count >= 22); /* every shape gen_corpus.py writes */
    free(manifest);
}

/* Refused: what the decoder skipped would be lost. Expect KVREG_ESTATE. */
static void refuse(uint32_t format, const char *spec)
{
    uint8_t buf[512];
    size_t len = wire_bytes(spec, buf, sizeof buf);
    kvreg_wire_decoder *dec;
    assert_int_equal(kvreg_wire_decoder_new(&dec, format), KVREG_OK);
    const kvreg_wire_event *ev;
    size_t n;
    const uint8_t *p;
    size_t plen;
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_ESTATE); /* nothing yet */
    assert_int_equal(kvreg_wire_decode(dec, buf, len, &ev, &n, NULL), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_ESTATE);
    kvreg_wire_decoder_free(dec);
}

/* The same for a payload given as text (JSON). */
static void refuse_text(uint32_t format, const char *text)
{
    kvreg_wire_decoder *dec;
    assert_int_equal(kvreg_wire_decoder_new(&dec, format), KVREG_OK);
    const kvreg_wire_event *ev;
    size_t n;
    const uint8_t *p;
    size_t plen;
    assert_int_equal(kvreg_wire_decode(dec, text, strlen(text), &ev, &n, NULL), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_ESTATE);
    kvreg_wire_decoder_free(dec);
}

static void test_reencode_refuses(void **state)
{
    (void)state;
    /* a map event with a key the decoder does not read ("zz": 1) */
    refuse(KVREG_WIRE_VLLM, "93 00 91 83 a4 \"type\" ac \"BlockRemoved\" ac \"block_hashes\" 91 01"
                            " a2 \"zz\" 01 00");
    /* an event of an unknown type (skipped) */
    refuse(KVREG_WIRE_VLLM, "93 00 91 81 a4 \"type\" a7 \"Ignored\" 00");
    /* a positional BlockStored with a 13th element */
    refuse(KVREG_WIRE_VLLM, "93 00 91 9d ab \"BlockStored\" 91 01 c0 90 00 c0 c0 c0 c0 c0 c0"
                            " c0 01 00");
    /* four outer elements */
    refuse(KVREG_WIRE_VLLM, "94 cb 3ff8000000000000 90 00 00");
    /* ts as an integer (upstream always sends a float) */
    refuse(KVREG_WIRE_VLLM, "93 01 90 00");

    /* Dynamo: a key the decoder does not read; a variant it skips; a residency_domain that
     * is not a string (Dynamo reads it as invalid and writes null: not what came) */
    refuse_text(KVREG_WIRE_DYNAMO_JSON,
                "{\"worker_id\":1,\"zz\":2,\"event\":{\"data\":\"cleared\"}}");
    refuse(KVREG_WIRE_DYNAMO_MSGPACK, "91 81 a5 \"event\" 81 a4 \"data\" 81 a4 \"xxxx\" c0");
    refuse(KVREG_WIRE_DYNAMO_MSGPACK,
           "81 a5 \"event\" 82 a4 \"data\" a7 \"cleared\" a2 \"zz\" 00");
    refuse(KVREG_WIRE_DYNAMO_MSGPACK,
           "82 b0 \"residency_domain\" 05 a5 \"event\" 81 a4 \"data\" a7 \"cleared\"");

    /* a failed decode leaves nothing to re-encode, in either family */
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    const uint8_t *p;
    size_t plen;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, "\x93\xcb", 2, &ev, &n, NULL), KVREG_EPROTO);
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_ESTATE);
    assert_int_equal(kvreg_wire_decoder_reencode(NULL, &p, &plen), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_reencode(dec, NULL, &plen), KVREG_EINVAL);
    kvreg_wire_decoder_free(dec);
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, "\"x\"", 3, &ev, &n, NULL), KVREG_EPROTO);
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_ESTATE);
    kvreg_wire_decoder_free(dec);
}

/* Values the decoders tolerate but would write back changed: each event is lossy, so
 * re-encoding refuses rather than return other bytes with KVREG_OK (a review found every one
 * of these re-encoded "successfully" into something else). */
static void test_reencode_refuses_changed_values(void **state)
{
    (void)state;
    /* Dynamo writes no null for these keys: re-encoded, each came back as 0 */
    refuse_text(KVREG_WIRE_DYNAMO_JSON, "{\"worker_id\":null,\"event\":{\"data\":\"cleared\"}}");
    refuse_text(KVREG_WIRE_DYNAMO_JSON, "{\"event\":{\"event_id\":null,\"data\":\"cleared\"}}");
    refuse_text(KVREG_WIRE_DYNAMO_JSON, "{\"event\":{\"dp_rank\":null,\"data\":\"cleared\"}}");
    /* "cleared" is a unit variant: a body was dropped */
    refuse_text(KVREG_WIRE_DYNAMO_JSON, "{\"event\":{\"data\":{\"cleared\":{\"keep\":[1,2,3]}}}}");
    /* Dynamo writes no negative integer: -1 came back as 18446744073709551615 */
    refuse_text(KVREG_WIRE_DYNAMO_JSON, "{\"worker_id\":-1,\"event\":{\"data\":\"cleared\"}}");
    refuse(KVREG_WIRE_DYNAMO_MSGPACK, "82 a9 \"worker_id\" ff a5 \"event\" 81 a4 \"data\" a7 \"cleared\"");
    /* a NUL inside a string: the C string (and the re-encoding) stopped at it */
    refuse_text(KVREG_WIRE_DYNAMO_JSON,
                "{\"storage_tier\":\"dev\\u0000ice\",\"event\":{\"data\":\"cleared\"}}");
    refuse_text(KVREG_WIRE_DYNAMO_JSON,
                "{\"event\":{\"data\":\"cleared\"},\"residency_domain\":\"wor\\u0000ker\"}");
    refuse(KVREG_WIRE_DYNAMO_MSGPACK,
           "82 ac \"storage_tier\" a7 64 65 76 00 69 63 65 a5 \"event\" 81 a4 \"data\" a7 \"cleared\"");
    /* vLLM: one flag says how an event's hashes >= 2^63 go back; with a negative hash and an
     * unsigned one >= 2^63 in one array, 2^64-1 came back as -1 */
    refuse(KVREG_WIRE_VLLM, "93 cb 3ff8000000000000 91 93 ac \"BlockRemoved\" 92 ff cf ffffffffffffffff"
                            " a3 \"GPU\" c0");

    /* What stays accepted: {"cleared": null}, a negative hash alone, a big unsigned one alone */
    const char *ok_js[] = {"{\"event\":{\"data\":{\"cleared\":null}}}",
                           "{\"worker_id\":5,\"event\":{\"event_id\":1,\"dp_rank\":0,\"data\":\"cleared\"}}"};
    for (size_t k = 0; k < 2; k++) {
        kvreg_wire_decoder *dec;
        const kvreg_wire_event *ev;
        size_t n;
        const uint8_t *p;
        size_t plen;
        assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
        assert_int_equal(kvreg_wire_decode(dec, ok_js[k], strlen(ok_js[k]), &ev, &n, NULL), KVREG_OK);
        assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_OK);
        kvreg_wire_decoder_free(dec);
    }
    const char *ok_mp[] = {"93 cb 3ff8000000000000 91 93 ac \"BlockRemoved\" 92 ff fe a3 \"GPU\" c0",
                           "93 cb 3ff8000000000000 91 93 ac \"BlockRemoved\" 92 01 cf ffffffffffffffff"
                           " a3 \"GPU\" c0"};
    for (size_t k = 0; k < 2; k++) {
        uint8_t buf[128];
        const size_t len = wire_bytes(ok_mp[k], buf, sizeof buf);
        kvreg_wire_decoder *dec;
        const kvreg_wire_event *ev;
        size_t n;
        const uint8_t *p;
        size_t plen;
        assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
        assert_int_equal(kvreg_wire_decode(dec, buf, len, &ev, &n, NULL), KVREG_OK);
        assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_OK);
        assert_int_equal(plen, len);
        assert_memory_equal(p, buf, len);
        kvreg_wire_decoder_free(dec);
    }
}

/* JSON \u escapes are UTF-16: a surrogate pair is one code point, four bytes of UTF-8 (each
 * half used to become a 3-byte sequence of its own, which is not UTF-8); a lone surrogate is
 * refused, as serde_json refuses it. */
static void test_json_surrogates(void **state)
{
    (void)state;
    const char *js = "{\"residency_domain\":\"a\\ud83d\\ude00b\",\"event\":{\"data\":\"cleared\"}}";
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, js, strlen(js), &ev, &n, NULL), KVREG_OK);
    kvreg_wire_event_ext x;
    x.struct_size = sizeof x;
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, &x), KVREG_OK);
    assert_string_equal(x.residency_domain, "a\xf0\x9f\x98\x80" "b"); /* U+1F600 */
    const uint8_t *p;
    size_t plen;
    assert_int_equal(kvreg_wire_decoder_reencode(dec, &p, &plen), KVREG_OK);
    const char *want = "{\"residency_domain\":\"a\xf0\x9f\x98\x80" "b\",\"event\":{\"data\":\"cleared\"}}";
    assert_int_equal(plen, strlen(want));
    assert_memory_equal(p, want, plen);
    static const char *const bad[] = {"\\ud83d", "\\ude00", "\\ud83d\\u0041", "\\ud83dx", "\\ud83d\\", "\\ud83d\\ude0"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[128];
        snprintf(text, sizeof text, "{\"residency_domain\":\"%s\",\"event\":{\"data\":\"cleared\"}}", bad[k]);
        assert_int_equal(kvreg_wire_decode(dec, text, strlen(text), &ev, &n, NULL), KVREG_EPROTO);
    }
    kvreg_wire_decoder_free(dec);
}

/* kvreg_wire_decoder_event_ext's versioning: a smaller struct_size gets that prefix. */
static void test_ext_struct_size(void **state)
{
    (void)state;
    uint8_t buf[128];
    size_t len = wire_bytes("93 cb 3ff8000000000000 91 92 b0 \"AllBlocksCleared\" a3 \"CPU\" 00",
                            buf, sizeof buf);
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, buf, len, &ev, &n, NULL), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_CPU);
    kvreg_wire_event_ext x;
    memset(&x, 0xee, sizeof x);
    x.struct_size = (uint32_t)offsetof(kvreg_wire_event_ext, n_fields);
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, &x), KVREG_OK);
    assert_int_equal(x.struct_size, offsetof(kvreg_wire_event_ext, n_fields));
    assert_int_equal(x.shape, KVREG_WIRE_SHAPE_ARRAY);
    assert_string_equal(x.tag, "AllBlocksCleared");
    assert_int_equal(x.n_fields, 0xeeeeeeeeu); /* past struct_size: untouched */
    x.struct_size = 4;
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, &x), KVREG_EINVAL);
    x.struct_size = sizeof x;
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 1, &x), KVREG_ERANGE);
    assert_int_equal(kvreg_wire_decoder_event_ext(NULL, 0, &x), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, NULL), KVREG_EINVAL);
    kvreg_wire_decoder_free(dec);
}

/* Dynamo: storage_tier absent, null and set are told apart; tag and shape. */
static void test_dynamo_ext(void **state)
{
    (void)state;
    const char *js = "[{\"event\":{\"data\":\"cleared\"}},"
                     "{\"storage_tier\":null,\"event\":{\"data\":{\"removed\":"
                     "{\"block_hashes\":[3]}}}},"
                     "{\"storage_tier\":\"disk\",\"event\":{\"data\":{\"stored\":"
                     "{\"parent_hash\":null,\"blocks\":[]}}}}]";
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, js, strlen(js), &ev, &n, NULL), KVREG_OK);
    assert_int_equal(n, 3);
    static const char *const tags[] = {"cleared", "removed", "stored"};
    static const uint32_t forms[] = {KVREG_WIRE_FIELD_ABSENT, KVREG_WIRE_FIELD_NIL,
                                     KVREG_WIRE_FIELD_SET};
    for (size_t k = 0; k < 3; k++) {
        kvreg_wire_event_ext x;
        x.struct_size = sizeof x;
        assert_int_equal(kvreg_wire_decoder_event_ext(dec, k, &x), KVREG_OK);
        assert_int_equal(x.shape, KVREG_WIRE_SHAPE_DYNAMO);
        assert_string_equal(x.tag, tags[k]);
        assert_int_equal(x.medium_form, forms[k]);
    }
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_GPU);
    assert_null(ev[0].medium_name);
    assert_int_equal(ev[2].medium, KVREG_MEDIUM_STORAGE);
    assert_string_equal(ev[2].medium_name, "disk");
    kvreg_wire_decoder_free(dec);
}

/* A caller built against the 0.5 header passes struct_size 168: it gets the 0.5 fields of a
 * Dynamo event that carries the 0.6 ones, and nothing is written past its struct. */
static void test_dynamo_ext_old_size(void **state)
{
    (void)state;
    const char *js = "{\"worker_id\":1,\"residency_domain\":\"worker\",\"event\":{\"event_id\":5,"
                     "\"data\":{\"stored\":{\"parent_hash\":null,\"start_position\":9,\"blocks\":"
                     "[{\"block_hash\":1,\"tokens_hash\":2,\"mm_extra_info\":{\"mm_objects\":"
                     "[{\"mm_hash\":3,\"offsets\":[[0,1]]}]}}]}},\"dp_rank\":0}}";
    kvreg_wire_decoder *dec;
    const kvreg_wire_event *ev;
    size_t n;
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_JSON), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, js, strlen(js), &ev, &n, NULL), KVREG_OK);
    assert_int_equal(n, 1);
    const size_t v05 = offsetof(kvreg_wire_event_ext, start_position_form);
    assert_int_equal(v05, 168);
    kvreg_wire_event_ext x;
    memset(&x, 0xee, sizeof x);
    x.struct_size = (uint32_t)v05;
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, &x), KVREG_OK);
    assert_int_equal(x.struct_size, v05);
    assert_int_equal(x.shape, KVREG_WIRE_SHAPE_DYNAMO);
    assert_int_equal(x.parent_form, KVREG_WIRE_FIELD_NIL);
    const unsigned char *tail = (const unsigned char *)&x + v05;
    for (size_t i = 0; i < sizeof x - v05; i++)
        assert_int_equal(tail[i], 0xee);
    /* the whole struct: the 0.6 fields */
    x.struct_size = sizeof x;
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, &x), KVREG_OK);
    assert_int_equal(x.struct_size, sizeof x);
    assert_int_equal(x.start_position_form, KVREG_WIRE_FIELD_SET);
    assert_int_equal(x.start_position, 9);
    assert_string_equal(x.residency_domain, "worker");
    assert_int_equal(x.state_source_form, KVREG_WIRE_FIELD_ABSENT);
    assert_null(x.state_source);
    assert_int_equal(x.mm_extra_info_forms[0], KVREG_WIRE_FIELD_SET);
    assert_int_equal(x.n_mm_objects, 1);
    assert_true(x.mm_objects[0].mm_hash == 3);
    assert_int_equal(x.n_mm_offsets, 2);
    /* a vLLM event fills none of them */
    static const uint8_t vllm[] = {0x93, 0x00, 0x91, 0x91, 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c',
                                   'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd', 0x00};
    kvreg_wire_decoder_free(dec);
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_decode(dec, vllm, sizeof vllm, &ev, &n, NULL), KVREG_OK);
    memset(&x, 0xee, sizeof x);
    x.struct_size = sizeof x;
    assert_int_equal(kvreg_wire_decoder_event_ext(dec, 0, &x), KVREG_OK);
    assert_int_equal(x.start_position_form, KVREG_WIRE_FIELD_ABSENT);
    assert_null(x.mm_extra_info_forms);
    assert_null(x.mm_objects);
    assert_int_equal(x.n_mm_offsets, 0);
    assert_null(x.residency_domain);
    assert_null(x.state_source);
    kvreg_wire_decoder_free(dec);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_reencode_refuses),
        cmocka_unit_test(test_reencode_refuses_changed_values),
        cmocka_unit_test(test_json_surrogates),
        cmocka_unit_test(test_ext_struct_size),
        cmocka_unit_test(test_dynamo_ext),
        cmocka_unit_test(test_dynamo_ext_old_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
