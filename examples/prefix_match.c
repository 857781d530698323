/*
 * prefix_match: a new request finds the cached prefix an earlier request left behind.
 * Two chats share a system prompt; the second reuses its blocks (no new Register events)
 * and only registers the blocks of its own question.
 */
#include <stdio.h>

#include <kvreg.h>

#include "check.h"

#define BLOCK 4
#define PROMPT_BLOCKS 4 /* 2 blocks of system prompt + 2 blocks of question */

static void count_registers(const kvreg_event *events, size_t n, void *user_data)
{
    unsigned *registers = user_data;
    size_t i;
    for (i = 0; i < n; i++)
        *registers += events[i].kind == KVREG_EVENT_REGISTER;
}

/* System prompt tokens 1..8, then a question that differs per request. */
static void build_prompt(uint32_t *tokens, uint32_t question)
{
    uint32_t i;
    for (i = 0; i < 2 * BLOCK; i++)
        tokens[i] = 1 + i;
    for (i = 2 * BLOCK; i < PROMPT_BLOCKS * BLOCK; i++)
        tokens[i] = question * 1000 + i;
}

static void hashes_of(const uint32_t *tokens, uint64_t *hashes, kvreg_block_info *info)
{
    size_t n, i;
    CHECK_OK(kvreg_hash_blocks(tokens, PROMPT_BLOCKS * BLOCK, BLOCK, KVREG_ROUTER_SALT, info,
                               PROMPT_BLOCKS, &n));
    CHECK(n == PROMPT_BLOCKS);
    for (i = 0; i < n; i++)
        hashes[i] = info[i].sequence_hash;
}

/* A block described by its hashes only (the registry does not need the tokens). */
static kvreg_pool_block_desc desc_of(const kvreg_block_info *info)
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
    uint32_t tokens[PROMPT_BLOCKS * BLOCK];
    uint64_t hashes_a[PROMPT_BLOCKS], hashes_b[PROMPT_BLOCKS];
    kvreg_block_info info[PROMPT_BLOCKS];
    kvreg_pool_block_desc descs[PROMPT_BLOCKS];
    kvreg_block a[PROMPT_BLOCKS], b[PROMPT_BLOCKS];
    kvreg_config *cfg;
    kvreg_registry *reg;
    kvreg_pool *pool;
    unsigned registers = 0;
    size_t matched, got, i, n_reg;

    CHECK_OK(kvreg_config_new(&cfg));
    CHECK_OK(kvreg_config_set_event_fn(cfg, count_registers, &registers, NULL));
    CHECK_OK(kvreg_registry_new(&reg, cfg));
    kvreg_config_free(cfg);
    CHECK_OK(kvreg_pool_new(&pool, reg, "gpu"));

    /* Request A: nothing cached, all 4 blocks are computed and registered. */
    build_prompt(tokens, 1);
    hashes_of(tokens, hashes_a, info);
    CHECK_OK(kvreg_pool_match(pool, hashes_a, PROMPT_BLOCKS, &matched));
    CHECK(matched == 0);
    for (i = 0; i < PROMPT_BLOCKS; i++)
        descs[i] = desc_of(&info[i]);
    CHECK_OK(kvreg_pool_register_batch(pool, descs, PROMPT_BLOCKS, a, NULL, &n_reg));
    CHECK(n_reg == PROMPT_BLOCKS && registers == PROMPT_BLOCKS);

    /* Request B: same system prompt, new question. Its first 2 hashes equal A's. */
    build_prompt(tokens, 2);
    hashes_of(tokens, hashes_b, info);
    CHECK_OK(kvreg_pool_match(pool, hashes_b, PROMPT_BLOCKS, &matched));
    printf("request B: %zu of %d blocks cached\n", matched, PROMPT_BLOCKS);
    CHECK(matched == 2);
    CHECK(hashes_b[0] == hashes_a[0] && hashes_b[2] != hashes_a[2]);

    /* Hold the cached prefix while B runs, then register only what B computed. */
    CHECK_OK(kvreg_pool_acquire_prefix(pool, hashes_b, PROMPT_BLOCKS, b, &got));
    CHECK(got == 2 && b[0] == a[0] && b[1] == a[1]);
    for (i = got; i < PROMPT_BLOCKS; i++) {
        kvreg_pool_block_desc d = desc_of(&info[i]);
        CHECK_OK(kvreg_pool_register(pool, &d, &b[i]));
    }
    printf("Register events: %u (A: 4, B: 2 new)\n", registers);
    CHECK(registers == PROMPT_BLOCKS + 2);
    CHECK(kvreg_pool_size(pool) == 6);

    CHECK_OK(kvreg_pool_release_batch(pool, a, PROMPT_BLOCKS, NULL, NULL));
    CHECK_OK(kvreg_pool_release_batch(pool, b, PROMPT_BLOCKS, NULL, NULL));
    CHECK(kvreg_pool_size(pool) == 0);
    kvreg_registry_free(reg);
    printf("prefix_match: ok\n");
    return 0;
}
