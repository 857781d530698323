/* Consumers that key entries by (hash, medium), fed by a two-tier engine in each event mode
 * (KVREG_OPT_EVENT_MODE), replaying the Mooncake traces.
 *
 * The engine: one registry, a GPU pool of 3,000 blocks and a CPU pool of 12,000, each with its
 * own LRU (kept here, in the test). A request's blocks are looked up in order; a block not on
 * the GPU is registered there (onboarded when the CPU has it: the CPU copy stays); when the GPU
 * is full its least recently used block is offloaded (registered on the CPU unless there
 * already, the CPU evicting its own LRU block when full) and released from the GPU.
 *
 * The consumers, written here and independent of the library's code:
 *   (a) llm-d's shape: one map keyed by (hash, medium);
 *   (b) Dynamo's shape: per medium, a set of hashes;
 *   (c) kvreg's own index (kvreg_index, OWN hashes), asked block by block.
 * Each is fed the callback's events directly, and (a), (b) and another index are fed the same
 * events through the Dynamo MessagePack encoder and decoder. At quiet points (between
 * requests) and at the end: in per-tier mode each consumer's entries per medium are exactly
 * the blocks the engine holds on that medium; in global mode each consumer holds one entry per
 * hash the engine holds anywhere and none other; and no Remove ever names an absent entry. A
 * consumer that applies each global-mode Remove at the medium of the pool that let go last,
 * instead of the medium the Remove carries, is kept beside them: its leftovers are what pairing
 * a Remove with its Register's medium prevents.
 *
 * argv[1]: the directory of the traces; argv[2]: requests per trace (0: all; the environment
 * variable KVREG_TIER_REQUESTS overrides it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_wire.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define GPU_BLOCKS 3000u
#define CPU_BLOCKS 12000u
#define NO_LINK UINT32_MAX

static const char *g_trace_dir = "data/traces";
static unsigned long g_max_requests = 1000;

/* ------------------------------------------------------------------ a set of u64 keys (!= 0) */
typedef struct keyset {
    uint64_t *slot;
    size_t mask, n;
} keyset;

static size_t ks_home(const keyset *s, uint64_t k) { return (size_t)((k * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & s->mask; }

static void ks_grow(keyset *s) {
    keyset t = {calloc(s->slot ? 2 * (s->mask + 1) : 1024, sizeof(uint64_t)), s->slot ? 2 * s->mask + 1 : 1023, 0};
    if (!t.slot) abort();
    for (size_t i = 0; s->slot && i <= s->mask; i++) {
        if (!s->slot[i]) continue;
        size_t j = ks_home(&t, s->slot[i]);
        while (t.slot[j]) j = (j + 1) & t.mask;
        t.slot[j] = s->slot[i];
        t.n++;
    }
    free(s->slot);
    *s = t;
}

static size_t ks_find(const keyset *s, uint64_t k) { /* slot index, or SIZE_MAX */
    if (!s->slot) return SIZE_MAX;
    for (size_t i = ks_home(s, k);; i = (i + 1) & s->mask) {
        if (s->slot[i] == k) return i;
        if (!s->slot[i]) return SIZE_MAX;
    }
}

static int ks_has(const keyset *s, uint64_t k) { return ks_find(s, k) != SIZE_MAX; }

static int ks_add(keyset *s, uint64_t k) { /* 1 when new */
    if (ks_has(s, k)) return 0;
    if (!s->slot || (s->n + 1) * 4 > (s->mask + 1) * 3) ks_grow(s);
    size_t i = ks_home(s, k);
    while (s->slot[i]) i = (i + 1) & s->mask;
    s->slot[i] = k;
    s->n++;
    return 1;
}

static int ks_del(keyset *s, uint64_t k) { /* 1 when it was there */
    size_t i = ks_find(s, k);
    if (i == SIZE_MAX) return 0;
    for (size_t j = i;;) { /* backward-shift deletion */
        j = (j + 1) & s->mask;
        if (!s->slot[j]) break;
        const size_t h = ks_home(s, s->slot[j]);
        if (i <= j ? (i < h && h <= j) : (i < h || h <= j)) continue;
        s->slot[i] = s->slot[j];
        i = j;
    }
    s->slot[i] = 0;
    s->n--;
    return 1;
}

static void ks_clear(keyset *s) {
    free(s->slot);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------------- the consumers */
typedef struct consumers {
    keyset by_pair;             /* (a): key hash << 2 | medium */
    keyset per_tier[KVREG_MEDIUM_COUNT]; /* (b) */
    uint64_t unknown_a, unknown_b; /* Removes naming an absent entry */
    uint64_t bad_medium;
} consumers;

static void consume(consumers *c, uint32_t kind, uint64_t hash, uint32_t medium) {
    if (kind == KVREG_EVENT_CLEARED) {
        ks_clear(&c->by_pair);
        for (unsigned t = 0; t < KVREG_MEDIUM_COUNT; t++) ks_clear(&c->per_tier[t]);
        return;
    }
    if (medium >= KVREG_MEDIUM_COUNT) {
        c->bad_medium++;
        return;
    }
    const uint64_t pair = hash << 2 | medium;
    if (kind == KVREG_EVENT_REGISTER) {
        ks_add(&c->by_pair, pair);
        ks_add(&c->per_tier[medium], hash);
    } else {
        c->unknown_a += !ks_del(&c->by_pair, pair);
        c->unknown_b += !ks_del(&c->per_tier[medium], hash);
    }
}

static void consumers_free(consumers *c) {
    ks_clear(&c->by_pair);
    for (unsigned t = 0; t < KVREG_MEDIUM_COUNT; t++) ks_clear(&c->per_tier[t]);
}

/* ------------------------------------------------------------------------------- the engine */
typedef struct lru {
    uint32_t head, tail, n; /* head: most recent */
    uint32_t *prev, *next;
} lru;

typedef struct engine {
    kvreg_registry *reg;
    kvreg_pool *gpu, *cpu;
    size_t cap; /* ids the arrays cover */
    uint8_t *held; /* bit t: tier t (GPU 1, CPU 2) holds id */
    uint8_t *seen;
    kvreg_block *h[2];
    lru l[2];
    uint64_t failures; /* library calls that did not return KVREG_OK */
} engine;

/* Everything the callback feeds. No cmocka assertions in a callback: it would longjmp through
 * library frames; failures are counted and asserted on afterwards. */
typedef struct feed {
    int per_tier;
    uint32_t gpu_id, cpu_id;
    consumers direct, wire, legacy;
    kvreg_index *idx_direct, *idx_wire;
    uint64_t seq_direct, seq_wire;
    kvreg_wire_encoder *enc;
    kvreg_wire_decoder *dec;
    uint64_t wire_failures, index_failures, index_unknown, events;
    uint64_t hashes[KVREG_EVENTS_PER_CALL];
    kvreg_wire_event wev[KVREG_EVENTS_PER_CALL];
} feed;

static uint64_t hash_of(size_t id) { return (uint64_t)id + 1; }

static void index_apply(feed *f, kvreg_index *idx, uint64_t *seq, const kvreg_wire_event *ev, size_t n) {
    kvreg_index_apply_info info;
    if (kvreg_index_apply(idx, 1, 0, (*seq)++, ev, n, &info) != KVREG_OK || info.events_skipped) f->index_failures++;
    f->index_unknown += info.removes_unknown;
}

static void feed_fn(const kvreg_event *events, size_t n, void *ud) {
    feed *f = ud;
    f->events += n;
    for (size_t i = 0; i < n; i++) {
        const kvreg_event *e = &events[i];
        consume(&f->direct, e->kind, e->sequence_hash, e->medium);
        /* What a consumer saw when a Remove carried the medium of the pool that let go. */
        const uint32_t old_medium = e->kind == KVREG_EVENT_REMOVE
                                        ? (e->pool_id == f->cpu_id ? KVREG_MEDIUM_CPU : KVREG_MEDIUM_GPU)
                                        : e->medium;
        consume(&f->legacy, e->kind, e->sequence_hash, old_medium);
        f->hashes[i] = e->sequence_hash;
        kvreg_wire_event *w = &f->wev[i];
        memset(w, 0, sizeof *w);
        w->type = e->kind == KVREG_EVENT_REGISTER ? KVREG_WIRE_STORED
                  : e->kind == KVREG_EVENT_REMOVE ? KVREG_WIRE_REMOVED : KVREG_WIRE_CLEARED;
        w->medium = e->medium;
        w->block_hashes = &f->hashes[i];
        w->n_block_hashes = e->kind == KVREG_EVENT_CLEARED ? 0 : 1;
    }
    index_apply(f, f->idx_direct, &f->seq_direct, f->wev, n);

    if (!f->enc) return;
    for (size_t done = 0; done < n;) {
        size_t used = 0, len = 0, n_dec = 0;
        const uint8_t *payload = NULL;
        const kvreg_wire_event *dev = NULL;
        if (kvreg_wire_encode(f->enc, events + done, n - done, 0, &used, &payload, &len) != KVREG_OK || used == 0 ||
            kvreg_wire_decode(f->dec, payload, len, &dev, &n_dec, NULL) != KVREG_OK) {
            f->wire_failures++;
            return;
        }
        done += used;
        for (size_t i = 0; i < n_dec; i++) {
            const uint32_t kind = dev[i].type == KVREG_WIRE_STORED    ? KVREG_EVENT_REGISTER
                                  : dev[i].type == KVREG_WIRE_REMOVED ? KVREG_EVENT_REMOVE
                                                                      : KVREG_EVENT_CLEARED;
            if (kind == KVREG_EVENT_CLEARED) consume(&f->wire, kind, 0, 0);
            for (size_t j = 0; j < dev[i].n_block_hashes; j++) consume(&f->wire, kind, dev[i].block_hashes[j], dev[i].medium);
        }
        index_apply(f, f->idx_wire, &f->seq_wire, dev, n_dec);
    }
}

static void lru_unlink(lru *l, uint32_t id) {
    if (l->prev[id] != NO_LINK) l->next[l->prev[id]] = l->next[id]; else l->head = l->next[id];
    if (l->next[id] != NO_LINK) l->prev[l->next[id]] = l->prev[id]; else l->tail = l->prev[id];
    l->n--;
}

static void lru_push(lru *l, uint32_t id) {
    l->prev[id] = NO_LINK;
    l->next[id] = l->head;
    if (l->head != NO_LINK) l->prev[l->head] = id; else l->tail = id;
    l->head = id;
    l->n++;
}

static void engine_cover(engine *e, size_t id) {
    if (id < e->cap) return;
    size_t cap = e->cap ? e->cap : 4096;
    while (cap <= id) cap *= 2;
    e->held = realloc(e->held, cap);
    e->seen = realloc(e->seen, cap);
    for (int t = 0; t < 2; t++) {
        e->h[t] = realloc(e->h[t], cap * sizeof(kvreg_block));
        e->l[t].prev = realloc(e->l[t].prev, cap * sizeof(uint32_t));
        e->l[t].next = realloc(e->l[t].next, cap * sizeof(uint32_t));
        if (!e->h[t] || !e->l[t].prev || !e->l[t].next) abort();
    }
    if (!e->held || !e->seen) abort();
    memset(e->held + e->cap, 0, cap - e->cap);
    memset(e->seen + e->cap, 0, cap - e->cap);
    e->cap = cap;
}

static void engine_register(engine *e, int t, uint32_t id, uint32_t parent) {
    kvreg_block_desc d;
    memset(&d, 0, sizeof d);
    d.sequence_hash = hash_of(id);
    d.block_hash = hash_of(id) * 31;
    d.has_parent = parent != NO_LINK;
    d.parent_sequence_hash = d.has_parent ? hash_of(parent) : 0;
    if (kvreg_register(t ? e->cpu : e->gpu, &d, &e->h[t][id]) != KVREG_OK) e->failures++;
    e->held[id] |= (uint8_t)(1u << t);
    lru_push(&e->l[t], id);
}

static void engine_release(engine *e, int t, uint32_t id) {
    if (kvreg_release(t ? e->cpu : e->gpu, e->h[t][id]) != KVREG_OK) e->failures++;
    e->held[id] &= (uint8_t)~(1u << t);
    lru_unlink(&e->l[t], id);
}

/* Offload the GPU's LRU block to the CPU, then let the GPU copy go. */
static void engine_evict_gpu(engine *e) {
    const uint32_t v = e->l[0].tail;
    if (e->held[v] & 2) {
        lru_unlink(&e->l[1], v);
        lru_push(&e->l[1], v);
    } else {
        if (e->l[1].n >= CPU_BLOCKS) engine_release(e, 1, e->l[1].tail);
        engine_register(e, 1, v, NO_LINK); /* the hash is known: its parent is the first registration's */
    }
    engine_release(e, 0, v);
}

static void engine_request(engine *e, const uint32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t id = ids[i];
        engine_cover(e, id);
        e->seen[id] = 1;
        if (e->held[id] & 1) {
            lru_unlink(&e->l[0], id);
            lru_push(&e->l[0], id);
            continue;
        }
        while (e->l[0].n >= GPU_BLOCKS) engine_evict_gpu(e);
        if (e->held[id] & 2) { /* onboard: the CPU copy stays, and is used */
            lru_unlink(&e->l[1], id);
            lru_push(&e->l[1], id);
        }
        engine_register(e, 0, id, i ? ids[i - 1] : NO_LINK);
    }
}

/* --------------------------------------------------------------------------------- the checks */
typedef struct leftovers {
    uint64_t a, b, idx; /* entries the engine no longer holds (there) */
} leftovers;

/* Entries of c the engine does not hold: per (hash, medium) in per-tier mode, per hash in
 * global mode. Also asserts the other direction: everything the engine holds is there. */
static leftovers check_consumers(const engine *e, const consumers *c, int per_tier) {
    leftovers lo = {0, 0, 0};
    uint64_t held_t[2] = {0, 0}, held_any = 0;
    for (size_t id = 0; id < e->cap; id++) {
        if (!e->held[id]) continue;
        held_any++;
        for (unsigned t = 0; t < 2; t++) {
            if (!(e->held[id] & (1u << t))) continue;
            held_t[t]++;
            if (per_tier) {
                assert_true(ks_has(&c->by_pair, hash_of(id) << 2 | t));
                assert_true(ks_has(&c->per_tier[t], hash_of(id)));
            }
        }
        if (!per_tier) { /* one entry, under its Register's medium */
            int in_a = 0, in_b = 0;
            for (unsigned t = 0; t < KVREG_MEDIUM_COUNT; t++) {
                in_a += ks_has(&c->by_pair, hash_of(id) << 2 | t);
                in_b += ks_has(&c->per_tier[t], hash_of(id));
            }
            assert_int_equal(in_a, 1);
            assert_int_equal(in_b, 1);
        }
    }
    for (size_t i = 0; c->by_pair.slot && i <= c->by_pair.mask; i++) {
        const uint64_t k = c->by_pair.slot[i];
        if (!k) continue;
        const uint64_t id = (k >> 2) - 1;
        const unsigned t = (unsigned)(k & 3);
        const int held = id < e->cap && (per_tier ? t < 2 && (e->held[id] & (1u << t)) : e->held[id] != 0);
        lo.a += !held;
    }
    for (unsigned t = 0; t < KVREG_MEDIUM_COUNT; t++)
        for (size_t i = 0; c->per_tier[t].slot && i <= c->per_tier[t].mask; i++) {
            const uint64_t k = c->per_tier[t].slot[i];
            if (!k) continue;
            const uint64_t id = k - 1;
            lo.b += !(id < e->cap && (per_tier ? t < 2 && (e->held[id] & (1u << t)) : e->held[id] != 0));
        }
    if (per_tier) {
        assert_int_equal(c->per_tier[0].n, held_t[0]);
        assert_int_equal(c->per_tier[1].n, held_t[1]);
    } else {
        assert_int_equal(c->by_pair.n, held_any + lo.a);
    }
    return lo;
}

/* Ask the index about every hash the trace named: per-tier mode, it holds exactly the engine's
 * tiers; global mode, it holds the hash (in one tier) exactly when the engine does. */
static uint64_t check_index(const engine *e, const kvreg_index *idx, int per_tier) {
    uint64_t left = 0;
    for (size_t id = 0; id < e->cap; id++) {
        if (!e->seen[id]) continue;
        const uint64_t h = hash_of(id);
        kvreg_index_match m[1];
        size_t n = 0;
        assert_int_equal(kvreg_index_query_hashes(idx, &h, 1, 1, m, 1, &n), KVREG_OK);
        unsigned bits = 0;
        for (unsigned t = 0; n && t < KVREG_MEDIUM_COUNT; t++) bits |= m[0].tier_depth[t] ? 1u << t : 0;
        if (per_tier) {
            left += (unsigned)__builtin_popcount(bits & ~(unsigned)e->held[id]);
            assert_int_equal(bits, e->held[id]);
        } else {
            left += bits && !e->held[id];
            assert_int_equal(n, e->held[id] ? 1 : 0);
        }
    }
    return left;
}

/* ------------------------------------------------------------------------------- the replay */
static size_t parse_ids(const char *line, uint32_t **ids, size_t *cap) {
    const char *p = strstr(line, "\"hash_ids\"");
    if (!p || !(p = strchr(p, '['))) return 0;
    size_t n = 0;
    for (p++;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p < '0' || *p > '9') break;
        char *end = NULL;
        const unsigned long v = strtoul(p, &end, 10);
        if (n == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            *ids = realloc(*ids, *cap * sizeof **ids);
            if (!*ids) abort();
        }
        (*ids)[n++] = (uint32_t)v;
        p = end;
    }
    return n;
}

static kvreg_index *new_index(void) {
    kvreg_index_config *cfg = NULL;
    kvreg_index *idx = NULL;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

static void check_all(const engine *e, feed *f, const char *where) {
    assert_int_equal(e->failures, 0);
    assert_int_equal(f->wire_failures, 0);
    assert_int_equal(f->index_failures, 0);
    assert_int_equal(f->index_unknown, 0);
    assert_int_equal(kvreg_pool_size(e->gpu), e->l[0].n);
    assert_int_equal(kvreg_pool_size(e->cpu), e->l[1].n);
    const consumers *cs[2] = {&f->direct, &f->wire};
    leftovers lo[2];
    for (int k = 0; k < 2; k++) {
        if (k == 1 && !f->enc) break;
        assert_int_equal(cs[k]->unknown_a, 0);
        assert_int_equal(cs[k]->unknown_b, 0);
        assert_int_equal(cs[k]->bad_medium, 0);
        lo[k] = check_consumers(e, cs[k], f->per_tier);
        lo[k].idx = check_index(e, k ? f->idx_wire : f->idx_direct, f->per_tier);
        assert_int_equal(lo[k].a, 0);
        assert_int_equal(lo[k].b, 0);
        assert_int_equal(lo[k].idx, 0);
    }
    if (where) {
        printf("# %s, %s mode: engine holds %u GPU + %u CPU blocks; entries left that the engine no longer holds:"
               " (a) %llu, (b) %llu, (c) %llu directly; through the Dynamo msgpack wire: %s; %llu events\n",
               where, f->per_tier ? "per-tier" : "global", e->l[0].n, e->l[1].n, (unsigned long long)lo[0].a,
               (unsigned long long)lo[0].b, (unsigned long long)lo[0].idx, f->enc ? "0, 0, 0" : "not built",
               (unsigned long long)f->events);
        if (!f->per_tier)
            printf("#   had each Remove carried the medium of the pool that let go last: %zu GPU + %zu CPU entries,"
                   " %llu Removes naming no entry\n",
                   f->legacy.per_tier[0].n, f->legacy.per_tier[1].n, (unsigned long long)f->legacy.unknown_b);
    }
}

static void replay(const char *trace, uint64_t mode) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_trace_dir, trace);
    gzFile gz = gzopen(path, "rb");
    assert_non_null(gz);

    feed *f = calloc(1, sizeof *f);
    engine *e = calloc(1, sizeof *e);
    assert_non_null(f);
    assert_non_null(e);
    f->per_tier = mode == KVREG_EVENTS_PER_TIER;
    f->idx_direct = new_index();
    f->idx_wire = new_index();
    if (kvreg_features() & KVREG_FEATURE_WIRE) {
        assert_int_equal(kvreg_wire_encoder_new(&f->enc, KVREG_WIRE_DYNAMO_MSGPACK), KVREG_OK);
        assert_int_equal(kvreg_wire_decoder_new(&f->dec, KVREG_WIRE_DYNAMO_MSGPACK), KVREG_OK);
    }
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, mode), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, feed_fn, f, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&e->reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new_medium(&e->gpu, e->reg, "G1", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&e->cpu, e->reg, "G2", KVREG_MEDIUM_CPU), KVREG_OK);
    f->gpu_id = kvreg_pool_id(e->gpu);
    f->cpu_id = kvreg_pool_id(e->cpu);
    e->l[0].head = e->l[0].tail = e->l[1].head = e->l[1].tail = NO_LINK;

    static char line[1 << 20];
    uint32_t *ids = NULL;
    size_t cap = 0;
    unsigned long requests = 0;
    while (gzgets(gz, line, sizeof line) && (g_max_requests == 0 || requests < g_max_requests)) {
        const size_t n = parse_ids(line, &ids, &cap);
        if (!n) continue;
        engine_request(e, ids, n);
        requests++;
        if (requests % 997 == 0) check_all(e, f, NULL); /* a quiet point: no call in progress */
    }
    gzclose(gz);
    assert_true(requests > 0);
    char where[256];
    snprintf(where, sizeof where, "%s (%lu requests)", trace, requests);
    check_all(e, f, where);
    if (!f->per_tier) assert_true(f->legacy.unknown_b > 0 || f->legacy.per_tier[0].n > e->l[0].n);

    /* A snapshot rebuilds consumer (a) exactly, in either mode. */
    kvreg_snapshot *snap = NULL;
    const kvreg_event *sev = NULL;
    size_t n_snap = 0;
    assert_int_equal(kvreg_registry_snapshot(e->reg, &snap), KVREG_OK);
    assert_int_equal(kvreg_snapshot_events(snap, &sev, &n_snap), KVREG_OK);
    consumers fresh;
    memset(&fresh, 0, sizeof fresh);
    for (size_t i = 0; i < n_snap; i++) consume(&fresh, sev[i].kind, sev[i].sequence_hash, sev[i].medium);
    assert_int_equal(n_snap, f->direct.by_pair.n);
    assert_int_equal(fresh.by_pair.n, f->direct.by_pair.n);
    for (size_t i = 0; i <= f->direct.by_pair.mask; i++)
        if (f->direct.by_pair.slot[i]) assert_true(ks_has(&fresh.by_pair, f->direct.by_pair.slot[i]));
    consumers_free(&fresh);
    kvreg_snapshot_free(snap);

    /* Clear: one Cleared, every consumer empty. */
    assert_int_equal(kvreg_registry_clear(e->reg), KVREG_OK);
    assert_int_equal(f->direct.by_pair.n, 0);
    assert_int_equal(f->direct.per_tier[0].n + f->direct.per_tier[1].n, 0);
    if (f->enc) assert_int_equal(f->wire.by_pair.n, 0);
    uint64_t entries = 1;
    assert_int_equal(kvreg_index_stat(f->idx_direct, KVREG_INDEX_STAT_ENTRIES, &entries), KVREG_OK);
    assert_int_equal(entries, 0);

    kvreg_registry_free(e->reg);
    kvreg_index_free(f->idx_direct);
    kvreg_index_free(f->idx_wire);
    kvreg_wire_encoder_free(f->enc);
    kvreg_wire_decoder_free(f->dec);
    consumers_free(&f->direct);
    consumers_free(&f->wire);
    consumers_free(&f->legacy);
    for (int t = 0; t < 2; t++) {
        free(e->h[t]);
        free(e->l[t].prev);
        free(e->l[t].next);
    }
    free(e->held);
    free(e->seen);
    free(ids);
    free(e);
    free(f);
}

static void test_conversation_global(void **state) { (void)state; replay("conversation_trace.jsonl.gz", KVREG_EVENTS_GLOBAL); }
static void test_conversation_per_tier(void **state) { (void)state; replay("conversation_trace.jsonl.gz", KVREG_EVENTS_PER_TIER); }
static void test_synthetic_global(void **state) { (void)state; replay("synthetic_trace.jsonl.gz", KVREG_EVENTS_GLOBAL); }
static void test_synthetic_per_tier(void **state) { (void)state; replay("synthetic_trace.jsonl.gz", KVREG_EVENTS_PER_TIER); }

int main(int argc, char **argv) {
    if (argc > 1) g_trace_dir = argv[1];
    if (argc > 2) g_max_requests = strtoul(argv[2], NULL, 10);
    /* KVREG_TIER_REQUESTS overrides it (the valgrind run in .ci/sanitizers.sh asks for fewer). */
    const char *env = getenv("KVREG_TIER_REQUESTS");
    if (env && *env) g_max_requests = strtoul(env, NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversation_global),
        cmocka_unit_test(test_conversation_per_tier),
        cmocka_unit_test(test_synthetic_global),
        cmocka_unit_test(test_synthetic_per_tier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
