/*
 * batch: registering or releasing many blocks in one call delivers their events together,
 * in one callback call, in input order. An engine that publishes events over the network
 * gets one message per batch instead of one per block.
 */
#include <inttypes.h>
#include <stdio.h>

#include <kvreg.h>

#include "check.h"

#define BLOCK 16
#define N_BLOCKS 6

typedef struct calls {
    unsigned calls;
    size_t last_batch;
    uint32_t last_kind;
    uint64_t first_id, last_id;
    int in_order; /* event_ids consecutive inside each batch */
} calls;

static void on_events(const kvreg_event *events, size_t n, void *user_data)
{
    calls *c = user_data;
    size_t i;
    c->calls++;
    c->last_batch = n;
    c->last_kind = events[0].kind;
    c->first_id = events[0].event_id;
    c->last_id = events[n - 1].event_id;
    for (i = 1; i < n; i++)
        c->in_order &= events[i].event_id == events[i - 1].event_id + 1;
    printf("  callback %u: %zu %s events, ids %" PRIu64 "..%" PRIu64 "\n", c->calls, n,
           events[0].kind == KVREG_EVENT_REGISTER ? "Register" : "Remove", c->first_id,
           c->last_id);
}

int main(void)
{
    uint32_t tokens[BLOCK * N_BLOCKS + 5]; /* 6 full blocks and 5 tokens of a partial one */
    kvreg_sequence *seq;
    kvreg_block handles[N_BLOCKS], again[N_BLOCKS];
    int status[N_BLOCKS];
    kvreg_config *cfg;
    kvreg_registry *reg;
    kvreg_pool *pool;
    calls c = {0, 0, 0, 0, 0, 1};
    size_t i, n;

    for (i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        tokens[i] = (uint32_t)(i * 7 + 3);
    CHECK_OK(kvreg_sequence_new(&seq, BLOCK, KVREG_ROUTER_SALT));
    CHECK_OK(kvreg_sequence_extend(seq, tokens, sizeof tokens / sizeof tokens[0], NULL));
    CHECK(kvreg_sequence_num_blocks(seq) == N_BLOCKS);

    CHECK_OK(kvreg_config_new(&cfg));
    CHECK_OK(kvreg_config_set_event_fn(cfg, on_events, &c, NULL));
    CHECK_OK(kvreg_registry_new(&reg, cfg));
    kvreg_config_free(cfg);
    CHECK_OK(kvreg_pool_new(&pool, reg, "gpu"));

    printf("register the sequence's %d full blocks in one call:\n", N_BLOCKS);
    CHECK_OK(kvreg_pool_register_sequence(pool, seq, 0, N_BLOCKS, handles, status, &n));
    CHECK(n == N_BLOCKS);
    CHECK(c.calls == 1 && c.last_batch == N_BLOCKS && c.last_kind == KVREG_EVENT_REGISTER);

    printf("again: every block is already there, so per-block EEXIST and no events:\n");
    CHECK_OK(kvreg_pool_register_sequence(pool, seq, 0, N_BLOCKS, again, status, &n));
    CHECK(n == 0 && c.calls == 1);
    for (i = 0; i < N_BLOCKS; i++)
        CHECK(status[i] == KVREG_EEXIST && again[i] == KVREG_BLOCK_NONE);

    printf("release them in one call:\n");
    CHECK_OK(kvreg_pool_release_batch(pool, handles, N_BLOCKS, NULL, &n));
    CHECK(n == N_BLOCKS);
    CHECK(c.calls == 2 && c.last_batch == N_BLOCKS && c.last_kind == KVREG_EVENT_REMOVE);
    CHECK(c.in_order);

    kvreg_registry_free(reg);
    kvreg_sequence_free(seq);
    printf("batch: ok\n");
    return 0;
}
