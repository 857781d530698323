// The 0.x names kept as aliases of their regular names (kvreg.h marks them KVREG_DEPRECATED).
// Each forwards unchanged; tests/api/test_aliases.c calls every one against its new name.
#include "kvreg.h"

extern "C" {

KVREG_API int kvreg_register_sequence_block(kvreg_pool *pool, const kvreg_sequence *seq, size_t index,
                                            kvreg_block *out) noexcept {
    return kvreg_pool_register_sequence_block(pool, seq, index, out);
}

KVREG_API int kvreg_register_sequence(kvreg_pool *pool, const kvreg_sequence *seq, size_t first, size_t count,
                                      kvreg_block *out_blocks, int *out_status, size_t *n_registered) noexcept {
    return kvreg_pool_register_sequence(pool, seq, first, count, out_blocks, out_status, n_registered);
}

KVREG_API int kvreg_acquire(kvreg_pool *pool, uint64_t sequence_hash, kvreg_block *out) noexcept {
    return kvreg_pool_acquire(pool, sequence_hash, out);
}

KVREG_API int kvreg_acquire_prefix(kvreg_pool *pool, const uint64_t *hashes, size_t n, kvreg_block *out_blocks,
                                   size_t *n_acquired) noexcept {
    return kvreg_pool_acquire_prefix(pool, hashes, n, out_blocks, n_acquired);
}

KVREG_API int kvreg_release(kvreg_pool *pool, kvreg_block block) noexcept { return kvreg_pool_release(pool, block); }

KVREG_API int kvreg_release_batch(kvreg_pool *pool, const kvreg_block *blocks, size_t n, int *out_status,
                                  size_t *n_released) noexcept {
    return kvreg_pool_release_batch(pool, blocks, n, out_status, n_released);
}

KVREG_API int kvreg_block_get_info(const kvreg_pool *pool, kvreg_block block, kvreg_block_info *out) noexcept {
    return kvreg_pool_block_info(pool, block, out);
}

KVREG_API int kvreg_block_refcount(const kvreg_pool *pool, kvreg_block block, uint32_t *refcount) noexcept {
    return kvreg_pool_block_refcount(pool, block, refcount);
}

KVREG_API int kvreg_block_tokens(const kvreg_pool *pool, kvreg_block block, uint32_t *out, size_t cap,
                                 size_t *n_tokens) noexcept {
    return kvreg_pool_block_tokens(pool, block, out, cap, n_tokens);
}

} // extern "C"
