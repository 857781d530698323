#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg.h>

#include "cache.h"
#include "compare.h"
#include "events.h"
#include "router.h"
#include "sweep.h"
#include "synth.h"
#include "trace.h"
#include "wire_out.h"

/* Its own string: one format string would pass the 4095 bytes C99 compilers must support. */
static const char cluster_usage[] =
"Cluster (kvreg-replay --workers N): N engines behind a router-side index (kvreg_index.h)\n"
"  --workers N               engines, each with the model above (capacities per engine)\n"
"  --router POLICY           kv (best prefix match less load, the default), kv-load, llm-d,\n"
"                            random, round_robin or least_loaded\n"
"  --transport inproc|zmq|nats  how the engines' vLLM event payloads reach the index: in\n"
"                            memory (default inproc), or zmq: a publisher per worker tier on\n"
"                            127.0.0.1 and one subscriber (same routing, over the network)\n";

static const char events_usage[] =
"  --events global|per-tier  the registry's event mode (KVREG_OPT_EVENT_MODE) for --wire-out,\n"
"                            --publish and --verify-events: global (default) sends one\n"
"                            Register / Remove pair per hash, whatever tiers hold it; per-tier\n"
"                            one pair per (hash, tier): G1 and G2 each announce what they\n"
"                            hold, as vLLM's offloading connector does. --verify-events then\n"
"                            checks each (hash, tier) against the pools. The cluster replay\n"
"                            always uses per-tier, so that its router sees tiers\n";

static void usage(FILE *out)
{
    fprintf(out,
"Usage: kvreg-replay [OPTIONS] [TRACE.jsonl | -]\n"
"\n"
"Replay an LLM inference workload through libkvreg the way an engine with a tiered KV cache\n"
"would, and report hit rates, events, speed and memory. Without TRACE it runs a built-in,\n"
"deterministic synthetic workload (multi-turn chats sharing system prompts).\n"
"\n"
"TRACE is Mooncake JSON lines: timestamp, input_length, output_length, hash_ids (one id per\n"
"prompt block, prefix-chained). Each id becomes a block of tokens derived from the id and is\n"
"named with Dynamo's chained XXH3 hashes (kvreg_block_hash, kvreg_sequence_hash).\n"
"Requests run in file order, --inflight at a time; timestamps are not used for timing.%s\n"
"\n"
"Model:\n"
"  --g1-blocks N|unlimited   device pool capacity in blocks (default %u)\n"
"  --g2-blocks N|unlimited   host pool G2 capacity; G1 evictions are offloaded to it and G2\n"
"                            hits onboarded back (default %u; 0: no G2). The defaults are\n"
"                            small on purpose, so that blocks are evicted and moved between\n"
"                            tiers; --g1-blocks unlimited --g2-blocks 0 gives the maximum\n"
"                            hit rate (nothing is ever evicted)\n"
"  --inflight N              requests running at once, holding their blocks (default 8)\n"
"  --block-tokens N          tokens per block id (default 512)\n"
"  --salt N                  hash salt (default 1337, Dynamo's KV-router salt)\n"
"%s%s"
"Input:\n"
"  --skip-bad                skip malformed trace lines and count them (default: stop with\n"
"                            the line number, exit status 2)\n"
"  --max-requests N          stop after N requests\n"
"  --seed N                  synthetic workload seed (default %u)\n"
"  --conversations N         synthetic workload size (default %u)\n"
"  --dump-trace FILE         also write the requests replayed as Mooncake JSON lines\n"
"Capacity sweep (the workload once per G1 capacity, on 2 threads):\n"
"  --sweep                   G1 = 256, 512, ... 131072 blocks and unlimited; G2 stays off\n"
"                            unless --g2-blocks is given. Prints a table of hit rates\n"
"  --sweep-g1 LIST           these G1 capacities instead (e.g. 1000,4000,unlimited)\n"
"  --sweep-g2 LIST           and each of them with these G2 capacities (0: no G2), one curve\n"
"                            per G2 in the chart (e.g. 0,16384)\n"
"  --sweep-out FILE          write the table there: FILE.csv, FILE.json, else text\n"
"  --chart FILE.svg|FILE.png hit rate against G1 capacity, drawn with cairo\n"
"Output:\n"
"  --json                    one JSON object on stdout instead of the summary\n"
"  --no-progress             no progress bar (shown on a terminal for long inputs)\n"
"  --verify-events           rebuild the registered set from the event stream (INLINE\n"
"                            callback) and check it equals the registry at checkpoints and\n"
"                            at the end; exit status 1 on a mismatch\n"
"  --checkpoint-every N      requests between checkpoints (default 1000)\n"
"  --verify-ignore-event ID  testing aid: the verifier drops event ID, so it must fail\n"
"  --wire-out FILE           write each batch of events (one callback call) as the payload an\n"
"                            engine would publish, in order, into one stream file (length-\n"
"                            prefixed records, see kvreg-replay(1)); `kvreg-events decode` reads it\n"
"  --wire-out-per-payload DIR  instead one file per payload: DIR/00000000.msgpack, 00000001...\n"
"                            (a long run writes tens of thousands)\n"
"  --wire FORMAT             its encoding: vllm (KVEventBatch, map events; default),\n"
"                            vllm-legacy (positional events), dynamo-json (.json),\n"
"                            dynamo-msgpack; decode them with `kvreg-events decode`\n"
"%s"
"%s"
"%s"
"  --help, --version\n"
"\n"
"Exit status: 0 done, 1 verification failed or library error, 2 bad usage or bad input.\n",
            trace_input_available() ? "" : "\nThis build cannot read traces (built without jansson).",
            REPLAY_DEFAULT_G1_BLOCKS, REPLAY_DEFAULT_G2_BLOCKS, cluster_usage, compare_usage, SYNTH_DEFAULT_SEED, SYNTH_DEFAULT_CONVERSATIONS,
            events_usage, publish_usage, nats_usage);
}

/* A decimal number in [min, max], or "unlimited" when allowed. */
static int number(const char *opt, const char *text, uint64_t min, uint64_t max,
                  int allow_unlimited, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (allow_unlimited && strcmp(text, "unlimited") == 0) {
        *out = CACHE_UNLIMITED;
        return 0;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno == ERANGE || v < min ||
        v > max) {
        fprintf(stderr, "kvreg-replay: %s: expected a whole number from %llu to %llu%s, got '%s'\n",
                opt, (unsigned long long)min, (unsigned long long)max,
                allow_unlimited ? " or 'unlimited'" : "", text);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse(int argc, char **argv, replay_options *o)
{
    int i, router_given = 0, nats_value = 0;
    memset(o, 0, sizeof *o);
    o->block_tokens = 512;
    o->g1_blocks = REPLAY_DEFAULT_G1_BLOCKS;
    o->g2_blocks = REPLAY_DEFAULT_G2_BLOCKS;
    o->inflight = 8;
    o->salt = KVREG_ROUTER_SALT;
    o->seed = SYNTH_DEFAULT_SEED;
    o->conversations = SYNTH_DEFAULT_CONVERSATIONS;
    o->checkpoint_every = 1000;
    o->ignore_event = EVENTS_IGNORE_NONE;
    o->progress = 1;
    router_params_defaults(&o->routing);
    timing_defaults(&o->timing);

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = NULL;
        const char *eq;
        char name[64];
        uint64_t v;

        if (arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (o->trace) {
                fprintf(stderr, "kvreg-replay: only one trace can be given ('%s', '%s')\n",
                        o->trace, arg);
                return CLI_USAGE;
            }
            o->trace = arg;
            continue;
        }
        /* Accept both --opt=value and --opt value. */
        eq = strchr(arg, '=');
        if (eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }

#define FLAG(str) (strcmp(name, str) == 0 && !val)
#define OPTION(str) (strcmp(name, str) == 0 && (val || (i + 1 < argc && (val = argv[++i]))))
        if (FLAG("--help") || FLAG("-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (FLAG("--version")) {
            printf("kvreg-replay (libkvreg %s)\n", kvreg_version_string());
            return CLI_EXIT_OK;
        } else if (FLAG("--json")) {
            o->json = 1;
        } else if (FLAG("--skip-bad")) {
            o->skip_bad = 1;
        } else if (FLAG("--verify-events")) {
            o->verify = 1;
        } else if (FLAG("--no-progress")) {
            o->progress = 0;
        } else if (OPTION("--g1-blocks")) {
            if (number(name, val, 1, UINT32_MAX, 1, &o->g1_blocks) != 0)
                return CLI_USAGE;
            o->g1_given = 1;
        } else if (OPTION("--g2-blocks")) {
            if (number(name, val, 0, UINT32_MAX, 1, &o->g2_blocks) != 0)
                return CLI_USAGE;
            o->g2_given = 1;
        } else if (OPTION("--inflight")) {
            if (number(name, val, 1, 1u << 20, 0, &v) != 0)
                return CLI_USAGE;
            o->inflight = (uint32_t)v;
        } else if (OPTION("--block-tokens")) {
            if (number(name, val, 1, 1u << 20, 0, &v) != 0)
                return CLI_USAGE;
            o->block_tokens = (uint32_t)v;
        } else if (OPTION("--salt")) {
            if (number(name, val, 0, UINT64_MAX, 0, &o->salt) != 0)
                return CLI_USAGE;
        } else if (OPTION("--seed")) {
            if (number(name, val, 0, UINT64_MAX, 0, &o->seed) != 0)
                return CLI_USAGE;
        } else if (OPTION("--conversations")) {
            if (number(name, val, 1, 10000000, 0, &v) != 0)
                return CLI_USAGE;
            o->conversations = (uint32_t)v;
        } else if (OPTION("--max-requests")) {
            if (number(name, val, 1, UINT64_MAX, 0, &o->max_requests) != 0)
                return CLI_USAGE;
        } else if (OPTION("--checkpoint-every")) {
            if (number(name, val, 1, UINT64_MAX, 0, &o->checkpoint_every) != 0)
                return CLI_USAGE;
        } else if (OPTION("--verify-ignore-event")) {
            if (number(name, val, 0, UINT64_MAX - 1, 0, &o->ignore_event) != 0)
                return CLI_USAGE;
        } else if (OPTION("--workers")) {
            if (number(name, val, 1, 4096, 0, &v) != 0)
                return CLI_USAGE;
            o->workers = (uint32_t)v;
        } else if (OPTION("--router")) {
            if (router_policy_list(val, o->routers, &o->n_routers) != 0)
                return CLI_USAGE;
            o->router = o->routers[0];
            router_given = 1;
        } else if (compare_is_option(name) && OPTION(name)) {
            if (compare_set_option(o, name, val) != 0)
                return CLI_USAGE;
        } else if (OPTION("--transport")) {
            if (strcmp(val, "inproc") == 0) {
                o->transport = REPLAY_TRANSPORT_INPROC;
            } else if (strcmp(val, "zmq") == 0) {
                o->transport = REPLAY_TRANSPORT_ZMQ;
            } else if (strcmp(val, "nats") == 0) {
                o->transport = REPLAY_TRANSPORT_NATS;
            } else {
                fprintf(stderr, "kvreg-replay: --transport: expected inproc, zmq or nats, got '%s'\n", val);
                return CLI_USAGE;
            }
            router_given = 1;
        } else if (OPTION("--wire")) {
            o->wire = val;
        } else if (OPTION("--events")) {
            if (strcmp(val, "global") == 0) {
                o->events_per_tier = 0;
            } else if (strcmp(val, "per-tier") == 0) {
                o->events_per_tier = 1;
            } else {
                fprintf(stderr, "kvreg-replay: --events: expected global or per-tier, got '%s'\n", val);
                return CLI_USAGE;
            }
        } else if (OPTION("--wire-out")) {
            o->wire_out = val;
            o->wire_per_payload = 0;
        } else if (OPTION("--wire-out-per-payload")) {
            o->wire_out = val;
            o->wire_per_payload = 1;
        } else if (FLAG("--sweep")) {
            o->sweep = 1;
        } else if (OPTION("--sweep-g1")) {
            int n = sweep_parse_list(name, val, 1, o->sweep_g1,
                                     sizeof o->sweep_g1 / sizeof o->sweep_g1[0]);
            if (n < 0)
                return CLI_USAGE;
            o->sweep_n = (size_t)n;
            o->sweep = 1;
        } else if (OPTION("--sweep-g2")) {
            int n = sweep_parse_list(name, val, 0, o->sweep_g2,
                                     sizeof o->sweep_g2 / sizeof o->sweep_g2[0]);
            if (n < 0)
                return CLI_USAGE;
            o->sweep_g2_n = (size_t)n;
            o->sweep = 1;
        } else if (OPTION("--sweep-out")) {
            o->sweep_out = val;
        } else if (OPTION("--chart")) {
            o->chart = val;
        } else if (OPTION("--dump-trace")) {
            o->dump_trace = val;
        } else if (nats_is_option(name, &nats_value) && (nats_value ? OPTION(name) : FLAG(name))) {
            /* --transport nats's own block (nats_options.c) */
            if (nats_set_option(&o->nats, name, nats_value ? val : NULL) != 0)
                return CLI_USAGE;
        } else if (publish_is_option(name) && OPTION(name)) {
            if (publish_set_option(&o->publish, name, val) != 0)
                return CLI_USAGE;
        } else {
            fprintf(stderr, "kvreg-replay: unknown option or missing value: %s "
                            "(see kvreg-replay --help)\n", arg);
            return CLI_USAGE;
        }
#undef FLAG
#undef OPTION
    }
    if (o->n_sweep_workers && o->workers) {
        fprintf(stderr, "kvreg-replay: --sweep-workers gives the worker counts: drop --workers\n");
        return CLI_USAGE;
    }
    if (!o->workers && !o->n_sweep_workers && router_given) {
        fprintf(stderr, "kvreg-replay: --router and --transport need --workers\n");
        return CLI_USAGE;
    }
    if (o->nats.given && o->transport != REPLAY_TRANSPORT_NATS) {
        fprintf(stderr, "kvreg-replay: --routers, --nats-url, --kill-router and --corrupt-restored need --transport nats\n");
        return CLI_USAGE;
    }
    if (o->transport == REPLAY_TRANSPORT_NATS && o->n_routers > 1) {
        fprintf(stderr, "kvreg-replay: --transport nats runs one policy (--router POLICY)\n");
        return CLI_USAGE;
    }
    if (o->nats.corrupt_restored && !o->nats.kill_router) {
        fprintf(stderr, "kvreg-replay: --corrupt-restored needs --kill-router\n");
        return CLI_USAGE;
    }
    if (o->nats.kill_router && o->nats.routers < 2) {
        fprintf(stderr, "kvreg-replay: --kill-router needs --routers 2 or more (one replica "
                        "must stay to route)\n");
        return CLI_USAGE;
    }
    if (o->n_sweep_workers && o->transport == REPLAY_TRANSPORT_NATS) {
        fprintf(stderr, "kvreg-replay: --sweep-workers runs in process; it takes no --transport nats\n");
        return CLI_USAGE;
    }
    if ((o->workers || o->n_sweep_workers) && (o->verify || o->dump_trace || o->sweep || o->wire_out)) {
        fprintf(stderr, "kvreg-replay: --workers does not combine with --verify-events, "
                        "--dump-trace, --sweep or --wire-out\n");
        return CLI_USAGE;
    }
    if (o->plot && o->n_routers < 2 && !o->n_sweep_workers) {
        fprintf(stderr, "kvreg-replay: --plot needs --router with two policies or more\n");
        return CLI_USAGE;
    }
    if ((o->sweep_out || o->chart) && !o->sweep) {
        fprintf(stderr, "kvreg-replay: --sweep-out and --chart need --sweep\n");
        return CLI_USAGE;
    }
    if (o->sweep && (o->verify || o->dump_trace || o->json)) {
        fprintf(stderr, "kvreg-replay: --sweep does not combine with --verify-events, "
                        "--dump-trace or --json (use --sweep-out FILE.json)\n");
        return CLI_USAGE;
    }
    if (o->sweep_g2_n && o->g2_given) {
        fprintf(stderr, "kvreg-replay: give G2 capacities with --sweep-g2 or --g2-blocks, "
                        "not both\n");
        return CLI_USAGE;
    }
    if (o->sweep && o->trace && strcmp(o->trace, "-") == 0) {
        fprintf(stderr, "kvreg-replay: --sweep reads the trace once per capacity, so it needs a "
                        "file, not standard input\n");
        return CLI_USAGE;
    }
    if (o->sweep && o->sweep_n == 0) {
        uint64_t cap;
        for (cap = 256; cap <= 131072; cap *= 2)
            o->sweep_g1[o->sweep_n++] = cap;
        o->sweep_g1[o->sweep_n++] = CACHE_UNLIMITED;
    }
    if (o->ignore_event != EVENTS_IGNORE_NONE && !o->verify) {
        fprintf(stderr, "kvreg-replay: --verify-ignore-event needs --verify-events\n");
        return CLI_USAGE;
    }
    if (!o->publish.endpoint &&
        (o->publish.replay_endpoint || o->publish.topic || o->publish.linger_s)) {
        fprintf(stderr, "kvreg-replay: --replay-endpoint, --topic and --linger need --publish\n");
        return CLI_USAGE;
    }
    if (o->publish.endpoint && o->verify) {
        fprintf(stderr, "kvreg-replay: --publish and --verify-events both need the events\n");
        return CLI_USAGE;
    }
    if (o->publish.endpoint && o->wire_out) {
        fprintf(stderr, "kvreg-replay: --publish and --wire-out both need the events\n");
        return CLI_USAGE;
    }
    uint32_t wire_format;
    if (o->wire && wire_out_format(o->wire, &wire_format) != 0) {
        fprintf(stderr, "kvreg-replay: --wire: unknown format '%s' (vllm, vllm-legacy, "
                        "dynamo-json, dynamo-msgpack)\n", o->wire);
        return CLI_USAGE;
    }
    if (o->wire && !o->wire_out) {
        fprintf(stderr, "kvreg-replay: --wire needs --wire-out FILE (or --wire-out-per-payload DIR)\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}
