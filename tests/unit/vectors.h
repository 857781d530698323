/* The shape of the generated public hash vectors (tests/vectors/public.json). */
#ifndef KVREG_TEST_VECTORS_H
#define KVREG_TEST_VECTORS_H
#include <stddef.h>
#include <stdint.h>

struct vec_block {
    uint64_t block_hash;
    uint64_t sequence_hash;
    uint64_t parent_sequence_hash;
    int has_parent;
};

struct vec_case {
    const char *note;
    const uint32_t *tokens;
    size_t n_tokens;
    uint32_t block_size;
    uint64_t salt;
    const struct vec_block *blocks;
    size_t n_blocks;
    size_t n_partial;
};

#include "public_vectors.h"

#endif
