/* The index against the reference model (index_model.c) under random batches and queries:
 * stores that chain from a held parent or start a prompt, removes of held and unheld hashes,
 * Cleared, worker removal, unknown media, orphans (parent not held), and sequence numbers that
 * follow, jump (GAP), go back (STALE) or restart at 0 (RESET). After every batch the flags and
 * counts are checked against what the model predicts, and random prompts are queried by hash
 * and by tokens. Router hashes come from kvreg_hash_blocks (an independent API), engine hashes
 * are made up per worker (not ours), as vLLM's are. Run in ENGINE and OWN modes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg_index.h>

#include "index_model.h"

#define BS 4u          /* tokens per block */
#define DEPTH 7        /* blocks in a prompt path */
#define CHOICES 3      /* distinct blocks at each position: prompts share prefixes */
#define N_WORKERS 5

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
static uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }

static const uint64_t worker_ids[IM_MAX_WORKERS] = {7, 7, 1000000007, 42, UINT64_MAX, 9, 10, 11};
static const uint32_t dp_ranks[IM_MAX_WORKERS] = {0, 1, 0, 3, 0, 0, 0, 0};

/* A prompt path: one choice per position. Its tokens, and its router hashes by kvreg_hash_blocks. */
typedef struct path {
    uint32_t choice[DEPTH];
    uint32_t tokens[DEPTH * BS];
    uint64_t router[DEPTH];
} path;

static void make_path(path *p, uint64_t salt)
{
    kvreg_block_info info[DEPTH];
    size_t n = 0, i, j;
    for (i = 0; i < DEPTH; i++) {
        p->choice[i] = below(CHOICES);
        for (j = 0; j < BS; j++)
            p->tokens[i * BS + j] = (uint32_t)(100 * i + 10 * p->choice[i] + j);
    }
    assert_int_equal(kvreg_hash_blocks(p->tokens, DEPTH * BS, BS, salt, info, DEPTH, &n), KVREG_OK);
    assert_int_equal(n, DEPTH);
    for (i = 0; i < DEPTH; i++)
        p->router[i] = info[i].sequence_hash;
}

/* The engine's own name for a block: any function of worker and content that is not ours. */
static uint64_t engine_hash(uint32_t w, uint64_t router, int own)
{
    return own ? router : (router ^ (UINT64_C(0xA5A5) * (w + 1))) * UINT64_C(0xD6E8FEB86659FD93);
}

typedef struct ctx {
    kvreg_index *idx;
    index_model m;
    int own;
    uint64_t salt;
    uint64_t hashes_buf[DEPTH];
    uint32_t tokens_buf[DEPTH * BS];
} ctx;

/* The depths-only answer: the same workers and depths as the model's ranked answer, each once,
 * in any order; by hashes and by tokens; a short buffer gets nothing and the size needed. */
static void check_depths(ctx *c, const path *p, size_t n, const kvreg_index_match *want, size_t n_want)
{
    kvreg_index_depth got[IM_MAX_WORKERS];
    size_t n_got = 99, i, j, pass;
    for (pass = 0; pass < 2; pass++) {
        int seen[IM_MAX_WORKERS] = {0};
        if (pass == 0)
            assert_int_equal(kvreg_index_query_depths(c->idx, p->router, n, got, IM_MAX_WORKERS, &n_got), KVREG_OK);
        else
            assert_int_equal(kvreg_index_query_depths_tokens(c->idx, p->tokens, n * BS + below(BS), got,
                                                             IM_MAX_WORKERS, &n_got), KVREG_OK);
        assert_int_equal(n_got, n_want);
        for (i = 0; i < n_got; i++) {
            for (j = 0; j < n_want; j++)
                if (got[i].worker_id == want[j].worker_id && got[i].dp_rank == want[j].dp_rank) break;
            assert_true(j < n_want);
            assert_false(seen[j]);
            seen[j] = 1;
            assert_int_equal(got[i].depth, want[j].depth);
        }
    }
    if (n_want > 0) {
        got[0].depth = 12345;
        assert_int_equal(kvreg_index_query_depths(c->idx, p->router, n, got, n_want - 1, &n_got), KVREG_ERANGE);
        assert_int_equal(n_got, n_want);
        assert_int_equal(got[0].depth, 12345);
        assert_int_equal(kvreg_index_query_depths(c->idx, p->router, n, NULL, 0, &n_got), KVREG_ERANGE);
        assert_int_equal(n_got, n_want);
    } else {
        assert_int_equal(kvreg_index_query_depths(c->idx, p->router, n, NULL, 0, &n_got), KVREG_OK);
        assert_int_equal(n_got, 0);
    }
}

static void check_queries(ctx *c, int rounds)
{
    kvreg_index_match got[IM_MAX_WORKERS], want[IM_MAX_WORKERS];
    int r;
    for (r = 0; r < rounds; r++) {
        path p;
        size_t n_got = 99, n_want, i, top_k = below(3);
        size_t n = 1 + below(DEPTH);
        make_path(&p, c->salt);
        n_want = im_query(&c->m, p.router, n, worker_ids, dp_ranks, want);
        assert_int_equal(kvreg_index_query_hashes(c->idx, p.router, n, 0, got, IM_MAX_WORKERS, &n_got), KVREG_OK);
        assert_int_equal(n_got, n_want);
        for (i = 0; i < n_want; i++) {
            assert_true(got[i].worker_id == want[i].worker_id);
            assert_int_equal(got[i].dp_rank, want[i].dp_rank);
            assert_int_equal(got[i].depth, want[i].depth);
            assert_memory_equal(got[i].blocks, want[i].blocks, sizeof want[i].blocks);
            assert_memory_equal(got[i].tier_depth, want[i].tier_depth, sizeof want[i].tier_depth);
            assert_true(got[i].score == want[i].score);
        }
        /* by tokens (a partial trailing block is ignored), and top-k */
        assert_int_equal(kvreg_index_query_tokens(c->idx, p.tokens, n * BS + below(BS), top_k, got,
                                                  IM_MAX_WORKERS, &n_got), KVREG_OK);
        assert_int_equal(n_got, top_k && top_k < n_want ? top_k : n_want);
        for (i = 0; i < n_got; i++) {
            assert_true(got[i].worker_id == want[i].worker_id);
            assert_int_equal(got[i].dp_rank, want[i].dp_rank);
            assert_int_equal(got[i].depth, want[i].depth);
        }
        if (n_want > 0) { /* too small a buffer: nothing written, the size needed returned */
            got[0].depth = 12345;
            assert_int_equal(kvreg_index_query_hashes(c->idx, p.router, n, 0, got, n_want - 1, &n_got), KVREG_ERANGE);
            assert_int_equal(n_got, n_want);
            assert_int_equal(got[0].depth, 12345);
        }
        check_depths(c, &p, n, want, n_want);
    }
}

static void check_stats(ctx *c)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_index_stat(c->idx, KVREG_INDEX_STAT_ENTRIES, &v), KVREG_OK);
    assert_int_equal(v, im_pairs(&c->m));
    assert_int_equal(kvreg_index_stat(c->idx, KVREG_INDEX_STAT_WORKERS, &v), KVREG_OK);
    assert_int_equal(v, im_workers(&c->m));
    if (!c->own) {
        assert_int_equal(kvreg_index_stat(c->idx, KVREG_INDEX_STAT_MAPPED_HASHES, &v), KVREG_OK);
        assert_int_equal(v, c->m.n);
    }
}

/* Expected flags for a batch of worker w carrying seq; updates the model's sequence state.
 * *apply: whether the events are applied. */
static uint32_t expect_seq(ctx *c, uint32_t w, uint64_t seq, int *apply, uint64_t *expected)
{
    im_worker *mw = &c->m.w[w];
    uint32_t flags = 0;
    *apply = 1;
    if (!mw->known) {
        mw->known = 1;
        mw->seq_known = 1;
        mw->next_seq = 0;
        flags |= KVREG_INDEX_F_NEW_WORKER;
    }
    *expected = mw->seq_known ? mw->next_seq : KVREG_INDEX_SEQ_NONE;
    if (seq == KVREG_INDEX_SEQ_NONE)
        return flags;
    if (mw->seq_known && seq != mw->next_seq) {
        if (seq > mw->next_seq) {
            flags |= KVREG_INDEX_F_GAP;
        } else if (seq == 0) {
            flags |= KVREG_INDEX_F_RESET;
            im_drop_worker(&c->m, w);
        } else {
            *apply = 0;
            return flags | KVREG_INDEX_F_STALE | KVREG_INDEX_F_SKIPPED;
        }
    }
    mw->seq_known = 1;
    mw->next_seq = seq + 1;
    return flags;
}

static uint64_t pick_seq(ctx *c, uint32_t w)
{
    const im_worker *mw = &c->m.w[w];
    uint64_t next = mw->known && mw->seq_known ? mw->next_seq : 0;
    uint32_t r = below(100);
    if (r < 4)
        return next + 1 + below(5);                 /* gap */
    if (r < 8 && next > 1)
        return 1 + below((uint32_t)(next - 1));     /* stale */
    if (r < 10 && next > 0)
        return 0;                                    /* reset */
    if (r < 13)
        return KVREG_INDEX_SEQ_NONE;                 /* unchecked */
    return next;
}

/* One random batch of 1..3 events for worker w, applied to both sides and compared. */
static void random_batch(ctx *c, uint32_t w)
{
    kvreg_wire_event ev[3];
    uint64_t hashes[3][DEPTH];
    uint32_t tokens[3][DEPTH * BS];
    size_t n_ev = 1 + below(3), i, j;
    uint64_t seq = pick_seq(c, w), expected;
    uint64_t want_stored = 0, want_removed = 0, want_unknown = 0, want_applied = 0, want_skipped = 0;
    uint32_t want_flags;
    int apply;
    kvreg_index_apply_info info;

    memset(ev, 0, sizeof ev);
    /* Build the events first (from the model before the batch), then predict in order. */
    want_flags = expect_seq(c, w, seq, &apply, &expected);
    for (i = 0; i < n_ev; i++) {
        uint32_t kind = below(100);
        kvreg_wire_event *e = &ev[i];
        e->medium = below(3);
        if (below(40) == 0)
            e->medium = KVREG_MEDIUM_UNKNOWN;
        if (kind < 60) { /* stored: blocks [s, s+len) of a path, parent = block s-1's engine hash */
            path p;
            size_t s, len;
            int orphan_ok = below(10) == 0;
            make_path(&p, c->salt);
            s = below(DEPTH);
            len = 1 + below((uint32_t)(DEPTH - s));
            e->type = KVREG_WIRE_STORED;
            e->block_size = below(8) == 0 ? 0 : BS; /* absent block_size is accepted */
            e->has_parent = s > 0;
            e->parent_block_hash = s ? engine_hash(w, p.router[s - 1], c->own) : 0;
            /* usually start where the worker holds the parent, so chains grow */
            if (s > 0 && !orphan_ok && !im_tiers(&c->m, w, p.router[s - 1])) {
                len += s;
                s = 0;
                e->has_parent = 0;
                e->parent_block_hash = 0;
            }
            for (j = 0; j < len; j++)
                hashes[i][j] = engine_hash(w, p.router[s + j], c->own);
            memcpy(tokens[i], p.tokens + s * BS, len * BS * sizeof(uint32_t));
            e->block_hashes = hashes[i];
            e->n_block_hashes = len;
            e->token_ids = c->own && below(2) ? NULL : tokens[i];
            e->n_token_ids = e->token_ids ? len * BS : 0;
            if (!c->own && below(30) == 0)
                e->n_token_ids -= 1; /* wrong token count: skipped */
            if (!apply)
                continue;
            if (e->medium == KVREG_MEDIUM_UNKNOWN ||
                (!c->own && (e->n_token_ids != len * BS ||
                             (e->has_parent && !im_find_engine(&c->m, w, e->parent_block_hash))))) {
                want_skipped++;
                continue;
            }
            want_applied++;
            for (j = 0; j < len; j++) {
                im_entry *x = im_find_engine(&c->m, w, hashes[i][j]);
                if (!x) {
                    assert_true(c->m.n < IM_MAX_ENTRIES);
                    x = &c->m.e[c->m.n++];
                    x->worker = w;
                    x->engine = hashes[i][j];
                    x->router = p.router[s + j];
                    x->tiers = 0;
                }
                if (!(x->tiers & (1u << e->medium))) {
                    x->tiers |= 1u << e->medium;
                    want_stored++;
                }
            }
        } else if (kind < 88) { /* removed: some held hashes, some never stored */
            size_t k = 0;
            e->type = KVREG_WIRE_REMOVED;
            for (j = 0; j < c->m.n && k < DEPTH; j++)
                if (c->m.e[j].worker == w && below(3) == 0)
                    hashes[i][k++] = c->m.e[j].engine;
            if (k < DEPTH && below(3) == 0)
                hashes[i][k++] = rnd();
            e->block_hashes = hashes[i];
            e->n_block_hashes = k;
            if (!apply)
                continue;
            if (e->medium == KVREG_MEDIUM_UNKNOWN) {
                want_skipped++;
                continue;
            }
            want_applied++;
            for (j = 0; j < k; j++) {
                im_entry *x = im_find_engine(&c->m, w, hashes[i][j]);
                if (x && (x->tiers & (1u << e->medium))) {
                    x->tiers &= ~(1u << e->medium);
                    want_removed++;
                    if (!x->tiers)
                        *x = c->m.e[--c->m.n];
                } else {
                    want_unknown++;
                }
            }
        } else if (kind < 94) {
            e->type = KVREG_WIRE_CLEARED;
            if (!apply)
                continue;
            want_applied++;
            want_flags |= KVREG_INDEX_F_CLEARED;
            im_drop_worker(&c->m, w);
        } else {
            e->type = 77; /* unknown type: skipped */
            if (apply)
                want_skipped++;
        }
    }
    if (!apply)
        want_skipped = n_ev;
    if (want_skipped)
        want_flags |= KVREG_INDEX_F_SKIPPED;

    memset(&info, 0xff, sizeof info);
    assert_int_equal(kvreg_index_apply(c->idx, worker_ids[w], dp_ranks[w], seq, ev, n_ev, &info), KVREG_OK);
    assert_int_equal(info.flags, want_flags);
    assert_true(info.expected_seq == expected);
    assert_int_equal(info.events_applied, want_applied);
    assert_int_equal(info.events_skipped, want_skipped);
    assert_int_equal(info.blocks_stored, want_stored);
    assert_int_equal(info.blocks_removed, want_removed);
    assert_int_equal(info.removes_unknown, want_unknown);
}

/* The index's replica: its dump loaded into a new index of another shard count (the same
 * meaning-giving settings and weights). The replica must dump the same bytes and have the same
 * digest; it then replaces the original, so every later batch (its sequence flags, Removes of
 * engine hashes stored before the dump) and query is checked against the model on the replica. */
static void replicate(ctx *c, uint64_t shards)
{
    kvreg_index *copy = NULL;
    kvreg_index_config *cfg = NULL;
    void *d1 = NULL, *d2 = NULL;
    size_t n1 = 0, n2 = 0;
    uint64_t g1 = 0, g2 = 1;
    assert_int_equal(kvreg_index_dump_alloc(c->idx, &d1, &n1), KVREG_OK);
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, BS), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SALT, c->salt), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, shards), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES,
                                            c->own ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_WEIGHT + 1, c->m.weight[1]), KVREG_OK);
    assert_int_equal(kvreg_index_new(&copy, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    assert_int_equal(kvreg_index_load(copy, d1, n1), KVREG_OK);
    assert_int_equal(kvreg_index_dump_alloc(copy, &d2, &n2), KVREG_OK);
    assert_int_equal(n2, n1);
    assert_memory_equal(d2, d1, n1);
    assert_int_equal(kvreg_index_digest(c->idx, &g1), KVREG_OK);
    assert_int_equal(kvreg_index_digest(copy, &g2), KVREG_OK);
    assert_true(g1 == g2);
    free(d1);
    free(d2);
    kvreg_index_free(c->idx);
    c->idx = copy;
}

static void run_model(int own, uint64_t seed, int steps)
{
    ctx *c = calloc(1, sizeof *c);
    kvreg_index_config *cfg = NULL;
    int step;
    assert_non_null(c);
    rng_state = seed;
    c->own = own;
    c->salt = own ? KVREG_ROUTER_SALT : 99; /* ENGINE mode with a salt that is not the default */
    im_init(&c->m);
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, BS), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SALT, c->salt), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 1u << below(5)), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES,
                                            own ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE), KVREG_OK);
    if (below(2)) { /* tables sized up front instead of grown; half of them big enough (several MB) for
                       the region the library aligns and advises for huge pages */
        const uint64_t expected = below(2) ? below(2000) : 100000 + below(100000);
        assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, expected), KVREG_OK);
    }
    if (below(2)) { /* other tier weights change the order of the matches */
        c->m.weight[1] = 1500;
        assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_WEIGHT + 1, 1500), KVREG_OK);
    }
    assert_int_equal(kvreg_index_new(&c->idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);

    for (step = 0; step < steps; step++) {
        uint32_t w = below(N_WORKERS), r = below(100);
        if (r < 3) { /* the worker leaves */
            int rc = kvreg_index_remove_worker(c->idx, worker_ids[w], dp_ranks[w]);
            assert_int_equal(rc, c->m.w[w].known ? KVREG_OK : KVREG_ENOENT);
            im_drop_worker(&c->m, w);
            memset(&c->m.w[w], 0, sizeof c->m.w[w]);
        } else if (r < 5) { /* resynchronisation: clear, and say where the stream resumes */
            uint64_t next = below(3) ? below(50) : KVREG_INDEX_SEQ_NONE;
            assert_int_equal(kvreg_index_clear_worker(c->idx, worker_ids[w], dp_ranks[w], next), KVREG_OK);
            im_drop_worker(&c->m, w);
            c->m.w[w].known = 1;
            c->m.w[w].seq_known = next != KVREG_INDEX_SEQ_NONE;
            c->m.w[w].next_seq = c->m.w[w].seq_known ? next : 0;
        } else if (r < 7) {
            replicate(c, 1u << below(6));
        } else {
            random_batch(c, w);
        }
        check_stats(c);
        check_queries(c, 3);
    }
    kvreg_index_free(c->idx);
    free(c);
}

static void test_model_engine(void **state)
{
    uint64_t seed;
    (void)state;
    for (seed = 1; seed <= 12; seed++)
        run_model(0, seed, 400);
}

static void test_model_own(void **state)
{
    uint64_t seed;
    (void)state;
    for (seed = 100; seed <= 112; seed++)
        run_model(1, seed, 400);
}

/* More workers than a query's small-cluster path takes (slots 0..63), all in one shard grown
 * from empty, so clusters are long and mix many hashes: worker k holds the first depth_of(k)
 * blocks of one chain (a tail block stored, then removed again for every third worker), plus
 * blocks of a second chain that share the table with it. Every worker's matched depth must be
 * the one it was given, whatever the order the workers came in or their slots. */
/* An index that takes the events' hashes as router hashes; shards 0 keeps the default. */
static kvreg_index *new_own_index(uint64_t shards)
{
    kvreg_index *idx = NULL;
    kvreg_index_config *cfg = NULL;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), KVREG_OK);
    if (shards) assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, shards), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

#define MANY 150
#define CHAIN_LEN 13

static uint32_t depth_of(uint32_t k)
{
    return (k * 7u) % (CHAIN_LEN + 1); /* 0 .. CHAIN_LEN */
}

static void test_many_workers(void **state)
{
    kvreg_index *idx = NULL;
    uint64_t chain[CHAIN_LEN], other[CHAIN_LEN], seq[MANY] = {0};
    kvreg_index_match got[MANY];
    size_t n_got = 0, i;
    uint32_t k, want_matches = 0;
    (void)state;
    for (i = 0; i < CHAIN_LEN; i++) {
        chain[i] = UINT64_C(0x9E3779B97F4A7C15) * (i + 1);
        other[i] = UINT64_C(0xD6E8FEB86659FD93) * (i + 1000);
    }
    idx = new_own_index(1);
    for (k = 0; k < MANY; k++) {
        /* workers arrive in an order unlike their ids, so slots and ids differ in order */
        const uint32_t w = (k * 37u) % MANY;
        const uint32_t d = depth_of(w);
        kvreg_index_apply_info info;
        kvreg_wire_event ev[3];
        memset(ev, 0, sizeof ev);
        ev[0].type = KVREG_WIRE_STORED;
        ev[0].medium = KVREG_MEDIUM_GPU;
        ev[0].block_hashes = chain;
        ev[0].n_block_hashes = d + (w % 3 == 0 && d < CHAIN_LEN); /* one block too many ... */
        ev[1].type = KVREG_WIRE_REMOVED;
        ev[1].medium = KVREG_MEDIUM_GPU;
        ev[1].block_hashes = chain + d;
        ev[1].n_block_hashes = ev[0].n_block_hashes - d; /* ... removed again */
        ev[2].type = KVREG_WIRE_STORED;
        ev[2].medium = KVREG_MEDIUM_GPU;
        ev[2].block_hashes = other;
        ev[2].n_block_hashes = 1 + w % CHAIN_LEN;
        assert_int_equal(kvreg_index_apply(idx, 5000 + w, 0, seq[w]++, ev, 3, &info), KVREG_OK);
        want_matches += d > 0;
    }
    assert_int_equal(kvreg_index_query_hashes(idx, chain, CHAIN_LEN, 0, got, MANY, &n_got), KVREG_OK);
    assert_int_equal(n_got, want_matches);
    for (i = 0; i < n_got; i++) {
        const uint32_t w = (uint32_t)(got[i].worker_id - 5000);
        assert_true(got[i].worker_id >= 5000 && w < MANY);
        assert_int_equal(got[i].depth, depth_of(w));
        assert_int_equal(got[i].blocks[KVREG_MEDIUM_GPU], depth_of(w));
        /* one tier: best = deepest first, equal depths by worker id ascending */
        if (i) assert_true(got[i].depth < got[i - 1].depth ||
                           (got[i].depth == got[i - 1].depth && got[i].worker_id > got[i - 1].worker_id));
    }
    /* the depths-only answer of many workers: the same set */
    {
        kvreg_index_depth dep[MANY];
        int seen[MANY] = {0};
        size_t n_dep = 0;
        assert_int_equal(kvreg_index_query_depths(idx, chain, CHAIN_LEN, dep, MANY, &n_dep), KVREG_OK);
        assert_int_equal(n_dep, want_matches);
        for (i = 0; i < n_dep; i++) {
            const uint32_t w = (uint32_t)(dep[i].worker_id - 5000);
            assert_true(dep[i].worker_id >= 5000 && w < MANY);
            assert_false(seen[w]);
            seen[w] = 1;
            assert_int_equal(dep[i].depth, depth_of(w));
            assert_int_equal(dep[i].dp_rank, 0);
        }
    }
    /* top-k over an answer of more than a few workers: exactly the first k of the whole answer */
    {
        kvreg_index_match top[MANY];
        size_t n_top = 0, k_want;
        for (k_want = 1; k_want < n_got; k_want += 17) {
            assert_int_equal(kvreg_index_query_hashes(idx, chain, CHAIN_LEN, k_want, top, MANY, &n_top), KVREG_OK);
            assert_int_equal(n_top, k_want);
            for (i = 0; i < n_top; i++) {
                assert_int_equal(top[i].worker_id, got[i].worker_id);
                assert_int_equal(top[i].depth, got[i].depth);
                assert_true(top[i].reserved[0] == 0 && top[i].reserved[1] == 0);
            }
        }
    }
    kvreg_index_free(idx);
}

/* Many workers whose ids differ in both 32-bit halves and share ids across DP ranks: the
 * answer's order (depth, then worker_id, then dp_rank) must hold whichever bytes tell them
 * apart. The expected order comes from qsort over what each worker was given. */
#define WIDE 120
typedef struct wide_want {
    uint64_t id;
    uint32_t dp, depth;
} wide_want;

static int wide_cmp(const void *a, const void *b)
{
    const wide_want *x = a, *y = b;
    if (x->depth != y->depth) return x->depth > y->depth ? -1 : 1;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->dp < y->dp ? -1 : x->dp > y->dp;
}

static void test_many_workers_ordered_by_id_and_rank(void **state)
{
    kvreg_index *idx = NULL;
    uint64_t chain[4];
    wide_want want[WIDE];
    kvreg_index_match got[WIDE];
    size_t n_got = 0, i;
    (void)state;
    for (i = 0; i < 4; i++) chain[i] = UINT64_C(0x9E3779B97F4A7C15) * (i + 7);
    idx = new_own_index(0);
    for (i = 0; i < WIDE; i++) {
        /* ids: 8 values of the high half times 5 of the low half, each on 3 DP ranks */
        const uint32_t k = (uint32_t)((i * 53u) % WIDE); /* arrival order unlike id order */
        kvreg_wire_event ev;
        kvreg_index_apply_info info;
        want[i].id = (UINT64_C(0x100000001) * (k % 8)) ^ ((uint64_t)(k / 24) << 40) ^ (k / 8 % 3 == 0 ? 0 : 0x77);
        want[i].dp = k % 3;
        want[i].depth = 1 + k % 4;
        memset(&ev, 0, sizeof ev);
        ev.type = KVREG_WIRE_STORED;
        ev.medium = KVREG_MEDIUM_GPU;
        ev.block_hashes = chain;
        ev.n_block_hashes = want[i].depth;
        assert_int_equal(kvreg_index_apply(idx, want[i].id, want[i].dp, 0, &ev, 1, &info), KVREG_OK);
    }
    qsort(want, WIDE, sizeof want[0], wide_cmp);
    assert_int_equal(kvreg_index_query_hashes(idx, chain, 4, 0, got, WIDE, &n_got), KVREG_OK);
    assert_int_equal(n_got, WIDE);
    for (i = 0; i < WIDE; i++) {
        assert_true(got[i].worker_id == want[i].id);
        assert_int_equal(got[i].dp_rank, want[i].dp);
        assert_int_equal(got[i].depth, want[i].depth);
        assert_true(got[i].score == (double)want[i].depth);
    }
    kvreg_index_free(idx);
}

/* A few matching workers among many more slots (the depths query's sparse walk, where zeroing
 * a word per slot would cost more than the walk): slots are given in arrival order, so the
 * matching workers arrive last; others hold the prompt's later blocks but not its first, or
 * unrelated hashes. */
#define SPARSE_WORKERS 1500
static void test_depths_few_of_many_slots(void **state)
{
    static const struct {
        uint64_t id;
        uint32_t depth;
    } holders[] = {{900001, 4}, {900002, 1}, {900003, 6}, {900004, 2}, {900005, 6}};
    const size_t n_holders = sizeof holders / sizeof holders[0];
    kvreg_index *idx = NULL;
    uint64_t chain[6], other;
    kvreg_index_depth got[8];
    kvreg_index_match ranked[8];
    size_t n_got = 0, i, j;
    int seen[8] = {0};
    (void)state;
    for (i = 0; i < 6; i++) chain[i] = UINT64_C(0xC2B2AE3D27D4EB4F) * (i + 101);
    idx = new_own_index(0);
    for (i = 0; i < SPARSE_WORKERS; i++) {
        kvreg_wire_event ev;
        kvreg_index_apply_info info;
        memset(&ev, 0, sizeof ev);
        ev.type = KVREG_WIRE_STORED;
        ev.medium = KVREG_MEDIUM_CPU;
        other = UINT64_C(0x9E3779B97F4A7C15) * (i + 1);
        if (i % 2) {
            ev.block_hashes = chain + 1; /* the prompt's blocks 1 and 2, not 0 */
            ev.n_block_hashes = 2;
        } else {
            ev.block_hashes = &other;
            ev.n_block_hashes = 1;
        }
        assert_int_equal(kvreg_index_apply(idx, i, 0, 0, &ev, 1, &info), KVREG_OK);
    }
    for (i = 0; i < n_holders; i++) {
        kvreg_wire_event ev[2];
        kvreg_index_apply_info info;
        memset(ev, 0, sizeof ev);
        ev[0].type = ev[1].type = KVREG_WIRE_STORED;
        ev[0].medium = KVREG_MEDIUM_GPU;
        ev[1].medium = KVREG_MEDIUM_STORAGE;
        ev[0].block_hashes = chain; /* depth in the GPU tier ... */
        ev[0].n_block_hashes = holders[i].depth;
        ev[1].block_hashes = chain; /* ... and a shorter prefix in storage changes nothing */
        ev[1].n_block_hashes = holders[i].depth / 2;
        assert_int_equal(kvreg_index_apply(idx, holders[i].id, 3, 0, ev, 2, &info), KVREG_OK);
    }
    assert_int_equal(kvreg_index_query_depths(idx, chain, 6, got, 8, &n_got), KVREG_OK);
    assert_int_equal(n_got, n_holders);
    for (i = 0; i < n_got; i++) {
        for (j = 0; j < n_holders; j++)
            if (got[i].worker_id == holders[j].id) break;
        assert_true(j < n_holders);
        assert_false(seen[j]);
        seen[j] = 1;
        assert_int_equal(got[i].dp_rank, 3);
        assert_int_equal(got[i].depth, holders[j].depth);
    }
    /* a prompt shorter than some holders' prefixes: depths stop at its end */
    assert_int_equal(kvreg_index_query_depths(idx, chain, 2, got, 8, &n_got), KVREG_OK);
    assert_int_equal(n_got, n_holders);
    for (i = 0; i < n_got; i++) assert_int_equal(got[i].depth, got[i].worker_id == 900002 ? 1 : 2);
    /* the ranked answer agrees */
    assert_int_equal(kvreg_index_query_hashes(idx, chain, 6, 0, ranked, 8, &n_got), KVREG_OK);
    assert_int_equal(n_got, n_holders);
    assert_true(ranked[0].worker_id == 900003 && ranked[0].depth == 6);
    /* from the prompt's second block on: the odd workers and the holders deeper than 1 (a
     * sizing call: too many for the buffer) */
    assert_int_equal(kvreg_index_query_depths(idx, chain + 1, 2, NULL, 0, &n_got), KVREG_ERANGE);
    assert_int_equal(n_got, SPARSE_WORKERS / 2 + n_holders - 1);
    kvreg_index_free(idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_engine),
        cmocka_unit_test(test_model_own),
        cmocka_unit_test(test_many_workers),
        cmocka_unit_test(test_many_workers_ordered_by_id_and_rank),
        cmocka_unit_test(test_depths_few_of_many_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
