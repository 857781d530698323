/* The engine -> router mapping with vLLM-shaped events (the worked example of the vLLM wire
 * format: hashes 0xdab89baa7b5857c0 and 0x1f2e3d4c5b6a7988, tokens 1..4, block size 2), the two
 * hash profiles, and the argument rules. Expected router hashes come from kvreg_hash_blocks /
 * kvreg_block_hash / kvreg_sequence_hash, independent of the index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <string.h>

#include <kvreg_index.h>

#define H1 UINT64_C(0xdab89baa7b5857c0)
#define H2 UINT64_C(0x1f2e3d4c5b6a7988)
#define H3 UINT64_C(0x0123456789abcdef)

static kvreg_index *make(uint32_t bs, uint64_t salt, uint64_t profile, uint64_t hashes)
{
    kvreg_index_config *cfg = NULL;
    kvreg_index *idx = NULL;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, bs), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SALT, salt), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_PROFILE, profile), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, hashes), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

static kvreg_wire_event stored(const uint64_t *hashes, size_t n, const uint64_t *parent, const uint32_t *tokens,
                               size_t n_tokens, uint32_t medium)
{
    kvreg_wire_event e;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_STORED;
    e.block_hashes = hashes;
    e.n_block_hashes = n;
    e.has_parent = parent != NULL;
    e.parent_block_hash = parent ? *parent : 0;
    e.token_ids = tokens;
    e.n_token_ids = n_tokens;
    e.block_size = 2;
    e.medium = medium;
    e.medium_name = medium == KVREG_MEDIUM_GPU ? "GPU" : "CPU";
    return e;
}

static kvreg_wire_event removed(const uint64_t *hashes, size_t n, uint32_t medium)
{
    kvreg_wire_event e;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_REMOVED;
    e.block_hashes = hashes;
    e.n_block_hashes = n;
    e.medium = medium;
    return e;
}

/* depth of worker (id, dp) for a hash prompt; 0 when it does not match */
static uint32_t depth_of(kvreg_index *idx, const uint64_t *hashes, size_t n, uint64_t id, kvreg_index_match *m)
{
    kvreg_index_match out[8];
    size_t k = 0, i;
    assert_int_equal(kvreg_index_query_hashes(idx, hashes, n, 0, out, 8, &k), KVREG_OK);
    for (i = 0; i < k; i++) {
        if (out[i].worker_id == id) {
            if (m)
                *m = out[i];
            return out[i].depth;
        }
    }
    return 0;
}

static void test_vllm_example(void **state)
{
    static const uint32_t tokens[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const uint64_t h12[] = {H1, H2}, h2[] = {H2}, h3[] = {H3};
    kvreg_block_info want[4];
    uint64_t router[4];
    size_t n = 0, i;
    kvreg_index *idx = make(2, KVREG_ROUTER_SALT, KVREG_INDEX_PROFILE_DYNAMO, KVREG_INDEX_HASHES_ENGINE);
    kvreg_index_apply_info info;
    kvreg_wire_event ev[2];
    kvreg_index_match m;
    uint64_t v = 0;
    (void)state;

    assert_int_equal(kvreg_hash_blocks(tokens, 8, 2, KVREG_ROUTER_SALT, want, 4, &n), KVREG_OK);
    for (i = 0; i < 4; i++)
        router[i] = want[i].sequence_hash;

    /* BlockStored [H1, H2], no parent, tokens 1..4, GPU: the router hashes of blocks 0 and 1 */
    ev[0] = stored(h12, 2, NULL, tokens, 4, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 0, ev, 1, &info), KVREG_OK);
    assert_int_equal(info.flags, KVREG_INDEX_F_NEW_WORKER);
    assert_int_equal(info.blocks_stored, 2);
    assert_int_equal(depth_of(idx, router, 4, 3, &m), 2);
    assert_int_equal(m.blocks[KVREG_MEDIUM_GPU], 2);
    /* the engine hashes themselves are not router hashes: nothing matches them */
    assert_int_equal(depth_of(idx, h12, 2, 3, NULL), 0);
    /* the same by tokens: a query hashes the prompt the same way (block 4 partial, ignored) */
    {
        kvreg_index_match out[2];
        size_t k = 0;
        assert_int_equal(kvreg_index_query_tokens(idx, tokens, 5, 1, out, 2, &k), KVREG_OK);
        assert_int_equal(k, 1);
        assert_int_equal(out[0].depth, 2);
        assert_true(out[0].worker_id == 3);
    }

    /* a child whose parent is the engine hash H2: chained from H2's router hash */
    ev[0] = stored(h3, 1, &h2[0], tokens + 4, 2, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 1, ev, 1, &info), KVREG_OK);
    assert_int_equal(info.flags, 0);
    assert_int_equal(depth_of(idx, router, 4, 3, NULL), 3);

    /* H2 also offloaded to CPU, then removed from GPU (a Remove carries only engine hashes) */
    ev[0] = stored(h2, 1, &h12[0], tokens + 2, 2, KVREG_MEDIUM_CPU);
    ev[1] = removed(h2, 1, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 2, ev, 2, &info), KVREG_OK);
    assert_int_equal(info.blocks_stored, 1);
    assert_int_equal(info.blocks_removed, 1);
    assert_int_equal(depth_of(idx, router, 4, 3, &m), 3);
    assert_int_equal(m.blocks[KVREG_MEDIUM_GPU], 2);
    assert_int_equal(m.blocks[KVREG_MEDIUM_CPU], 1);
    assert_int_equal(m.tier_depth[KVREG_MEDIUM_GPU], 1);
    assert_int_equal(m.tier_depth[KVREG_MEDIUM_CPU], 0);
    assert_true(m.score == 1.0 + 0.8 + 1.0);

    /* removed from CPU too: the prefix stops at block 1, and H2's mapping is gone */
    ev[0] = removed(h2, 1, KVREG_MEDIUM_CPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 3, ev, 1, &info), KVREG_OK);
    assert_int_equal(depth_of(idx, router, 4, 3, NULL), 1);
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_MAPPED_HASHES, &v), KVREG_OK);
    assert_int_equal(v, 2); /* H1, H3 */
    /* a child of the forgotten H2 cannot be chained: skipped, not guessed */
    ev[0] = stored(h3, 1, &h2[0], tokens + 4, 2, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 4, ev, 1, &info), KVREG_OK);
    assert_int_equal(info.flags, KVREG_INDEX_F_SKIPPED);
    assert_int_equal(info.events_skipped, 1);
    /* removing a hash never stored is counted, not an error */
    ev[0] = removed(h2, 1, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 5, ev, 1, &info), KVREG_OK);
    assert_int_equal(info.removes_unknown, 1);

    /* the engine reuses H1 for other content (tokens 5,6): the old block is forgotten */
    ev[0] = stored(h12, 1, NULL, tokens + 4, 2, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 6, ev, 1, &info), KVREG_OK);
    assert_int_equal(depth_of(idx, router, 4, 3, NULL), 0);
    {
        uint64_t other = kvreg_block_hash(tokens + 4, 2, KVREG_ROUTER_SALT);
        assert_int_equal(depth_of(idx, &other, 1, 3, NULL), 1);
    }
    /* a block size other than the index's: skipped (as Dynamo drops it) */
    ev[0] = stored(h12, 1, NULL, tokens, 2, KVREG_MEDIUM_GPU);
    ev[0].block_size = 4;
    assert_int_equal(kvreg_index_apply(idx, 3, 0, 7, ev, 1, &info), KVREG_OK);
    assert_int_equal(info.events_skipped, 1);
    kvreg_index_free(idx);
}

/* Dynamo's KV router chains with seed 1337 whatever the salt; Dynamo 1.0.x with the salt. */
static void test_profiles(void **state)
{
    static const uint32_t tokens[] = {10, 11, 12, 13, 14, 15};
    const uint64_t e[] = {1, 2, 3};
    const uint64_t salt = 5;
    uint64_t b[3], dyn[3], kvr[3];
    kvreg_wire_event ev;
    size_t i;
    (void)state;
    for (i = 0; i < 3; i++)
        b[i] = kvreg_block_hash(tokens + 2 * i, 2, salt);
    dyn[0] = kvr[0] = b[0];
    for (i = 1; i < 3; i++) {
        dyn[i] = kvreg_sequence_hash(dyn[i - 1], b[i], salt);
        kvr[i] = kvreg_sequence_hash(kvr[i - 1], b[i], KVREG_ROUTER_SALT);
    }
    assert_true(dyn[1] != kvr[1]);
    ev = stored(e, 3, NULL, tokens, 6, KVREG_MEDIUM_GPU);
    {
        kvreg_index *d = make(2, salt, KVREG_INDEX_PROFILE_DYNAMO, KVREG_INDEX_HASHES_ENGINE);
        kvreg_index *k = make(2, salt, KVREG_INDEX_PROFILE_KV_ROUTER, KVREG_INDEX_HASHES_ENGINE);
        kvreg_index_match out[1];
        size_t n = 0;
        assert_int_equal(kvreg_index_apply(d, 1, 0, 0, &ev, 1, NULL), KVREG_OK);
        assert_int_equal(kvreg_index_apply(k, 1, 0, 0, &ev, 1, NULL), KVREG_OK);
        assert_int_equal(depth_of(d, dyn, 3, 1, NULL), 3);
        assert_int_equal(depth_of(d, kvr, 3, 1, NULL), 1);
        assert_int_equal(depth_of(k, kvr, 3, 1, NULL), 3);
        assert_int_equal(depth_of(k, dyn, 3, 1, NULL), 1);
        assert_int_equal(kvreg_index_query_tokens(k, tokens, 6, 0, out, 1, &n), KVREG_OK);
        assert_int_equal(out[0].depth, 3);
        kvreg_index_free(d);
        kvreg_index_free(k);
    }
    {   /* with salt 1337 the two profiles agree */
        kvreg_index *k = make(2, KVREG_ROUTER_SALT, KVREG_INDEX_PROFILE_KV_ROUTER, KVREG_INDEX_HASHES_ENGINE);
        kvreg_block_info want[3];
        uint64_t r[3];
        size_t n = 0;
        assert_int_equal(kvreg_hash_blocks(tokens, 6, 2, KVREG_ROUTER_SALT, want, 3, &n), KVREG_OK);
        for (i = 0; i < 3; i++)
            r[i] = want[i].sequence_hash;
        assert_int_equal(kvreg_index_apply(k, 1, 0, 0, &ev, 1, NULL), KVREG_OK);
        assert_int_equal(depth_of(k, r, 3, 1, NULL), 3);
        kvreg_index_free(k);
    }
}

static void test_arguments(void **state)
{
    kvreg_index_config *cfg = NULL;
    kvreg_index *idx = NULL;
    kvreg_wire_event ev;
    kvreg_index_match out[1];
    kvreg_index_depth d;
    size_t n = 7;
    uint64_t v = 0, h = 1;
    (void)state;
    assert_int_equal(kvreg_index_config_new(NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_new(NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, (1u << 20) + 1), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_PROFILE, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 3), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 8192), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_WEIGHT + KVREG_MEDIUM_COUNT, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, (UINT64_C(1) << 32) + 1), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_WEIGHT, 1000001), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(cfg, 999, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_set(NULL, KVREG_INDEX_OPT_SALT, 1), KVREG_EINVAL);
    kvreg_index_config_free(cfg);
    kvreg_index_config_free(NULL);
    kvreg_index_free(NULL);

    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK); /* defaults */
    assert_int_equal(kvreg_index_apply(NULL, 1, 0, 0, NULL, 0, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_apply(idx, 1, 0, 0, NULL, 1, NULL), KVREG_EINVAL);
    memset(&ev, 0, sizeof ev);
    ev.type = KVREG_WIRE_STORED;
    ev.n_block_hashes = 1; /* NULL array with a count: rejected, nothing applied, no worker added */
    assert_int_equal(kvreg_index_apply(idx, 1, 0, 0, &ev, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_WORKERS, &v), KVREG_OK);
    assert_int_equal(v, 0);
    assert_int_equal(kvreg_index_apply(idx, 1, 0, 0, NULL, 0, NULL), KVREG_OK); /* empty batch */
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_WORKERS, &v), KVREG_OK);
    assert_int_equal(v, 1);
    assert_int_equal(kvreg_index_query_hashes(idx, NULL, 1, 0, out, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_hashes(idx, &h, 1, 0, out, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_hashes(NULL, &h, 1, 0, out, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_hashes(idx, NULL, 0, 0, NULL, 0, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_index_query_depths(idx, NULL, 1, &d, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_depths(idx, &h, 1, &d, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_depths(NULL, &h, 1, &d, 1, &n), KVREG_EINVAL);
    n = 7;
    assert_int_equal(kvreg_index_query_depths(idx, NULL, 0, NULL, 0, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_index_query_depths_tokens(idx, NULL, 3, &d, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_depths_tokens(idx, (const uint32_t *)&h, SIZE_MAX / 4 + 1, &d, 1, &n),
                     KVREG_EOVERFLOW);
    assert_int_equal(kvreg_index_query_tokens(idx, NULL, 3, 0, out, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_query_tokens(idx, (const uint32_t *)&h, SIZE_MAX / 4 + 1, 0, out, 1, &n),
                     KVREG_EOVERFLOW);
    assert_int_equal(kvreg_index_stat(idx, 999, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_index_remove_worker(idx, 2, 0), KVREG_ENOENT);
    assert_int_equal(kvreg_index_remove_worker(idx, 1, 1), KVREG_ENOENT); /* dp rank is part of the name */
    assert_int_equal(kvreg_index_remove_worker(idx, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_index_remove_worker(idx, 1, 0), KVREG_ENOENT);
    assert_int_equal(kvreg_index_clear_worker(NULL, 1, 0, 0), KVREG_EINVAL);
    kvreg_index_free(idx);
}

/* Many workers come and go: slots are reused and every answer names the right worker. */
static void test_worker_churn(void **state)
{
    kvreg_index *idx = make(2, KVREG_ROUTER_SALT, KVREG_INDEX_PROFILE_DYNAMO, KVREG_INDEX_HASHES_OWN);
    uint64_t round, w, v = 0;
    (void)state;
    for (round = 0; round < 5; round++) {
        for (w = 0; w < 300; w++) {
            uint64_t h[2] = {round * 1000 + w + 1, UINT64_C(0xffff0000) + w};
            kvreg_wire_event ev = stored(h, 2, NULL, NULL, 0, KVREG_MEDIUM_GPU);
            kvreg_index_match m;
            assert_int_equal(kvreg_index_apply(idx, w * 7919, (uint32_t)round, 0, &ev, 1, NULL), KVREG_OK);
            assert_int_equal(depth_of(idx, h, 2, w * 7919, &m), 2);
            assert_int_equal(m.dp_rank, round);
        }
        for (w = 0; w < 300; w++)
            assert_int_equal(kvreg_index_remove_worker(idx, w * 7919, (uint32_t)round), KVREG_OK);
        assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &v), KVREG_OK);
        assert_int_equal(v, 0);
        assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_WORKERS, &v), KVREG_OK);
        assert_int_equal(v, 0);
    }
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_MEMORY_BYTES, &v), KVREG_OK);
    assert_true(v > 0);
    kvreg_index_free(idx);
}

/* Worker 7 stores n engine hashes on the GPU (1000 + i, into gpu[]) and n on the CPU
 * (5000 + i, into cpu[]), all with the same two tokens; one batch per pair. Returns the next
 * seq. */
static uint64_t store_same_content(kvreg_index *idx, uint64_t *gpu, uint64_t *cpu, size_t n,
                                   const uint32_t tokens[2])
{
    kvreg_index_apply_info info;
    uint64_t seq = 0;
    for (size_t i = 0; i < n; i++) {
        gpu[i] = 1000 + i;
        cpu[i] = 5000 + i;
        kvreg_wire_event ev[2] = {stored(&gpu[i], 1, NULL, tokens, 2, KVREG_MEDIUM_GPU),
                                  stored(&cpu[i], 1, NULL, tokens, 2, KVREG_MEDIUM_CPU)};
        assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, ev, 2, &info), KVREG_OK);
        assert_int_equal(info.blocks_stored, 2);
    }
    return seq;
}

/* ENGINE mode counts, per (router hash, worker, tier), how many of the worker's engine hashes
 * name the content: past 255 (a byte's worth) the count stays exact. 300 engine hashes with the
 * same tokens on the GPU and 300 on the CPU; the content stays matched on a tier until the
 * last of them there is removed. */
static void test_engine_counts_past_255(void **state)
{
    (void)state;
    enum { N = 300 };
    kvreg_index *idx = make(2, 0, KVREG_INDEX_PROFILE_DYNAMO, KVREG_INDEX_HASHES_ENGINE);
    static uint64_t gpu[N], cpu[N];
    const uint32_t tokens[2] = {5, 6};
    kvreg_index_apply_info info;
    uint64_t seq = store_same_content(idx, gpu, cpu, N, tokens);
    kvreg_index_match m[2];
    size_t n = 0;
    /* Remove all but one on the GPU (N - 1 >= 255): still held on both tiers. */
    for (size_t i = 0; i + 1 < N; i++) {
        kvreg_wire_event ev = removed(&gpu[i], 1, KVREG_MEDIUM_GPU);
        assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, &ev, 1, &info), KVREG_OK);
        assert_int_equal(info.blocks_removed, 1);
        assert_int_equal(kvreg_index_query_tokens(idx, tokens, 2, 0, m, 2, &n), KVREG_OK);
        assert_int_equal(n, 1);
        assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_GPU], 1);
        assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_CPU], 1);
    }
    kvreg_wire_event last = removed(&gpu[N - 1], 1, KVREG_MEDIUM_GPU);
    assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, &last, 1, &info), KVREG_OK);
    assert_int_equal(kvreg_index_query_tokens(idx, tokens, 2, 0, m, 2, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_GPU], 0);
    assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_CPU], 1);
    for (size_t i = 0; i < N; i++) {
        kvreg_wire_event ev = removed(&cpu[i], 1, KVREG_MEDIUM_CPU);
        assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, &ev, 1, &info), KVREG_OK);
        assert_int_equal(kvreg_index_query_tokens(idx, tokens, 2, 0, m, 2, &n), KVREG_OK);
        assert_int_equal(n, i + 1 < N ? 1 : 0);
    }
    uint64_t entries = 1;
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &entries), KVREG_OK);
    assert_int_equal(entries, 0);

    /* Past 255 again, then the worker cleared: nothing of it is left to resurface. */
    for (size_t i = 0; i < N; i++) {
        kvreg_wire_event ev = stored(&gpu[i], 1, NULL, tokens, 2, KVREG_MEDIUM_GPU);
        assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, &ev, 1, &info), KVREG_OK);
    }
    assert_int_equal(kvreg_index_clear_worker(idx, 7, 0, seq), KVREG_OK);
    for (size_t i = 0; i < 2; i++) {
        kvreg_wire_event ev = stored(&gpu[i], 1, NULL, tokens, 2, KVREG_MEDIUM_GPU);
        assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, &ev, 1, &info), KVREG_OK);
    }
    for (size_t i = 0; i < 2; i++) {
        kvreg_wire_event ev = removed(&gpu[i], 1, KVREG_MEDIUM_GPU);
        assert_int_equal(kvreg_index_apply(idx, 7, 0, seq++, &ev, 1, &info), KVREG_OK);
    }
    assert_int_equal(kvreg_index_query_tokens(idx, tokens, 2, 0, m, 2, &n), KVREG_OK);
    assert_int_equal(n, 0);
    kvreg_index_free(idx);
}

/* The same counts past 255 through a dump and a load (the load counts them again, in the
 * table up to 255 and the rest beside it): the copy dumps the same bytes, and the content
 * stays matched on the GPU until the last of its 300 engine hashes there is removed. */
static void test_engine_counts_past_255_loaded(void **state)
{
    (void)state;
    enum { N = 300 };
    kvreg_index *idx = make(2, 0, KVREG_INDEX_PROFILE_DYNAMO, KVREG_INDEX_HASHES_ENGINE);
    kvreg_index *copy = make(2, 0, KVREG_INDEX_PROFILE_DYNAMO, KVREG_INDEX_HASHES_ENGINE);
    static uint64_t gpu[N], cpu[N];
    const uint32_t tokens[2] = {5, 6};
    kvreg_index_apply_info info;
    uint64_t seq = store_same_content(idx, gpu, cpu, N, tokens);
    void *d = NULL, *again = NULL;
    size_t dn = 0, an = 0;
    assert_int_equal(kvreg_index_dump_alloc(idx, &d, &dn), KVREG_OK);
    assert_int_equal(kvreg_index_load(copy, d, dn), KVREG_OK);
    assert_int_equal(kvreg_index_dump_alloc(copy, &again, &an), KVREG_OK);
    assert_int_equal(an, dn);
    assert_memory_equal(again, d, dn);
    uint64_t v = 0;
    assert_int_equal(kvreg_index_stat(copy, KVREG_INDEX_STAT_ENTRIES, &v), KVREG_OK);
    assert_int_equal(v, 1); /* one (router hash, worker) entry for all 600 */
    kvreg_index_match m[2];
    size_t n = 0;
    for (size_t i = 0; i < N; i++) {
        kvreg_wire_event ev = removed(&gpu[i], 1, KVREG_MEDIUM_GPU);
        assert_int_equal(kvreg_index_apply(copy, 7, 0, seq + i, &ev, 1, &info), KVREG_OK);
        assert_int_equal(info.blocks_removed, 1);
        assert_int_equal(kvreg_index_query_tokens(copy, tokens, 2, 0, m, 2, &n), KVREG_OK);
        assert_int_equal(n, 1);
        assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_GPU], i + 1 < N ? 1 : 0);
        assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_CPU], 1);
    }
    free(d);
    free(again);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_example),
        cmocka_unit_test(test_profiles),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_worker_churn),
        cmocka_unit_test(test_engine_counts_past_255),
        cmocka_unit_test(test_engine_counts_past_255_loaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
