#include "timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void timing_defaults(timing_model *m)
{
    m->prefill_tps = TIMING_DEFAULT_PREFILL_TPS;
    m->onboard_tps = TIMING_DEFAULT_ONBOARD_TPS;
    m->decode_tps = TIMING_DEFAULT_DECODE_TPS;
    m->batch = TIMING_DEFAULT_BATCH;
    m->speedup = 1.0;
}

/* Slot end times of one worker: a binary min-heap, so the earliest free slot is the root. */
static void sift_down(double *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        double t;
        if (l < n && h[l] < h[m])
            m = l;
        if (r < n && h[r] < h[m])
            m = r;
        if (m == i)
            return;
        t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double nearest_rank(const double *sorted, size_t n, double q)
{
    size_t k = (size_t)ceil(q * (double)n);
    return n ? sorted[k ? k - 1 : 0] : 0.0;
}

int timing_run(const timing_model *m, uint32_t n_workers, const timing_request *reqs, size_t n,
               timing_result *out)
{
    /* every slot starts free at time 0: a heap of zeros is a valid heap */
    double *slots = calloc((size_t)n_workers * m->batch, sizeof *slots);
    double *prefill_free = calloc(n_workers, sizeof *prefill_free);
    double *ttft = calloc(n ? n : 1, sizeof *ttft);
    double first = 0.0, last = 0.0, sum = 0.0, tokens = 0.0;
    size_t i;
    memset(out, 0, sizeof *out);
    if (!slots || !prefill_free || !ttft) {
        free(slots);
        free(prefill_free);
        free(ttft);
        return -1;
    }
    for (i = 0; i < n; i++) {
        const timing_request *q = &reqs[i];
        double *heap = slots + (size_t)q->worker * m->batch;
        double arrival = q->arrival_s / m->speedup;
        double admit = arrival > heap[0] ? arrival : heap[0];
        double start = admit > prefill_free[q->worker] ? admit : prefill_free[q->worker];
        double done = start + (double)q->uncached_tokens / m->prefill_tps +
                      (double)q->g2_tokens / m->onboard_tps;
        double end = done + (double)q->output_tokens / m->decode_tps;
        prefill_free[q->worker] = done;
        heap[0] = end; /* the earliest slot is taken until this request ends */
        sift_down(heap, m->batch, 0);
        ttft[i] = done - arrival;
        sum += ttft[i];
        tokens += (double)q->output_tokens;
        if (i == 0 || arrival < first)
            first = arrival;
        if (end > last)
            last = end;
    }
    qsort(ttft, n, sizeof *ttft, cmp_double);
    out->ttft_p50_s = nearest_rank(ttft, n, 0.50);
    out->ttft_p99_s = nearest_rank(ttft, n, 0.99);
    out->ttft_mean_s = n ? sum / (double)n : 0.0;
    out->span_s = n ? last - first : 0.0;
    if (out->span_s > 0) {
        out->output_tps = tokens / out->span_s;
        out->requests_per_s = (double)n / out->span_s;
    }
    free(slots);
    free(prefill_free);
    free(ttft);
    return 0;
}
