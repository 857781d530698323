/* The per-shard block limit kvreg.h documents: with KVREG_OPT_SHARDS = 1, exactly 16,776,960
 * (2^24 - 256) blocks register; the next returns KVREG_EOVERFLOW (not ENOMEM: memory is not
 * what ran out) and changes nothing; after one release, one more registers. About 900 MB and
 * a few seconds, so it is its own suite ('limits'), left out of the sanitizer passes. */
#include <kvreg.h>
#include <stdio.h>
#include <stdlib.h>

#define LIMIT 16776960u
#define CHUNK 1048576u
#define FAIL(...) do { fprintf(stderr, "shard_limit FAIL: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static void describe(kvreg_block_desc *d, unsigned n, unsigned first) {
    for (unsigned i = 0; i < n; i++) {
        d[i].sequence_hash = 0x9E3779B97F4A7C15ull * (first + i + 1);
        d[i].block_hash = first + i;
    }
}

int main(void) {
    kvreg_config *cfg;
    kvreg_registry *reg;
    kvreg_pool *pool;
    kvreg_block_desc *d = calloc(CHUNK, sizeof *d);
    kvreg_block *h = malloc(CHUNK * sizeof *h);
    int *st = malloc(CHUNK * sizeof *st);
    if (!d || !h || !st) FAIL("test arrays");
    if (kvreg_config_new(&cfg) || kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1) ||
        kvreg_registry_new(&reg, cfg) || kvreg_pool_new(&pool, reg, "one-shard"))
        FAIL("setup");
    kvreg_config_free(cfg);
    unsigned done = 0;
    kvreg_block first = KVREG_BLOCK_NONE;
    while (done < LIMIT) {
        const unsigned n = LIMIT - done < CHUNK ? LIMIT - done : CHUNK;
        size_t ok = 0;
        describe(d, n, done);
        if (kvreg_register_batch(pool, d, n, h, st, &ok) || ok != n) FAIL("%zu of %u at %u (status %d)", ok, n, done, st[ok]);
        if (done == 0) first = h[0];
        done += n;
    }
    uint64_t hashes = 0;
    kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes);
    kvreg_block extra;
    describe(d, 1, LIMIT);
    int rc = kvreg_register(pool, &d[0], &extra);
    if (rc != KVREG_EOVERFLOW) FAIL("block %u: status %d, want KVREG_EOVERFLOW", LIMIT + 1, rc);
    uint64_t after = 0;
    kvreg_registry_stat(reg, KVREG_STAT_HASHES, &after);
    if (hashes != LIMIT || after != LIMIT) FAIL("hashes %llu then %llu", (unsigned long long)hashes, (unsigned long long)after);
    if (kvreg_release(pool, first)) FAIL("release");
    if ((rc = kvreg_register(pool, &d[0], &extra)) != KVREG_OK) FAIL("after a release: status %d", rc);
    printf("shard_limit: %u blocks in one shard, then KVREG_EOVERFLOW; one release makes room\n", LIMIT);
    kvreg_registry_free(reg);
    free(d);
    free(h);
    free(st);
    return 0;
}
