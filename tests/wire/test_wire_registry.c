/* End to end with a real registry: the events a registry emits for an engine's calls
 * (register a prompt's blocks in a GPU pool, another in a CPU pool, release, clear, snapshot)
 * go through the vLLM and Dynamo encoders and come back from the decoders as the wire events
 * an engine would publish for those calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg_wire.h>
#include <stdlib.h>
#include <string.h>

#define CAP 64
#define BS 4

/* Events copied out of the callback (their tokens too: they are borrowed). */
typedef struct log {
    kvreg_event ev[CAP];
    uint32_t tokens[CAP][BS];
    size_t n;
} log_t;

static void on_events(const kvreg_event *events, size_t n, void *user)
{
    log_t *l = user;
    for (size_t i = 0; i < n && l->n < CAP; i++, l->n++) {
        l->ev[l->n] = events[i];
        if (events[i].n_tokens) {
            assert_true(events[i].n_tokens == BS);
            memcpy(l->tokens[l->n], events[i].tokens, BS * sizeof(uint32_t));
            l->ev[l->n].tokens = l->tokens[l->n];
        }
    }
}

/* Encode l->ev[0..n) in one payload and decode it (same decoder format family). */
static const kvreg_wire_event *round_trip(kvreg_wire_encoder *enc, kvreg_wire_decoder *dec,
                                          const kvreg_event *ev, size_t n, size_t *n_out)
{
    const uint8_t *p;
    size_t len, used;
    const kvreg_wire_event *w;
    assert_int_equal(kvreg_wire_encode(enc, ev, n, 3.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, n);
    assert_int_equal(kvreg_wire_decode(dec, p, len, &w, n_out, NULL), KVREG_OK);
    return w;
}

static void test_engine_calls(void **state)
{
    (void)state;
    static log_t l;
    memset(&l, 0, sizeof l);
    kvreg_config *cfg;
    kvreg_registry *reg;
    kvreg_pool *gpu, *cpu;
    kvreg_sequence *a, *b;
    const uint32_t prompt[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    const uint32_t other[8] = {50, 51, 52, 53, 54, 55, 56, 57};
    kvreg_block ha[3], hb[2];
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, on_events, &l, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new_medium(&gpu, reg, "G1", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "G2", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_sequence_new(&a, BS, KVREG_ROUTER_SALT), KVREG_OK);
    assert_int_equal(kvreg_sequence_new(&b, BS, KVREG_ROUTER_SALT), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(a, prompt, 12, NULL), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(b, other, 8, NULL), KVREG_OK);
    kvreg_block_info ia[3], ib[2];
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(kvreg_sequence_block(a, i, &ia[i]), KVREG_OK);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(kvreg_sequence_block(b, i, &ib[i]), KVREG_OK);

    /* prompt a in the GPU pool, prompt b in the CPU pool, then a released, then a clear */
    assert_int_equal(kvreg_register_sequence(gpu, a, 0, 3, ha, NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_register_sequence(cpu, b, 0, 2, hb, NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_release_batch(gpu, ha, 3, NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    assert_int_equal(l.n, 3 + 2 + 3 + 1);

    kvreg_wire_encoder *enc;
    kvreg_wire_decoder *dec;
    size_t n;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_BLOCK_SIZE, BS), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    const kvreg_wire_event *w = round_trip(enc, dec, l.ev, l.n, &n);
    assert_int_equal(n, 4);
    assert_int_equal(w[0].type, KVREG_WIRE_STORED);
    assert_int_equal(w[0].medium, KVREG_MEDIUM_GPU);
    assert_int_equal(w[0].n_block_hashes, 3);
    for (size_t i = 0; i < 3; i++)
        assert_true(w[0].block_hashes[i] == ia[i].sequence_hash);
    assert_int_equal(w[0].has_parent, 0);
    assert_int_equal(w[0].block_size, BS);
    assert_int_equal(w[0].n_token_ids, 12);
    assert_memory_equal(w[0].token_ids, prompt, sizeof prompt);
    assert_int_equal(w[1].type, KVREG_WIRE_STORED);
    assert_int_equal(w[1].medium, KVREG_MEDIUM_CPU);
    assert_string_equal(w[1].medium_name, "CPU");
    assert_true(w[1].block_hashes[1] == ib[1].sequence_hash);
    assert_memory_equal(w[1].token_ids, other, sizeof other);
    assert_int_equal(w[2].type, KVREG_WIRE_REMOVED);
    assert_int_equal(w[2].n_block_hashes, 3);
    assert_int_equal(w[3].type, KVREG_WIRE_CLEARED);
    kvreg_wire_encoder_free(enc);
    kvreg_wire_decoder_free(dec);

    /* Dynamo: tokens_hash is the block hash, event_id the first kvreg event's */
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_MSGPACK), KVREG_OK);
    /* the grouping is checked through 0.5's ids (each group's first kvreg event_id) */
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_EVENT_IDS, KVREG_WIRE_EVENT_IDS_KVREG),
                     KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_DYNAMO_MSGPACK), KVREG_OK);
    w = round_trip(enc, dec, l.ev, l.n, &n);
    assert_int_equal(n, 4);
    assert_true(w[0].event_id == l.ev[0].event_id);
    assert_true(w[1].event_id == l.ev[3].event_id);
    assert_true(w[2].event_id == l.ev[5].event_id);
    assert_true(w[3].event_id == l.ev[8].event_id);
    for (size_t i = 0; i < 3; i++)
        assert_true(w[0].tokens_hashes[i] == ia[i].block_hash);
    assert_string_equal(w[1].medium_name, "host_pinned");

    /* a snapshot of what b re-registers: the same chain; its kvreg events have event_id
     * KVREG_EVENT_ID_SNAPSHOT, the RouterEvent gets the encoder's next snapshot id */
    l.n = 0;
    assert_int_equal(kvreg_register_sequence(cpu, b, 0, 2, hb, NULL, NULL), KVREG_OK);
    kvreg_snapshot *snap;
    const kvreg_event *sev;
    size_t sn;
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_int_equal(kvreg_snapshot_events(snap, &sev, &sn), KVREG_OK);
    assert_int_equal(sn, 2);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, 7), KVREG_OK);
    w = round_trip(enc, dec, sev, sn, &n);
    assert_int_equal(n, 1);
    assert_true(w[0].event_id == 7);
    uint64_t next = 0;
    assert_int_equal(kvreg_wire_encoder_get(enc, KVREG_WIRE_OPT_SNAPSHOT_EVENT_ID, &next),
                     KVREG_OK);
    assert_true(next == 8);
    assert_int_equal(w[0].n_block_hashes, 2);
    assert_true(w[0].block_hashes[0] == ib[0].sequence_hash);
    assert_true(w[0].block_hashes[1] == ib[1].sequence_hash);
    kvreg_snapshot_free(snap);
    kvreg_wire_encoder_free(enc);
    kvreg_wire_decoder_free(dec);

    kvreg_sequence_free(a);
    kvreg_sequence_free(b);
    kvreg_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
