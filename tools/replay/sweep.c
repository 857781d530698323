#include "sweep.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvreg.h>

#include "cache.h"
#include "chart.h"
#include "events.h"
#include "hmap.h"
#include "naming.h"
#include "report.h"
#include "synth.h"
#include "trace.h"

int sweep_parse_list(const char *opt, const char *text, uint64_t min, uint64_t *caps,
                     size_t max)
{
    size_t n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        unsigned long long v;
        if (n == max) {
            fprintf(stderr, "kvreg-replay: %s: at most %zu capacities\n", opt, max);
            return -1;
        }
        if (strncmp(p, "unlimited", 9) == 0 && (p[9] == ',' || p[9] == '\0')) {
            caps[n++] = CACHE_UNLIMITED;
            p += 9;
        } else {
            errno = 0;
            v = strtoull(p, &end, 10);
            if (*p < '0' || *p > '9' || end == p || errno == ERANGE || v < min ||
                v > UINT32_MAX || (*end != ',' && *end != '\0')) {
                fprintf(stderr, "kvreg-replay: %s: expected whole numbers from %llu to %u "
                                "or 'unlimited', separated by commas, got '%s'\n",
                        opt, (unsigned long long)min, UINT32_MAX, text);
                return -1;
            }
            caps[n++] = v;
            p = end;
        }
        if (*p == ',')
            p++;
    }
    if (n == 0) {
        fprintf(stderr, "kvreg-replay: %s: no capacity given\n", opt);
        return -1;
    }
    return (int)n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One replay of the whole workload at one capacity, as a single run with the same options
 * would do it (same requests, same model), without verification or output. */
static void run_point(const replay_options *o, sweep_row *row)
{
    workload *w;
    namer nm;
    event_sink sink;
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    cache model;
    cache_config cc;
    hmap seen;
    int rc, inited = 0;
    double t0 = now_s();

    if (o->trace) {
        w = trace_open(o->trace, o->skip_bad);
    } else {
        synth_params sp = {o->seed, o->conversations, o->block_tokens};
        w = synth_open(&sp);
    }
    if (!w) {
        row->failed = 1;
        return;
    }
    hmap_init(&seen);
    event_sink_init(&sink, 0, EVENTS_IGNORE_NONE);
    rc = namer_init(&nm, o->block_tokens, o->salt) == 0 ? KVREG_OK : KVREG_ENOMEM;
    if (rc == KVREG_OK)
        rc = kvreg_config_new(&cfg);
    if (rc == KVREG_OK)
        rc = kvreg_config_set_event_fn(cfg, event_sink_fn, &sink, NULL);
    if (rc == KVREG_OK)
        rc = kvreg_registry_new(&reg, cfg);
    kvreg_config_free(cfg);
    memset(&cc, 0, sizeof cc); /* every field not set here is off (tokens_of NULL) */
    cc.g1_blocks = row->g1_blocks;
    cc.g2_blocks = row->g2_blocks;
    cc.inflight = o->inflight;
    cc.block_tokens = o->block_tokens;
    cc.with_tokens = 0; /* the sweep does not publish */
    if (rc == KVREG_OK && (rc = cache_init(&model, reg, &cc)) == KVREG_OK)
        inited = 1;
    while (rc == KVREG_OK) {
        replay_request req;
        size_t i;
        int got = workload_next(w, &req);
        if (got <= 0) {
            rc = got < 0 ? KVREG_EINVAL : KVREG_OK;
            break;
        }
        for (i = 0; i < req.n_ids; i++) { /* the theoretical maximum, as main.c counts it */
            int inserted;
            if (hmap_put(&seen, req.ids[i], 1, &inserted) != 0) {
                rc = KVREG_ENOMEM;
                break;
            }
            if (!inserted) {
                row->max_hit_blocks++;
                row->max_hit_tokens += request_block_tokens(&req, i, o->block_tokens);
            }
        }
        if (rc == KVREG_OK && cache_request(&model, &nm, &req) != 0)
            rc = KVREG_EINVAL;
        if (o->max_requests && model.st.requests >= o->max_requests)
            break;
    }
    if (rc == KVREG_OK && inited && cache_drain(&model) != 0)
        rc = KVREG_EINVAL;
    if (inited) {
        row->requests = model.st.requests;
        row->blocks = model.st.blocks;
        row->prompt_tokens = model.st.prompt_tokens;
        row->hit_blocks_g1 = model.st.hit_blocks_g1;
        row->hit_blocks_g2 = model.st.hit_blocks_g2;
        row->hit_tokens_g1 = model.st.hit_tokens_g1;
        row->hit_tokens_g2 = model.st.hit_tokens_g2;
        row->g1_evictions = model.st.g1_evictions;
        row->onboards = model.st.onboards;
        cache_free(&model);
    }
    row->registers = sink.registers;
    row->removes = sink.removes;
    row->failed = rc != KVREG_OK;
    row->elapsed_s = now_s() - t0;
    kvreg_registry_free(reg);
    event_sink_free(&sink);
    namer_free(&nm);
    hmap_free(&seen);
    w->close(w);
}

typedef struct sweep_job {
    const replay_options *o;
    sweep_row *rows;
    size_t n, next;
    pthread_mutex_t lock;
} sweep_job;

/* Workers take the next capacity until none is left: the big capacities (slow runs) and the
 * small ones share the two cores without a fixed split. */
static void *worker(void *arg)
{
    sweep_job *job = arg;
    for (;;) {
        size_t i;
        pthread_mutex_lock(&job->lock);
        i = job->next++;
        pthread_mutex_unlock(&job->lock);
        if (i >= job->n)
            return NULL;
        run_point(job->o, &job->rows[i]);
    }
}

/* By G2 capacity, then G1: one chart series per G2, its points in capacity order. */
static int cmp_rows(const void *a, const void *b)
{
    const sweep_row *x = a, *y = b;
    if (x->g2_blocks != y->g2_blocks)
        return x->g2_blocks < y->g2_blocks ? -1 : 1;
    return x->g1_blocks < y->g1_blocks ? -1 : x->g1_blocks > y->g1_blocks;
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void cap_text(uint64_t v, char buf[24])
{
    if (v == CACHE_UNLIMITED)
        snprintf(buf, 24, "unlimited");
    else
        snprintf(buf, 24, "%llu", (unsigned long long)v);
}

typedef enum { OUT_TEXT, OUT_CSV, OUT_JSON } out_format;

static out_format format_of(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if (n > 4 && strcmp(path + n - 4, ".csv") == 0)
        return OUT_CSV;
    if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        return OUT_JSON;
    return OUT_TEXT;
}

static void write_table(FILE *f, out_format fmt, const sweep_row *rows, size_t n,
                        const char *source, uint32_t block_tokens)
{
    size_t i;
    char g1[24], g2[24];
    if (fmt == OUT_CSV)
        fprintf(f, "g1_blocks,g2_blocks,g1_tokens,requests,blocks,hit_blocks_g1,hit_blocks_g2,"
                   "hit_blocks_total,max_hit_blocks,hit_rate_blocks,hit_rate_tokens,"
                   "max_hit_rate_blocks,g1_evictions,onboards,register_events,remove_events\n");
    else if (fmt == OUT_JSON)
    {
        fprintf(f, "{\"tool\":\"kvreg-replay --sweep\",\"source\":");
        json_string(f, source);
        fprintf(f, ",\"block_tokens\":%u,\"rows\":[", block_tokens);
    }
    else
        fprintf(f, "kvreg-replay --sweep: %s, blocks of %u tokens (hit rate by blocks; max = "
                   "every block seen before hits)\n%12s %10s %9s %9s %9s %9s %12s %12s\n",
                source, block_tokens, "G1 blocks", "G2 blocks", "G1 hits", "G2 hits", "total",
                "max", "G1 evictions", "Remove events");
    for (i = 0; i < n; i++) {
        const sweep_row *r = &rows[i];
        uint64_t hb = r->hit_blocks_g1 + r->hit_blocks_g2;
        uint64_t ht = r->hit_tokens_g1 + r->hit_tokens_g2;
        cap_text(r->g1_blocks, g1);
        if (r->g2_blocks)
            cap_text(r->g2_blocks, g2);
        else
            snprintf(g2, sizeof g2, "%s", fmt == OUT_TEXT ? "off" : "0");
        if (fmt == OUT_CSV) {
            fprintf(f, "%s,%s,", g1, g2);
            if (r->g1_blocks == CACHE_UNLIMITED)
                fprintf(f, "unlimited");
            else
                fprintf(f, "%llu", (unsigned long long)r->g1_blocks * block_tokens);
            fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%llu,%.6f,%.6f,%.6f,%llu,%llu,%llu,%llu\n",
                    (unsigned long long)r->requests, (unsigned long long)r->blocks,
                    (unsigned long long)r->hit_blocks_g1, (unsigned long long)r->hit_blocks_g2,
                    (unsigned long long)hb, (unsigned long long)r->max_hit_blocks,
                    pct(hb, r->blocks) / 100, pct(ht, r->prompt_tokens) / 100,
                    pct(r->max_hit_blocks, r->blocks) / 100,
                    (unsigned long long)r->g1_evictions, (unsigned long long)r->onboards,
                    (unsigned long long)r->registers, (unsigned long long)r->removes);
        } else if (fmt == OUT_JSON) {
            fprintf(f, "%s{\"g1_blocks\":%s,\"g2_blocks\":%s,\"requests\":%llu,\"blocks\":%llu,"
                       "\"hit_blocks\":{\"g1\":%llu,\"g2\":%llu,\"total\":%llu,\"max\":%llu},"
                       "\"hit_rate_blocks\":%.6f,\"hit_rate_tokens\":%.6f,\"g1_evictions\":%llu,"
                       "\"onboards\":%llu,\"events\":{\"register\":%llu,\"remove\":%llu}}",
                    i ? "," : "", r->g1_blocks == CACHE_UNLIMITED ? "null" : g1,
                    r->g2_blocks == CACHE_UNLIMITED ? "null" : g2,
                    (unsigned long long)r->requests, (unsigned long long)r->blocks,
                    (unsigned long long)r->hit_blocks_g1, (unsigned long long)r->hit_blocks_g2,
                    (unsigned long long)hb, (unsigned long long)r->max_hit_blocks,
                    pct(hb, r->blocks) / 100, pct(ht, r->prompt_tokens) / 100,
                    (unsigned long long)r->g1_evictions, (unsigned long long)r->onboards,
                    (unsigned long long)r->registers, (unsigned long long)r->removes);
        } else {
            fprintf(f, "%12s %10s %8.2f%% %8.2f%% %8.2f%% %8.2f%% %12llu %12llu\n", g1, g2,
                    pct(r->hit_blocks_g1, r->blocks), pct(r->hit_blocks_g2, r->blocks),
                    pct(hb, r->blocks), pct(r->max_hit_blocks, r->blocks),
                    (unsigned long long)r->g1_evictions, (unsigned long long)r->removes);
        }
    }
    if (fmt == OUT_JSON)
        fprintf(f, "]}\n");
}

int sweep_main(const replay_options *o)
{
    sweep_row *rows;
    pthread_t th[SWEEP_WORKERS];
    sweep_job job;
    size_t i, j, n, started = 0;
    uint64_t fixed_g2 = o->g2_given ? o->g2_blocks : 0;
    const uint64_t *g2s = o->sweep_g2_n ? o->sweep_g2 : &fixed_g2;
    size_t n_g2 = o->sweep_g2_n ? o->sweep_g2_n : 1;
    const char *source = o->trace ? o->trace : "synthetic chats";
    char title[256];
    FILE *out = stdout;
    int status = 0;

    if (o->chart && !chart_available()) {
        fprintf(stderr, "kvreg-replay: --chart: this build cannot draw charts (cairo was not "
                        "found when it was configured: install libcairo2-dev and reconfigure); "
                        "the table alone needs no cairo\n");
        return 2;
    }
    if (o->chart) {
        size_t len = strlen(o->chart);
        if (len < 5 || (strcmp(o->chart + len - 4, ".svg") != 0 &&
                        strcmp(o->chart + len - 4, ".png") != 0)) {
            fprintf(stderr, "kvreg-replay: --chart %s: the name must end in .svg or .png\n",
                    o->chart);
            return 2;
        }
    }
    n = o->sweep_n * n_g2;
    if (!(rows = calloc(n, sizeof *rows))) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return 1;
    }
    for (j = 0; j < n_g2; j++)
        for (i = 0; i < o->sweep_n; i++) {
            rows[j * o->sweep_n + i].g1_blocks = o->sweep_g1[i];
            rows[j * o->sweep_n + i].g2_blocks = g2s[j];
        }
    job.o = o;
    job.rows = rows;
    job.n = n;
    job.next = 0;
    pthread_mutex_init(&job.lock, NULL);
    for (i = 0; i < SWEEP_WORKERS; i++)
        if (pthread_create(&th[i], NULL, worker, &job) == 0)
            started++;
    if (started == 0)
        worker(&job); /* no thread: do it here */
    for (i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&job.lock);

    for (i = 0; i < n; i++)
        if (rows[i].failed)
            status = 2;
    if (status) {
        fprintf(stderr, "kvreg-replay: --sweep: a run failed (see above)\n");
        free(rows);
        return status;
    }
    qsort(rows, n, sizeof rows[0], cmp_rows);
    if (rows[0].requests == 0)
        fprintf(stderr, "kvreg-replay: warning: %s holds no requests (an empty file?); "
                        "nothing was replayed\n", source);
    if (o->sweep_out && strcmp(o->sweep_out, "-") != 0 && !(out = fopen(o->sweep_out, "w"))) {
        perror(o->sweep_out);
        free(rows);
        return 1;
    }
    write_table(out, format_of(o->sweep_out), rows, n, source, o->block_tokens);
    if (out != stdout && fclose(out) != 0) {
        perror(o->sweep_out);
        status = 1;
    }
    if (o->chart) {
        const char *base = strrchr(source, '/');
        snprintf(title, sizeof title, "%s: prefix-cache hit rate vs G1 capacity",
                 base ? base + 1 : source);
        if (chart_write(o->chart, title, rows, n, o->block_tokens) != 0)
            status = 1;
    }
    free(rows);
    return status;
}
