/* libFuzzer target: the input bytes become an index configuration and a sequence of garbage
 * decoded events (any type, medium, hash, parent, block size and token count, in batches with
 * any sequence number), queries, clears and worker removals. Every answer must be well formed
 * (tier counts summing to the depth, best first), and removing every worker must leave the
 * index empty (no entry or mapping leaked by any path). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg_index.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct src {
    const uint8_t *p;
    size_t n;
} src;

static unsigned byte(src *s)
{
    if (!s->n)
        return 0;
    s->n--;
    return *s->p++;
}

#define MUST(cond)                                                                                     \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "fuzz_index: %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            abort();                                                                                   \
        }                                                                                              \
    } while (0)

static const uint64_t pool[16] = {0, 1, 2, 3, 0x7f, 0xff, 0x100, UINT64_MAX, UINT64_MAX - 1,
                                  UINT64_C(0xdab89baa7b5857c0), UINT64_C(0x1f2e3d4c5b6a7988),
                                  UINT64_C(0x8000000000000000), 42, 43, 44, 45};

static void check_answer(const kvreg_index_match *m, size_t n)
{
    size_t i;
    unsigned t;
    for (i = 0; i < n; i++) {
        uint32_t sum = 0;
        MUST(m[i].depth >= 1);
        for (t = 0; t < KVREG_MEDIUM_COUNT; t++) {
            sum += m[i].blocks[t];
            MUST(m[i].tier_depth[t] <= m[i].depth);
        }
        MUST(sum == m[i].depth);
        if (i)
            MUST(m[i - 1].score >= m[i].score);
    }
}

static void query(kvreg_index *idx, src *s, int by_tokens)
{
    uint64_t hashes[8];
    uint32_t tokens[32];
    kvreg_index_match out[16];
    kvreg_index_depth depths[16];
    size_t n = byte(s) % 9, i, got = 0, n_tokens, n_depths = 0;
    int rc;
    for (i = 0; i < n; i++)
        hashes[i] = pool[byte(s) % 16];
    for (i = 0; i < 32; i++)
        tokens[i] = byte(s) % 4;
    n_tokens = byte(s) % 33;
    if (by_tokens)
        rc = kvreg_index_query_tokens(idx, tokens, n_tokens, byte(s) % 3, out, 16, &got);
    else
        rc = kvreg_index_query_hashes(idx, hashes, n, byte(s) % 3, out, 16, &got);
    MUST(rc == KVREG_OK);
    check_answer(out, got);

    /* the depths-only answer: the ranked answer's workers and depths, each once */
    if (by_tokens) {
        rc = kvreg_index_query_tokens(idx, tokens, n_tokens, 0, out, 16, &got);
        MUST(rc == kvreg_index_query_depths_tokens(idx, tokens, n_tokens, depths, 16, &n_depths));
    } else {
        rc = kvreg_index_query_hashes(idx, hashes, n, 0, out, 16, &got);
        MUST(rc == kvreg_index_query_depths(idx, hashes, n, depths, 16, &n_depths));
    }
    MUST(rc == KVREG_OK && n_depths == got);
    for (i = 0; i < n_depths; i++) {
        size_t j, found = 0;
        for (j = 0; j < got; j++)
            found += out[j].worker_id == depths[i].worker_id && out[j].dp_rank == depths[i].dp_rank &&
                     out[j].depth == depths[i].depth;
        MUST(found == 1);
    }
}

static void batch(kvreg_index *idx, src *s)
{
    kvreg_wire_event ev[4];
    uint64_t hashes[4][6];
    uint32_t tokens[64];
    size_t n_ev = byte(s) % 5, i, j;
    uint64_t worker = byte(s) % 4, seq;
    uint32_t dp = byte(s) % 2;
    unsigned r = byte(s);
    kvreg_index_apply_info info;
    seq = r < 200 ? r % 8 : KVREG_INDEX_SEQ_NONE;
    for (i = 0; i < 64; i++)
        tokens[i] = byte(s) % 3;
    memset(ev, 0, sizeof ev);
    for (i = 0; i < n_ev; i++) {
        unsigned m = byte(s) % 7;
        ev[i].type = byte(s) % 5;
        ev[i].medium = m < 4 ? m : m == 4 ? KVREG_MEDIUM_UNKNOWN : m * 1000u;
        ev[i].n_block_hashes = byte(s) % 7;
        for (j = 0; j < ev[i].n_block_hashes; j++)
            hashes[i][j] = pool[byte(s) % 16];
        ev[i].block_hashes = hashes[i];
        ev[i].has_parent = byte(s) % 2;
        ev[i].parent_block_hash = pool[byte(s) % 16];
        ev[i].block_size = byte(s) % 6;
        ev[i].n_token_ids = byte(s) % 25;
        ev[i].token_ids = tokens;
    }
    MUST(kvreg_index_apply(idx, worker, dp, seq, ev, n_ev, &info) == KVREG_OK);
    MUST(info.events_applied + info.events_skipped == n_ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    src s = {data, size};
    kvreg_index_config *cfg = NULL;
    kvreg_index *idx = NULL;
    uint64_t v = 0, w;
    uint32_t dp;
    unsigned mode = byte(&s);
    MUST(kvreg_index_config_new(&cfg) == KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, mode & 1) == KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_PROFILE, (mode >> 1) & 1) == KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, 1 + (mode >> 2) % 4) == KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 1u << ((mode >> 4) % 4)) == KVREG_OK);
    MUST(kvreg_index_new(&idx, cfg) == KVREG_OK);
    kvreg_index_config_free(cfg);
    while (s.n) {
        unsigned op = byte(&s) % 10;
        if (op < 6) {
            batch(idx, &s);
        } else if (op < 8) {
            query(idx, &s, op == 7);
        } else if (op == 8) {
            int rc = kvreg_index_clear_worker(idx, byte(&s) % 4, byte(&s) % 2, byte(&s) % 2 ? 3 : KVREG_INDEX_SEQ_NONE);
            MUST(rc == KVREG_OK);
        } else {
            int rc = kvreg_index_remove_worker(idx, byte(&s) % 4, byte(&s) % 2);
            MUST(rc == KVREG_OK || rc == KVREG_ENOENT);
        }
    }
    for (w = 0; w < 4; w++)
        for (dp = 0; dp < 2; dp++)
            kvreg_index_remove_worker(idx, w, dp);
    MUST(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &v) == KVREG_OK && v == 0);
    MUST(kvreg_index_stat(idx, KVREG_INDEX_STAT_MAPPED_HASHES, &v) == KVREG_OK && v == 0);
    MUST(kvreg_index_stat(idx, KVREG_INDEX_STAT_WORKERS, &v) == KVREG_OK && v == 0);
    kvreg_index_free(idx);
    return 0;
}
