#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const names[ROUTER_COUNT] = {"kv",           "random", "round_robin",
                                                "least_loaded", "kv-load", "llm-d"};

int router_policy_parse(const char *name, int *policy)
{
    int i;
    for (i = 0; i < ROUTER_COUNT; i++) {
        if (strcmp(name, names[i]) == 0) {
            *policy = i;
            return 0;
        }
    }
    return -1;
}

int router_policy_list(const char *list, int *policies, size_t *n)
{
    char name[32];
    const char *p = list;
    *n = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        int policy, k;
        if (len == 0 || len >= sizeof name)
            goto bad;
        memcpy(name, p, len);
        name[len] = '\0';
        if (router_policy_parse(name, &policy) != 0)
            goto bad;
        for (k = 0; k < (int)*n; k++) {
            if (policies[k] == policy) {
                fprintf(stderr, "kvreg-replay: --router: '%s' is listed twice\n", name);
                return -1;
            }
        }
        policies[(*n)++] = policy;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
bad:
    fprintf(stderr, "kvreg-replay: --router: expected kv, kv-load, llm-d, random, round_robin or "
                    "least_loaded, or several of them separated by commas, got '%s'\n", list);
    return -1;
}

const char *router_policy_name(int policy)
{
    return policy >= 0 && policy < ROUTER_COUNT ? names[policy] : "?";
}

void router_params_defaults(router_params *p)
{
    kvreg_router_config cfg;
    kvreg_router_config_init(&cfg);
    p->overlap_weight = cfg.overlap_weight;
    p->temperature = cfg.temperature;
    p->prefix_weight = cfg.prefix_weight;
    p->load_weight = cfg.load_weight;
    p->cpu_weight = cfg.tier_weight[KVREG_MEDIUM_CPU];
}

static int library_router(router *r, uint64_t seed, const router_params *params)
{
    kvreg_router_config cfg;
    router_params defaults;
    uint32_t w;
    int rc;
    if (!params) {
        router_params_defaults(&defaults);
        params = &defaults;
    }
    kvreg_router_config_init(&cfg);
    cfg.policy = r->policy == ROUTER_LLMD ? KVREG_ROUTER_POLICY_WEIGHTED : KVREG_ROUTER_POLICY_COST;
    cfg.overlap_weight = params->overlap_weight;
    cfg.temperature = params->temperature;
    cfg.prefix_weight = params->prefix_weight;
    cfg.load_weight = params->load_weight;
    cfg.tier_weight[KVREG_MEDIUM_CPU] = params->cpu_weight;
    cfg.seed = seed;
    rc = kvreg_router_new(&r->lib, &cfg);
    for (w = 0; rc == KVREG_OK && w < r->n_workers; w++)
        rc = kvreg_router_add_worker(r->lib, w, 0);
    if (rc != KVREG_OK)
        fprintf(stderr, "kvreg-replay: router: %s\n", kvreg_strerror(rc));
    return rc == KVREG_OK ? 0 : -1;
}

int router_init(router *r, int policy, uint32_t n_workers, uint64_t seed,
                const router_params *params)
{
    memset(r, 0, sizeof *r);
    r->policy = policy;
    r->n_workers = n_workers;
    r->rng = seed;
    r->matches = calloc(n_workers, sizeof *r->matches);
    r->score = calloc(n_workers, sizeof *r->score);
    if (!r->matches || !r->score)
        return -1;
    return policy == ROUTER_KV_LOAD || policy == ROUTER_LLMD ? library_router(r, seed, params)
                                                              : 0;
}

void router_free(router *r)
{
    free(r->matches);
    free(r->score);
    free(r->pending);
    kvreg_router_free(r->lib);
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
    case ROUTER_KV_LOAD:
    case ROUTER_LLMD: {
        kvreg_router_cost chosen;
        rc = kvreg_router_select(r->lib, r->matches, n_matches, (double)n, &chosen);
        if (rc != KVREG_OK) {
            fprintf(stderr, "kvreg-replay: router: %s\n", kvreg_strerror(rc));
            return -1;
        }
        *worker = (uint32_t)chosen.worker_id;
        break;
    }
    default:
        *worker = least_loaded(r, inflight);
        break;
    }
    return 0;
}

int router_dispatched(router *r, uint32_t w, uint64_t blocks)
{
    int rc;
    if (!r->lib)
        return 0;
    if (r->pending_len == r->pending_cap) {
        /* unroll the ring into a larger one, oldest first */
        size_t cap = r->pending_cap ? 2 * r->pending_cap : 64, i;
        uint64_t *p = malloc(cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "kvreg-replay: out of memory\n");
            return -1;
        }
        for (i = 0; i < r->pending_len; i++)
            p[i] = r->pending[(r->pending_head + i) % r->pending_cap];
        free(r->pending);
        r->pending = p;
        r->pending_cap = cap;
        r->pending_head = 0;
    }
    r->pending[(r->pending_head + r->pending_len) % r->pending_cap] = r->next_id;
    r->pending_len++;
    rc = kvreg_router_request_add(r->lib, r->next_id++, w, 0, blocks);
    if (rc != KVREG_OK)
        fprintf(stderr, "kvreg-replay: router: %s\n", kvreg_strerror(rc));
    return rc == KVREG_OK ? 0 : -1;
}

int router_retired(router *r)
{
    int rc;
    if (!r->lib || r->pending_len == 0)
        return 0;
    rc = kvreg_router_request_finish(r->lib, r->pending[r->pending_head]);
    r->pending_head = (r->pending_head + 1) % r->pending_cap;
    r->pending_len--;
    if (rc != KVREG_OK)
        fprintf(stderr, "kvreg-replay: router: %s\n", kvreg_strerror(rc));
    return rc == KVREG_OK ? 0 : -1;
}
