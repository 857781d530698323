/*
 * kvreg-replay: replays an inference workload (a Mooncake trace, or the built-in synthetic
 * chats) through libkvreg as an engine with a tiered KV cache would, and reports hit rates,
 * events, speed and memory. This file only wires the parts together:
 *   cli.c (options) -> trace.c / synth.c (requests) -> naming.c (ids to Dynamo hashes)
 *   -> cache.c + lru.c (the G1/G2 model on libkvreg pools) -> events.c (event stream and
 *   --verify-events) -> report.c (summary, JSON, progress bar).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <kvreg.h>

#include "cache.h"
#include "cli.h"
#include "cluster.h"
#include "compare.h"
#include "events.h"
#include "hmap.h"
#include "max_hits.h"
#include "naming.h"
#include "publish.h"
#include "report.h"
#include "sweep.h"
#include "synth.h"
#include "trace.h"
#include "wire_out.h"

#define EXIT_VERIFY_OR_LIBRARY 1
#define EXIT_BAD_INPUT 2

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void dump_request(FILE *f, const replay_request *req)
{
    size_t i;
    fprintf(f, "{\"timestamp\": %.17g, \"input_length\": %llu, \"output_length\": %llu, "
               "\"hash_ids\": [",
            req->timestamp_ms, (unsigned long long)req->input_length,
            (unsigned long long)req->output_length);
    for (i = 0; i < req->n_ids; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)req->ids[i]);
    fprintf(f, "]}\n");
}

/* Model and event stream against the registry; counts the checkpoint. */
static int checkpoint(const cache *c, event_sink *sink, const kvreg_registry *reg,
                      const char *when)
{
    int model = cache_check(c);
    int events = event_sink_check(sink, reg, when);
    return model == 0 && events == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    replay_options o;
    workload *w = NULL;
    namer nm;
    event_sink sink;
    wire_out wire = {0};
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_publisher *pub = NULL;
    cache model;
    cache_config cc;
    hmap seen;
    report r = {0};
    progress bar;
    FILE *dump = NULL;
    struct rusage ru;
    double t0;
    int rc, status = 0, verify_failed = 0;

    rc = cli_parse(argc, argv, &o);
    if (rc == CLI_EXIT_OK)
        return 0;
    if (rc != CLI_OK)
        return EXIT_BAD_INPUT;
    if (o.sweep)
        return sweep_main(&o);
    /* --router A,B,...: the policies side by side; --sweep-workers: that per worker count
     * (compare.c) */
    if (o.n_routers > 1 || o.n_sweep_workers)
        return compare_main(&o);

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
    if (o.workers) { /* the cluster replay (cluster.c) */
        status = cluster_run(&o, w);
        w->close(w);
        return status;
    }
    if (o.dump_trace && !(dump = fopen(o.dump_trace, "w"))) {
        perror(o.dump_trace);
        w->close(w);
        return EXIT_BAD_INPUT;
    }

    hmap_init(&seen);
    event_sink_init(&sink, o.verify, o.ignore_event);
    if (namer_init(&nm, o.block_tokens, o.salt) != 0) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return EXIT_VERIFY_OR_LIBRARY;
    }
    if (o.wire_out && wire_out_open(&wire, o.wire_out, o.wire_per_payload,
                                    o.wire ? o.wire : "vllm", &sink, &nm) != 0) {
        wire_out_close(&wire);
        namer_free(&nm);
        event_sink_free(&sink);
        hmap_free(&seen);
        if (dump)
            fclose(dump);
        w->close(w);
        return EXIT_BAD_INPUT;
    }
    /* INLINE delivery (the default) with our counting/verifying callback (through the wire
     * writer with --wire-out), or POLL delivery to the publisher with --publish. */
    rc = kvreg_config_new(&cfg);
    if (rc == KVREG_OK)
        rc = kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE,
                              o.events_per_tier ? KVREG_EVENTS_PER_TIER : KVREG_EVENTS_GLOBAL);
    /* Published per tier, G2's Registers (offloads, by hash only) and onboards need tokens for
     * vLLM's format: the registry keeps the ones G1 registered with, and such Registers carry them. */
    if (rc == KVREG_OK && o.publish.endpoint && o.events_per_tier)
        rc = kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 1);
    if (rc == KVREG_OK)
        rc = o.publish.endpoint ? publish_configure(cfg)
             : o.wire_out       ? kvreg_config_set_event_fn(cfg, wire_out_fn, &wire, NULL)
                                : kvreg_config_set_event_fn(cfg, event_sink_fn, &sink, NULL);
    if (rc == KVREG_OK)
        rc = kvreg_registry_new(&reg, cfg);
    kvreg_config_free(cfg);
    memset(&cc, 0, sizeof cc); /* every field not set here is off (tokens_of NULL) */
    cc.g1_blocks = o.g1_blocks;
    cc.g2_blocks = o.g2_blocks;
    cc.inflight = o.inflight;
    cc.block_tokens = o.block_tokens;
    cc.with_tokens = o.publish.endpoint != NULL;
    if (rc == KVREG_OK)
        rc = cache_init(&model, reg, &cc);
    if (rc == KVREG_OK) { /* the verifier's per-tier checks ask the pools */
        sink.per_tier = o.events_per_tier;
        sink.pools[KVREG_MEDIUM_GPU] = model.g1;
        sink.pools[KVREG_MEDIUM_CPU] = model.g2;
    }
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: cannot set up the registry: %s\n", kvreg_strerror(rc));
        return EXIT_VERIFY_OR_LIBRARY;
    }
    if (o.publish.endpoint && publish_start(&pub, reg, &o.publish, o.block_tokens) != 0)
        return EXIT_VERIFY_OR_LIBRARY;

    progress_start(&bar, o.progress && w->long_input);
    t0 = now_s();
    for (;;) {
        replay_request req;
        rc = workload_next(w, &req);
        if (rc < 0) {
            status = EXIT_BAD_INPUT;
            break;
        }
        if (rc == 0)
            break;
        if (dump)
            dump_request(dump, &req);
        if ((o.wire_out && wire_out_note_request(&wire, &nm, &req) != 0) ||
            count_max_hits(&seen, &req, o.block_tokens, &r) != 0 ||
            cache_request(&model, &nm, &req) != 0) {
            status = EXIT_VERIFY_OR_LIBRARY;
            break;
        }
        if (o.verify && model.st.requests % o.checkpoint_every == 0) {
            char when[48];
            snprintf(when, sizeof when, "after request %llu",
                     (unsigned long long)model.st.requests);
            verify_failed |= checkpoint(&model, &sink, reg, when) != 0;
        }
        if ((model.st.requests & 255) == 0)
            progress_tick(&bar, w->progress(w), model.st.requests);
        if (o.max_requests && model.st.requests >= o.max_requests)
            break;
    }
    if (status == 0 && cache_drain(&model) != 0)
        status = EXIT_VERIFY_OR_LIBRARY;
    r.elapsed_s = now_s() - t0;
    progress_finish(&bar);
    if (status == 0 && model.st.requests == 0)
        fprintf(stderr, "kvreg-replay: warning: %s holds no requests (an empty file?); "
                        "nothing was replayed\n", o.trace ? o.trace : "the workload");

    if (status == 0) {
        if (o.verify)
            verify_failed |= checkpoint(&model, &sink, reg, "at the end") != 0;
        r.source = o.trace;
        r.seed = o.trace ? 0 : o.seed;
        r.conversations = o.trace ? 0 : o.conversations;
        r.salt = o.salt;
        r.cfg = cc;
        r.g1_default = !o.g1_given;
        r.g2_default = !o.g2_given;
        r.st = model.st;
        r.bad_lines = w->bad_lines;
        r.unique_blocks = seen.len;
        r.registers = sink.registers;
        r.removes = sink.removes;
        if (pub) { /* no callback counted them */
            kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REGISTER, &r.registers);
            kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REMOVE, &r.removes);
        }
        kvreg_registry_stat(reg, KVREG_STAT_HASHES, &r.registry_hashes);
        r.g1_size = kvreg_pool_size(model.g1);
        r.g2_size = model.g2 ? kvreg_pool_size(model.g2) : 0;
        r.verify = o.verify;
        r.verify_ok = !verify_failed;
        r.checkpoints = sink.checkpoints;
        r.wire_format = o.wire_out ? wire.format_name : NULL;
        r.wire_batches = wire.batches;
        r.wire_errors = wire.errors;
        r.peak_rss_kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
        if (o.json)
            report_json(stdout, &r);
        else
            report_text(stdout, &r);
        if (verify_failed) {
            fprintf(stderr, "kvreg-replay: --verify-events: the event stream and the registry "
                            "disagree (see above)\n");
            status = EXIT_VERIFY_OR_LIBRARY;
        }
        if (wire.errors)
            status = EXIT_VERIFY_OR_LIBRARY;
    }

    if (dump && fclose(dump) != 0) {
        perror(o.dump_trace);
        status = status ? status : EXIT_VERIFY_OR_LIBRARY;
    }
    if (publish_finish(pub) != 0)
        status = status ? status : EXIT_VERIFY_OR_LIBRARY;
    cache_free(&model);
    kvreg_registry_free(reg); /* frees G1 and G2 too, without events */
    event_sink_free(&sink);
    wire_out_close(&wire);
    namer_free(&nm);
    hmap_free(&seen);
    w->close(w);
    return status;
}
