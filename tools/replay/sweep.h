/*
 * sweep: kvreg-replay --sweep. Replays the same workload once per G1 capacity, and per G2
 * capacity with --sweep-g2 (else G2 fixed by --g2-blocks, off by default), on two worker
 * threads, each run with its own registry, and
 * writes a table (text, CSV or JSON) and, with --chart, a chart of hit rate against G1
 * capacity (chart.c): the question "how big must my cache be" answered from a trace, as in
 * Mooncake's FAST'25 paper, Fig. 9.
 */
#ifndef KVREG_REPLAY_SWEEP_H
#define KVREG_REPLAY_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"

#define SWEEP_MAX_POINTS 64 /* per list (G1, G2); a sweep runs every G1 with every G2 */
#define SWEEP_WORKERS 2 /* both cores of the machine the defaults are tuned for */

typedef struct sweep_row {
    uint64_t g1_blocks, g2_blocks; /* CACHE_UNLIMITED for unlimited; g2 0: no G2 */
    uint64_t requests, blocks, prompt_tokens;
    uint64_t hit_blocks_g1, hit_blocks_g2, max_hit_blocks;
    uint64_t hit_tokens_g1, hit_tokens_g2, max_hit_tokens;
    uint64_t g1_evictions, onboards, registers, removes;
    double elapsed_s;
    int failed;
} sweep_row;

/* Parse "a,b,c" (whole numbers >= min or "unlimited") into caps, for option opt; the count,
 * or -1 after a message. */
int sweep_parse_list(const char *opt, const char *text, uint64_t min, uint64_t *caps,
                     size_t max);

/* Run the sweep the options describe and write its outputs. Exit status for main(). */
int sweep_main(const replay_options *o);

#endif
