/* libFuzzer target for kvreg_index_load: the input is a dump, byte 0 aside. The index is
 * configured as the dump's header says (when it names a valid configuration), so inputs reach
 * the body; bit 0 of byte 0 set reseals the checksum first (with the system libxxhash), so the
 * fuzzer explores the body's checks instead of stopping at the checksum. Properties: the status
 * is one kvreg_index_load documents; a refused dump leaves the index empty; an accepted one
 * dumps back to exactly the same bytes (the format is canonical; a version 1 dump comes back as
 * version 2, as long, with the same header and the same workers' heads), its digest is that
 * dump's checksum, queries answer well formed, and removing every worker leaves the index
 * empty. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include <kvreg_index.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(cond)                                                                                     \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "fuzz_index_load: %s:%d: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                                   \
        }                                                                                              \
    } while (0)

static uint64_t get(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    int i;
    for (i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t stat(const kvreg_index *idx, uint32_t which)
{
    uint64_t v = 0;
    MUST(kvreg_index_stat(idx, which, &v) == KVREG_OK);
    return v;
}

static void must_be_empty(const kvreg_index *idx)
{
    MUST(stat(idx, KVREG_INDEX_STAT_WORKERS) == 0);
    MUST(stat(idx, KVREG_INDEX_STAT_ENTRIES) == 0);
    MUST(stat(idx, KVREG_INDEX_STAT_MAPPED_HASHES) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvreg_index_config *cfg = NULL;
    kvreg_index *idx = NULL;
    uint8_t *d;
    size_t n;
    int rc;
    if (size < 1)
        return 0;
    n = size - 1;
    d = malloc(n ? n : 1);
    MUST(d != NULL);
    memcpy(d, data + 1, n);
    if ((data[0] & 1) && n >= 48)
        put64(d + n - 8, XXH3_64bits(d, n - 8));
    MUST(kvreg_index_config_new(&cfg) == KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 1u << ((data[0] >> 1) & 3)) == KVREG_OK);
    if (n >= 40) {
        /* the dump's own configuration when valid (else the defaults: KVREG_EINVAL or EPROTO) */
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, get(d + 12, 4));
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_PROFILE, get(d + 16, 4));
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, get(d + 20, 4));
        kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SALT, get(d + 24, 8));
    }
    MUST(kvreg_index_new(&idx, cfg) == KVREG_OK);
    kvreg_index_config_free(cfg);

    rc = kvreg_index_load(idx, d, n);
    MUST(rc == KVREG_OK || rc == KVREG_EPROTO || rc == KVREG_ENOTSUP || rc == KVREG_EINVAL ||
         rc == KVREG_ENOMEM || rc == KVREG_EOVERFLOW);
    if (rc != KVREG_OK) {
        must_be_empty(idx);
    } else {
        void *again = NULL;
        size_t n_again = 0, n_m = 0, i;
        uint64_t dg = 0, h[4];
        kvreg_index_match m[64];
        MUST(kvreg_index_dump_alloc(idx, &again, &n_again) == KVREG_OK);
        MUST(n_again == n);
        if (get(d + 8, 4) == KVREG_INDEX_DUMP_VERSION) {
            MUST(memcmp(again, d, n) == 0);
        } else {
            MUST(get(d + 8, 4) == 1 && get((const uint8_t *)again + 8, 4) == KVREG_INDEX_DUMP_VERSION);
            MUST(memcmp(again, d, 8) == 0 && memcmp((const uint8_t *)again + 12, d + 12, 40 - 12) == 0);
        }
        MUST(kvreg_index_digest(idx, &dg) == KVREG_OK && dg == get((const uint8_t *)again + n - 8, 8));
        free(again);
        /* query the first records' hashes; answers well formed */
        for (i = 0; i < 4; i++)
            h[i] = n >= 96 + 8 * (i + 1) ? get(d + 96 + 8 * i, 8) : i;
        if (kvreg_index_query_hashes(idx, h, 4, 0, m, 64, &n_m) == KVREG_OK) {
            for (i = 0; i < n_m; i++)
                MUST(m[i].depth >= 1 && m[i].depth <= 4);
        }
        MUST(kvreg_index_load(idx, d, n) == (stat(idx, KVREG_INDEX_STAT_WORKERS) ? KVREG_ESTATE : KVREG_OK));
        /* remove every worker, as the dump names them: the index is empty afterwards */
        {
            size_t at = 40;
            uint64_t w, workers = get(d + 32, 8);
            const size_t rec = get(d + 12, 4) ? 9 : 17;
            for (w = 0; w < workers; w++) {
                uint64_t g, groups = get(d + at + 32, 8);
                kvreg_index_remove_worker(idx, get(d + at, 8), (uint32_t)get(d + at + 8, 4));
                at += 40;
                for (g = 0; g < groups; g++)
                    at += 16 + get(d + at + 8, 8) * rec;
            }
        }
        must_be_empty(idx);
    }
    kvreg_index_free(idx);
    free(d);
    return 0;
}
