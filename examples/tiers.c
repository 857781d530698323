/*
 * tiers: two pools (a GPU tier G1 and a host tier G2) share one registry. Moving a block
 * between them registers it in the destination BEFORE releasing it from the source, so the
 * registry never loses the hash: each hash gets exactly one Register and one Remove event,
 * however often it moves.
 */
#include <inttypes.h>
#include <stdio.h>

#include <kvreg.h>

#include "check.h"

#define N_BLOCKS 3

typedef struct per_hash {
    uint64_t hashes[N_BLOCKS];
    unsigned registers[N_BLOCKS], removes[N_BLOCKS];
} per_hash;

static void on_events(const kvreg_event *events, size_t n, void *user_data)
{
    per_hash *p = user_data;
    size_t i, k;
    for (i = 0; i < n; i++) {
        for (k = 0; k < N_BLOCKS; k++) {
            if (p->hashes[k] != events[i].sequence_hash)
                continue;
            if (events[i].kind == KVREG_EVENT_REGISTER)
                p->registers[k]++;
            else
                p->removes[k]++;
        }
        printf("  %s block (pool %" PRIu32 ")\n",
               events[i].kind == KVREG_EVENT_REGISTER ? "Register" : "Remove",
               events[i].pool_id);
    }
}

/* Describe block i of the hashed blocks, by hash only (no tokens stored). */
static kvreg_pool_block_desc describe(const kvreg_block_info *info)
{
    kvreg_pool_block_desc d = KVREG_POOL_BLOCK_DESC_INIT;
    d.sequence_hash = info->sequence_hash;
    d.block_hash = info->block_hash;
    d.parent_sequence_hash = info->parent_sequence_hash;
    d.has_parent = info->has_parent;
    return d;
}

int main(void)
{
    uint32_t tokens[4 * N_BLOCKS];
    kvreg_block_info info[N_BLOCKS];
    kvreg_block g1_handle[N_BLOCKS], g2_handle[N_BLOCKS], back;
    kvreg_config *cfg;
    kvreg_registry *reg;
    int present = 0;
    kvreg_pool *g1, *g2;
    per_hash p = {{0}, {0}, {0}};
    size_t n, i;

    for (i = 0; i < 4 * N_BLOCKS; i++)
        tokens[i] = (uint32_t)(100 + i);
    CHECK_OK(kvreg_hash_blocks(tokens, 4 * N_BLOCKS, 4, KVREG_ROUTER_SALT, info, N_BLOCKS, &n));
    CHECK(n == N_BLOCKS);
    for (i = 0; i < N_BLOCKS; i++)
        p.hashes[i] = info[i].sequence_hash;

    CHECK_OK(kvreg_config_new(&cfg));
    CHECK_OK(kvreg_config_set_event_fn(cfg, on_events, &p, NULL));
    CHECK_OK(kvreg_registry_new(&reg, cfg));
    kvreg_config_free(cfg);
    CHECK_OK(kvreg_pool_new(&g1, reg, "G1 gpu"));
    CHECK_OK(kvreg_pool_new(&g2, reg, "G2 host"));

    printf("compute into G1:\n");
    for (i = 0; i < N_BLOCKS; i++) {
        kvreg_pool_block_desc d = describe(&info[i]);
        CHECK_OK(kvreg_pool_register(g1, &d, &g1_handle[i]));
    }

    printf("offload all to G2 (no events expected):\n");
    for (i = 0; i < N_BLOCKS; i++) {
        kvreg_pool_block_desc d = describe(&info[i]);
        CHECK_OK(kvreg_pool_register(g2, &d, &g2_handle[i])); /* first: the hash stays known */
        CHECK_OK(kvreg_pool_release(g1, g1_handle[i]));       /* then free the GPU copy */
    }
    CHECK(kvreg_pool_size(g1) == 0 && kvreg_pool_size(g2) == N_BLOCKS);

    printf("onboard block 0 back to G1 (no event expected):\n");
    {
        kvreg_pool_block_desc d = describe(&info[0]);
        CHECK_OK(kvreg_pool_register(g1, &d, &back));
    }
    CHECK_OK(kvreg_pool_contains(g1, info[0].sequence_hash, &present));
    CHECK(present == 1);

    printf("drop G2: blocks 1 and 2 leave the registry, block 0 stays in G1:\n");
    for (i = 0; i < N_BLOCKS; i++)
        CHECK_OK(kvreg_pool_release(g2, g2_handle[i]));
    CHECK_OK(kvreg_registry_contains(reg, info[0].sequence_hash, &present));
    CHECK(present == 1);
    CHECK_OK(kvreg_registry_contains(reg, info[1].sequence_hash, &present));
    CHECK(present == 0);

    printf("drop G1:\n");
    CHECK_OK(kvreg_pool_release(g1, back));

    for (i = 0; i < N_BLOCKS; i++) {
        printf("block %zu: %u Register, %u Remove\n", i, p.registers[i], p.removes[i]);
        CHECK(p.registers[i] == 1 && p.removes[i] == 1);
    }
    kvreg_registry_free(reg);
    printf("tiers: ok\n");
    return 0;
}
