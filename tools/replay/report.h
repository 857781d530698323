/*
 * report: what kvreg-replay prints. A readable summary on stdout, or one JSON object with
 * --json (field names are stable: tests and scripts read them), and a progress bar on stderr
 * when stderr is a terminal and the input is long.
 */
#ifndef KVREG_REPLAY_REPORT_H
#define KVREG_REPLAY_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "cache.h"

typedef struct report {
    const char *source;      /* trace path, or NULL for the synthetic workload */
    uint64_t seed;           /* synthetic only */
    uint32_t conversations;  /* synthetic only */
    uint64_t salt;
    cache_config cfg;
    cache_stats st;
    uint64_t bad_lines;
    /* Theoretical maximum: a block is a hit iff its id was seen before (infinite cache). */
    uint64_t unique_blocks, max_hit_blocks, max_hit_tokens;
    uint64_t registers, removes; /* events delivered to the callback */
    uint64_t registry_hashes;    /* KVREG_STAT_HASHES at the end */
    uint64_t g1_size, g2_size;   /* kvreg_pool_size at the end */
    int verify;                  /* --verify-events given */
    int verify_ok;
    uint64_t checkpoints;
    const char *wire_format;     /* --wire-out: the encoding, else NULL */
    uint64_t wire_batches, wire_errors;
    double elapsed_s;
    long peak_rss_kib;
    int g1_default, g2_default;  /* the capacities were not given on the command line */
} report;

void report_text(FILE *out, const report *r);
void report_json(FILE *out, const report *r);
/* str as a JSON string literal (quotes, backslashes and control bytes escaped). */
void json_string(FILE *out, const char *str);

typedef struct progress {
    int enabled;
    int shown_permille; /* last value drawn, negative before the first */
    double started_s;   /* CLOCK_MONOTONIC at progress_start */
} progress;

/* Enabled only when stderr is a terminal and the input is long. */
void progress_start(progress *p, int long_input);
/* The bar, the requests done, their rate and the time left (from the fraction done). */
void progress_tick(progress *p, double fraction, uint64_t requests);
/* progress_tick without a count. */
void progress_update(progress *p, double fraction);
void progress_finish(progress *p);

#endif
