/* The conversation trace's full index dumped and loaded: every request's blocks stored on
 * worker (request % 8) and never evicted, in OWN mode (the trace's hash ids as router hashes)
 * and in ENGINE mode (tokens made from the hash ids, engine hashes made up per worker). The
 * replica must dump the same bytes and have the same digest; the dump's size per entry and the
 * speed of dump, load and digest are printed (CPU time of this process, one run: the machine
 * may be shared).
 * Usage: test_index_dump_trace TRACE.jsonl.gz */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include <kvreg_index.h>

#define WORKERS 8
#define BS 16

#define MUST(cond)                                                                                     \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                                \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static size_t parse_ids(const char *line, uint64_t *ids, size_t cap)
{
    const char *p = strstr(line, "\"hash_ids\"");
    size_t n = 0;
    if (!p || !(p = strchr(p, '[')))
        return 0;
    for (p++; n < cap;) {
        char *end = NULL;
        while (*p == ' ' || *p == ',')
            p++;
        if (*p < '0' || *p > '9')
            break;
        ids[n++] = strtoull(p, &end, 10);
        p = end;
    }
    return n;
}

static kvreg_index *new_index(int own)
{
    kvreg_index_config *cfg = NULL;
    kvreg_index *idx = NULL;
    MUST(kvreg_index_config_new(&cfg) == KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, own ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE) ==
         KVREG_OK);
    MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, BS) == KVREG_OK);
    MUST(kvreg_index_new(&idx, cfg) == KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

static void run(const char *path, int own)
{
    static char line[1 << 20];
    static uint64_t ids[8192], hashes[8192];
    static uint32_t tokens[8192 * BS];
    gzFile gz = gzopen(path, "rb");
    kvreg_index *idx = new_index(own), *copy = new_index(own);
    uint64_t seq[WORKERS] = {0}, requests = 0, entries = 0, d1 = 0, d2 = 1;
    void *dump = NULL, *again = NULL;
    size_t n_dump = 0, n_again = 0;
    double t0, t_dump, t_load, t_digest;
    MUST(gz != NULL);
    while (gzgets(gz, line, sizeof line)) {
        const size_t n = parse_ids(line, ids, 8192);
        const uint32_t w = (uint32_t)(requests++ % WORKERS);
        kvreg_wire_event e;
        size_t i, j;
        if (n == 0)
            continue;
        memset(&e, 0, sizeof e);
        e.type = KVREG_WIRE_STORED;
        e.medium = KVREG_MEDIUM_GPU;
        for (i = 0; i < n; i++) {
            hashes[i] = own ? mix(ids[i] + 1) : mix(ids[i] + 1 + ((uint64_t)w << 40));
            for (j = 0; j < BS; j++)
                tokens[i * BS + j] = (uint32_t)(ids[i] * BS + j);
        }
        e.block_hashes = hashes;
        e.n_block_hashes = n;
        if (!own) {
            e.token_ids = tokens;
            e.n_token_ids = n * BS;
        }
        MUST(kvreg_index_apply(idx, w, 0, seq[w]++, &e, 1, NULL) == KVREG_OK);
    }
    gzclose(gz);
    MUST(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &entries) == KVREG_OK);

    t0 = now();
    MUST(kvreg_index_dump_alloc(idx, &dump, &n_dump) == KVREG_OK);
    t_dump = now() - t0;
    t0 = now();
    MUST(kvreg_index_load(copy, dump, n_dump) == KVREG_OK);
    t_load = now() - t0;
    t0 = now();
    MUST(kvreg_index_digest(idx, &d1) == KVREG_OK);
    t_digest = now() - t0;
    MUST(kvreg_index_digest(copy, &d2) == KVREG_OK);
    MUST(d1 == d2);
    MUST(kvreg_index_dump_alloc(copy, &again, &n_again) == KVREG_OK);
    MUST(n_again == n_dump && memcmp(again, dump, n_dump) == 0);
    printf("%s: %llu requests, %llu entries, dump %zu bytes (%.2f bytes an entry); dump %.1f ms "
           "(%.1f M entries/s), load %.1f ms (%.1f M entries/s), digest %.1f ms\n",
           own ? "OWN   " : "ENGINE", (unsigned long long)requests, (unsigned long long)entries, n_dump,
           (double)n_dump / (double)entries, t_dump * 1e3, (double)entries / t_dump / 1e6, t_load * 1e3,
           (double)entries / t_load / 1e6, t_digest * 1e3);
    free(dump);
    free(again);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

int main(int argc, char **argv)
{
    MUST(argc == 2);
    run(argv[1], 1);
    run(argv[1], 0);
    return 0;
}
