/*
 * naming: turns a request's block ids into Dynamo-compatible names (sequence hashes).
 *
 * The mapping, so other tools can reproduce it:
 *   - Block id k stands for a block of `block_tokens` tokens. Its tokens are a deterministic
 *     function of k alone: token j = output number j+1 of a splitmix64 generator whose state
 *     starts at mix(k), reduced modulo 128000 (a Llama-3-sized vocabulary), where mix is
 *     splitmix64's output function (z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27;
 *     z *= 0x94d049bb133111eb; z ^= z>>31) and the state advances by 0x9e3779b97f4a7c15.
 *   - block_hash(k) = kvreg_block_hash(those tokens, salt): the Dynamo rule, XXH3-64 over the
 *     tokens as u32 little-endian, seeded with the salt.
 *   - The ids of a request are then chained with kvreg_sequence_hash, exactly as Dynamo
 *     chains the blocks of one prompt: sequence_hash[0] = block_hash(id[0]),
 *     sequence_hash[i] = kvreg_sequence_hash(sequence_hash[i-1], block_hash(id[i]), salt).
 * So a request's names are what kvreg_hash_blocks() gives for the concatenation of its
 * blocks' tokens, and equal id prefixes give equal sequence hashes. The trace's last,
 * partial block is named as a whole block, because the trace counts it as one.
 */
#ifndef KVREG_REPLAY_NAMING_H
#define KVREG_REPLAY_NAMING_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"

#define NAMING_VOCABULARY 128000u

typedef struct namer {
    uint32_t block_tokens;
    uint64_t salt;
    hmap block_hash_of_id; /* memo: hashing 512 tokens per id once is enough */
    uint32_t *tokens;      /* scratch, block_tokens long */
} namer;

int namer_init(namer *nm, uint32_t block_tokens, uint64_t salt); /* 0 or -1 (no memory) */
void namer_free(namer *nm);

/* The tokens block id `id` stands for (block_tokens of them). */
void namer_tokens(const namer *nm, uint64_t id, uint32_t *out);

/* Block and sequence hashes for ids[0..n). 0 or -1 (no memory). */
int namer_chain(namer *nm, const uint64_t *ids, size_t n, uint64_t *block_hashes,
                uint64_t *sequence_hashes);

#endif
