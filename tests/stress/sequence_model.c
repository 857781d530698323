/* Model-based test of kvreg_sequence: random extend / append / truncate / unwind / pop / reset
 * checked call by call against a plain token array. After every call: total tokens, block
 * count, every complete block's tokens, the partial block's tokens, and every block's hashes
 * against kvreg_hash_blocks over the model's tokens (an independent code path; the hash rule
 * itself is pinned by the vectors in tests/unit). Blocks that survive a shrink must keep their
 * hashes ("Surviving hashes are kept").
 * Usage: kvreg-sequence-model [seed]. Env KVREG_MODEL_SEEDS (default 100). */
#include <kvreg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 512

static unsigned long g_seed;
static unsigned long g_op;

static void fail(const char *what, long long got, long long want)
{
    fprintf(stderr, "sequence_model FAIL [seed=%lu op=%lu]: %s: got %lld, expected %lld\n", g_seed,
            g_op, what, got, want);
    abort();
}

#define EQ(what, got, want)                                                                    \
    do {                                                                                       \
        if ((long long)(got) != (long long)(want))                                             \
            fail((what), (long long)(got), (long long)(want));                                 \
    } while (0)

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return (uint32_t)((z ^ (z >> 31)) % n);
}

typedef struct model {
    uint32_t tok[MAXT];
    size_t n;
    uint32_t bs;
    uint64_t salt;
} model;

static void check(const kvreg_sequence *seq, const model *m, const kvreg_block_info *before,
                  size_t kept)
{
    static kvreg_block_info want[MAXT];
    size_t nb = 0;
    const uint32_t *view = NULL;
    size_t nv = 0;
    EQ("total tokens", kvreg_sequence_total_tokens(seq), m->n);
    EQ("num blocks", kvreg_sequence_num_blocks(seq), m->n / m->bs);
    EQ("block size", kvreg_sequence_block_size(seq), m->bs);
    if (kvreg_sequence_salt(seq) != m->salt)
        fail("salt", 0, 1);
    EQ("kvreg_hash_blocks", kvreg_hash_blocks(m->n ? m->tok : NULL, m->n, m->bs, m->salt, want, MAXT, &nb), KVREG_OK);
    for (size_t b = 0; b < nb; b++) {
        kvreg_block_info got;
        EQ("kvreg_sequence_block", kvreg_sequence_block(seq, b, &got), KVREG_OK);
        if (got.block_hash != want[b].block_hash || got.sequence_hash != want[b].sequence_hash ||
            got.has_parent != want[b].has_parent ||
            got.parent_sequence_hash != want[b].parent_sequence_hash)
            fail("block hashes differ from kvreg_hash_blocks", (long long)b, -1);
        EQ("block position", got.position, b);
        if (b < kept && got.sequence_hash != before[b].sequence_hash)
            fail("a surviving block's hash changed", (long long)b, -1);
        EQ("kvreg_sequence_block_tokens", kvreg_sequence_block_tokens(seq, b, &view, &nv), KVREG_OK);
        EQ("block token count", nv, m->bs);
        if (memcmp(view, m->tok + b * m->bs, m->bs * sizeof(uint32_t)) != 0)
            fail("block tokens differ", (long long)b, -1);
    }
    EQ("block past the end", kvreg_sequence_block(seq, nb, &want[0]), KVREG_ERANGE);
    EQ("kvreg_sequence_partial_tokens", kvreg_sequence_partial_tokens(seq, &view, &nv), KVREG_OK);
    EQ("partial token count", nv, m->n % m->bs);
    if (nv && memcmp(view, m->tok + nb * m->bs, nv * sizeof(uint32_t)) != 0)
        fail("partial tokens differ", 0, 1);
}

static void run(unsigned long seed, unsigned long ops)
{
    static kvreg_block_info before[MAXT];
    model m;
    kvreg_sequence *seq = NULL;
    g_seed = seed;
    rng_state = seed;
    memset(&m, 0, sizeof m);
    m.bs = 1 + rnd(rnd(2) ? 4 : 40);
    m.salt = rnd(2) ? KVREG_ROUTER_SALT : ((uint64_t)rnd(UINT32_MAX) << 32 | rnd(UINT32_MAX));
    EQ("kvreg_sequence_new", kvreg_sequence_new(&seq, m.bs, m.salt), KVREG_OK);
    for (g_op = 0; g_op < ops; g_op++) {
        size_t kept = kvreg_sequence_num_blocks(seq);
        for (size_t b = 0; b < kept; b++)
            kvreg_sequence_block(seq, b, &before[b]);
        size_t nb_before = kept;
        uint32_t c = rnd(10), t[64];
        size_t k = rnd(3 * m.bs + 2), done = 99;
        int completed = 7;
        uint32_t tok = 0;
        if (c < 4) { /* extend */
            if (m.n + k > MAXT)
                k = MAXT - m.n;
            for (size_t i = 0; i < k && i < 64; i++)
                t[i] = rnd(4) ? rnd(50) : UINT32_MAX - rnd(3);
            if (k > 64)
                k = 64;
            EQ("extend", kvreg_sequence_extend(seq, k ? t : NULL, k, &done), KVREG_OK);
            memcpy(m.tok + m.n, t, k * sizeof(uint32_t));
            m.n += k;
            EQ("blocks completed by extend", done, m.n / m.bs - nb_before);
        } else if (c < 6 && m.n < MAXT) { /* append */
            t[0] = rnd(1000);
            EQ("append", kvreg_sequence_append(seq, t[0], &completed), KVREG_OK);
            m.tok[m.n++] = t[0];
            EQ("append completed", completed, m.n % m.bs == 0);
        } else if (c == 6) { /* truncate: mostly a little, sometimes anywhere */
            size_t d = rnd(2 * m.bs + 1);
            size_t to = rnd(4) ? (m.n > d ? m.n - d : 0) : rnd((uint32_t)m.n + 3);
            EQ("truncate", kvreg_sequence_truncate(seq, to), KVREG_OK);
            if (to < m.n)
                m.n = to;
        } else if (c == 7) { /* unwind, sometimes too far */
            size_t by = rnd(4) ? rnd(2 * m.bs + 1) : rnd((uint32_t)m.n + 2);
            int st = kvreg_sequence_unwind(seq, by);
            EQ("unwind", st, by > m.n ? KVREG_ERANGE : KVREG_OK);
            if (by <= m.n)
                m.n -= by;
        } else if (c == 8) { /* pop */
            int st = kvreg_sequence_pop(seq, &tok);
            EQ("pop", st, m.n ? KVREG_OK : KVREG_ENOENT);
            if (m.n) {
                m.n--;
                EQ("popped token", tok, m.tok[m.n]);
            }
        } else if (rnd(8) == 0) { /* reset, rarely */
            EQ("reset", kvreg_sequence_reset(seq), KVREG_OK);
            m.n = 0;
        }
        size_t surv = m.n / m.bs < nb_before ? m.n / m.bs : nb_before;
        check(seq, &m, before, surv);
    }
    kvreg_sequence_free(seq);
}

int main(int argc, char **argv)
{
    unsigned long seeds = 100;
    const char *v = getenv("KVREG_MODEL_SEEDS");
    if (v && *v)
        seeds = strtoul(v, NULL, 10);
    if (argc > 1) {
        run(strtoul(argv[1], NULL, 10), 4000);
        seeds = 1;
    } else {
        for (unsigned long s = 1; s <= seeds; s++)
            run(s, 4000);
    }
    printf("sequence_model: %lu seeds x 4000 operations checked against the model\n", seeds);
    return 0;
}
