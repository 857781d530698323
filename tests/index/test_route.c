/* kvreg_router (kvreg_index.h): the cost function's arithmetic on cases computed by hand (the
 * expected logits are written out below, with the sum that gives each), the choice at
 * temperature 0 and its ties, and the softmax draw against hand-computed probabilities. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kvreg_index.h"

#define EPS 1e-9

static kvreg_index_match match(uint64_t worker, uint32_t gpu, uint32_t cpu)
{
    kvreg_index_match m;
    memset(&m, 0, sizeof m);
    m.worker_id = worker;
    m.blocks[KVREG_MEDIUM_GPU] = gpu;
    m.blocks[KVREG_MEDIUM_CPU] = cpu;
    m.depth = gpu + cpu;
    return m;
}

static kvreg_router *new_router(const kvreg_router_config *cfg)
{
    kvreg_router *r = NULL;
    assert_int_equal(kvreg_router_new(&r, cfg), KVREG_OK);
    assert_non_null(r);
    return r;
}

/* The three-worker state most cases use, for a prompt of 10 blocks:
 *   worker 1: 9 blocks matched on GPU; request 100 of 4 blocks in flight;
 *   worker 2: 2 on GPU and 5 more on CPU; nothing in flight;
 *   worker 3: no match; its owner says 3 blocks are active (set_active). */
static void three_workers(kvreg_router *r, kvreg_index_match m[2])
{
    assert_int_equal(kvreg_router_add_worker(r, 3, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 2, 0), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 100, 1, 0, 4), KVREG_OK);
    assert_int_equal(kvreg_router_set_active(r, 3, 0, 3), KVREG_OK);
    m[0] = match(2, 2, 5); /* the index's order does not matter */
    m[1] = match(1, 9, 0);
}

static void expect_cost(const kvreg_router_cost *c, uint64_t worker, double overlap,
                        double prefill, double active, double logit)
{
    assert_int_equal(c->worker_id, worker);
    assert_int_equal(c->dp_rank, 0);
    assert_true(fabs(c->overlap_blocks - overlap) < EPS);
    assert_true(fabs(c->prefill_blocks - prefill) < EPS);
    assert_true(fabs(c->active_blocks - active) < EPS);
    if (fabs(c->logit - logit) >= EPS)
        fail_msg("worker %llu: logit %.12g, expected %.12g", (unsigned long long)worker,
                 c->logit, logit);
}

static void costs3(kvreg_router *r, const kvreg_index_match *m, kvreg_router_cost out[3])
{
    size_t n = 0;
    assert_int_equal(kvreg_router_costs(r, m, 2, 10.0, out, 3, &n), KVREG_OK);
    assert_int_equal(n, 3);
}

/* Dynamo's cost: logit = overlap_weight x prefill + active, active including the prompt. */
static void test_cost_default(void **state)
{
    (void)state;
    kvreg_router *r = new_router(NULL);
    kvreg_index_match m[2];
    kvreg_router_cost c[3], chosen;
    three_workers(r, m);
    costs3(r, m, c);
    /* w1: overlap 9, prefill 10-9 = 1, active 4+10 = 14: 1 x 1 + 14 = 15
     * w2: overlap 2 + 0.8 x 5 = 6, prefill 4, active 0+10 = 10: 4 + 10 = 14
     * w3: overlap 0, prefill 10, active 3+10 = 13: 10 + 13 = 23 */
    expect_cost(&c[0], 1, 9, 1, 14, 15);
    expect_cost(&c[1], 2, 6, 4, 10, 14);
    expect_cost(&c[2], 3, 0, 10, 13, 23);
    assert_int_equal(kvreg_router_select(r, m, 2, 10.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 2);
    assert_true(fabs(chosen.logit - 14) < EPS);

    /* The request grows to 7 blocks: w1 active 17, logit 1 + 17 = 18. */
    assert_int_equal(kvreg_router_request_update(r, 100, 7), KVREG_OK);
    costs3(r, m, c);
    expect_cost(&c[0], 1, 9, 1, 17, 18);
    /* It finishes: w1 active 0+10, logit 1 + 10 = 11, now the best. */
    assert_int_equal(kvreg_router_request_finish(r, 100), KVREG_OK);
    costs3(r, m, c);
    expect_cost(&c[0], 1, 9, 1, 10, 11);
    assert_int_equal(kvreg_router_select(r, m, 2, 10.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 1);
    kvreg_router_free(r);
}

static void test_cost_weights(void **state)
{
    (void)state;
    kvreg_router_config cfg;
    kvreg_router *r;
    kvreg_index_match m[2];
    kvreg_router_cost c[3], chosen;

    /* overlap_weight 2: w1 2 x 1 + 14 = 16, w2 2 x 4 + 10 = 18, w3 2 x 10 + 13 = 33 */
    assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
    cfg.overlap_weight = 2.0;
    r = new_router(&cfg);
    three_workers(r, m);
    costs3(r, m, c);
    expect_cost(&c[0], 1, 9, 1, 14, 16);
    expect_cost(&c[1], 2, 6, 4, 10, 18);
    expect_cost(&c[2], 3, 0, 10, 13, 33);
    assert_int_equal(kvreg_router_select(r, m, 2, 10.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 1);
    kvreg_router_free(r);

    /* CPU blocks count half: w2 overlap 2 + 0.5 x 5 = 4.5, prefill 5.5, 5.5 + 10 = 15.5 */
    assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
    cfg.tier_weight[KVREG_MEDIUM_CPU] = 0.5;
    r = new_router(&cfg);
    three_workers(r, m);
    costs3(r, m, c);
    expect_cost(&c[1], 2, 4.5, 5.5, 10, 15.5);
    kvreg_router_free(r);

    /* overlap_weight 0: load only, logit = active: 14, 10, 13 */
    assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
    cfg.overlap_weight = 0.0;
    r = new_router(&cfg);
    three_workers(r, m);
    costs3(r, m, c);
    expect_cost(&c[0], 1, 9, 1, 14, 14);
    expect_cost(&c[1], 2, 6, 4, 10, 10);
    expect_cost(&c[2], 3, 0, 10, 13, 13);
    kvreg_router_free(r);
}

/* llm-d's weighted scorers: prefix = overlap / prompt, load = (max - active) / (max - min). */
static void test_weighted(void **state)
{
    (void)state;
    kvreg_router_config cfg;
    kvreg_router *r;
    kvreg_index_match m[2];
    kvreg_router_cost c[3], chosen;

    assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
    cfg.policy = KVREG_ROUTER_POLICY_WEIGHTED;
    cfg.prefix_weight = 2.0;
    cfg.load_weight = 1.0;
    r = new_router(&cfg);
    three_workers(r, m);
    costs3(r, m, c);
    /* active 14, 10, 13 (min 10, max 14); prefix 0.9, 0.6, 0;
     * load (14-14)/4 = 0, (14-10)/4 = 1, (14-13)/4 = 0.25;
     * score 2 x 0.9 + 0 = 1.8, 2 x 0.6 + 1 = 2.2, 0 + 0.25 = 0.25; logit = -score */
    expect_cost(&c[0], 1, 9, 1, 14, -1.8);
    expect_cost(&c[1], 2, 6, 4, 10, -2.2);
    expect_cost(&c[2], 3, 0, 10, 13, -0.25);
    assert_int_equal(kvreg_router_select(r, m, 2, 10.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 2);
    kvreg_router_free(r);

    /* prefix weight 5: 4.5 + 0 = 4.5 beats 3.0 + 1 = 4.0 */
    cfg.prefix_weight = 5.0;
    r = new_router(&cfg);
    three_workers(r, m);
    costs3(r, m, c);
    expect_cost(&c[0], 1, 9, 1, 14, -4.5);
    expect_cost(&c[1], 2, 6, 4, 10, -4.0);
    assert_int_equal(kvreg_router_select(r, m, 2, 10.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 1);
    kvreg_router_free(r);

    /* Equal loads score 1 each; an empty prompt has prefix 0: logit = -load_weight. */
    r = new_router(&cfg);
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 2, 0), KVREG_OK);
    {
        size_t n = 0;
        assert_int_equal(kvreg_router_costs(r, NULL, 0, 0.0, c, 3, &n), KVREG_OK);
        assert_int_equal(n, 2);
        expect_cost(&c[0], 1, 0, 0, 0, -1.0);
        expect_cost(&c[1], 2, 0, 0, 0, -1.0);
    }
    kvreg_router_free(r);
}

/* Temperature 0: the lowest logit; ties to the least active, then the lowest (id, rank). */
static void test_ties(void **state)
{
    (void)state;
    kvreg_router *r = new_router(NULL);
    kvreg_router_cost chosen;
    kvreg_index_match m[2];

    /* Equal logits, equal loads: the lowest id, whatever the order of adding. */
    assert_int_equal(kvreg_router_add_worker(r, 7, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 5, 1), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 5, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 9, 0), KVREG_OK);
    assert_int_equal(kvreg_router_select(r, NULL, 0, 4.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 5);
    assert_int_equal(chosen.dp_rank, 0);
    kvreg_router_free(r);

    /* Equal logits, different loads: worker 1 matches 2 blocks but has 2 in flight:
     * (4-2) + (2+4) = 8; worker 2 matches nothing and is idle: 4 + 4 = 8. Worker 2 wins. */
    r = new_router(NULL);
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 2, 0), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 1, 1, 0, 2), KVREG_OK);
    m[0] = match(1, 2, 0);
    assert_int_equal(kvreg_router_select(r, m, 1, 4.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 2);
    assert_true(fabs(chosen.logit - 8) < EPS);
    kvreg_router_free(r);
}

/* n draws at temperature t with seed among workers 1.. whose logits are active[] (no
 * matches, no prompt, overlap weight 0: the logit is the active blocks set); count[w] gets
 * how often worker w + 1 came out. */
static unsigned draws(double t, uint64_t seed, const uint64_t *active, size_t workers,
                      unsigned n, unsigned *count)
{
    kvreg_router_config cfg;
    kvreg_router *r;
    kvreg_router_cost chosen;
    size_t w;
    unsigned i;
    assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
    cfg.overlap_weight = 0.0;
    cfg.temperature = t;
    cfg.seed = seed;
    r = new_router(&cfg);
    for (w = 0; w < workers; w++) {
        assert_int_equal(kvreg_router_add_worker(r, w + 1, 0), KVREG_OK);
        assert_int_equal(kvreg_router_set_active(r, w + 1, 0, active[w]), KVREG_OK);
        count[w] = 0;
    }
    for (i = 0; i < n; i++) {
        assert_int_equal(kvreg_router_select(r, NULL, 0, 0.0, &chosen), KVREG_OK);
        assert_true(chosen.worker_id >= 1 && chosen.worker_id <= workers);
        count[chosen.worker_id - 1]++;
    }
    kvreg_router_free(r);
    return count[0];
}

/* Softmax over logits normalised to 0..1: p(w) ~ exp(-(l - min) / ((max - min) T)).
 * Bounds are 5 standard deviations of a binomial count (sqrt(n p (1 - p))). */
static void test_softmax(void **state)
{
    (void)state;
    const unsigned n = 20000;
    unsigned count[3], again[3];
    uint64_t two[2] = {2, 4}, equal[2] = {6, 6}, three[3] = {0, 1, 2};

    /* T 1: normalised logits 0 and -1: p1 = 1 / (1 + e^-1) = 0.7310585786: 14621.2, sd 62.7 */
    draws(1.0, 42, two, 2, n, count);
    assert_true(count[0] + count[1] == n);
    if (fabs((double)count[0] - 14621.2) > 314)
        fail_msg("T 1: worker 1 drawn %u times of %u, expected 14621 +- 314", count[0], n);
    /* T 0.5: 0 and -2: p1 = 1 / (1 + e^-2) = 0.8807970780: 17615.9, sd 45.8 */
    draws(0.5, 42, two, 2, n, count);
    if (fabs((double)count[0] - 17615.9) > 229)
        fail_msg("T 0.5: worker 1 drawn %u times, expected 17616 +- 229", count[0]);
    /* Equal logits: uniform, 10000, sd 70.7 */
    draws(1.0, 7, equal, 2, n, count);
    if (fabs((double)count[0] - 10000.0) > 354)
        fail_msg("equal logits: worker 1 drawn %u times, expected 10000 +- 354", count[0]);
    /* Three workers, T 1: 0, -0.5, -1: weights 1, 0.6065306597, 0.3678794412 (sum
     * 1.9744101009): p = 0.5064803, 0.3071959, 0.1863237: 10129.6 (sd 70.7), 6143.9 (65.2),
     * 3726.5 (55.1) */
    draws(1.0, 1, three, 3, n, count);
    if (fabs((double)count[0] - 10129.6) > 354 || fabs((double)count[1] - 6143.9) > 326 ||
        fabs((double)count[2] - 3726.5) > 276)
        fail_msg("three workers: %u %u %u, expected 10130 6144 3727", count[0], count[1],
                 count[2]);
    /* The seed alone decides: the same seed draws the same. */
    draws(1.0, 1, three, 3, n, again);
    assert_memory_equal(count, again, sizeof count);
    /* Temperature 0 never draws: always the lowest logit. */
    draws(0.0, 1, three, 3, 1000, count);
    assert_int_equal(count[0], 1000);
    /* Nor does one so small that the logits' spread times it is 0: the lowest, always. */
    {
        kvreg_router_config cfg;
        kvreg_router *r;
        kvreg_router_cost chosen;
        kvreg_index_match m = match(1, 1, 0);
        unsigned i, first = 0;
        /* overlap_weight 0.3, 1 prompt block: worker 1 has it (logit 0), worker 2 not (0.3);
         * 0.3 x 4.94e-324 is 0, and the best's weight was exp(0 / 0), NaN: every draw fell
         * to the last worker. */
        assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
        cfg.overlap_weight = 0.3;
        cfg.temperature = 4.94e-324;
        r = new_router(&cfg);
        assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
        assert_int_equal(kvreg_router_add_worker(r, 2, 0), KVREG_OK);
        for (i = 0; i < 1000; i++) {
            assert_int_equal(kvreg_router_select(r, &m, 1, 1.0, &chosen), KVREG_OK);
            first += chosen.worker_id == 1;
        }
        assert_int_equal(first, 1000);
        kvreg_router_free(r);
    }
}

static void test_errors(void **state)
{
    (void)state;
    kvreg_router_config cfg;
    kvreg_router *r = NULL;
    kvreg_router_cost c[2], chosen;
    kvreg_index_match m[2];
    size_t n = 0;

    assert_int_equal(kvreg_router_config_init(NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_router_new(NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_router_config_init(&cfg), KVREG_OK);
    assert_int_equal(cfg.size, sizeof cfg);
    cfg.temperature = -1;
    assert_int_equal(kvreg_router_new(&r, &cfg), KVREG_EINVAL);
    kvreg_router_config_init(&cfg);
    cfg.temperature = NAN;
    assert_int_equal(kvreg_router_new(&r, &cfg), KVREG_EINVAL);
    kvreg_router_config_init(&cfg);
    cfg.tier_weight[KVREG_MEDIUM_CPU] = 1.5;
    assert_int_equal(kvreg_router_new(&r, &cfg), KVREG_EINVAL);
    kvreg_router_config_init(&cfg);
    cfg.policy = 7;
    assert_int_equal(kvreg_router_new(&r, &cfg), KVREG_EINVAL);
    kvreg_router_config_init(&cfg);
    cfg.size = 8;
    assert_int_equal(kvreg_router_new(&r, &cfg), KVREG_EINVAL);
    assert_null(r);
    /* A caller compiled without the reserved tail still works (growth by size). */
    kvreg_router_config_init(&cfg);
    cfg.size = (uint32_t)offsetof(kvreg_router_config, reserved);
    r = new_router(&cfg);

    assert_int_equal(kvreg_router_select(r, NULL, 0, 1.0, &chosen), KVREG_ENOENT);
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_EEXIST);
    assert_int_equal(kvreg_router_add_worker(r, 2, 0), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 1, 3, 0, 5), KVREG_ENOENT);
    assert_int_equal(kvreg_router_request_add(r, 1, 1, 0, 5), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 1, 2, 0, 5), KVREG_EEXIST);
    assert_int_equal(kvreg_router_request_update(r, 2, 5), KVREG_ENOENT);
    assert_int_equal(kvreg_router_request_finish(r, 2), KVREG_ENOENT);
    assert_int_equal(kvreg_router_set_active(r, 3, 0, 1), KVREG_ENOENT);
    assert_int_equal(kvreg_router_costs(r, NULL, 1, 1.0, c, 2, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, -1.0, c, 2, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 1.0, c, 1, &n), KVREG_ERANGE);
    assert_int_equal(n, 2);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 1.0, NULL, 0, &n), KVREG_ERANGE);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 1.0, NULL, 2, &n), KVREG_EINVAL);

    /* Workers the router does not know are ignored; a worker named twice counts once. */
    m[0] = match(9, 4, 0);
    m[1] = match(2, 1, 0);
    assert_int_equal(kvreg_router_costs(r, m, 2, 4.0, c, 2, &n), KVREG_OK);
    assert_true(fabs(c[0].overlap_blocks) < EPS && fabs(c[1].overlap_blocks - 1) < EPS);
    m[0] = match(2, 3, 0);
    assert_int_equal(kvreg_router_costs(r, m, 2, 4.0, c, 2, &n), KVREG_OK);
    assert_true(fabs(c[1].overlap_blocks - 3) < EPS);

    /* Removing a worker drops its requests: back, it is idle and the request id is free. */
    assert_int_equal(kvreg_router_remove_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_remove_worker(r, 1, 0), KVREG_ENOENT);
    assert_int_equal(kvreg_router_request_finish(r, 1), KVREG_ENOENT);
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 1.0, c, 2, &n), KVREG_OK);
    assert_true(fabs(c[0].active_blocks - 1.0) < EPS); /* only the prompt's 1 block */
    assert_int_equal(kvreg_router_request_add(r, 1, 1, 0, 5), KVREG_OK);
    kvreg_router_free(r);
    kvreg_router_free(NULL);
}

/* A worker's blocks in flight add up past UINT64_MAX: refused (KVREG_EOVERFLOW), nothing
 * recorded, rather than the sum wrapping round to a small number (which made the busiest
 * worker look idle and chosen). At the edge the sum is exactly UINT64_MAX. */
static void test_blocks_in_flight_overflow(void **state)
{
    (void)state;
    kvreg_router *r = new_router(NULL);
    kvreg_router_cost c[2], chosen;
    size_t n = 0;
    assert_int_equal(kvreg_router_add_worker(r, 1, 0), KVREG_OK);
    assert_int_equal(kvreg_router_add_worker(r, 2, 0), KVREG_OK);
    assert_int_equal(kvreg_router_set_active(r, 2, 0, 10), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 1, 1, 0, UINT64_MAX - 2), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 2, 1, 0, 2), KVREG_OK); /* UINT64_MAX: fits */
    assert_int_equal(kvreg_router_request_add(r, 3, 1, 0, 1), KVREG_EOVERFLOW);
    assert_int_equal(kvreg_router_request_finish(r, 3), KVREG_ENOENT); /* not recorded */
    assert_int_equal(kvreg_router_request_update(r, 2, 3), KVREG_EOVERFLOW);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 1.0, c, 2, &n), KVREG_OK);
    assert_true(c[0].active_blocks > 1.8e19); /* 2^64 - 1 + 1, not wrapped */
    assert_true(fabs(c[1].active_blocks - 11.0) < EPS);
    assert_int_equal(kvreg_router_select(r, NULL, 0, 1.0, &chosen), KVREG_OK);
    assert_int_equal(chosen.worker_id, 2);
    /* The update kept the old blocks: finishing request 2 takes 2 off, then 1 more fits. */
    assert_int_equal(kvreg_router_request_finish(r, 2), KVREG_OK);
    assert_int_equal(kvreg_router_request_add(r, 3, 1, 0, 2), KVREG_OK);
    assert_int_equal(kvreg_router_request_update(r, 3, 3), KVREG_EOVERFLOW);
    assert_int_equal(kvreg_router_request_update(r, 3, 0), KVREG_OK);
    assert_int_equal(kvreg_router_request_finish(r, 1), KVREG_OK);
    assert_int_equal(kvreg_router_request_finish(r, 3), KVREG_OK);
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 1.0, c, 2, &n), KVREG_OK);
    assert_true(fabs(c[0].active_blocks - 1.0) < EPS);
    kvreg_router_free(r);
}

/* Threads adding, selecting and finishing requests on one router at once: every call
 * serializes on its lock, so when they are done the record is empty again (each worker's
 * active blocks are the prompt's alone) and no call failed. Run under TSan for the locking. */
typedef struct race_arg {
    kvreg_router *r;
    uint64_t first_id;
    int failures;
} race_arg;

static void *race_thread(void *p)
{
    race_arg *a = p;
    kvreg_index_match m = match(1, 2, 1);
    kvreg_router_cost chosen;
    uint64_t i;
    for (i = 0; i < 2000; i++) {
        uint64_t id = a->first_id + i;
        if (kvreg_router_select(a->r, &m, 1, 4.0, &chosen) != KVREG_OK ||
            kvreg_router_request_add(a->r, id, chosen.worker_id, 0, 1 + i % 5) != KVREG_OK ||
            kvreg_router_request_update(a->r, id, 2 + i % 7) != KVREG_OK ||
            kvreg_router_request_finish(a->r, id) != KVREG_OK)
            a->failures++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    kvreg_router *r = new_router(NULL);
    pthread_t t[4];
    race_arg a[4];
    kvreg_router_cost c[3];
    size_t n = 0, i;
    for (i = 0; i < 3; i++)
        assert_int_equal(kvreg_router_add_worker(r, i, 0), KVREG_OK);
    for (i = 0; i < 4; i++) {
        a[i].r = r;
        a[i].first_id = 1000000 * (i + 1);
        a[i].failures = 0;
        assert_int_equal(pthread_create(&t[i], NULL, race_thread, &a[i]), 0);
    }
    for (i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(a[i].failures, 0);
    }
    assert_int_equal(kvreg_router_costs(r, NULL, 0, 4.0, c, 3, &n), KVREG_OK);
    for (i = 0; i < n; i++)
        assert_true(fabs(c[i].active_blocks - 4.0) < EPS);
    kvreg_router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_default), cmocka_unit_test(test_cost_weights),
        cmocka_unit_test(test_weighted),     cmocka_unit_test(test_ties),
        cmocka_unit_test(test_softmax),      cmocka_unit_test(test_errors),
        cmocka_unit_test(test_threads),      cmocka_unit_test(test_blocks_in_flight_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
