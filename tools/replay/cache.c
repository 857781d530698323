#include "cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, int status)
{
    fprintf(stderr, "kvreg-replay: %s: %s\n", what, kvreg_strerror(status));
    return -1;
}

static int inconsistent(const char *what)
{
    fprintf(stderr, "kvreg-replay: model and registry disagree: %s\n", what);
    return -1;
}

static int push_hash(running_request *r, uint64_t hash)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        uint64_t *v = realloc(r->hashes, cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "kvreg-replay: out of memory\n");
            return -1;
        }
        r->hashes = v;
        r->cap = cap;
    }
    r->hashes[r->n++] = hash;
    return 0;
}

int cache_init(cache *c, kvreg_registry *reg, const cache_config *cfg)
{
    return cache_init_tiers(c, reg, reg, cfg);
}

int cache_init_tiers(cache *c, kvreg_registry *g1_reg, kvreg_registry *g2_reg,
                     const cache_config *cfg)
{
    int rc;
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    lru_init(&c->t1);
    lru_init(&c->t2);
    c->ring = calloc(cfg->inflight, sizeof *c->ring);
    if (cfg->with_tokens)
        c->tokens = malloc((size_t)cfg->block_tokens * sizeof *c->tokens);
    if (!c->ring || (cfg->with_tokens && !c->tokens))
        return KVREG_ENOMEM;
    rc = kvreg_pool_new_medium(&c->g1, g1_reg, "G1", KVREG_MEDIUM_GPU);
    if (rc == KVREG_OK && cfg->g2_blocks != 0)
        rc = kvreg_pool_new_medium(&c->g2, g2_reg, "G2", KVREG_MEDIUM_CPU);
    return rc;
}

static int evict_g1(cache *c, lru_entry *v);

/* Back to capacity once blocks are free again: G1 only exceeds it while a request too big
 * for it runs; afterwards its extra blocks must not linger as free hits. */
static int trim_g1(cache *c)
{
    lru_entry *v;
    while (c->cfg.g1_blocks != CACHE_UNLIMITED && c->t1.size > c->cfg.g1_blocks &&
           (v = lru_victim(&c->t1)) != NULL) {
        if (evict_g1(c, v) != 0)
            return -1;
    }
    return 0;
}

/* Drop the references the oldest running request holds; its blocks stay cached (as far as
 * capacity allows). */
static int finish_oldest(cache *c)
{
    running_request *r = &c->ring[c->ring_head];
    size_t i;
    for (i = 0; i < r->n; i++) {
        lru_entry *e = lru_find(&c->t1, r->hashes[i]);
        int rc;
        if (!e || e->users == 0)
            return inconsistent("a running request's block is not held in G1");
        rc = kvreg_release(c->g1, e->handle);
        c->st.api_calls++;
        if (rc != KVREG_OK)
            return fail("release from G1", rc);
        lru_unpin(&c->t1, e);
    }
    r->n = 0;
    c->ring_head = (c->ring_head + 1) % c->cfg.inflight;
    c->ring_count--;
    return trim_g1(c);
}

static int evict_g2(cache *c)
{
    lru_entry *v = lru_victim(&c->t2);
    int rc;
    if (!v)
        return inconsistent("G2 is full but holds no block");
    rc = kvreg_release(c->g2, v->handle);
    c->st.api_calls++;
    if (rc != KVREG_OK)
        return fail("release from G2", rc);
    lru_remove(&c->t2, v);
    c->st.g2_evictions++;
    return 0;
}

/* A copy of a block for the other tier: by hash only (the model has no real tokens to store),
 * unless the tokens are asked for and known (cache_config.tokens_of). 0, or -1 (printed). */
static int desc_of(cache *c, const kvreg_block_info *info, kvreg_block_desc *d)
{
    memset(d, 0, sizeof *d);
    d->sequence_hash = info->sequence_hash;
    d->block_hash = info->block_hash;
    d->parent_sequence_hash = info->parent_sequence_hash;
    d->has_parent = info->has_parent;
    if (c->cfg.with_tokens && c->cfg.tokens_of) {
        if (c->cfg.tokens_of(c->cfg.tokens_ctx, info->sequence_hash, c->tokens) != 0)
            return inconsistent("no tokens for a block moving between tiers");
        d->tokens = c->tokens;
        d->n_tokens = d->block_size = c->cfg.block_tokens;
    }
    return 0;
}

/* Evict G1's least recently used unused block, offloading it to G2 first when there is one. */
static int evict_g1(cache *c, lru_entry *v)
{
    uint64_t hash = v->hash, handle = v->handle;
    int rc;

    if (c->g2) {
        lru_entry *e2 = lru_find(&c->t2, hash);
        if (e2) {
            lru_touch(&c->t2, e2); /* G2 already has a copy (it was onboarded from there) */
        } else {
            kvreg_block_info info;
            kvreg_block g2_handle;
            rc = kvreg_block_get_info(c->g1, handle, &info);
            c->st.api_calls++;
            if (rc != KVREG_OK)
                return fail("block info in G1", rc);
            if (c->cfg.g2_blocks != CACHE_UNLIMITED && c->t2.size >= c->cfg.g2_blocks &&
                evict_g2(c) != 0)
                return -1;
            {
                kvreg_block_desc d;
                if (desc_of(c, &info, &d) != 0)
                    return -1;
                /* Register in G2 BEFORE releasing from G1: the hash never leaves the registry,
                 * so consumers of the event stream see no Remove/Register pair for a move. */
                rc = kvreg_register(c->g2, &d, &g2_handle);
            }
            c->st.api_calls++;
            if (rc != KVREG_OK)
                return fail("register in G2", rc);
            if (!lru_insert(&c->t2, hash, g2_handle))
                return fail("G2 bookkeeping", KVREG_ENOMEM);
            c->st.g2_stores++;
        }
    }
    v = lru_find(&c->t1, hash);
    rc = kvreg_release(c->g1, handle);
    c->st.api_calls++;
    if (rc != KVREG_OK)
        return fail("release from G1", rc);
    lru_remove(&c->t1, v);
    c->st.g1_evictions++;
    return 0;
}

/* Make room for one more block in G1. */
static int make_room_g1(cache *c)
{
    while (c->cfg.g1_blocks != CACHE_UNLIMITED && c->t1.size >= c->cfg.g1_blocks) {
        lru_entry *v = lru_victim(&c->t1);
        if (v) {
            if (evict_g1(c, v) != 0)
                return -1;
        } else if (c->ring_count > 0) {
            /* Everything cached is in use: the scheduler waits for a running request. */
            if (finish_oldest(c) != 0)
                return -1;
            c->st.early_finishes++;
        } else {
            c->st.over_capacity++; /* the current request alone does not fit */
            break;
        }
    }
    return 0;
}

/* The current request takes a reference on a block G1 holds. */
static int use_g1_block(cache *c, uint64_t hash, int acquire)
{
    lru_entry *e = lru_find(&c->t1, hash);
    if (!e)
        return inconsistent("G1 holds a block the model does not know");
    if (acquire) {
        kvreg_block h;
        int rc = kvreg_acquire(c->g1, hash, &h);
        c->st.api_calls++;
        if (rc != KVREG_OK)
            return fail("acquire in G1", rc);
        if (h != e->handle)
            return inconsistent("kvreg_acquire returned another handle than kvreg_register");
    }
    lru_pin(&c->t1, e);
    return push_hash(&c->cur, hash);
}

/* Register a block in G1 (computed, or onboarded from G2) and take the request's reference. */
static int add_g1_block(cache *c, const kvreg_block_desc *d)
{
    kvreg_block h;
    int rc;
    if (make_room_g1(c) != 0)
        return -1;
    rc = kvreg_register(c->g1, d, &h);
    c->st.api_calls++;
    if (rc != KVREG_OK)
        return fail("register in G1", rc);
    if (!lru_insert(&c->t1, d->sequence_hash, h))
        return fail("G1 bookkeeping", KVREG_ENOMEM);
    return use_g1_block(c, d->sequence_hash, 1);
}

static int onboard(cache *c, uint64_t hash)
{
    lru_entry *e2 = lru_find(&c->t2, hash);
    kvreg_block_info info;
    kvreg_block_desc d;
    int rc;
    if (!e2)
        return inconsistent("G2 holds a block the model does not know");
    lru_touch(&c->t2, e2);
    rc = kvreg_block_get_info(c->g2, e2->handle, &info);
    c->st.api_calls++;
    if (rc != KVREG_OK)
        return fail("block info in G2", rc);
    if (desc_of(c, &info, &d) != 0)
        return -1;
    c->st.onboards++;
    return add_g1_block(c, &d);
}

static int ensure_scratch(cache *c, size_t n)
{
    if (n > c->scratch_cap) {
        uint64_t *bh = realloc(c->block_hashes, n * sizeof *bh);
        if (bh)
            c->block_hashes = bh;
        {
            uint64_t *sh = realloc(c->sequence_hashes, n * sizeof *sh);
            kvreg_block *hd;
            if (sh)
                c->sequence_hashes = sh;
            hd = realloc(c->handles, n * sizeof *hd);
            if (hd)
                c->handles = hd;
            if (!bh || !sh || !hd) {
                fprintf(stderr, "kvreg-replay: out of memory\n");
                return -1;
            }
        }
        c->scratch_cap = n;
    }
    return 0;
}

int cache_request(cache *c, namer *nm, const replay_request *req)
{
    const size_t n = req->n_ids;
    const uint32_t bt = c->cfg.block_tokens;
    size_t i = 0;
    int in_prefix = 1;
    running_request slot;

    if (ensure_scratch(c, n) != 0 ||
        (n && namer_chain(nm, req->ids, n, c->block_hashes, c->sequence_hashes) != 0)) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return -1;
    }
    if (c->ring_count == c->cfg.inflight && finish_oldest(c) != 0)
        return -1;

    c->st.requests++;
    c->st.blocks += n;
    c->st.prompt_tokens += req->input_length;
    c->st.output_tokens += req->output_length;
    c->cur.n = 0;

    while (i < n) {
        const uint64_t *sh = c->sequence_hashes;
        if (in_prefix) {
            size_t k = 0, j;
            int rc = kvreg_acquire_prefix(c->g1, sh + i, n - i, c->handles, &k);
            c->st.api_calls++;
            if (rc != KVREG_OK)
                return fail("acquire prefix in G1", rc);
            for (j = 0; j < k; j++) {
                const lru_entry *e = lru_find(&c->t1, sh[i + j]);
                if (!e || e->handle != c->handles[j])
                    return inconsistent("kvreg_acquire_prefix gave a handle the model lacks");
                if (use_g1_block(c, sh[i + j], 0) != 0)
                    return -1;
                c->st.hit_blocks_g1++;
                c->st.hit_tokens_g1 += request_block_tokens(req, i + j, bt);
            }
            i += k;
            if (i == n)
                break;
            if (c->g2) {
                int in_g2 = 0;
                rc = kvreg_pool_contains(c->g2, sh[i], &in_g2);
                c->st.api_calls++;
                if (rc < 0)
                    return fail("lookup in G2", rc);
                if (in_g2) {
                    if (onboard(c, sh[i]) != 0)
                        return -1;
                    c->st.hit_blocks_g2++;
                    c->st.hit_tokens_g2 += request_block_tokens(req, i, bt);
                    i++;
                    continue;
                }
            }
            in_prefix = 0; /* first block in neither tier: the rest must be computed */
        }
        if (lru_find(&c->t1, sh[i])) {
            if (use_g1_block(c, sh[i], 1) != 0)
                return -1;
        } else {
            kvreg_block_desc d;
            memset(&d, 0, sizeof d);
            d.sequence_hash = sh[i];
            d.block_hash = c->block_hashes[i];
            d.has_parent = i > 0;
            d.parent_sequence_hash = i > 0 ? sh[i - 1] : 0;
            if (c->cfg.with_tokens) { /* only a computed block's Register is an event */
                namer_tokens(nm, req->ids[i], c->tokens);
                d.tokens = c->tokens;
                d.n_tokens = d.block_size = bt;
            }
            if (add_g1_block(c, &d) != 0)
                return -1;
        }
        i++;
    }

    /* Hand the request's references to a free ring slot (its old buffer becomes cur's). */
    if (c->ring_count == c->cfg.inflight && finish_oldest(c) != 0)
        return -1;
    {
        size_t at = (c->ring_head + c->ring_count) % c->cfg.inflight;
        slot = c->ring[at];
        c->ring[at] = c->cur;
        c->cur = slot;
        c->cur.n = 0;
        c->ring_count++;
    }
    return 0;
}

int cache_drain(cache *c)
{
    while (c->ring_count > 0) {
        if (finish_oldest(c) != 0)
            return -1;
    }
    return 0;
}

int cache_check(const cache *c)
{
    size_t g1 = kvreg_pool_size(c->g1), g2 = c->g2 ? kvreg_pool_size(c->g2) : 0;
    if (g1 != c->t1.size || g2 != c->t2.size) {
        fprintf(stderr,
                "kvreg-replay: model and registry disagree: G1 %zu vs pool %zu, G2 %zu vs pool %zu\n",
                c->t1.size, g1, c->t2.size, g2);
        return -1;
    }
    return 0;
}

void cache_free(cache *c)
{
    size_t i;
    if (c->ring) {
        for (i = 0; i < c->cfg.inflight; i++)
            free(c->ring[i].hashes);
    }
    free(c->ring);
    free(c->cur.hashes);
    free(c->block_hashes);
    free(c->sequence_hashes);
    free(c->handles);
    free(c->tokens);
    lru_free(&c->t1);
    lru_free(&c->t2);
    memset(c, 0, sizeof *c);
}
