#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const names[] = {"kv", "random", "round_robin", "least_loaded"};

int router_policy_parse(const char *name, int *policy)
{
    int i;
    for (i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *policy = i;
            return 0;
        }
    }
    return -1;
}

const char *router_policy_name(int policy)
{
    return policy >= 0 && policy < 4 ? names[policy] : "?";
}

int router_init(router *r, int policy, uint32_t n_workers, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->policy = policy;
    r->n_workers = n_workers;
    r->rng = seed;
    r->matches = calloc(n_workers, sizeof *r->matches);
    r->score = calloc(n_workers, sizeof *r->score);
    return r->matches && r->score ? 0 : -1;
}

void router_free(router *r)
{
    free(r->matches);
    free(r->score);
    memset(r, 0, sizeof *r);
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint32_t least_loaded(const router *r, const uint32_t *inflight)
{
    uint32_t w, best = 0;
    for (w = 1; w < r->n_workers; w++)
        if (inflight[w] < inflight[best])
            best = w;
    return best;
}

/* kv: match score less the load term; ties to the least loaded, then the lowest number. */
static uint32_t pick_kv(router *r, size_t n_matches, const uint32_t *inflight, double load_cost)
{
    uint32_t w, best = 0, min_load = inflight[least_loaded(r, inflight)];
    size_t i;
    for (w = 0; w < r->n_workers; w++)
        r->score[w] = -load_cost * (double)(inflight[w] - min_load);
    for (i = 0; i < n_matches; i++) {
        /* the index names workers by the ids the cluster gave them: 0 .. n-1 */
        uint64_t id = r->matches[i].worker_id;
        if (id < r->n_workers)
            r->score[id] += r->matches[i].score;
    }
    for (w = 1; w < r->n_workers; w++) {
        if (r->score[w] > r->score[best] ||
            (r->score[w] == r->score[best] && inflight[w] < inflight[best]))
            best = w;
    }
    return best;
}

int router_pick(router *r, const kvreg_index *idx, const uint64_t *hashes, size_t n,
                const uint32_t *inflight, double load_cost, uint32_t *worker, double *query_ns)
{
    size_t n_matches = 0;
    double t0 = now_ns();
    int rc = kvreg_index_query_hashes(idx, hashes, n, 0, r->matches, r->n_workers, &n_matches);
    *query_ns = now_ns() - t0;
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: index query: %s\n", kvreg_strerror(rc));
        return -1;
    }
    switch (r->policy) {
    case ROUTER_KV:
        *worker = pick_kv(r, n_matches, inflight, load_cost);
        break;
    case ROUTER_RANDOM:
        *worker = (uint32_t)(splitmix64(&r->rng) % r->n_workers);
        break;
    case ROUTER_ROUND_ROBIN:
        *worker = r->next_rr;
        r->next_rr = (r->next_rr + 1) % r->n_workers;
        break;
    default:
        *worker = least_loaded(r, inflight);
        break;
    }
    return 0;
}
