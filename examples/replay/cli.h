/*
 * cli: kvreg-replay's command line: options, defaults, validation and --help.
 */
#ifndef KVREG_REPLAY_CLI_H
#define KVREG_REPLAY_CLI_H

#include <stdint.h>

#include "publish.h"

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
    int json, skip_bad, verify, progress;
    publish_options publish;   /* --publish and its options (publish.h) */
} replay_options;

#define CLI_OK 0
#define CLI_EXIT_OK 1 /* --help or --version was printed */
#define CLI_USAGE 2   /* bad command line, message printed */

int cli_parse(int argc, char **argv, replay_options *o);

#endif
