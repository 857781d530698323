#include "naming.h"

#include <stdlib.h>

#include <kvreg.h>

int namer_init(namer *nm, uint32_t block_tokens, uint64_t salt)
{
    nm->block_tokens = block_tokens;
    nm->salt = salt;
    hmap_init(&nm->block_hash_of_id);
    nm->tokens = malloc((size_t)block_tokens * sizeof *nm->tokens);
    return nm->tokens ? 0 : -1;
}

void namer_free(namer *nm)
{
    hmap_free(&nm->block_hash_of_id);
    free(nm->tokens);
    nm->tokens = NULL;
}

/* splitmix64's output function. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void namer_tokens(const namer *nm, uint64_t id, uint32_t *out)
{
    /* Seeding with mix(id), not id itself: splitmix64 streams seeded with consecutive
     * multiples of its increment are the same stream shifted by one, so neighbouring ids
     * would get blocks sharing all but one token. */
    uint64_t state = mix(id);
    uint32_t j;
    for (j = 0; j < nm->block_tokens; j++) {
        state += UINT64_C(0x9e3779b97f4a7c15);
        out[j] = (uint32_t)(mix(state) % NAMING_VOCABULARY);
    }
}

static int block_hash_of(namer *nm, uint64_t id, uint64_t *out)
{
    uint64_t *memo = hmap_get(&nm->block_hash_of_id, id);
    if (memo) {
        *out = *memo;
        return 0;
    }
    namer_tokens(nm, id, nm->tokens);
    *out = kvreg_block_hash(nm->tokens, nm->block_tokens, nm->salt);
    return hmap_put(&nm->block_hash_of_id, id, *out, NULL);
}

int namer_chain(namer *nm, const uint64_t *ids, size_t n, uint64_t *block_hashes,
                uint64_t *sequence_hashes)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (block_hash_of(nm, ids[i], &block_hashes[i]) != 0)
            return -1;
        sequence_hashes[i] = i == 0 ? block_hashes[0]
                                    : kvreg_sequence_hash(sequence_hashes[i - 1], block_hashes[i],
                                                          nm->salt);
    }
    return 0;
}
