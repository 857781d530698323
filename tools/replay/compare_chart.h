/*
 * compare_chart: kvreg-replay --router A,B,... --plot FILE.svg|FILE.png draws the table side by
 * side with cairo: three panels, one bar group per policy: hit rate by blocks (G1 and G2
 * stacked), TTFT p50 and p99 from the timing model, and output tokens per second; with
 * --sweep-workers, lines of TTFT p99 and hit rate against the worker count. Both charts share
 * one cairo setup (surface by the file name's extension, fonts, clean-up).
 */
#ifndef KVREG_REPLAY_COMPARE_CHART_H
#define KVREG_REPLAY_COMPARE_CHART_H

#include <stddef.h>

typedef struct compare_bar {
    const char *policy;
    double hit_g1, hit_g2;    /* fractions of the prompt blocks */
    double ttft_p50, ttft_p99; /* seconds */
    double output_tps;
} compare_bar;

/* 0, or -1 after a message (no cairo in this build, a bad name, a cairo error). */
int compare_chart_write(const char *path, const char *title, const compare_bar *bars, size_t n);

/* --sweep-workers: one point per policy per worker count. */
typedef struct compare_sweep_point {
    const char *policy;
    unsigned workers;
    double hit;      /* fraction of the prompt blocks (G1 + G2) */
    double ttft_p99; /* seconds */
} compare_sweep_point;

/* Two panels, TTFT p99 and hit rate against the worker count, one line per policy.
 * pts[c * n_policies + p]: count c, policy p (counts increasing). 0, or -1 after a message. */
int compare_sweep_chart_write(const char *path, const char *title, const compare_sweep_point *pts,
                              size_t n_counts, size_t n_policies);

#endif
