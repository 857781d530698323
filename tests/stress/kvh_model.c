/* kvh: the reference model (holders, events, statistics) and the lifecycle of a run. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvh_int.h"
#include "kvreg_answer.h"

void kvh_fail(const kvh *h, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kvh FAIL [%s] op #%llu (%s): ", h->context ? h->context : "",
            (unsigned long long)h->ops, h->opname ? h->opname : "-");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    abort();
}

unsigned kvh_u8(kvh *h)
{
    kvh_src *s = h->src;
    if (s->data) {
        if (s->pos < s->len)
            return s->data[s->pos++];
        s->exhausted = 1;
        return 0;
    }
    /* splitmix64: any fixed generator will do, it only has to be reproducible from the seed */
    uint64_t z = (s->rng += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return (unsigned)((z ^ (z >> 31)) & 0xFF);
}

unsigned kvh_pick(kvh *h, unsigned n)
{
    return n ? kvh_u8(h) % n : 0;
}

/* Hashes 0..2 are the chained blocks of tokens 1..12 (B=4, salt 1337) with the values of
 * tests/vectors/public.json case "tokens.rs HASH_9_12", so sequence registration is checked
 * against independently computed hashes. The others are arbitrary values chosen to collide in
 * their low bits (same shard), with and without tokens and parents. */
static const uint64_t vec_block[3] = {UINT64_C(14643705804678351452),
                                      UINT64_C(16777012769546811212),
                                      UINT64_C(483935686894639516)};
static const uint64_t vec_seq[3] = {UINT64_C(14643705804678351452),
                                    UINT64_C(4945711292740353085),
                                    UINT64_C(12583592247330656132)};

static void init_universe(kvh *h)
{
    for (int i = 0; i < KVH_NH; i++) {
        kvh_hash *x = &h->hash[i];
        memset(x, 0, sizeof *x);
        if (i < 3) {
            for (int t = 0; t < 4; t++)
                x->tok[t] = (uint32_t)(i * 4 + t + 1);
            x->has_tokens = 1;
            x->desc.sequence_hash = vec_seq[i];
            x->desc.block_hash = vec_block[i];
            x->desc.has_parent = i > 0;
            x->desc.parent_sequence_hash = i > 0 ? vec_seq[i - 1] : 0;
            x->desc.block_size = 4;
        } else {
            /* the same low 32 bits for all: every synthetic hash falls into one shard */
            x->desc.sequence_hash = ((uint64_t)(i * 0x10001 + 0x77) << 32) | 0x5EEDu;
            if (i == KVH_NH - 1)
                x->desc.sequence_hash = UINT64_MAX - 1;
            x->desc.block_hash = x->desc.sequence_hash ^ UINT64_C(0x0123456789ABCDEF);
            x->desc.has_parent = (i % 3) != 0;
            /* a parent value with has_parent == 0 must be ignored (events report 0) */
            x->desc.parent_sequence_hash = x->desc.has_parent ? h->hash[i - 1].desc.sequence_hash
                                                             : UINT64_C(0xDEADBEEF);
            x->has_tokens = (i % 2) == 0;
            x->tok[0] = (uint32_t)i * 7u;
            x->tok[1] = (uint32_t)i * 7u + 1u;
            x->tok[2] = 0;
            x->tok[3] = UINT32_MAX;
            x->desc.block_size = (i % 4) == 0 ? 0 : 4;
        }
        if (x->has_tokens) {
            x->desc.tokens = x->tok;
            x->desc.n_tokens = 4;
        }
    }
}

static void evlist_push(kvh *h, kvh_evlist *l, const kvreg_event *ev)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        kvh_ev *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            kvh_fail(h, "test out of memory");
        l->v = v;
        l->cap = cap;
    }
    kvh_ev *e = &l->v[l->n++];
    e->ev = *ev;
    if (ev->n_tokens > 4)
        kvh_fail(h, "event with %u tokens; every block here has 4", ev->n_tokens);
    if (ev->n_tokens) {
        if (!ev->tokens)
            kvh_fail(h, "event n_tokens %u with NULL tokens", ev->n_tokens);
        memcpy(e->tok, ev->tokens, ev->n_tokens * sizeof(uint32_t));
    }
    e->ev.tokens = NULL;
    e->group = h->group;
    e->wild = 0;
}

static void emit(kvh *h, uint32_t kind, int s, int hi)
{
    kvh_hash *x = &h->hash[hi];
    kvreg_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.pool_id = h->slot[s].id;
    /* Global event mode: the Remove names the entry its Register made (kvreg.h). */
    if (kind == KVREG_EVENT_REGISTER)
        x->reg_medium = h->slot[s].medium;
    ev.medium = kind == KVREG_EVENT_REGISTER ? h->slot[s].medium : x->reg_medium;
    if (kind == KVREG_EVENT_REMOVE && h->group) {
        const unsigned k = h->n_group_media++ % KVH_GROUP_MEDIA;
        h->group_media[k].group = h->group;
        h->group_media[k].seq = x->desc.sequence_hash;
        h->group_media[k].medium = ev.medium;
    }
    ev.event_id = h->next_id++;
    ev.sequence_hash = x->desc.sequence_hash;
    ev.block_hash = x->desc.block_hash;
    ev.has_parent = x->desc.has_parent;
    ev.parent_sequence_hash = x->desc.has_parent ? x->desc.parent_sequence_hash : 0;
    /* Register carries the registration's tokens; Remove only what KEEP_TOKENS stored */
    if (x->has_tokens && (kind == KVREG_EVENT_REGISTER || h->keep)) {
        ev.n_tokens = 4;
        ev.tokens = x->tok;
    }
    if (kind == KVREG_EVENT_REGISTER)
        h->n_reg++;
    else
        h->n_rem++;
    if (h->poll) {
        if (h->expect.n - h->q_head < h->poll_cap) {
            evlist_push(h, &h->expect, &ev);
        } else {
            h->dropped++;
            /* which members of an unordered group were queued is now up to the library */
            for (size_t i = h->q_head; h->group && i < h->expect.n; i++)
                if (h->expect.v[i].group == h->group)
                    h->expect.v[i].wild = 1;
        }
    } else if (h->cur_ud >= 0) {
        evlist_push(h, &h->expect, &ev);
    } else {
        h->dropped++;
    }
}

void kvh_hold(kvh *h, int s, int hi)
{
    if (h->holders[hi]++ == 0)
        emit(h, KVREG_EVENT_REGISTER, s, hi);
}

void kvh_unhold(kvh *h, int s, int hi)
{
    if (h->holders[hi] == 0)
        kvh_fail(h, "model: unhold of an unheld hash");
    if (--h->holders[hi] == 0)
        emit(h, KVREG_EVENT_REMOVE, s, hi);
}

void kvh_stale_add(kvh *h, kvreg_block b, const kvreg_pool *pool)
{
    h->stale[h->stale_next].b = b;
    h->stale[h->stale_next].pool = pool;
    h->stale_next = (h->stale_next + 1) % KVH_STALE;
    if (h->nstale < KVH_STALE)
        h->nstale++;
}

int kvh_find_live(const kvh *h, int s, kvreg_block b)
{
    if (b == KVREG_BLOCK_NONE)
        return -1;
    for (int i = 0; i < KVH_NH; i++)
        if (h->slot[s].ref[i] && h->slot[s].handle[i] == b)
            return i;
    return -1;
}

/* A new handle must differ from every live one, from the recent stale ones of the same pool
 * pointer and from the foreign registry's: otherwise a stale or foreign release could not be
 * told apart from a valid one, which the header promises (KVREG_ESTALE). */
void kvh_check_new_handle(kvh *h, kvreg_block b, const kvreg_pool *pool)
{
    if (b == KVREG_BLOCK_NONE)
        kvh_fail(h, "handle KVREG_BLOCK_NONE returned with KVREG_OK");
    if (b == h->foreign)
        kvh_fail(h, "handle 0x%llx equals the other registry's live handle",
                 (unsigned long long)b);
    for (int s = 0; s < KVH_NP; s++)
        if (h->slot[s].state == KVH_LIVE && kvh_find_live(h, s, b) >= 0)
            kvh_fail(h, "handle 0x%llx returned twice (live in slot %d)", (unsigned long long)b, s);
    for (size_t i = 0; i < h->nstale; i++)
        if (h->stale[i].b == b && h->stale[i].pool == pool)
            kvh_fail(h, "handle 0x%llx reused while a stale copy may still be around",
                     (unsigned long long)b);
}

void kvh_event_fn(const kvreg_event *events, size_t n, void *user_data)
{
    kvh_ud *u = user_data;
    kvh *h = u->h;
    if (h->cur_ud < 0 || u != &h->ud[h->cur_ud])
        kvh_fail(h, "a replaced callback was called");
    if (n == 0 || !events)
        kvh_fail(h, "callback with no events");
    h->cb_calls++;
    for (size_t i = 0; i < n; i++)
        evlist_push(h, &h->seen, &events[i]);
}

void kvh_destroy_fn(void *user_data)
{
    kvh_ud *u = user_data;
    u->destroyed++;
}

void kvh_compare_event(kvh *h, const kvreg_event *got, const kvh_ev *exp, int check_id)
{
    const kvreg_event *e = &exp->ev;
    KVH_EQ(h, "event kind", got->kind, e->kind);
    if (check_id)
        KVH_EQ(h, "event_id", got->event_id, e->event_id);
    KVH_EQ(h, "event pool_id", got->pool_id, e->pool_id);
    if (got->sequence_hash != e->sequence_hash)
        kvh_fail(h, "event sequence_hash %llu, expected %llu",
                 (unsigned long long)got->sequence_hash, (unsigned long long)e->sequence_hash);
    if (got->block_hash != e->block_hash)
        kvh_fail(h, "event block_hash %llu, expected %llu", (unsigned long long)got->block_hash,
                 (unsigned long long)e->block_hash);
    if (got->parent_sequence_hash != e->parent_sequence_hash)
        kvh_fail(h, "event parent %llu, expected %llu",
                 (unsigned long long)got->parent_sequence_hash,
                 (unsigned long long)e->parent_sequence_hash);
    KVH_EQ(h, "event has_parent", got->has_parent, e->has_parent);
    KVH_EQ(h, "event n_tokens", got->n_tokens, e->n_tokens);
    if (e->n_tokens) {
        if (!got->tokens)
            kvh_fail(h, "event with n_tokens %u has NULL tokens", got->n_tokens);
        if (memcmp(got->tokens, exp->tok, e->n_tokens * sizeof(uint32_t)) != 0)
            kvh_fail(h, "event tokens differ");
    }
    KVH_EQ(h, "event medium", got->medium, e->medium);
    KVH_EQ(h, "event reserved32", got->reserved32, 0);
    for (int i = 0; i < 3; i++)
        KVH_EQ(h, "event reserved word", got->reserved[i], 0);
    h->events_checked++;
}

static int cmp_seq(const void *a, const void *b)
{
    const kvh_ev *x = a, *y = b;
    return x->ev.sequence_hash < y->ev.sequence_hash ? -1 : x->ev.sequence_hash > y->ev.sequence_hash;
}

static void check_inline_events(kvh *h)
{
    KVH_EQ(h, "events delivered by this call", h->seen.n, h->expect.n);
    if (h->unordered && h->seen.n) {
        /* kvreg_pool_free does not fix the order of its Removes; ids must still be contiguous */
        for (size_t i = 0; i < h->seen.n; i++)
            KVH_EQ(h, "event_id (pool free)", h->seen.v[i].ev.event_id, h->expect.v[0].ev.event_id + i);
        qsort(h->seen.v, h->seen.n, sizeof *h->seen.v, cmp_seq);
        qsort(h->expect.v, h->expect.n, sizeof *h->expect.v, cmp_seq);
    }
    for (size_t i = 0; i < h->seen.n; i++) {
        kvh_ev *g = &h->seen.v[i];
        g->ev.tokens = g->tok;
        kvh_compare_event(h, &g->ev, &h->expect.v[i], !h->unordered);
    }
    h->seen.n = 0;
    h->expect.n = 0;
}

static void check_stat(kvh *h, uint32_t stat, uint64_t exp, const char *name)
{
    uint64_t v = UINT64_C(0xABABABAB);
    KVH_EQ(h, "kvreg_registry_stat status", kvreg_registry_stat(h->reg, stat, &v), KVREG_OK);
    if (v != exp)
        kvh_fail(h, "stat %s = %llu, expected %llu", name, (unsigned long long)v,
                 (unsigned long long)exp);
}

void kvh_after_op(kvh *h)
{
    uint64_t hashes = 0, pools = 0, token_bytes = 0;
    if (!h->poll)
        check_inline_events(h);
    h->unordered = 0;
    h->cb_calls = 0;
    for (int i = 0; i < KVH_NH; i++) {
        if (h->holders[i]) {
            hashes++;
            if (h->keep && h->hash[i].has_tokens)
                token_bytes += 4 * sizeof(uint32_t);
        }
    }
    for (int s = 0; s < KVH_NP; s++)
        pools += h->slot[s].state == KVH_LIVE;
    check_stat(h, KVREG_STAT_HASHES, hashes, "HASHES");
    check_stat(h, KVREG_STAT_POOLS, pools, "POOLS");
    check_stat(h, KVREG_STAT_EVENTS_REGISTER, h->n_reg, "EVENTS_REGISTER");
    check_stat(h, KVREG_STAT_EVENTS_REMOVE, h->n_rem, "EVENTS_REMOVE");
    check_stat(h, KVREG_STAT_EVENTS_DROPPED, h->dropped, "EVENTS_DROPPED");
    check_stat(h, KVREG_STAT_EVENTS_QUEUED, h->poll ? h->expect.n - h->q_head : 0, "EVENTS_QUEUED");
    check_stat(h, KVREG_STAT_NEXT_EVENT_ID, h->next_id, "NEXT_EVENT_ID");
    check_stat(h, KVREG_STAT_TOKEN_BYTES, token_bytes, "TOKEN_BYTES");
}

/* Every query about one hash, against the model. */
void kvh_check_hash(kvh *h, int hi)
{
    uint64_t sh = h->hash[hi].desc.sequence_hash;
    KVH_EQ(h, "kvreg_registry_contains", kvt_registry_has(h->reg, sh), h->holders[hi] > 0);
    for (int s = 0; s < KVH_NP; s++) {
        kvh_slot *p = &h->slot[s];
        if (p->state == KVH_LIVE)
            KVH_EQ(h, "kvreg_pool_contains", kvt_pool_has(p->pool, sh), p->ref[hi] > 0);
        else if (p->state == KVH_FREED)
            KVH_EQ(h, "kvreg_pool_contains (freed pool)", kvt_pool_has(p->pool, sh),
                   KVREG_ESTALE);
    }
}

static int make_config(kvh *h, kvreg_config **out)
{
    static const uint64_t caps[8] = {1, 2, 3, 5, 8, 16, 64, 65536};
    static const uint64_t shards[4] = {1, 2, 64, 4096};
    unsigned b = kvh_u8(h);
    unsigned c = kvh_u8(h);
    kvreg_config *cfg = NULL;
    if (h->src->exhausted)
        return -1;
    h->poll = b & 1;
    h->keep = (b >> 1) & 1;
    h->poll_cap = caps[(b >> 2) & 7];
    if (kvreg_config_new(&cfg) != KVREG_OK)
        kvh_fail(h, "kvreg_config_new");
    KVH_EQ(h, "config DELIVERY", kvreg_config_set(cfg, KVREG_OPT_DELIVERY, (uint64_t)h->poll), KVREG_OK);
    KVH_EQ(h, "config KEEP_TOKENS", kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, (uint64_t)h->keep), KVREG_OK);
    KVH_EQ(h, "config POLL_CAPACITY", kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, h->poll_cap), KVREG_OK);
    KVH_EQ(h, "config SHARDS", kvreg_config_set(cfg, KVREG_OPT_SHARDS, shards[(b >> 5) & 3]), KVREG_OK);
    h->cur_ud = -1;
    if (!h->poll && (c & 3) != 0) {
        h->cur_ud = h->nud++;
        h->ud[h->cur_ud].h = h;
        KVH_EQ(h, "kvreg_config_set_event_fn",
               kvreg_config_set_event_fn(cfg, kvh_event_fn, &h->ud[h->cur_ud], kvh_destroy_fn),
               KVREG_OK);
    }
    *out = cfg;
    return 0;
}

static void make_foreign(kvh *h)
{
    KVH_EQ(h, "kvreg_registry_new (foreign)", kvreg_registry_new(&h->reg2, NULL), KVREG_OK);
    KVH_EQ(h, "kvreg_pool_new (foreign)", kvreg_pool_new(&h->pool2, h->reg2, "foreign"), KVREG_OK);
    KVH_EQ(h, "kvreg_register (foreign)", kvreg_register(h->pool2, &h->hash[0].desc, &h->foreign),
           KVREG_OK);
}

static void make_sequence(kvh *h)
{
    uint32_t toks[14];
    size_t done = 0;
    for (uint32_t i = 0; i < 14; i++)
        toks[i] = i + 1;
    KVH_EQ(h, "kvreg_sequence_new", kvreg_sequence_new(&h->seq, 4, KVREG_ROUTER_SALT), KVREG_OK);
    KVH_EQ(h, "kvreg_sequence_extend", kvreg_sequence_extend(h->seq, toks, 14, &done), KVREG_OK);
    KVH_EQ(h, "blocks completed", done, KVH_NSEQ);
}

kvh *kvh_new(kvh_src *src, const char *context)
{
    kvh *h = calloc(1, sizeof *h);
    kvreg_config *cfg = NULL;
    if (!h)
        abort();
    h->src = src;
    h->context = context;
    h->opname = "setup";
    init_universe(h);
    if (make_config(h, &cfg) != 0) {
        free(h);
        return NULL;
    }
    KVH_EQ(h, "kvreg_registry_new", kvreg_registry_new(&h->reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    make_foreign(h);
    make_sequence(h);
    for (int s = 0; s < 3; s++)
        kvh_op_pool_new(h, s);
    kvh_after_op(h);
    return h;
}

int kvh_step(kvh *h)
{
    unsigned op = kvh_u8(h);
    if (h->src->exhausted)
        return 0;
    h->ops++;
    kvh_do_op(h, op);
    kvh_after_op(h);
    return 1;
}

void kvh_free(kvh *h)
{
    h->opname = "quiescence";
    if (getenv("KVH_DEBUG")) /* to see how much a seed exercised */
        fprintf(stderr, "kvh: poll=%d keep=%d cap=%llu emitted=%llu dropped=%llu\n", h->poll,
                h->keep, (unsigned long long)h->poll_cap, (unsigned long long)h->next_id,
                (unsigned long long)h->dropped);
    for (int i = 0; i < KVH_NH; i++)
        kvh_check_hash(h, i);
    /* Half the runs retire every pool first (checking their Removes); the others free the
     * registry with live pools and blocks, which must free all of it (ASan/valgrind check). */
    if (kvh_u8(h) & 1) {
        for (int s = 0; s < KVH_NP; s++) {
            if (h->slot[s].state != KVH_LIVE)
                continue;
            h->opname = "final pool free";
            kvh_op_pool_free(h, s);
            kvh_after_op(h);
        }
        if (h->poll)
            kvh_drain_poll(h);
        for (int i = 0; i < KVH_NH; i++)
            KVH_EQ(h, "holders after freeing every pool", h->holders[i], 0);
    }
    kvreg_registry_free(h->reg);
    for (int i = 0; i < h->nud; i++)
        KVH_EQ(h, "destroy_notify calls", h->ud[i].destroyed, 1);
    kvreg_registry_free(h->reg2);
    kvreg_sequence_free(h->seq);
    free(h->expect.v);
    free(h->seen.v);
    free(h);
}

uint64_t kvh_ops(const kvh *h)
{
    return h->ops;
}

uint64_t kvh_events(const kvh *h)
{
    return h->events_checked;
}
