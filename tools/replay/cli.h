/*
 * cli: kvreg-replay's command line: options, defaults, validation and --help.
 */
#ifndef KVREG_REPLAY_CLI_H
#define KVREG_REPLAY_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "nats_options.h"
#include "publish.h"
#include "router.h"
#include "timing.h"

typedef struct replay_options {
    const char *trace;         /* NULL: the built-in synthetic workload */
    uint32_t block_tokens;
    uint64_t g1_blocks;        /* CACHE_UNLIMITED when not given */
    uint64_t g2_blocks;        /* 0: no G2 */
    uint32_t inflight;
    uint64_t salt;
    uint64_t seed;
    uint32_t conversations;
    uint64_t max_requests;     /* 0: all */
    uint64_t checkpoint_every; /* requests between --verify-events checkpoints */
    uint64_t ignore_event;     /* testing aid, EVENTS_IGNORE_NONE normally */
    const char *dump_trace;
    const char *wire, *wire_out; /* --wire FORMAT (NULL: vllm), --wire-out FILE (NULL: none) */
    int wire_per_payload;        /* --wire-out-per-payload DIR: wire_out is the DIR */
    int events_per_tier;         /* --events per-tier: KVREG_EVENTS_PER_TIER (else global) */
    int json, skip_bad, verify, progress;
    uint32_t workers;          /* --workers: 0 is the single-engine replay */
    int router;                /* ROUTER_* (router.h) */
    int transport;             /* REPLAY_TRANSPORT_* */
    int g1_given, g2_given;    /* --g1-blocks / --g2-blocks on the command line */
    /* --sweep (sweep.c): the G1 capacities to run, where to write the table and chart */
    int sweep;
    uint64_t sweep_g1[64], sweep_g2[64];
    size_t sweep_n, sweep_g2_n; /* sweep_g2_n 0: G2 from --g2-blocks (off if not given) */
    const char *sweep_out, *chart;
    publish_options publish;   /* --publish and its options (publish.h) */
    /* --router A,B,... (compare.c): the policies, in order (router is the first) */
    int routers[ROUTER_COUNT];
    size_t n_routers;
    router_params routing;     /* --overlap-weight, --router-temperature, ... (kv-load, llm-d) */
    timing_model timing;       /* --prefill-tps, --decode-tps, ... (the table's TTFT) */
    const char *plot;          /* --plot FILE.svg|.png: the table drawn (compare_chart.h) */
    nats_options nats;         /* --transport nats: --routers, --nats-url, --kill-router */
    /* --sweep-workers 2,4,8,16 (compare.c): the comparison once per worker count */
    uint32_t sweep_workers[16];
    size_t n_sweep_workers;
} replay_options;

#define REPLAY_TRANSPORT_INPROC 0
#define REPLAY_TRANSPORT_ZMQ 1
#define REPLAY_TRANSPORT_NATS 2 /* nats_cluster.h */

/* The default tiers: small enough that the built-in workload and the Mooncake traces evict,
 * offload and onboard (so a first run shows the library at work: Removes, G2 hits, a hit
 * rate below the maximum), in the ratio of a GPU to its host memory. 4,096 blocks of 512
 * tokens are 2M tokens, the size of the local caches in Mooncake's FAST'25 Fig. 9. */
#define REPLAY_DEFAULT_G1_BLOCKS 4096u
#define REPLAY_DEFAULT_G2_BLOCKS 16384u

#define CLI_OK 0
#define CLI_EXIT_OK 1 /* --help or --version was printed */
#define CLI_USAGE 2   /* bad command line, message printed */

int cli_parse(int argc, char **argv, replay_options *o);

#endif
