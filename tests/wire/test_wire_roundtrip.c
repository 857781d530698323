/* Round trips: random event streams (chains of Registers, runs of Removes over several media,
 * Cleared) encoded in each of the four encodings, in payloads of random size, decoded again
 * and expanded back to one record per hash: the records must equal the input events (Removes
 * of one run may come back grouped by medium, so each run is compared sorted by medium).
 * Then bad input: every strict prefix of a valid payload is rejected with an offset inside
 * it, and random byte flips never crash (run under ASan/valgrind in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg_wire.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVENTS 3000
#define MAX_BS 8

typedef struct record {
    uint32_t kind, medium, has_parent;
    uint64_t seq, parent, block_hash, event_id; /* block_hash, event_id: Dynamo only */
    uint32_t n_tokens;
    uint32_t tokens[MAX_BS];
} record;

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static kvreg_event events[MAX_EVENTS];
static uint32_t tokens[MAX_EVENTS][MAX_BS];
static record want[MAX_EVENTS], got[MAX_EVENTS];

/* A random stream of about n events with block size bs. */
static size_t make_stream(size_t n, uint32_t bs)
{
    size_t k = 0;
    uint64_t id = rnd() % 1000;
    while (k < n) {
        uint64_t r = rnd() % 20;
        if (r < 11) { /* a chain */
            size_t len = 1 + rnd() % 6;
            uint32_t medium = (uint32_t)(rnd() % KVREG_MEDIUM_COUNT);
            uint64_t parent = rnd();
            int has_parent = (int)(rnd() % 2);
            for (size_t j = 0; j < len && k < n; j++, k++) {
                kvreg_event *e = &events[k];
                memset(e, 0, sizeof *e);
                e->kind = KVREG_EVENT_REGISTER;
                e->event_id = id++;
                /* small values too: they must still round-trip (and take the u64 form) */
                e->sequence_hash = rnd() % 4 == 0 ? rnd() % 300 : rnd();
                e->block_hash = rnd();
                e->has_parent = (uint32_t)(j > 0 || has_parent);
                e->parent_sequence_hash = e->has_parent ? parent : 0;
                e->medium = rnd() % 10 == 0 ? (uint32_t)(rnd() % KVREG_MEDIUM_COUNT) : medium;
                for (uint32_t t = 0; t < bs; t++)
                    tokens[k][t] = rnd() % 8 == 0 ? UINT32_MAX - (uint32_t)t : (uint32_t)rnd() % 70000;
                e->tokens = tokens[k];
                e->n_tokens = bs;
                parent = e->sequence_hash;
            }
        } else if (r < 19) { /* a run of removes */
            size_t len = 1 + rnd() % 5;
            for (size_t j = 0; j < len && k < n; j++, k++) {
                kvreg_event *e = &events[k];
                memset(e, 0, sizeof *e);
                e->kind = KVREG_EVENT_REMOVE;
                e->event_id = id++;
                e->sequence_hash = rnd();
                e->block_hash = rnd();
                e->medium = (uint32_t)(rnd() % KVREG_MEDIUM_COUNT);
            }
        } else {
            memset(&events[k], 0, sizeof events[k]);
            events[k].kind = KVREG_EVENT_CLEARED;
            events[k].event_id = id++;
            k++;
        }
    }
    return k;
}

static record from_event(const kvreg_event *e, int dynamo)
{
    record r;
    memset(&r, 0, sizeof r);
    r.kind = e->kind;
    if (e->kind == KVREG_EVENT_CLEARED)
        return r;
    r.seq = e->sequence_hash;
    r.medium = e->medium;
    if (e->kind == KVREG_EVENT_REGISTER) {
        r.has_parent = e->has_parent;
        r.parent = e->parent_sequence_hash;
        if (dynamo) {
            r.block_hash = e->block_hash;
        } else {
            r.n_tokens = e->n_tokens;
            memcpy(r.tokens, e->tokens, e->n_tokens * sizeof(uint32_t));
        }
    }
    return r;
}

/* Expand one decoded event into records; returns how many. first_id: the event_id the
 * first record's input event had (Dynamo carries it per wire event). */
static size_t expand(const kvreg_wire_event *w, record *out, int dynamo)
{
    if (w->type == KVREG_WIRE_CLEARED) {
        memset(out, 0, sizeof *out);
        out->kind = KVREG_EVENT_CLEARED;
        return 1;
    }
    assert_true(w->medium < KVREG_MEDIUM_COUNT);
    if (w->type == KVREG_WIRE_STORED && !dynamo)
        assert_int_equal(w->n_token_ids, w->n_block_hashes * w->block_size);
    for (size_t k = 0; k < w->n_block_hashes; k++) {
        record *r = &out[k];
        memset(r, 0, sizeof *r);
        r->seq = w->block_hashes[k];
        r->medium = w->medium;
        if (w->type == KVREG_WIRE_REMOVED) {
            r->kind = KVREG_EVENT_REMOVE;
            continue;
        }
        r->kind = KVREG_EVENT_REGISTER;
        r->has_parent = k > 0 || w->has_parent;
        r->parent = k > 0 ? w->block_hashes[k - 1] : w->parent_block_hash;
        if (dynamo) {
            r->block_hash = w->tokens_hashes[k];
        } else {
            r->n_tokens = w->block_size;
            memcpy(r->tokens, w->token_ids + k * w->block_size, w->block_size * sizeof(uint32_t));
        }
    }
    return w->n_block_hashes;
}

static int by_medium(const void *a, const void *b)
{
    const record *x = a, *y = b;
    if (x->medium != y->medium)
        return x->medium < y->medium ? -1 : 1;
    return x->event_id < y->event_id ? -1 : x->event_id > y->event_id;
}

/* Sort each run of removes by medium (ties: input order, kept in event_id by the caller). */
static void normalise(record *r, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && r[j].kind == KVREG_EVENT_REMOVE)
            j++;
        if (j > i) {
            qsort(r + i, j - i, sizeof *r, by_medium);
            i = j;
        } else {
            i++;
        }
    }
}

static void round_trip(uint32_t format, uint64_t seed)
{
    rng_state = seed;
    int dynamo = format == KVREG_WIRE_DYNAMO_JSON || format == KVREG_WIRE_DYNAMO_MSGPACK;
    uint32_t bs = 1 + (uint32_t)(rnd() % MAX_BS);
    size_t n = make_stream(200 + rnd() % 800, bs);
    kvreg_wire_encoder *enc;
    kvreg_wire_decoder *dec;
    assert_int_equal(kvreg_wire_encoder_new(&enc, format), KVREG_OK);
    /* the grouping is checked through 0.5's ids (each group's first kvreg event_id) */
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_EVENT_IDS, KVREG_WIRE_EVENT_IDS_KVREG),
                     KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_new(&dec, format), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_DP_RANK, seed % 5), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_WORKER_ID, seed), KVREG_OK);
    size_t done = 0, n_got = 0;
    while (done < n) {
        assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, 1 + rnd() % 40),
                         KVREG_OK);
        const uint8_t *p;
        size_t len, used, n_wire, off;
        const kvreg_wire_event *w;
        double ts = (double)(rnd() % 100000) / 8.0;
        assert_int_equal(kvreg_wire_encode(enc, events + done, n - done, ts, &used, &p, &len),
                         KVREG_OK);
        assert_true(used >= 1);
        int rc = kvreg_wire_decode(dec, p, len, &w, &n_wire, &off);
        if (rc != KVREG_OK)
            fail_msg("format %u seed %llu: %s", format, (unsigned long long)seed,
                     kvreg_wire_decoder_error(dec));
        size_t input_at = done;
        for (size_t k = 0; k < n_wire; k++) {
            assert_int_equal(w[k].has_dp_rank, 1);
            assert_int_equal(w[k].dp_rank, (int64_t)(seed % 5));
            if (dynamo) {
                assert_true(w[k].worker_id == seed);
            } else {
                assert_true(w[k].ts == ts);
            }
            size_t m = expand(&w[k], got + n_got, dynamo);
            if (dynamo) {
                /* event_id is the first grouped kvreg event's: find it in this payload */
                int found = 0;
                for (size_t i = input_at; i < done + used && !found; i++)
                    found = events[i].event_id == w[k].event_id;
                assert_true(found);
            }
            n_got += m;
        }
        done += used;
    }
    assert_int_equal(n_got, n);
    for (size_t i = 0; i < n; i++) {
        want[i] = from_event(&events[i], dynamo);
        want[i].event_id = i;
    }
    /* removes come back per medium within a run: give each got record the index of the
     * same-hash input remove so ties keep input order */
    for (size_t i = 0; i < n; i++)
        got[i].event_id = i;
    normalise(want, n);
    for (size_t i = 0; i < n; i++)
        want[i].event_id = 0, got[i].event_id = 0;
    normalise(got, n);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof(record)) != 0)
            fail_msg("format %u seed %llu: record %zu differs (kind %u/%u seq %llx/%llx)", format,
                     (unsigned long long)seed, i, want[i].kind, got[i].kind,
                     (unsigned long long)want[i].seq, (unsigned long long)got[i].seq);
    kvreg_wire_encoder_free(enc);
    kvreg_wire_decoder_free(dec);
}

static void test_round_trips(void **state)
{
    (void)state;
    for (uint32_t format = KVREG_WIRE_VLLM; format <= KVREG_WIRE_DYNAMO_MSGPACK; format++)
        for (uint64_t seed = 1; seed <= 25; seed++)
            round_trip(format, seed * 7919 + format);
}

/* One payload of each format from a random stream. */
static size_t sample_payload(uint32_t format, uint64_t seed, uint8_t *out, size_t cap)
{
    rng_state = seed;
    size_t n = make_stream(30, 3);
    kvreg_wire_encoder *enc;
    const uint8_t *p;
    size_t len, used;
    assert_int_equal(kvreg_wire_encoder_new(&enc, format), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, events, n, 1.25, &used, &p, &len), KVREG_OK);
    assert_true(len <= cap);
    memcpy(out, p, len);
    kvreg_wire_encoder_free(enc);
    return len;
}

/* Touch everything a successful decode returned (ASan / valgrind check the pointers). */
static uint64_t touch(const kvreg_wire_event *w, size_t n)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < w[k].n_block_hashes; i++)
            sum += w[k].block_hashes[i] + (w[k].tokens_hashes ? w[k].tokens_hashes[i] : 0);
        for (size_t i = 0; i < w[k].n_token_ids; i++)
            sum += w[k].token_ids[i];
        if (w[k].medium_name)
            sum += strlen(w[k].medium_name);
        if (w[k].lora_name)
            sum += strlen(w[k].lora_name);
    }
    return sum;
}

static void test_prefixes_and_flips(void **state)
{
    (void)state;
    static uint8_t payload[65536], copy[65536];
    uint64_t sink = 0;
    for (uint32_t format = KVREG_WIRE_VLLM; format <= KVREG_WIRE_DYNAMO_MSGPACK; format++) {
        uint32_t dec_format = format == KVREG_WIRE_VLLM_LEGACY ? KVREG_WIRE_VLLM : format;
        size_t len = sample_payload(format, 99 + format, payload, sizeof payload);
        kvreg_wire_decoder *dec;
        const kvreg_wire_event *w;
        size_t n, off;
        assert_int_equal(kvreg_wire_decoder_new(&dec, dec_format), KVREG_OK);
        assert_int_equal(kvreg_wire_decode(dec, payload, len, &w, &n, &off), KVREG_OK);
        for (size_t cut = 0; cut < len; cut++) {
            /* a copy of exactly `cut` bytes: a read past it is a heap overflow under ASan */
            uint8_t *prefix = malloc(cut ? cut : 1);
            memcpy(prefix, payload, cut);
            off = SIZE_MAX;
            assert_int_equal(kvreg_wire_decode(dec, prefix, cut, &w, &n, &off), KVREG_EPROTO);
            assert_true(off <= cut);
            free(prefix);
        }
        rng_state = format;
        for (int round = 0; round < 1000; round++) {
            memcpy(copy, payload, len);
            int flips = 1 + (int)(rnd() % 3);
            for (int f = 0; f < flips; f++)
                copy[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
            off = SIZE_MAX;
            int rc = kvreg_wire_decode(dec, copy, len, &w, &n, &off);
            if (rc == KVREG_OK)
                sink += touch(w, n);
            else {
                assert_int_equal(rc, KVREG_EPROTO);
                assert_true(off <= len);
            }
        }
        kvreg_wire_decoder_free(dec);
    }
    (void)sink;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_prefixes_and_flips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
