/*
 * basic: name a token sequence, register its blocks, watch the events, release them.
 *
 * Expected hashes are the seed vector of tests/vectors/public.json (tokens 1..10, block size
 * 4, salt 1337): NVIDIA Dynamo computes the same names for the same tokens.
 */
#include <inttypes.h>
#include <stdio.h>

#include <kvreg.h>

#include "check.h"

/* Counts what the registry reports; the callback runs inline, on our thread. */
typedef struct seen {
    unsigned registers, removes;
} seen;

static void on_events(const kvreg_event *events, size_t n, void *user_data)
{
    seen *s = user_data;
    size_t i;
    for (i = 0; i < n; i++) {
        const kvreg_event *ev = &events[i];
        printf("  event %" PRIu64 ": %s %" PRIu64 " (pool %" PRIu32 ", %" PRIu32 " tokens)\n",
               ev->event_id, ev->kind == KVREG_EVENT_REGISTER ? "Register" : "Remove",
               ev->sequence_hash, ev->pool_id, ev->n_tokens);
        if (ev->kind == KVREG_EVENT_REGISTER)
            s->registers++;
        else
            s->removes++;
    }
}

int main(void)
{
    const uint32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    kvreg_sequence *seq;
    kvreg_block_info b0, b1;
    kvreg_config *cfg;
    kvreg_registry *reg;
    kvreg_pool *gpu;
    kvreg_block h0, h1, again;
    uint32_t refs;
    int present = 0;
    size_t completed;
    seen s = {0, 0};

    /* 1. Split the tokens into blocks of 4 and hash them the way Dynamo does. */
    CHECK_OK(kvreg_sequence_new(&seq, 4, KVREG_ROUTER_SALT));
    CHECK_OK(kvreg_sequence_extend(seq, tokens, 10, &completed));
    CHECK(completed == 2); /* [1..4] and [5..8] are full; [9, 10] is the partial block */
    CHECK_OK(kvreg_sequence_block(seq, 0, &b0));
    CHECK_OK(kvreg_sequence_block(seq, 1, &b1));
    printf("block 0: sequence hash %" PRIu64 "\nblock 1: sequence hash %" PRIu64
           " (parent %" PRIu64 ")\n", b0.sequence_hash, b1.sequence_hash,
           b1.parent_sequence_hash);
    CHECK(b0.sequence_hash == UINT64_C(14643705804678351452));
    CHECK(b1.block_hash == UINT64_C(16777012769546811212));
    CHECK(b1.sequence_hash == UINT64_C(4945711292740353085));
    CHECK(b1.has_parent && b1.parent_sequence_hash == b0.sequence_hash);

    /* 2. A registry that tells us (inline) when a hash appears or disappears. */
    CHECK_OK(kvreg_config_new(&cfg));
    CHECK_OK(kvreg_config_set_event_fn(cfg, on_events, &s, NULL));
    CHECK_OK(kvreg_registry_new(&reg, cfg));
    kvreg_config_free(cfg);
    CHECK_OK(kvreg_pool_new(&gpu, reg, "gpu"));

    /* 3. Register both full blocks: one Register event each, carrying the block's tokens. */
    printf("register:\n");
    CHECK_OK(kvreg_pool_register_sequence_block(gpu, seq, 0, &h0));
    CHECK_OK(kvreg_pool_register_sequence_block(gpu, seq, 1, &h1));
    CHECK(s.registers == 2 && s.removes == 0);
    CHECK_OK(kvreg_registry_contains(reg, b1.sequence_hash, &present));
    CHECK(present == 1);
    CHECK(kvreg_pool_register_sequence_block(gpu, seq, 2, &again) == KVREG_ESTATE); /* partial */

    /* 4. A second user of block 0 takes a reference instead of registering again. */
    CHECK(kvreg_pool_register_sequence_block(gpu, seq, 0, &again) == KVREG_EEXIST);
    CHECK_OK(kvreg_pool_acquire(gpu, b0.sequence_hash, &again));
    CHECK(again == h0);
    CHECK_OK(kvreg_pool_block_refcount(gpu, h0, &refs));
    CHECK(refs == 2);

    /* 5. Release: the hash leaves when its last reference goes, with one Remove event. */
    printf("release:\n");
    CHECK_OK(kvreg_pool_release(gpu, again));
    CHECK(s.removes == 0); /* one reference left */
    CHECK_OK(kvreg_pool_release(gpu, h0));
    CHECK_OK(kvreg_pool_release(gpu, h1));
    CHECK(s.registers == 2 && s.removes == 2);
    CHECK_OK(kvreg_registry_contains(reg, b0.sequence_hash, &present));
    CHECK(present == 0);
    CHECK(kvreg_pool_release(gpu, h1) == KVREG_ESTALE); /* double release is detected */

    kvreg_registry_free(reg); /* also frees the pool */
    kvreg_sequence_free(seq);
    printf("basic: ok\n");
    return 0;
}
