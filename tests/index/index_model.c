#include "index_model.h"

#include <stdlib.h>
#include <string.h>

void im_init(index_model *m)
{
    memset(m, 0, sizeof *m);
    m->weight[0] = 1000;
    m->weight[1] = 800;
    m->weight[2] = 500;
    m->weight[3] = 300;
}

im_entry *im_find_engine(index_model *m, uint32_t worker, uint64_t engine)
{
    size_t i;
    for (i = 0; i < m->n; i++)
        if (m->e[i].worker == worker && m->e[i].engine == engine)
            return &m->e[i];
    return NULL;
}

uint32_t im_tiers(const index_model *m, uint32_t worker, uint64_t router)
{
    uint32_t t = 0;
    size_t i;
    for (i = 0; i < m->n; i++)
        if (m->e[i].worker == worker && m->e[i].router == router)
            t |= m->e[i].tiers;
    return t;
}

void im_drop_worker(index_model *m, uint32_t worker)
{
    size_t i = 0;
    while (i < m->n) {
        if (m->e[i].worker == worker)
            m->e[i] = m->e[--m->n];
        else
            i++;
    }
}

size_t im_workers(const index_model *m)
{
    size_t i, n = 0;
    for (i = 0; i < IM_MAX_WORKERS; i++)
        n += m->w[i].known != 0;
    return n;
}

size_t im_pairs(const index_model *m)
{
    size_t i, j, n = 0;
    for (i = 0; i < m->n; i++) {
        int first = m->e[i].tiers != 0;
        for (j = 0; j < i && first; j++)
            if (m->e[j].worker == m->e[i].worker && m->e[j].router == m->e[i].router && m->e[j].tiers)
                first = 0;
        n += first;
    }
    return n;
}

static int better(const kvreg_index_match *a, const kvreg_index_match *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->depth != b->depth)
        return a->depth > b->depth;
    if (a->worker_id != b->worker_id)
        return a->worker_id < b->worker_id;
    return a->dp_rank < b->dp_rank;
}

size_t im_query(const index_model *m, const uint64_t *hashes, size_t n, const uint64_t *worker_ids,
                const uint32_t *dp_ranks, kvreg_index_match *out)
{
    size_t count = 0, i, k;
    uint32_t w;
    for (w = 0; w < IM_MAX_WORKERS; w++) {
        kvreg_index_match r;
        unsigned t;
        int tier_alive[KVREG_MEDIUM_COUNT] = {1, 1, 1, 1};
        if (!m->w[w].known)
            continue;
        memset(&r, 0, sizeof r);
        r.worker_id = worker_ids[w];
        r.dp_rank = dp_ranks[w];
        for (i = 0; i < n; i++) {
            uint32_t tiers = im_tiers(m, w, hashes[i]);
            if (!tiers)
                break;
            r.depth++;
            for (t = 0; t < KVREG_MEDIUM_COUNT; t++) {
                if (tiers & (1u << t)) {
                    r.blocks[t]++;
                    break;
                }
            }
            for (t = 0; t < KVREG_MEDIUM_COUNT; t++) {
                if (!(tiers & (1u << t)))
                    tier_alive[t] = 0;
                if (tier_alive[t])
                    r.tier_depth[t]++;
            }
        }
        if (!r.depth)
            continue;
        for (t = 0; t < KVREG_MEDIUM_COUNT; t++)
            r.score += m->weight[t] / 1000.0 * r.blocks[t];
        /* insertion sort into place */
        for (k = count; k > 0 && better(&r, &out[k - 1]); k--)
            out[k] = out[k - 1];
        out[k] = r;
        count++;
    }
    return count;
}
