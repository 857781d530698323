/*
 * timing_test: the engine timing model (timing.h) against a tiny trace worked out by hand.
 *
 * Model: prefill 1000 tokens/s, onboard 10000 tokens/s, decode 10 tokens/s, batch 2; 2 workers.
 *   r0 worker 0, arrives 0.0: 1000 uncached, 10 out.  Slot free; prefill 0.0 -> 1.0
 *      (TTFT 1.0); decodes 10 / 10 = 1 s, ends 2.0.
 *   r1 worker 0, arrives 0.5: 500 uncached, 20 out.   Second slot free at 0.5, but the prefill
 *      unit is busy until 1.0: prefill 1.0 -> 1.5 (TTFT 1.0); ends 1.5 + 2 = 3.5.
 *   r2 worker 0, arrives 0.6: 0 uncached, 1000 G2 hit, 10 out.  Both slots busy, the first
 *      frees at 2.0: prefill (onboard) 2.0 -> 2.1 (TTFT 1.5); ends 3.1.
 *   r3 worker 1, arrives 0.7: 2000 uncached, 0 out.   Idle worker: 0.7 -> 2.7 (TTFT 2.0).
 * TTFTs sorted 1.0 1.0 1.5 2.0: nearest-rank p50 = 2nd = 1.0, p99 = 4th = 2.0, mean 1.375.
 * Span: first arrival 0.0 to last end 3.5; output 40 tokens: 40 / 3.5 tokens/s, 4 / 3.5 req/s.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "timing.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static int failures;

static void expect(const char *what, double got, double want)
{
    if (!NEAR(got, want)) {
        fprintf(stderr, "timing_test: %s = %.12g, expected %.12g\n", what, got, want);
        failures++;
    }
}

int main(void)
{
    timing_model m = {1000.0, 10000.0, 10.0, 2, 1.0};
    timing_request r[4] = {
        {0.0, 0, 1000, 0, 10},
        {0.5, 0, 500, 0, 20},
        {0.6, 0, 0, 1000, 10},
        {0.7, 1, 2000, 0, 0},
    };
    timing_result t;
    if (timing_run(&m, 2, r, 4, &t) != 0) {
        fprintf(stderr, "timing_test: out of memory\n");
        return 1;
    }
    expect("ttft p50", t.ttft_p50_s, 1.0);
    expect("ttft p99", t.ttft_p99_s, 2.0);
    expect("ttft mean", t.ttft_mean_s, 1.375);
    expect("span", t.span_s, 3.5);
    expect("output tokens/s", t.output_tps, 40.0 / 3.5);
    expect("requests/s", t.requests_per_s, 4.0 / 3.5);

    /* batch 1 on one worker: r1 waits for r0's end (2.0): prefill 2.0 -> 2.5, TTFT 2.0 */
    m.batch = 1;
    if (timing_run(&m, 2, r, 2, &t) != 0)
        return 1;
    expect("batch 1: ttft p99", t.ttft_p99_s, 2.0);
    expect("batch 1: span", t.span_s, 4.5); /* r1 ends 2.5 + 2 */
    /* speedup 2 (batch 1): r1 arrives at 0.25 and still waits for r0's end at 2.0, so its
     * TTFT is 2.5 - 0.25 = 2.25 */
    m.speedup = 2.0;
    if (timing_run(&m, 2, r, 2, &t) != 0)
        return 1;
    expect("speedup 2: ttft p99", t.ttft_p99_s, 2.25);
    m.speedup = 1.0;
    /* no requests: zeros, no division */
    if (timing_run(&m, 2, r, 0, &t) != 0)
        return 1;
    expect("empty: span", t.span_s, 0.0);
    expect("empty: tokens/s", t.output_tps, 0.0);
    if (failures)
        return 1;
    printf("timing_test: ok\n");
    return 0;
}
