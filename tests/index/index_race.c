/* Concurrent writers and readers on one index, more threads than cores: 4 writer threads (two
 * workers each, own hashes, so they share table shards) grow and shrink prefixes of one chain
 * (tail stores and tail removes, GPU and CPU, an occasional Cleared or worker removal) while 4
 * readers query the chain (ranked and depths-only answers). Workers are removed and come back
 * often enough that their slots are handed out again while queries run. Readers check every
 * answer is well formed and names each worker at most once; at the end each worker's
 * entries must equal what its writer holds. Bounded by iterations, not time: built for TSan. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg_index.h>

#define WRITERS 4
#define READERS 4
#define CHAIN 24
#define ITER 30000

static kvreg_index *idx;
static uint64_t chain[CHAIN];
static int failed;

#define CHECK(cond)                                                                                    \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "index_race: %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
            __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);                                            \
        }                                                                                              \
    } while (0)

typedef struct writer {
    int id;
    uint64_t held[2]; /* prefix length each of its two workers holds in GPU */
    uint64_t seq[2];
    uint64_t rng;
} writer;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *write_loop(void *arg)
{
    writer *w = arg;
    int i;
    for (i = 0; i < ITER; i++) {
        int k = (int)(next_rand(&w->rng) & 1);
        uint64_t wid = (uint64_t)w->id * 2 + (uint64_t)k + 1;
        uint64_t r = next_rand(&w->rng) % 100;
        kvreg_wire_event ev;
        kvreg_index_apply_info info;
        memset(&ev, 0, sizeof ev);
        if (r < 2) {
            int rc = kvreg_index_remove_worker(idx, wid, 0);
            CHECK(rc == KVREG_OK || rc == KVREG_ENOENT);
            w->held[k] = 0;
            w->seq[k] = 0;
            continue;
        }
        if (r < 4) {
            ev.type = KVREG_WIRE_CLEARED;
            w->held[k] = 0;
        } else if (r < 55 && w->held[k] < CHAIN) {
            uint64_t n = 1 + next_rand(&w->rng) % (CHAIN - w->held[k]);
            ev.type = KVREG_WIRE_STORED;
            ev.block_hashes = chain + w->held[k];
            ev.n_block_hashes = n;
            ev.medium = (r & 1) ? KVREG_MEDIUM_GPU : KVREG_MEDIUM_CPU;
            if (ev.medium == KVREG_MEDIUM_CPU)
                ev.n_block_hashes = n = 0; /* CPU copies come and go below; GPU defines held */
            w->held[k] += n;
        } else if (w->held[k] > 0) {
            uint64_t n = 1 + next_rand(&w->rng) % w->held[k];
            ev.type = KVREG_WIRE_REMOVED;
            ev.block_hashes = chain + (w->held[k] - n);
            ev.n_block_hashes = n;
            ev.medium = KVREG_MEDIUM_GPU;
            w->held[k] -= n;
        } else {
            ev.type = KVREG_WIRE_STORED; /* a CPU copy of block 0: tiers beside GPU */
            ev.block_hashes = chain;
            ev.n_block_hashes = 1;
            ev.medium = KVREG_MEDIUM_CPU;
        }
        CHECK(kvreg_index_apply(idx, wid, 0, w->seq[k]++, &ev, 1, &info) == KVREG_OK);
        CHECK((info.flags & (KVREG_INDEX_F_GAP | KVREG_INDEX_F_STALE | KVREG_INDEX_F_RESET)) == 0);
    }
    return NULL;
}

static void *read_loop(void *arg)
{
    kvreg_index_match out[2 * WRITERS];
    kvreg_index_depth depths[2 * WRITERS];
    unsigned seen;
    int i;
    (void)arg;
    for (i = 0; i < ITER; i++) {
        size_t n = 0, j;
        unsigned t;
        CHECK(kvreg_index_query_hashes(idx, chain, CHAIN, (size_t)(i % 3), out, 2 * WRITERS, &n) == KVREG_OK);
        CHECK(n <= 2 * WRITERS);
        seen = 0;
        for (j = 0; j < n; j++) {
            uint32_t sum = 0;
            CHECK(out[j].worker_id >= 1 && out[j].worker_id <= 2 * WRITERS);
            /* each worker once: removed workers' slots are handed out again while queries run */
            CHECK(!(seen >> out[j].worker_id & 1));
            seen |= 1u << out[j].worker_id;
            CHECK(out[j].depth >= 1 && out[j].depth <= CHAIN);
            for (t = 0; t < KVREG_MEDIUM_COUNT; t++) {
                sum += out[j].blocks[t];
                CHECK(out[j].tier_depth[t] <= out[j].depth);
            }
            CHECK(sum == out[j].depth);
            if (j > 0)
                CHECK(out[j - 1].score >= out[j].score);
        }
        /* the depths-only answer: each worker at most once, depths in range */
        CHECK(kvreg_index_query_depths(idx, chain, CHAIN, depths, 2 * WRITERS, &n) == KVREG_OK);
        CHECK(n <= 2 * WRITERS);
        seen = 0;
        for (j = 0; j < n; j++) {
            CHECK(depths[j].worker_id >= 1 && depths[j].worker_id <= 2 * WRITERS);
            CHECK(depths[j].depth >= 1 && depths[j].depth <= CHAIN);
            CHECK(!(seen >> depths[j].worker_id & 1));
            seen |= 1u << depths[j].worker_id;
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t tw[WRITERS], tr[READERS];
    writer w[WRITERS];
    uint64_t entries = 0, want = 0;
    int i;
    kvreg_index_config *cfg = NULL;
    if (kvreg_index_config_new(&cfg) != KVREG_OK ||
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN) != KVREG_OK ||
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 4) != KVREG_OK || /* few shards: contention */
        kvreg_index_new(&idx, cfg) != KVREG_OK)
        return 1;
    kvreg_index_config_free(cfg);
    for (i = 0; i < CHAIN; i++)
        chain[i] = UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(i + 1);
    for (i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].rng = UINT64_C(88172645463325252) + (uint64_t)i;
        if (pthread_create(&tw[i], NULL, write_loop, &w[i]) != 0)
            return 1;
    }
    for (i = 0; i < READERS; i++)
        if (pthread_create(&tr[i], NULL, read_loop, NULL) != 0)
            return 1;
    for (i = 0; i < WRITERS; i++)
        pthread_join(tw[i], NULL);
    for (i = 0; i < READERS; i++)
        pthread_join(tr[i], NULL);

    /* Quiet now: each worker holds exactly its GPU prefix, plus block 0 where only CPU has it. */
    for (i = 0; i < WRITERS; i++) {
        int k;
        for (k = 0; k < 2; k++) {
            kvreg_index_match out[2 * WRITERS];
            size_t n = 0, j;
            uint32_t depth = 0;
            uint64_t wid = (uint64_t)i * 2 + (uint64_t)k + 1;
            kvreg_index_depth depths[2 * WRITERS];
            size_t n_depths = 0;
            uint32_t any_depth = 0;
            CHECK(kvreg_index_query_hashes(idx, chain, CHAIN, 0, out, 2 * WRITERS, &n) == KVREG_OK);
            for (j = 0; j < n; j++)
                if (out[j].worker_id == wid) {
                    depth = out[j].tier_depth[KVREG_MEDIUM_GPU];
                    any_depth = out[j].depth;
                    want += out[j].depth;
                }
            CHECK(depth == w[i].held[k]);
            CHECK(kvreg_index_query_depths(idx, chain, CHAIN, depths, 2 * WRITERS, &n_depths) == KVREG_OK);
            CHECK(n_depths == n);
            for (j = 0; j < n_depths; j++)
                if (depths[j].worker_id == wid) {
                    CHECK(depths[j].depth == any_depth);
                    any_depth = 0;
                }
            CHECK(any_depth == 0);
        }
    }
    CHECK(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &entries) == KVREG_OK);
    CHECK(entries == want);
    kvreg_index_free(idx);
    if (failed)
        return 1;
    printf("index_race: %d writers x %d batches, %d readers x %d queries: consistent\n", WRITERS, ITER,
           READERS, ITER);
    return 0;
}
