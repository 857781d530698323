/* Queries under concurrency (kvreg_index.h, "Thread-safety"): more threads than cores, several
 * query threads while writer threads store and remove blocks, clear workers and remove them.
 *
 * What a reader may see is checked on every answer against what was ever stored: a worker in an
 * answer with depth d held each of the prompt's first d blocks at some moment (each writer sets
 * a worker's "ever stored" bit for a hash before it applies the Stored event, so a reader that
 * finds the entry also finds the bit); it is one of the workers that exist; it appears once; a
 * ranked answer's blocks per tier add up to its depth. Once the writers stop, every answer must
 * equal the model exactly (each worker's current blocks, kept by its writer).
 *
 * Progress, not timing: the writers keep writing until every reader has finished its queries,
 * or until a cap of batches each; the test fails if a writer reached the cap first (the readers
 * were held up by the writers). Each reader starts after the first batch and stops only after
 * a batch went in during its queries, so the readers always overlap the writers. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg_index.h>

#define WRITERS 3
#define WORKERS_PER_WRITER 4
#define WORKERS (WRITERS * WORKERS_PER_WRITER)
#define READERS 4
#define QUERIES 3000           /* per reader */
#define WRITER_CAP 20000000    /* batches per writer: the bound on the readers */
#define PROMPTS 6
#define SHARED 2               /* blocks every prompt starts with */
#define OWN 7                  /* blocks of each prompt after those */
#define PROMPT_LEN (SHARED + OWN)
#define HASHES (SHARED + PROMPTS * OWN) /* <= 64: one bit each */

static kvreg_index *idx;
static uint64_t hash_of[HASHES];
static int prompt[PROMPTS][PROMPT_LEN]; /* indexes into hash_of */
/* Shared words are read and written with the __atomic builtins (C99 has no atomics). */
static uint64_t ever[WORKERS + 1]; /* by worker id: hashes it ever stored, one bit each */
static int readers_left = READERS;
static int start_flag;
static uint64_t batches_while_reading;
static int failed;

#define CHECK(cond)                                                                                    \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "query_concurrent: %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);                                                                  \
        }                                                                                              \
    } while (0)

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct writer {
    int id;
    uint64_t now[WORKERS_PER_WRITER]; /* hashes each worker holds now (bits) */
    uint64_t seq[WORKERS_PER_WRITER];
    uint64_t rng;
    uint64_t batches;
    int capped;
} writer;

static void apply(writer *w, int k, int type, const uint64_t *hashes, size_t n)
{
    kvreg_wire_event ev;
    kvreg_index_apply_info info;
    uint64_t wid = (uint64_t)(w->id * WORKERS_PER_WRITER + k + 1);
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.block_hashes = hashes;
    ev.n_block_hashes = n;
    ev.medium = KVREG_MEDIUM_GPU;
    CHECK(kvreg_index_apply(idx, wid, 0, w->seq[k]++, &ev, 1, &info) == KVREG_OK);
    CHECK((info.flags & (KVREG_INDEX_F_GAP | KVREG_INDEX_F_STALE | KVREG_INDEX_F_RESET)) == 0);
}

static void *write_loop(void *arg)
{
    writer *w = arg;
    while (!__atomic_load_n(&start_flag, __ATOMIC_ACQUIRE)) {
    }
    while (__atomic_load_n(&readers_left, __ATOMIC_ACQUIRE) > 0) {
        int k = (int)(next_rand(&w->rng) % WORKERS_PER_WRITER);
        uint64_t wid = (uint64_t)(w->id * WORKERS_PER_WRITER + k + 1);
        uint64_t r = next_rand(&w->rng) % 100;
        if (w->batches == WRITER_CAP) {
            w->capped = 1;
            break;
        }
        w->batches++;
        __atomic_fetch_add(&batches_while_reading, 1, __ATOMIC_RELAXED);
        if (r < 1) { /* the worker leaves; it may come back under the same id (a new slot) */
            int rc = kvreg_index_remove_worker(idx, wid, 0);
            CHECK(rc == KVREG_OK || rc == KVREG_ENOENT);
            w->now[k] = 0;
            w->seq[k] = 0;
        } else if (r < 3) {
            apply(w, k, KVREG_WIRE_CLEARED, NULL, 0);
            w->now[k] = 0;
        } else if (r < 65) { /* extend one prompt's prefix: the first block of it not held */
            const int *p = prompt[next_rand(&w->rng) % PROMPTS];
            int i = 0;
            while (i < PROMPT_LEN && (w->now[k] >> p[i] & 1))
                i++;
            if (i == PROMPT_LEN)
                continue;
            __atomic_fetch_or(&ever[wid], UINT64_C(1) << p[i], __ATOMIC_RELEASE); /* before the index can show it */
            apply(w, k, KVREG_WIRE_STORED, &hash_of[p[i]], 1);
            w->now[k] |= UINT64_C(1) << p[i];
        } else if (w->now[k]) { /* remove one held block, anywhere (holes in prefixes too) */
            int b;
            do
                b = (int)(next_rand(&w->rng) % HASHES);
            while (!(w->now[k] >> b & 1));
            apply(w, k, KVREG_WIRE_REMOVED, &hash_of[b], 1);
            w->now[k] &= ~(UINT64_C(1) << b);
        }
    }
    return NULL;
}

static void check_depth(const int *p, uint64_t wid, uint32_t depth, uint64_t *seen)
{
    uint64_t ev;
    uint32_t i;
    CHECK(wid >= 1 && wid <= WORKERS);
    if (wid < 1 || wid > WORKERS)
        return;
    CHECK(depth >= 1 && depth <= PROMPT_LEN);
    CHECK(!(*seen >> wid & 1)); /* each worker once */
    *seen |= UINT64_C(1) << wid;
    ev = __atomic_load_n(&ever[wid], __ATOMIC_ACQUIRE);
    for (i = 0; i < depth && i < PROMPT_LEN; i++)
        CHECK(ev >> p[i] & 1); /* it held this block at some moment */
}

static void *read_loop(void *arg)
{
    kvreg_index_match m[WORKERS];
    kvreg_index_depth d[WORKERS];
    uint64_t rng = (uint64_t)(uintptr_t)arg * 7919 + 1;
    uint64_t b0;
    int q;
    while (!__atomic_load_n(&start_flag, __ATOMIC_ACQUIRE)) {
    }
    /* Ask while the writers write: wait for their first batch (on a loaded machine the readers
     * could otherwise finish before a writer ran), and go on past QUERIES until at least one
     * more batch went in during this reader's queries. */
    while ((b0 = __atomic_load_n(&batches_while_reading, __ATOMIC_RELAXED)) == 0)
        sched_yield();
    for (q = 0; q < QUERIES || __atomic_load_n(&batches_while_reading, __ATOMIC_RELAXED) == b0; q++) {
        const int *p = prompt[next_rand(&rng) % PROMPTS];
        uint64_t h[PROMPT_LEN], seen = 0;
        size_t n = 0, j;
        int i;
        for (i = 0; i < PROMPT_LEN; i++)
            h[i] = hash_of[p[i]];
        if (q & 1) {
            CHECK(kvreg_index_query_depths(idx, h, PROMPT_LEN, d, WORKERS, &n) == KVREG_OK);
            CHECK(n <= WORKERS);
            for (j = 0; j < n && j < WORKERS; j++)
                check_depth(p, d[j].worker_id, d[j].depth, &seen);
        } else {
            CHECK(kvreg_index_query_hashes(idx, h, PROMPT_LEN, 0, m, WORKERS, &n) == KVREG_OK);
            CHECK(n <= WORKERS);
            for (j = 0; j < n && j < WORKERS; j++) {
                uint32_t sum = 0, t;
                check_depth(p, m[j].worker_id, m[j].depth, &seen);
                for (t = 0; t < KVREG_MEDIUM_COUNT; t++)
                    sum += m[j].blocks[t];
                CHECK(sum == m[j].depth);
            }
        }
    }
    __atomic_fetch_sub(&readers_left, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(void)
{
    pthread_t tw[WRITERS], tr[READERS];
    writer w[WRITERS];
    uint64_t total = 0;
    int i, pi;
    kvreg_index_config *cfg = NULL;
    if (kvreg_index_config_new(&cfg) != KVREG_OK ||
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN) != KVREG_OK ||
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 2) != KVREG_OK || /* few shards: contention */
        kvreg_index_new(&idx, cfg) != KVREG_OK)
        return 1;
    kvreg_index_config_free(cfg);
    for (i = 0; i < HASHES; i++)
        hash_of[i] = UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(i + 1);
    for (pi = 0; pi < PROMPTS; pi++)
        for (i = 0; i < PROMPT_LEN; i++)
            prompt[pi][i] = i < SHARED ? i : SHARED + pi * OWN + (i - SHARED);
    for (i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].rng = UINT64_C(88172645463325252) + (uint64_t)i;
        if (pthread_create(&tw[i], NULL, write_loop, &w[i]) != 0)
            return 1;
    }
    for (i = 0; i < READERS; i++)
        if (pthread_create(&tr[i], NULL, read_loop, (void *)(uintptr_t)(i + 1)) != 0)
            return 1;
    __atomic_store_n(&start_flag, 1, __ATOMIC_RELEASE);
    for (i = 0; i < READERS; i++)
        pthread_join(tr[i], NULL);
    for (i = 0; i < WRITERS; i++) {
        pthread_join(tw[i], NULL);
        CHECK(!w[i].capped); /* the readers finished while the writers ran */
        total += w[i].batches;
    }
    CHECK(__atomic_load_n(&batches_while_reading, __ATOMIC_RELAXED) > 0);

    /* Quiet now: every answer equals the model. */
    for (pi = 0; pi < PROMPTS; pi++) {
        uint64_t h[PROMPT_LEN];
        kvreg_index_depth d[WORKERS];
        kvreg_index_match m[WORKERS];
        size_t n = 0, nm = 0, want_n = 0, j;
        uint32_t want[WORKERS + 1] = {0};
        for (i = 0; i < PROMPT_LEN; i++)
            h[i] = hash_of[prompt[pi][i]];
        for (i = 0; i < WORKERS; i++) {
            const writer *ww = &w[i / WORKERS_PER_WRITER];
            uint64_t now = ww->now[i % WORKERS_PER_WRITER];
            uint32_t dep = 0;
            while (dep < PROMPT_LEN && (now >> prompt[pi][dep] & 1))
                dep++;
            want[i + 1] = dep;
            want_n += dep > 0;
        }
        CHECK(kvreg_index_query_depths(idx, h, PROMPT_LEN, d, WORKERS, &n) == KVREG_OK);
        CHECK(n == want_n);
        for (j = 0; j < n; j++)
            CHECK(d[j].worker_id >= 1 && d[j].worker_id <= WORKERS && d[j].depth == want[d[j].worker_id]);
        CHECK(kvreg_index_query_hashes(idx, h, PROMPT_LEN, 0, m, WORKERS, &nm) == KVREG_OK);
        CHECK(nm == want_n);
        for (j = 0; j < nm; j++)
            CHECK(m[j].worker_id >= 1 && m[j].worker_id <= WORKERS && m[j].depth == want[m[j].worker_id]);
    }
    kvreg_index_free(idx);
    if (__atomic_load_n(&failed, __ATOMIC_RELAXED))
        return 1;
    printf("query_concurrent: %d readers x %d queries during %llu batches of %d writers: valid\n", READERS,
           QUERIES, (unsigned long long)total, WRITERS);
    return 0;
}
