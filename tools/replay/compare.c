#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "compare_chart.h"
#include "report.h"
#include "router.h"
#include "synth.h"
#include "trace.h"

#define EXIT_LIBRARY 1
#define EXIT_BAD_INPUT 2

const char compare_usage[] =
"  --router A,B,...          several policies (also kv-load: Dynamo's cost in libkvreg's\n"
"                            kvreg_router; llm-d: its weighted prefix and load scorers): each\n"
"                            replays the same workload, and one table compares them, with\n"
"                            TTFT and throughput from the engine timing model below\n"
"  --overlap-weight X        kv-load: weight of the prefill blocks (default 1)\n"
"  --router-temperature X    kv-load, llm-d: 0 picks the best (default); > 0 samples (softmax)\n"
"  --prefix-weight X         llm-d: weight of the prefix score (default 1)\n"
"  --load-weight X           llm-d: weight of the load score (default 1)\n"
"  --cpu-weight X            kv-load, llm-d: share of a block matched only in G2 that counts\n"
"                            as cached, 0 to 1 (default 0.8)\n"
"  --plot FILE.svg|FILE.png  also draw the table: hit rate, TTFT and throughput per policy\n"
"                            (with --sweep-workers: TTFT p99 and hit rate against workers)\n"
"  --sweep-workers LIST      the comparison once per worker count (e.g. 2,4,8,16; replaces\n"
"                            --workers): one table of TTFT and hit rate per policy and count\n"
"Engine timing model (--router A,B,...): each worker admits --batch requests at once, first\n"
"come first served on the trace's timestamps; a request's prefill (uncached tokens at\n"
"--prefill-tps, G2 hits at --onboard-tps) runs after the prefills before it; TTFT is its end\n"
"less the arrival; output decodes at --decode-tps per request. The defaults are assumptions,\n"
"not measurements (they keep 8 workers busy, not saturated, on the Mooncake traces):\n"
"  --prefill-tps X           uncached prompt tokens per second per worker (default 8000)\n"
"  --onboard-tps X           G2-hit tokens per second per worker (default 100000)\n"
"  --decode-tps X            output tokens per second per request (default 30)\n"
"  --batch N                 requests a worker runs at once (default 64)\n"
"  --speedup X               replay the timestamps X times faster (default 1)\n";

static const char *const real_options[] = {"--overlap-weight", "--router-temperature",
                                           "--prefix-weight", "--load-weight", "--cpu-weight",
                                           "--prefill-tps",
                                           "--onboard-tps", "--decode-tps", "--speedup"};

int compare_is_option(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof real_options / sizeof real_options[0]; i++)
        if (strcmp(name, real_options[i]) == 0)
            return 1;
    return strcmp(name, "--batch") == 0 || strcmp(name, "--plot") == 0 ||
           strcmp(name, "--sweep-workers") == 0;
}

/* "2,4,8,16": whole numbers from 1 to 4096 (--workers' range), increasing, at most
 * sizeof o->sweep_workers of them. */
static int parse_worker_counts(replay_options *o, const char *val)
{
    const size_t max = sizeof o->sweep_workers / sizeof o->sweep_workers[0];
    const char *p = val;
    o->n_sweep_workers = 0;
    for (;;) {
        char *end;
        unsigned long v;
        errno = 0;
        v = strtoul(p, &end, 10);
        if (*p < '0' || *p > '9' || end == p || errno == ERANGE || v < 1 || v > 4096 ||
            (*end != ',' && *end != '\0') || o->n_sweep_workers == max ||
            (o->n_sweep_workers && v <= o->sweep_workers[o->n_sweep_workers - 1])) {
            fprintf(stderr, "kvreg-replay: --sweep-workers: expected up to %zu increasing worker "
                            "counts from 1 to 4096 (e.g. 2,4,8,16), got '%s'\n", max, val);
            o->n_sweep_workers = 0;
            return -1;
        }
        o->sweep_workers[o->n_sweep_workers++] = (uint32_t)v;
        if (*end == '\0')
            return 0;
        p = end + 1;
    }
}

int compare_set_option(replay_options *o, const char *name, const char *val)
{
    char *end;
    double v;
    if (strcmp(name, "--sweep-workers") == 0)
        return parse_worker_counts(o, val);
    if (strcmp(name, "--plot") == 0) {
        size_t len = strlen(val);
        if (len <= 4 || (strcmp(val + len - 4, ".svg") != 0 && strcmp(val + len - 4, ".png") != 0)) {
            fprintf(stderr, "kvreg-replay: --plot %s: the name must end in .svg or .png\n", val);
            return -1;
        }
        o->plot = val;
        return 0;
    }
    errno = 0;
    v = strtod(val, &end);
    if (end == val || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0) {
        fprintf(stderr, "kvreg-replay: %s: expected a number >= 0, got '%s'\n", name, val);
        return -1;
    }
    if (strcmp(name, "--batch") == 0) {
        if (v < 1 || v > 1e6 || v != floor(v)) {
            fprintf(stderr, "kvreg-replay: --batch: expected a whole number from 1 to 1000000, "
                            "got '%s'\n", val);
            return -1;
        }
        o->timing.batch = (uint32_t)v;
        return 0;
    }
    if ((strcmp(name, "--prefill-tps") == 0 || strcmp(name, "--onboard-tps") == 0 ||
         strcmp(name, "--decode-tps") == 0 || strcmp(name, "--speedup") == 0) && v <= 0) {
        fprintf(stderr, "kvreg-replay: %s: expected a rate above 0, got '%s'\n", name, val);
        return -1;
    }
    if (strcmp(name, "--cpu-weight") == 0 && v > 1) {
        fprintf(stderr, "kvreg-replay: --cpu-weight: expected a number from 0 to 1, got '%s'\n",
                val);
        return -1;
    }
    if (strcmp(name, "--cpu-weight") == 0)
        o->routing.cpu_weight = v;
    else if (strcmp(name, "--overlap-weight") == 0)
        o->routing.overlap_weight = v;
    else if (strcmp(name, "--router-temperature") == 0)
        o->routing.temperature = v;
    else if (strcmp(name, "--prefix-weight") == 0)
        o->routing.prefix_weight = v;
    else if (strcmp(name, "--load-weight") == 0)
        o->routing.load_weight = v;
    else if (strcmp(name, "--prefill-tps") == 0)
        o->timing.prefill_tps = v;
    else if (strcmp(name, "--onboard-tps") == 0)
        o->timing.onboard_tps = v;
    else if (strcmp(name, "--speedup") == 0)
        o->timing.speedup = v;
    else
        o->timing.decode_tps = v;
    return 0;
}

typedef struct row {
    const char *policy;
    cluster_outcome oc;
    timing_result t;
    double hit, hit_g1, hit_g2, imbalance;
} row;

static double ratio(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

static int run_policy(const replay_options *base, int policy, row *rw)
{
    replay_options o = *base;
    workload *w;
    uint64_t max = 0, sum = 0;
    uint32_t i;
    int status;
    o.router = policy;
    o.json = 0;
    if (o.trace) {
        w = trace_open(o.trace, o.skip_bad);
    } else {
        synth_params sp;
        sp.seed = o.seed;
        sp.conversations = o.conversations;
        sp.block_tokens = o.block_tokens;
        w = synth_open(&sp);
    }
    if (!w)
        return EXIT_BAD_INPUT;
    rw->policy = router_policy_name(policy);
    status = cluster_collect(&o, w, &rw->oc);
    w->close(w);
    if (status != 0)
        return status;
    if (!rw->oc.index_agrees)
        return EXIT_LIBRARY;
    if (timing_run(&o.timing, rw->oc.workers, rw->oc.reqs, rw->oc.n_reqs, &rw->t) != 0) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return EXIT_LIBRARY;
    }
    rw->hit = ratio(rw->oc.st.hit_blocks_g1 + rw->oc.st.hit_blocks_g2, rw->oc.st.blocks);
    rw->hit_g1 = ratio(rw->oc.st.hit_blocks_g1, rw->oc.st.blocks);
    rw->hit_g2 = ratio(rw->oc.st.hit_blocks_g2, rw->oc.st.blocks);
    for (i = 0; i < rw->oc.workers; i++) {
        sum += rw->oc.requests_per_worker[i];
        if (rw->oc.requests_per_worker[i] > max)
            max = rw->oc.requests_per_worker[i];
    }
    rw->imbalance = sum ? (double)max / ((double)sum / rw->oc.workers) : 0.0;
    return 0;
}

static void print_json(const replay_options *o, const row *rows, size_t n)
{
    size_t i;
    uint32_t k;
    printf("{\"source\":");
    json_string(stdout, o->trace ? o->trace : "built-in");
    printf(",\"workers\":%u,\"timing\":{\"prefill_tps\":%.17g,\"onboard_tps\":%.17g,"
           "\"decode_tps\":%.17g,\"batch\":%u,\"speedup\":%.17g},\"policies\":[",
           o->workers, o->timing.prefill_tps, o->timing.onboard_tps, o->timing.decode_tps,
           o->timing.batch, o->timing.speedup);
    for (i = 0; i < n; i++) {
        const row *r = &rows[i];
        printf("%s{\"router\":\"%s\",\"requests\":%llu,\"blocks\":%llu,"
               "\"hit_rate_blocks\":{\"total\":%.6f,\"g1\":%.6f,\"g2\":%.6f},"
               "\"load_imbalance\":%.6f,\"requests_per_worker\":[",
               i ? "," : "", r->policy, (unsigned long long)r->oc.st.requests,
               (unsigned long long)r->oc.st.blocks, r->hit, r->hit_g1, r->hit_g2, r->imbalance);
        for (k = 0; k < r->oc.workers; k++)
            printf("%s%llu", k ? "," : "", (unsigned long long)r->oc.requests_per_worker[k]);
        printf("],\"ttft_s\":{\"p50\":%.6f,\"p99\":%.6f,\"mean\":%.6f},"
               "\"output_tokens_per_s\":%.3f,\"requests_per_s\":%.6f,\"span_s\":%.3f,"
               "\"query_latency_us\":{\"p50\":%.3f,\"p99\":%.3f}}",
               r->t.ttft_p50_s, r->t.ttft_p99_s, r->t.ttft_mean_s, r->t.output_tps,
               r->t.requests_per_s, r->t.span_s, r->oc.query_p50_us, r->oc.query_p99_us);
    }
    printf("]}\n");
}

static void print_text(const replay_options *o, const row *rows, size_t n)
{
    size_t i;
    printf("kvreg-replay: %s, %u workers, %llu requests; G1 %llu + G2 %llu blocks per worker\n",
           o->trace ? o->trace : "built-in workload", o->workers,
           (unsigned long long)(n ? rows[0].oc.st.requests : 0),
           (unsigned long long)o->g1_blocks, (unsigned long long)o->g2_blocks);
    printf("timing model (assumed): prefill %.0f tok/s, onboard %.0f tok/s, decode %.0f tok/s "
           "per request, batch %u, speedup %g\n\n",
           o->timing.prefill_tps, o->timing.onboard_tps, o->timing.decode_tps, o->timing.batch,
           o->timing.speedup);
    printf("%-13s %7s %7s %7s %9s %10s %10s %11s %9s\n", "router", "hit", "G1", "G2",
           "imbalance", "TTFT p50", "TTFT p99", "out tok/s", "query p50");
    for (i = 0; i < n; i++) {
        const row *r = &rows[i];
        printf("%-13s %6.2f%% %6.2f%% %6.2f%% %9.3f %9.3fs %9.3fs %11.1f %7.2fus\n", r->policy,
               100 * r->hit, 100 * r->hit_g1, 100 * r->hit_g2, r->imbalance, r->t.ttft_p50_s,
               r->t.ttft_p99_s, r->t.output_tps, r->oc.query_p50_us);
    }
}

static int plot(const replay_options *o, const row *rows, size_t n)
{
    compare_bar bars[ROUTER_COUNT];
    char title[256];
    const char *src = o->trace ? strrchr(o->trace, '/') : NULL;
    size_t i;
    for (i = 0; i < n; i++) {
        bars[i].policy = rows[i].policy;
        bars[i].hit_g1 = rows[i].hit_g1;
        bars[i].hit_g2 = rows[i].hit_g2;
        bars[i].ttft_p50 = rows[i].t.ttft_p50_s;
        bars[i].ttft_p99 = rows[i].t.ttft_p99_s;
        bars[i].output_tps = rows[i].t.output_tps;
    }
    snprintf(title, sizeof title, "%s, %u workers", o->trace ? (src ? src + 1 : o->trace)
                                                           : "built-in workload", o->workers);
    return compare_chart_write(o->plot, title, bars, n) == 0 ? 0 : EXIT_LIBRARY;
}

/* --sweep-workers: every policy at every worker count, rows[count][policy]. */
static void print_sweep_text(const replay_options *o, const int *policies, size_t n_pol, const row *rows)
{
    size_t c, i;
    printf("kvreg-replay: %s, %llu requests; G1 %llu + G2 %llu blocks per worker\n",
           o->trace ? o->trace : "built-in workload",
           (unsigned long long)(n_pol ? rows[0].oc.st.requests : 0),
           (unsigned long long)o->g1_blocks, (unsigned long long)o->g2_blocks);
    printf("timing model (assumed): prefill %.0f tok/s, onboard %.0f tok/s, decode %.0f tok/s "
           "per request, batch %u, speedup %g\n\n",
           o->timing.prefill_tps, o->timing.onboard_tps, o->timing.decode_tps, o->timing.batch,
           o->timing.speedup);
    printf("%7s %-13s %7s %9s %10s %10s\n", "workers", "router", "hit", "imbalance", "TTFT p50",
           "TTFT p99");
    for (c = 0; c < o->n_sweep_workers; c++)
        for (i = 0; i < n_pol; i++) {
            const row *r = &rows[c * n_pol + i];
            printf("%7u %-13s %6.2f%% %9.3f %9.3fs %9.3fs\n", o->sweep_workers[c], r->policy,
                   100 * r->hit, r->imbalance, r->t.ttft_p50_s, r->t.ttft_p99_s);
        }
    (void)policies;
}

static void print_sweep_json(const replay_options *o, size_t n_pol, const row *rows)
{
    size_t c, i;
    printf("{\"source\":");
    json_string(stdout, o->trace ? o->trace : "built-in");
    printf(",\"timing\":{\"prefill_tps\":%.17g,\"onboard_tps\":%.17g,\"decode_tps\":%.17g,"
           "\"batch\":%u,\"speedup\":%.17g},\"sweep\":[",
           o->timing.prefill_tps, o->timing.onboard_tps, o->timing.decode_tps, o->timing.batch,
           o->timing.speedup);
    for (c = 0; c < o->n_sweep_workers; c++)
        for (i = 0; i < n_pol; i++) {
            const row *r = &rows[c * n_pol + i];
            printf("%s{\"workers\":%u,\"router\":\"%s\",\"requests\":%llu,\"blocks\":%llu,"
                   "\"hit_rate_blocks\":{\"total\":%.6f,\"g1\":%.6f,\"g2\":%.6f},"
                   "\"load_imbalance\":%.6f,\"ttft_s\":{\"p50\":%.6f,\"p99\":%.6f,\"mean\":%.6f},"
                   "\"output_tokens_per_s\":%.3f}",
                   c || i ? "," : "", o->sweep_workers[c], r->policy,
                   (unsigned long long)r->oc.st.requests, (unsigned long long)r->oc.st.blocks,
                   r->hit, r->hit_g1, r->hit_g2, r->imbalance, r->t.ttft_p50_s, r->t.ttft_p99_s,
                   r->t.ttft_mean_s, r->t.output_tps);
        }
    printf("]}\n");
}

static int plot_sweep(const replay_options *o, size_t n_pol, const row *rows)
{
    compare_sweep_point *pts = calloc(o->n_sweep_workers * n_pol, sizeof *pts);
    char title[256];
    const char *src = o->trace ? strrchr(o->trace, '/') : NULL;
    size_t k;
    int rc;
    if (!pts) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return EXIT_LIBRARY;
    }
    for (k = 0; k < o->n_sweep_workers * n_pol; k++) {
        pts[k].policy = rows[k].policy;
        pts[k].workers = o->sweep_workers[k / n_pol];
        pts[k].hit = rows[k].hit;
        pts[k].ttft_p99 = rows[k].t.ttft_p99_s;
    }
    snprintf(title, sizeof title, "%s: TTFT p99 and hit rate against workers",
             o->trace ? (src ? src + 1 : o->trace) : "built-in workload");
    rc = compare_sweep_chart_write(o->plot, title, pts, o->n_sweep_workers, n_pol);
    free(pts);
    return rc == 0 ? 0 : EXIT_LIBRARY;
}

static int sweep_workers_main(const replay_options *base)
{
    replay_options o = *base;
    /* --router A,B,... or one policy (the default, kv, when --router is not given) */
    const size_t n_pol = base->n_routers ? base->n_routers : 1;
    const int *policies = base->n_routers ? base->routers : &base->router;
    const size_t n = base->n_sweep_workers * n_pol;
    row *rows = calloc(n, sizeof *rows);
    size_t c, i, done = 0;
    int status = 0;
    if (!rows) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return EXIT_LIBRARY;
    }
    for (c = 0; c < base->n_sweep_workers && status == 0; c++) {
        o.workers = base->sweep_workers[c];
        for (i = 0; i < n_pol && status == 0; i++, done++)
            status = run_policy(&o, policies[i], &rows[c * n_pol + i]);
    }
    if (status == 0) {
        if (o.json)
            print_sweep_json(base, n_pol, rows);
        else
            print_sweep_text(base, policies, n_pol, rows);
        if (base->plot)
            status = plot_sweep(base, n_pol, rows);
    }
    for (i = 0; i < done; i++)
        cluster_outcome_free(&rows[i].oc);
    free(rows);
    return status;
}

int compare_main(const replay_options *o)
{
    if (o->n_sweep_workers)
        return sweep_workers_main(o);
    row *rows = calloc(o->n_routers, sizeof *rows);
    size_t i;
    int status = 0;
    if (!rows) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return EXIT_LIBRARY;
    }
    for (i = 0; i < o->n_routers && status == 0; i++)
        status = run_policy(o, o->routers[i], &rows[i]);
    if (status == 0) {
        if (o->json)
            print_json(o, rows, o->n_routers);
        else
            print_text(o, rows, o->n_routers);
    }
    if (status == 0 && o->plot)
        status = plot(o, rows, o->n_routers);
    for (i = 0; i < o->n_routers; i++)
        cluster_outcome_free(&rows[i].oc);
    free(rows);
    return status;
}
