/* KVREG_OPT_EVENT_MODE: what Register and Remove stand for when pools on different media hold a
 * hash. Global: one pair per hash, the Remove carrying the Register's medium. Per-tier: one pair
 * per (hash, medium). Every expected event here is written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

static kvreg_registry *mode_registry(recorder *rec, uint64_t mode, int keep_tokens) {
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, mode), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, (uint64_t)keep_tokens), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, recorder_fn, rec, recorder_destroy), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    return reg;
}

static void expect_event(const recorder *rec, size_t i, uint32_t kind, uint64_t seq, uint32_t medium,
                         const kvreg_pool *pool) {
    assert_true(i < rec->n);
    assert_int_equal(rec->events[i].kind, kind);
    assert_true(rec->events[i].sequence_hash == seq);
    assert_int_equal(rec->events[i].medium, medium);
    assert_int_equal(rec->events[i].pool_id, kvreg_pool_id(pool));
}

static void test_option_values(void **state) {
    (void)state;
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, KVREG_EVENTS_GLOBAL), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, KVREG_EVENTS_PER_TIER), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, UINT64_MAX), KVREG_EINVAL);
    kvreg_config_free(cfg);
}

/* Global: the head of the hash's pools changes hands twice (the first registrant leaves first,
 * then a middle one); the last release's Remove still names the Register's medium. */
static void test_global_remove_carries_register_medium(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = mode_registry(rec, KVREG_EVENTS_GLOBAL, 0);
    kvreg_pool *gpu = NULL, *cpu = NULL, *disk = NULL;
    kvreg_block g = 0, c = 0, s = 0;
    assert_int_equal(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&disk, reg, "disk", KVREG_MEDIUM_STORAGE), KVREG_OK);
    kvreg_block_desc d = hash_desc(21, 2, 1, 20);
    assert_int_equal(kvreg_register(gpu, &d, &g), KVREG_OK);
    assert_int_equal(kvreg_register(cpu, &d, &c), KVREG_OK);
    assert_int_equal(kvreg_register(disk, &d, &s), KVREG_OK);
    assert_int_equal(rec->n, 1);
    expect_event(rec, 0, KVREG_EVENT_REGISTER, 21, KVREG_MEDIUM_GPU, gpu);
    assert_int_equal(kvreg_release(gpu, g), KVREG_OK); /* the head leaves */
    assert_int_equal(kvreg_release(disk, s), KVREG_OK);
    assert_int_equal(rec->n, 1);

    /* A snapshot now says GPU too: the entry a consumer made from the Register. */
    kvreg_snapshot *snap = NULL;
    const kvreg_event *ev = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_GPU);
    assert_true(ev[0].sequence_hash == 21);
    kvreg_snapshot_free(snap);

    assert_int_equal(kvreg_release(cpu, c), KVREG_OK);
    assert_int_equal(rec->n, 2);
    expect_event(rec, 1, KVREG_EVENT_REMOVE, 21, KVREG_MEDIUM_GPU, cpu);
    assert_true(rec->events[1].block_hash == 2);
    assert_int_equal(rec->events[1].has_parent, 1);
    assert_true(rec->events[1].parent_sequence_hash == 20);
    kvreg_registry_free(reg);
    free(rec);
}

/* Per-tier: offload GPU -> CPU, evict from GPU, evict from CPU; then a hash held by two GPU pools
 * and a CPU pool, where a member that is not the chain's head leaves its tier. */
static void test_per_tier_offload_and_evict(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = mode_registry(rec, KVREG_EVENTS_PER_TIER, 0);
    kvreg_pool *gpu = NULL, *gpu2 = NULL, *cpu = NULL;
    kvreg_block g = 0, g2 = 0, c = 0;
    assert_int_equal(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&gpu2, reg, "gpu2", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);

    kvreg_block_desc d = hash_desc(31, 3, 1, 30);
    assert_int_equal(kvreg_register(gpu, &d, &g), KVREG_OK);
    assert_int_equal(kvreg_register(gpu, &d, &g), KVREG_EEXIST); /* no event either */
    kvreg_block_desc other = hash_desc(31, 99, 0, 0); /* same hash: the hash's fields win */
    assert_int_equal(kvreg_register(cpu, &other, &c), KVREG_OK); /* offload */
    assert_int_equal(rec->n, 2);
    expect_event(rec, 0, KVREG_EVENT_REGISTER, 31, KVREG_MEDIUM_GPU, gpu);
    expect_event(rec, 1, KVREG_EVENT_REGISTER, 31, KVREG_MEDIUM_CPU, cpu);
    assert_true(rec->events[1].block_hash == 3);
    assert_int_equal(rec->events[1].has_parent, 1);
    assert_true(rec->events[1].parent_sequence_hash == 30);
    assert_int_equal(kvreg_release(gpu, g), KVREG_OK); /* evicted from GPU: the head leaves */
    assert_int_equal(rec->n, 3);
    expect_event(rec, 2, KVREG_EVENT_REMOVE, 31, KVREG_MEDIUM_GPU, gpu);
    int present = 0;
    assert_int_equal(kvreg_pool_contains(cpu, 31, &present), KVREG_OK);
    assert_int_equal(present, 1);
    assert_int_equal(kvreg_release(cpu, c), KVREG_OK);
    assert_int_equal(rec->n, 4);
    expect_event(rec, 3, KVREG_EVENT_REMOVE, 31, KVREG_MEDIUM_CPU, cpu);
    assert_true(rec->events[3].block_hash == 3);
    assert_true(rec->events[3].parent_sequence_hash == 30);

    /* Two GPU pools and a CPU pool: one Register per medium, one Remove per medium. */
    d = hash_desc(41, 4, 0, 0);
    assert_int_equal(kvreg_register(gpu, &d, &g), KVREG_OK);
    assert_int_equal(kvreg_register(gpu2, &d, &g2), KVREG_OK);
    assert_int_equal(kvreg_register(cpu, &d, &c), KVREG_OK);
    assert_int_equal(rec->n, 6);
    expect_event(rec, 4, KVREG_EVENT_REGISTER, 41, KVREG_MEDIUM_GPU, gpu);
    expect_event(rec, 5, KVREG_EVENT_REGISTER, 41, KVREG_MEDIUM_CPU, cpu);
    assert_int_equal(kvreg_release(cpu, c), KVREG_OK); /* not the head; last of CPU */
    assert_int_equal(rec->n, 7);
    expect_event(rec, 6, KVREG_EVENT_REMOVE, 41, KVREG_MEDIUM_CPU, cpu);
    assert_int_equal(kvreg_release(gpu2, g2), KVREG_OK); /* gpu still holds it on GPU */
    assert_int_equal(rec->n, 7);
    assert_int_equal(kvreg_register(cpu, &d, &c), KVREG_OK); /* back on CPU */
    assert_int_equal(rec->n, 8);
    expect_event(rec, 7, KVREG_EVENT_REGISTER, 41, KVREG_MEDIUM_CPU, cpu);
    assert_int_equal(kvreg_release(gpu, g), KVREG_OK);
    assert_int_equal(rec->n, 9);
    expect_event(rec, 8, KVREG_EVENT_REMOVE, 41, KVREG_MEDIUM_GPU, gpu);
    /* A reference more does not make an event; the last one does. */
    kvreg_block c2 = 0;
    assert_int_equal(kvreg_acquire(cpu, 41, &c2), KVREG_OK);
    assert_int_equal(kvreg_release(cpu, c2), KVREG_OK);
    assert_int_equal(rec->n, 9);
    assert_int_equal(kvreg_release(cpu, c), KVREG_OK);
    assert_int_equal(rec->n, 10);
    expect_event(rec, 9, KVREG_EVENT_REMOVE, 41, KVREG_MEDIUM_CPU, cpu);
    for (size_t i = 0; i < rec->n; i++) assert_true(rec->events[i].event_id == i);
    kvreg_registry_free(reg);
    free(rec);
}

/* Per-tier with stored tokens: a further medium registered by hash only gets the stored tokens,
 * and a Remove while another medium keeps the hash carries them too. */
static void test_per_tier_tokens(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = mode_registry(rec, KVREG_EVENTS_PER_TIER, 1);
    kvreg_pool *gpu = NULL, *cpu = NULL;
    kvreg_block g = 0, c = 0;
    assert_int_equal(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    const uint32_t toks[4] = {7, 8, 9, 10};
    kvreg_block_desc d = hash_desc(51, 5, 0, 0);
    d.tokens = toks;
    d.n_tokens = 4;
    assert_int_equal(kvreg_register(gpu, &d, &g), KVREG_OK);
    kvreg_block_desc bare = hash_desc(51, 5, 0, 0);
    assert_int_equal(kvreg_register(cpu, &bare, &c), KVREG_OK);
    assert_int_equal(kvreg_release(gpu, g), KVREG_OK);
    assert_int_equal(kvreg_release(cpu, c), KVREG_OK);
    assert_int_equal(rec->n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(rec->events[i].n_tokens, 4);
        assert_memory_equal(rec->tokens[i], toks, sizeof toks);
    }
    expect_event(rec, 1, KVREG_EVENT_REGISTER, 51, KVREG_MEDIUM_CPU, cpu);
    expect_event(rec, 2, KVREG_EVENT_REMOVE, 51, KVREG_MEDIUM_GPU, gpu);
    kvreg_registry_free(reg);
    free(rec);
}

/* Per-tier: kvreg_pool_free sends a Remove for each hash that leaves the pool's medium. */
static void test_per_tier_pool_free(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = mode_registry(rec, KVREG_EVENTS_PER_TIER, 0);
    kvreg_pool *gpu = NULL, *gpu2 = NULL, *cpu = NULL;
    kvreg_block b = 0;
    assert_int_equal(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&gpu2, reg, "gpu2", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    kvreg_block_desc d1 = hash_desc(61, 1, 0, 0), d2 = hash_desc(62, 2, 0, 0), d3 = hash_desc(63, 3, 0, 0);
    assert_int_equal(kvreg_register(gpu, &d1, &b), KVREG_OK); /* REG 61 GPU */
    assert_int_equal(kvreg_register(cpu, &d1, &b), KVREG_OK); /* REG 61 CPU */
    assert_int_equal(kvreg_register(gpu, &d2, &b), KVREG_OK); /* REG 62 GPU */
    assert_int_equal(kvreg_register(gpu, &d3, &b), KVREG_OK); /* REG 63 GPU */
    assert_int_equal(kvreg_register(gpu2, &d3, &b), KVREG_OK);
    assert_int_equal(rec->n, 4);
    kvreg_pool_free(gpu); /* 61 and 62 leave GPU; 63 stays in gpu2 */
    assert_int_equal(rec->n, 6);
    int seen61 = 0, seen62 = 0;
    for (size_t i = 4; i < 6; i++) {
        assert_int_equal(rec->events[i].kind, KVREG_EVENT_REMOVE);
        assert_int_equal(rec->events[i].medium, KVREG_MEDIUM_GPU);
        seen61 += rec->events[i].sequence_hash == 61;
        seen62 += rec->events[i].sequence_hash == 62;
    }
    assert_int_equal(seen61, 1);
    assert_int_equal(seen62, 1);
    kvreg_pool_free(cpu);
    assert_int_equal(rec->n, 7);
    expect_event(rec, 6, KVREG_EVENT_REMOVE, 61, KVREG_MEDIUM_CPU, cpu);
    kvreg_pool_free(gpu2);
    assert_int_equal(rec->n, 8);
    assert_int_equal(rec->events[7].kind, KVREG_EVENT_REMOVE);
    assert_true(rec->events[7].sequence_hash == 63);
    assert_int_equal(rec->events[7].medium, KVREG_MEDIUM_GPU);
    kvreg_registry_free(reg);
    free(rec);
}

/* Per-tier snapshot: one Register per (hash, medium) held; parents first still holds. Then a
 * clear: one Cleared, and registering again starts each medium afresh. */
static void test_per_tier_snapshot_and_clear(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = mode_registry(rec, KVREG_EVENTS_PER_TIER, 0);
    kvreg_pool *gpu = NULL, *gpu2 = NULL, *cpu = NULL;
    kvreg_block b = 0;
    assert_int_equal(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&gpu2, reg, "gpu2", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    kvreg_block_desc d1 = hash_desc(71, 1, 0, 0), d2 = hash_desc(72, 2, 1, 71), d3 = hash_desc(73, 3, 1, 72);
    assert_int_equal(kvreg_register(cpu, &d3, &b), KVREG_OK); /* a child before its parents */
    assert_int_equal(kvreg_register(gpu, &d2, &b), KVREG_OK);
    assert_int_equal(kvreg_register(gpu, &d1, &b), KVREG_OK);
    assert_int_equal(kvreg_register(gpu2, &d1, &b), KVREG_OK);
    assert_int_equal(kvreg_register(cpu, &d1, &b), KVREG_OK);
    assert_int_equal(rec->n, 4);

    kvreg_snapshot *snap = NULL;
    const kvreg_event *ev = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 4); /* 71 GPU, 71 CPU, 72 GPU, 73 CPU */
    assert_true(kvreg_snapshot_position(snap) == 4);
    int got[4][2] = {{0}};
    size_t pos[4] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ev[i].kind, KVREG_EVENT_REGISTER);
        assert_true(ev[i].sequence_hash >= 71 && ev[i].sequence_hash <= 73);
        assert_true(ev[i].medium <= KVREG_MEDIUM_CPU);
        const size_t k = (size_t)(ev[i].sequence_hash - 70);
        got[k][ev[i].medium]++;
        pos[k] = i;
        if (ev[i].medium == KVREG_MEDIUM_CPU)
            assert_int_equal(ev[i].pool_id, kvreg_pool_id(cpu));
    }
    assert_int_equal(got[1][0], 1);
    assert_int_equal(got[1][1], 1);
    assert_int_equal(got[2][0], 1);
    assert_int_equal(got[2][1], 0);
    assert_int_equal(got[3][0], 0);
    assert_int_equal(got[3][1], 1);
    assert_true(pos[2] < pos[3]); /* parent before child */
    kvreg_snapshot_free(snap);

    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    assert_int_equal(rec->n, 5);
    assert_int_equal(rec->events[4].kind, KVREG_EVENT_CLEARED);
    assert_int_equal(kvreg_register(cpu, &d1, &b), KVREG_OK);
    assert_int_equal(kvreg_register(gpu, &d1, &b), KVREG_OK);
    assert_int_equal(rec->n, 7);
    expect_event(rec, 5, KVREG_EVENT_REGISTER, 71, KVREG_MEDIUM_CPU, cpu);
    expect_event(rec, 6, KVREG_EVENT_REGISTER, 71, KVREG_MEDIUM_GPU, gpu);
    kvreg_registry_free(reg);
    free(rec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option_values),
        cmocka_unit_test(test_global_remove_carries_register_medium),
        cmocka_unit_test(test_per_tier_offload_and_evict),
        cmocka_unit_test(test_per_tier_tokens),
        cmocka_unit_test(test_per_tier_pool_free),
        cmocka_unit_test(test_per_tier_snapshot_and_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
