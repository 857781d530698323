/* A reference model of the router-side index, written for the tests from kvreg_index.h's
 * documentation alone: a set of (worker, router hash) -> tier mask entries, per-worker sequence
 * numbers, and the expected matches of a prompt. Shared by the model test and the fuzz target
 * (the fuzz target drives the same operations from bytes). */
#ifndef KVREG_TEST_INDEX_MODEL_H
#define KVREG_TEST_INDEX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <kvreg_index.h>

#define IM_MAX_WORKERS 8
#define IM_MAX_ENTRIES 4096

typedef struct im_entry {
    uint32_t worker; /* model worker number */
    uint64_t router;
    uint64_t engine;
    uint32_t tiers;  /* bit per KVREG_MEDIUM_* */
} im_entry;

typedef struct im_worker {
    int known;
    uint64_t next_seq;
    int seq_known;
} im_worker;

typedef struct index_model {
    im_entry e[IM_MAX_ENTRIES];
    size_t n;
    im_worker w[IM_MAX_WORKERS];
    uint32_t weight[KVREG_MEDIUM_COUNT];
} index_model;

void im_init(index_model *m);
/* Entry of (worker, engine hash), or NULL. */
im_entry *im_find_engine(index_model *m, uint32_t worker, uint64_t engine);
/* Tier mask of (worker, router hash) (OR over its engine hashes). */
uint32_t im_tiers(const index_model *m, uint32_t worker, uint64_t router);
void im_drop_worker(index_model *m, uint32_t worker);
size_t im_workers(const index_model *m);
/* Distinct (worker, router) pairs with a tier: what KVREG_INDEX_STAT_ENTRIES counts. */
size_t im_pairs(const index_model *m);
/* Expected matches of hashes[0..n), in the documented order; returns how many. */
size_t im_query(const index_model *m, const uint64_t *hashes, size_t n, const uint64_t *worker_ids,
                const uint32_t *dp_ranks, kvreg_index_match *out);

#endif
