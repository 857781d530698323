/* kvh: the operations. Each decodes its arguments, calls the library, predicts the result with
 * the model and compares; events are compared afterwards by kvh_after_op(). */
#include <stdio.h>
#include <string.h>

#include "kvh_int.h"

#define SENTINEL UINT64_C(0x5A5A5A5A5A5A5A5A)

static const uint32_t five_tokens[5] = {1, 2, 3, 4, 5};

enum { V_OK, V_PARTIAL, V_TOOMANY, V_NULLTOK, V_COUNT };

/* A descriptor for hash hi, made invalid in one way when variant != V_OK. */
static kvreg_block_desc make_desc(const kvh *h, int hi, int variant, int *expect)
{
    kvreg_block_desc d = h->hash[hi].desc;
    *expect = KVREG_OK;
    switch (variant) {
    case V_PARTIAL: /* fewer tokens than the declared block size: not a complete block */
        d.tokens = five_tokens;
        d.n_tokens = 3;
        d.block_size = 4;
        *expect = KVREG_ESTATE;
        break;
    case V_TOOMANY:
        d.tokens = five_tokens;
        d.n_tokens = 5;
        d.block_size = 4;
        *expect = KVREG_EINVAL;
        break;
    case V_NULLTOK:
        d.tokens = NULL;
        d.n_tokens = 4;
        *expect = KVREG_EINVAL;
        break;
    default:
        break;
    }
    return d;
}

/* Model of registering a valid descriptor of hash hi in live slot s. */
static int model_register(kvh *h, int s, int hi, int status, kvreg_block got)
{
    kvh_slot *p = &h->slot[s];
    if (p->ref[hi]) {
        KVH_EQ(h, "register of a held hash", status, KVREG_EEXIST);
        return 0;
    }
    KVH_EQ(h, "register status", status, KVREG_OK);
    kvh_check_new_handle(h, got, p->pool);
    p->ref[hi] = 1;
    p->handle[hi] = got;
    kvh_hold(h, s, hi);
    return 1;
}

/* Model of releasing handle value b in live slot s; returns the expected status. */
static int model_release(kvh *h, int s, kvreg_block b)
{
    kvh_slot *p = &h->slot[s];
    int hi = kvh_find_live(h, s, b);
    if (hi < 0)
        return KVREG_ESTALE;
    if (--p->ref[hi] == 0) {
        kvh_stale_add(h, b, p->pool);
        p->handle[hi] = KVREG_BLOCK_NONE;
        kvh_unhold(h, s, hi);
    }
    return KVREG_OK;
}

/* A live handle of slot s for hash hi if there is one, else something that must be stale. */
static kvreg_block pick_handle(kvh *h, int s, int hi)
{
    unsigned c = kvh_pick(h, 10);
    int other = (s + 1 + (int)kvh_pick(h, KVH_NP - 1)) % KVH_NP;
    switch (c) {
    case 0: case 1: case 2: case 8: case 9: /* a live handle, starting the search at hi */
        for (int i = 0; i < KVH_NH; i++)
            if (h->slot[s].ref[(hi + i) % KVH_NH])
                return h->slot[s].handle[(hi + i) % KVH_NH];
        /* fall through */
    case 3:
        if (h->nstale)
            return h->stale[kvh_pick(h, (unsigned)h->nstale)].b;
        return h->foreign;
    case 4: /* another pool's live handle */
        if (h->slot[other].state == KVH_LIVE && h->slot[other].ref[hi])
            return h->slot[other].handle[hi];
        return h->foreign;
    case 5:
        return h->foreign;
    case 6:
        return KVREG_BLOCK_NONE;
    case 7: /* a near miss of a live handle: one bit flipped */
        for (int i = 0; i < KVH_NH; i++)
            if (h->slot[s].ref[(hi + i) % KVH_NH])
                return h->slot[s].handle[(hi + i) % KVH_NH] ^ (UINT64_C(1) << kvh_pick(h, 64));
        return UINT64_MAX;
    default:
        return h->foreign;
    }
}

/* A batch call on a freed pool: the header does not say whether the call itself fails with
 * KVREG_ESTALE or succeeds with KVREG_ESTALE for every item; both leave everything unchanged. */
static void check_freed_batch(kvh *h, int st, size_t n, const int *status,
                              const kvreg_block *out, const size_t *done)
{
    if (st == KVREG_ESTALE)
        return;
    KVH_EQ(h, "batch call on a freed pool", st, KVREG_OK);
    for (size_t i = 0; i < n; i++) {
        if (status)
            KVH_EQ(h, "item fails in a freed pool", status[i] < 0, 1);
        if (out && out[i] != KVREG_BLOCK_NONE)
            kvh_fail(h, "block handed out by a freed pool");
    }
    if (done)
        KVH_EQ(h, "items done in a freed pool", *done, 0);
}

static void op_register(kvh *h, int s, int hi, int variant)
{
    kvh_slot *p = &h->slot[s];
    int expect;
    kvreg_block_desc d = make_desc(h, hi, variant, &expect);
    kvreg_block out = SENTINEL;
    h->opname = "kvreg_register";
    if (p->state == KVH_EMPTY)
        return;
    int st = kvreg_register(p->pool, &d, &out);
    if (p->state == KVH_FREED) {
        if (variant == V_OK)
            KVH_EQ(h, "register in a freed pool", st, KVREG_ESTALE);
        else if (st >= 0)
            kvh_fail(h, "bad register in a freed pool succeeded");
    } else if (variant != V_OK) {
        KVH_EQ(h, "register of a bad descriptor", st, expect);
    } else {
        model_register(h, s, hi, st, out);
        return;
    }
    KVH_EQ(h, "output written on failure", out == SENTINEL, 1);
}

static void op_register_null(kvh *h, int s, int hi)
{
    kvh_slot *p = &h->slot[s];
    kvreg_block out = SENTINEL;
    h->opname = "kvreg_register (NULL arguments)";
    KVH_EQ(h, "register NULL pool", kvreg_register(NULL, &h->hash[hi].desc, &out), KVREG_EINVAL);
    if (p->state != KVH_LIVE)
        return;
    KVH_EQ(h, "register NULL desc", kvreg_register(p->pool, NULL, &out), KVREG_EINVAL);
    KVH_EQ(h, "register NULL out", kvreg_register(p->pool, &h->hash[hi].desc, NULL), KVREG_EINVAL);
    KVH_EQ(h, "output written on failure", out == SENTINEL, 1);
}

static void op_acquire(kvh *h, int s, int hi)
{
    kvh_slot *p = &h->slot[s];
    kvreg_block out = SENTINEL;
    h->opname = "kvreg_acquire";
    if (p->state == KVH_EMPTY)
        return;
    int st = kvreg_acquire(p->pool, h->hash[hi].desc.sequence_hash, &out);
    if (p->state == KVH_FREED) {
        KVH_EQ(h, "acquire in a freed pool", st, KVREG_ESTALE);
    } else if (!p->ref[hi]) {
        KVH_EQ(h, "acquire of an absent hash", st, KVREG_ENOENT);
    } else {
        KVH_EQ(h, "acquire status", st, KVREG_OK);
        if (out != p->handle[hi])
            kvh_fail(h, "acquire gave handle 0x%llx, register gave 0x%llx",
                     (unsigned long long)out, (unsigned long long)p->handle[hi]);
        p->ref[hi]++;
        return;
    }
    KVH_EQ(h, "output written on failure", out == SENTINEL, 1);
}

static void op_release(kvh *h, int s, int hi)
{
    kvh_slot *p = &h->slot[s];
    kvreg_block b = pick_handle(h, s, hi);
    h->opname = "kvreg_release";
    if (p->state == KVH_EMPTY)
        return;
    int st = kvreg_release(p->pool, b);
    if (p->state == KVH_FREED) {
        KVH_EQ(h, "release in a freed pool", st, KVREG_ESTALE);
        return;
    }
    KVH_EQ(h, "release status", st, model_release(h, s, b));
}

static void op_register_batch(kvh *h, int s)
{
    kvh_slot *p = &h->slot[s];
    kvreg_block_desc d[8];
    kvreg_block out[8];
    int status[8], expect[8], hi[8], variant[8];
    size_t n = 1 + kvh_pick(h, 8), nreg = 999, want = 0;
    unsigned flags = kvh_u8(h);
    h->opname = "kvreg_register_batch";
    for (size_t i = 0; i < n; i++) {
        hi[i] = (int)kvh_pick(h, KVH_NH);
        variant[i] = kvh_pick(h, 8) == 0 ? (int)kvh_pick(h, V_COUNT) : V_OK;
        d[i] = make_desc(h, hi[i], variant[i], &expect[i]);
        out[i] = SENTINEL;
        status[i] = 12345;
    }
    if (p->state == KVH_EMPTY)
        return;
    if (flags & 1) { /* bad arguments: nothing happens (events and stats are checked after) */
        int st1 = kvreg_register_batch(p->pool, NULL, n, out, status, &nreg);
        int st2 = kvreg_register_batch(p->pool, d, n, NULL, status, &nreg);
        if (p->state == KVH_LIVE) {
            KVH_EQ(h, "batch NULL descs", st1, KVREG_EINVAL);
            KVH_EQ(h, "batch NULL out_blocks", st2, KVREG_EINVAL);
        } else if (st1 >= 0 || st2 >= 0) {
            kvh_fail(h, "bad batch in a freed pool succeeded");
        }
        KVH_EQ(h, "n_registered written on failure", nreg, 999);
        return;
    }
    int st = kvreg_register_batch(p->pool, d, n, out, (flags & 2) ? NULL : status,
                                  (flags & 4) ? NULL : &nreg);
    if (p->state == KVH_FREED) {
        check_freed_batch(h, st, n, (flags & 2) ? NULL : status, out, (flags & 4) ? NULL : &nreg);
        return;
    }
    KVH_EQ(h, "batch status", st, KVREG_OK);
    for (size_t i = 0; i < n; i++) {
        int pred = variant[i] != V_OK ? expect[i] : p->ref[hi[i]] ? KVREG_EEXIST : KVREG_OK;
        if (!(flags & 2))
            KVH_EQ(h, "batch out_status", status[i], pred);
        if (pred == KVREG_OK) {
            model_register(h, s, hi[i], KVREG_OK, out[i]);
            want++;
        } else if (out[i] != KVREG_BLOCK_NONE) {
            kvh_fail(h, "batch out_blocks[%zu] = 0x%llx for a failed block, expected 0", i,
                     (unsigned long long)out[i]);
        }
    }
    if (!(flags & 4))
        KVH_EQ(h, "batch n_registered", nreg, want);
    if (!h->poll && h->expect.n)
        KVH_EQ(h, "callback calls for one batch", h->cb_calls, 1);
}

static void op_release_batch(kvh *h, int s)
{
    kvh_slot *p = &h->slot[s];
    kvreg_block b[8];
    int status[8];
    size_t n = 1 + kvh_pick(h, 8), nrel = 999, want = 0;
    unsigned flags = kvh_u8(h);
    h->opname = "kvreg_release_batch";
    for (size_t i = 0; i < n; i++) {
        b[i] = pick_handle(h, s, (int)kvh_pick(h, KVH_NH));
        status[i] = 12345;
    }
    if (p->state == KVH_EMPTY)
        return;
    if (flags & 1) {
        KVH_EQ(h, "release batch NULL blocks",
               kvreg_release_batch(p->pool, NULL, n, status, &nrel) < 0, 1);
        return;
    }
    int st = kvreg_release_batch(p->pool, b, n, (flags & 2) ? NULL : status,
                                 (flags & 4) ? NULL : &nrel);
    if (p->state == KVH_FREED) {
        check_freed_batch(h, st, n, (flags & 2) ? NULL : status, NULL, (flags & 4) ? NULL : &nrel);
        return;
    }
    KVH_EQ(h, "release batch status", st, KVREG_OK);
    for (size_t i = 0; i < n; i++) {
        int e = model_release(h, s, b[i]);
        want += e == KVREG_OK;
        if (!(flags & 2))
            KVH_EQ(h, "release batch out_status", status[i], e);
    }
    if (!(flags & 4))
        KVH_EQ(h, "release batch n_released", nrel, want);
    if (!h->poll && h->expect.n)
        KVH_EQ(h, "callback calls for one release batch", h->cb_calls, 1);
}

static void op_prefix(kvh *h, int s, int acquire)
{
    kvh_slot *p = &h->slot[s];
    uint64_t hs[8];
    int hi[8];
    kvreg_block out[8];
    size_t n = 1 + kvh_pick(h, 8), got = 999, want = 0;
    h->opname = acquire ? "kvreg_acquire_prefix" : "kvreg_pool_match";
    for (size_t i = 0; i < n; i++) {
        /* mostly the vector chain in order, which is what engines look up */
        hi[i] = kvh_pick(h, 4) ? (int)(i % 3) : (int)kvh_pick(h, KVH_NH);
        hs[i] = h->hash[hi[i]].desc.sequence_hash;
        out[i] = SENTINEL;
    }
    if (p->state == KVH_EMPTY)
        return;
    int st = acquire ? kvreg_acquire_prefix(p->pool, hs, n, out, &got)
                     : kvreg_pool_match(p->pool, hs, n, &got);
    if (p->state == KVH_FREED) {
        KVH_EQ(h, "prefix in a freed pool", st, KVREG_ESTALE);
        return;
    }
    KVH_EQ(h, "prefix status", st, KVREG_OK);
    while (want < n && p->ref[hi[want]])
        want++;
    KVH_EQ(h, "prefix length", got, want);
    for (size_t i = 0; acquire && i < want; i++) {
        if (out[i] != p->handle[hi[i]])
            kvh_fail(h, "acquire_prefix out_blocks[%zu] is not the block's handle", i);
        p->ref[hi[i]]++;
    }
    for (size_t i = acquire ? want : 0; i < n; i++)
        if (out[i] != SENTINEL)
            kvh_fail(h, "out_blocks[%zu] written beyond the prefix", i);
}

void kvh_op_pool_free(kvh *h, int s)
{
    kvh_slot *p = &h->slot[s];
    h->opname = "kvreg_pool_free";
    if (p->state == KVH_EMPTY)
        return;
    if (p->state == KVH_FREED) { /* freeing again is a no-op: the pointer is stale */
        kvreg_pool_free(p->pool);
        return;
    }
    kvreg_pool_free(p->pool);
    h->unordered = 1;
    h->group = ++h->ngroups;
    for (int i = 0; i < KVH_NH; i++) {
        if (!p->ref[i])
            continue;
        kvh_stale_add(h, p->handle[i], p->pool);
        p->ref[i] = 0;
        p->handle[i] = KVREG_BLOCK_NONE;
        kvh_unhold(h, s, i);
    }
    h->group = 0;
    p->state = KVH_FREED;
    KVH_EQ(h, "size of a freed pool", kvreg_pool_size(p->pool), 0);
}

void kvh_op_pool_new(kvh *h, int s)
{
    kvh_slot *p = &h->slot[s];
    kvreg_pool *np = NULL;
    h->opname = "kvreg_pool_new";
    if (p->state == KVH_LIVE)
        return;
    snprintf(p->name, sizeof p->name, "pool-%llu", (unsigned long long)(h->ops % 1000));
    /* kvreg_pool_new (GPU) or kvreg_pool_new_medium with a medium chosen by the op counter */
    p->medium = (h->ops >> 1) % (KVREG_MEDIUM_COUNT + 1);
    if (p->medium == KVREG_MEDIUM_COUNT) {
        p->medium = KVREG_MEDIUM_GPU;
        KVH_EQ(h, "kvreg_pool_new", kvreg_pool_new(&np, h->reg, (h->ops & 1) ? p->name : NULL), KVREG_OK);
    } else {
        KVH_EQ(h, "kvreg_pool_new_medium",
               kvreg_pool_new_medium(&np, h->reg, (h->ops & 1) ? p->name : NULL, p->medium), KVREG_OK);
    }
    if (!(h->ops & 1))
        p->name[0] = '\0';
    if (!np)
        kvh_fail(h, "kvreg_pool_new gave NULL");
    /* a freed slot whose memory is reused is no longer stale: it is this pool */
    for (int t = 0; t < KVH_NP; t++)
        if (t != s && h->slot[t].state == KVH_FREED && h->slot[t].pool == np)
            h->slot[t].state = KVH_EMPTY;
    memset(p->ref, 0, sizeof p->ref);
    memset(p->handle, 0, sizeof p->handle);
    p->pool = np;
    p->state = KVH_LIVE;
    p->id = kvreg_pool_id(np);
    if (p->id < 1 || p->id > KVREG_MAX_POOLS)
        kvh_fail(h, "pool id %u out of 1..%u", p->id, KVREG_MAX_POOLS);
    for (int t = 0; t < KVH_NP; t++)
        if (t != s && h->slot[t].state == KVH_LIVE && h->slot[t].id == p->id)
            kvh_fail(h, "pool id %u given to two live pools", p->id);
    if (strcmp(kvreg_pool_name(np), p->name) != 0)
        kvh_fail(h, "pool name \"%s\", expected \"%s\"", kvreg_pool_name(np), p->name);
    KVH_EQ(h, "size of a new pool", kvreg_pool_size(np), 0);
    KVH_EQ(h, "medium of a new pool", kvreg_pool_medium(np), p->medium);
}

static void check_handle_queries(kvh *h, int s, int hi)
{
    kvh_slot *p = &h->slot[s];
    const kvh_hash *x = &h->hash[hi];
    kvreg_block_info info;
    uint32_t rc = 0, tok[8];
    size_t nt = 99;
    kvreg_block b = p->handle[hi];
    h->opname = "handle queries";
    KVH_EQ(h, "kvreg_block_get_info", kvreg_block_get_info(p->pool, b, &info), KVREG_OK);
    if (info.sequence_hash != x->desc.sequence_hash || info.block_hash != x->desc.block_hash)
        kvh_fail(h, "block info hashes differ");
    KVH_EQ(h, "info has_parent", info.has_parent, x->desc.has_parent);
    if (info.parent_sequence_hash != (x->desc.has_parent ? x->desc.parent_sequence_hash : 0))
        kvh_fail(h, "block info parent differs");
    KVH_EQ(h, "info position", info.position, KVREG_POSITION_UNKNOWN);
    KVH_EQ(h, "kvreg_block_refcount", kvreg_block_refcount(p->pool, b, &rc), KVREG_OK);
    KVH_EQ(h, "refcount", rc, p->ref[hi]);
    int st = kvreg_block_tokens(p->pool, b, tok, 8, &nt);
    if (h->keep && x->has_tokens) {
        KVH_EQ(h, "kvreg_block_tokens", st, KVREG_OK);
        KVH_EQ(h, "stored tokens", nt, 4);
        if (memcmp(tok, x->tok, sizeof x->tok) != 0)
            kvh_fail(h, "stored tokens differ");
        nt = 99;
        KVH_EQ(h, "kvreg_block_tokens small cap", kvreg_block_tokens(p->pool, b, tok, 3, &nt),
               KVREG_ERANGE);
        KVH_EQ(h, "kvreg_block_tokens sizes on ERANGE", nt, 4);
        nt = 99;
        KVH_EQ(h, "kvreg_block_tokens sizing call", kvreg_block_tokens(p->pool, b, NULL, 0, &nt),
               KVREG_ERANGE);
        KVH_EQ(h, "kvreg_block_tokens sizing call count", nt, 4);
    } else {
        KVH_EQ(h, "kvreg_block_tokens (none stored)", st, KVREG_ENOENT);
    }
}

static void op_query(kvh *h, int s, int hi)
{
    kvh_slot *p = &h->slot[s];
    kvreg_block_info info;
    uint32_t rc = 77;
    size_t size = 0;
    h->opname = "queries";
    kvh_check_hash(h, hi);
    if (p->state == KVH_EMPTY)
        return;
    for (int i = 0; i < KVH_NH; i++)
        size += p->ref[i] > 0;
    KVH_EQ(h, "kvreg_pool_size", kvreg_pool_size(p->pool), p->state == KVH_LIVE ? size : 0);
    if (p->state == KVH_LIVE && p->ref[hi]) {
        check_handle_queries(h, s, hi);
        return;
    }
    kvreg_block b = pick_handle(h, s, hi);
    if (p->state == KVH_LIVE && kvh_find_live(h, s, b) >= 0)
        return;
    KVH_EQ(h, "get_info of a stale handle", kvreg_block_get_info(p->pool, b, &info), KVREG_ESTALE);
    KVH_EQ(h, "refcount of a stale handle", kvreg_block_refcount(p->pool, b, &rc), KVREG_ESTALE);
    KVH_EQ(h, "refcount output written on failure", rc, 77);
}

static void op_set_fn(kvh *h)
{
    h->opname = "kvreg_registry_set_event_fn";
    int clear = kvh_pick(h, 3) == 0;
    if (h->poll) {
        KVH_EQ(h, "set_event_fn in POLL mode", kvreg_registry_set_event_fn(h->reg, NULL, NULL, NULL),
               KVREG_EINVAL);
        return;
    }
    if (!clear && h->nud == KVH_NUD)
        return;
    int old = h->cur_ud, nu = clear ? -1 : h->nud++;
    if (nu >= 0)
        h->ud[nu].h = h;
    int st = clear ? kvreg_registry_set_event_fn(h->reg, NULL, NULL, NULL)
                   : kvreg_registry_set_event_fn(h->reg, kvh_event_fn, &h->ud[nu], kvh_destroy_fn);
    KVH_EQ(h, "kvreg_registry_set_event_fn", st, KVREG_OK);
    h->cur_ud = nu;
    if (old >= 0)
        KVH_EQ(h, "destroy of the replaced user_data", h->ud[old].destroyed, 1);
    if (nu >= 0)
        KVH_EQ(h, "destroy of the new user_data", h->ud[nu].destroyed, 0);
}

static void op_sequence(kvh *h, int s)
{
    kvh_slot *p = &h->slot[s];
    size_t first = kvh_pick(h, 5), count = 1 + kvh_pick(h, 3), nreg = 99;
    kvreg_block out[4] = {SENTINEL, SENTINEL, SENTINEL, SENTINEL};
    int status[4];
    if (p->state == KVH_EMPTY)
        return;
    if (kvh_u8(h) & 1) {
        h->opname = "kvreg_register_sequence_block";
        int st = kvreg_register_sequence_block(p->pool, h->seq, first, &out[0]);
        if (p->state == KVH_FREED && first < KVH_NSEQ)
            KVH_EQ(h, "sequence block in a freed pool", st, KVREG_ESTALE);
        else if (p->state == KVH_FREED)
            KVH_EQ(h, "bad sequence block in a freed pool fails", st < 0, 1);
        else if (first == KVH_NSEQ)
            KVH_EQ(h, "register the partial block", st, KVREG_ESTATE);
        else if (first > KVH_NSEQ)
            KVH_EQ(h, "register past the partial block", st, KVREG_ERANGE);
        else
            model_register(h, s, (int)first, st, out[0]);
        return;
    }
    h->opname = "kvreg_register_sequence";
    int st = kvreg_register_sequence(p->pool, h->seq, first, count, out, status, &nreg);
    if (p->state == KVH_FREED) {
        if (first + count > KVH_NSEQ)
            KVH_EQ(h, "sequence range past the blocks (freed pool)", st < 0, 1);
        else
            check_freed_batch(h, st, count, status, out, &nreg);
        return;
    }
    if (first + count > KVH_NSEQ) {
        KVH_EQ(h, "sequence range past the complete blocks", st, KVREG_ERANGE);
        return;
    }
    KVH_EQ(h, "register_sequence", st, KVREG_OK);
    size_t want = 0;
    for (size_t i = 0; i < count; i++) {
        int hi = (int)(first + i);
        if (h->slot[s].ref[hi]) {
            KVH_EQ(h, "sequence status of a held block", status[i], KVREG_EEXIST);
            KVH_EQ(h, "sequence out of a held block", out[i] == KVREG_BLOCK_NONE, 1);
        } else {
            KVH_EQ(h, "sequence status", status[i], KVREG_OK);
            model_register(h, s, hi, KVREG_OK, out[i]);
            want++;
        }
    }
    KVH_EQ(h, "sequence n_registered", nreg, want);
}

void kvh_do_op(kvh *h, unsigned op)
{
    int s = (int)kvh_pick(h, KVH_NP);
    int hi = (int)kvh_pick(h, KVH_NH);
    if (h->slot[s].state == KVH_EMPTY && op % 20 != 14) {
        kvh_op_pool_new(h, s); /* keep the slots busy; freed ones stay stale until op 14 */
        return;
    }
    switch (op % 20) {
    case 0: case 1: case 2:
        op_register(h, s, hi, V_OK);
        break;
    case 3:
        op_register(h, s, hi, (int)kvh_pick(h, V_COUNT));
        break;
    case 4:
        op_register_null(h, s, hi);
        break;
    case 5:
        op_acquire(h, s, hi);
        break;
    case 6: case 7: case 8: case 9: case 10:
        op_release(h, s, hi);
        break;
    case 11:
        op_register_batch(h, s);
        break;
    case 12:
        op_release_batch(h, s);
        break;
    case 13:
        op_prefix(h, s, (int)(op & 32));
        break;
    case 14:
        if (h->slot[s].state == KVH_LIVE && (op & 64))
            kvh_op_pool_free(h, s);
        else
            kvh_op_pool_new(h, s);
        break;
    case 15: case 16:
        op_query(h, s, hi);
        break;
    case 17:
        kvh_op_poll(h, 1 + kvh_pick(h, 8));
        break;
    case 18:
        op_set_fn(h);
        break;
    default:
        op_sequence(h, s);
        break;
    }
}
