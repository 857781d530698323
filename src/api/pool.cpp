// C entry points for pools and blocks. Each call that may queue events delivers them (INLINE
// mode) after every shard lock is released and before returning.
#include "api/guard.hpp"
#include "api/internal.hpp"
#include "api/string_out.hpp"

namespace {

using kvreg::EventBatch; // on the caller's stack; delivers its events when it goes out of scope

// Batch loops prefetch the index slot this many blocks ahead (one cache miss in flight per
// few blocks of work; measured best around 4-8 on a 2-core EPYC VM).
constexpr size_t kPrefetchAhead = 6;

int register_one(kvreg_registry *reg, kvreg_pool *pool, const kvreg_block_desc &d, kvreg_block *out,
                 EventBatch &batch) noexcept {
    KVREG_GUARD_BEGIN
    return reg->register_block(pool, d, out, batch);
    KVREG_GUARD_END
}

int release_one(kvreg_registry *reg, kvreg_pool *pool, kvreg_block b, EventBatch &batch) noexcept {
    return reg->release(pool, b, batch);
}

kvreg_block_desc desc_of(const kvreg::Sequence &s, size_t i) noexcept {
    const kvreg_block_info &b = s.block(i);
    kvreg_block_desc d{};
    d.sequence_hash = b.sequence_hash;
    d.block_hash = b.block_hash;
    d.parent_sequence_hash = b.parent_sequence_hash;
    d.has_parent = b.has_parent;
    d.block_size = s.block_size();
    d.tokens = s.block_tokens(i);
    d.n_tokens = s.block_size();
    return d;
}

// The sized descriptor (kvreg.h): this version knows one size. Its fields are those of
// kvreg_block_desc, so both forms share one path.
bool sized_ok(const kvreg_pool_block_desc &d) noexcept { return d.size == sizeof(kvreg_pool_block_desc); }

kvreg_block_desc desc_from(const kvreg_pool_block_desc &d) noexcept {
    kvreg_block_desc o{};
    o.sequence_hash = d.sequence_hash;
    o.block_hash = d.block_hash;
    o.parent_sequence_hash = d.parent_sequence_hash;
    o.has_parent = d.has_parent;
    o.block_size = d.block_size;
    o.tokens = d.tokens;
    o.n_tokens = d.n_tokens;
    return o;
}

} // namespace

extern "C" {

KVREG_API int kvreg_pool_new_medium(kvreg_pool **out, kvreg_registry *reg, const char *name,
                                    uint32_t medium) noexcept {
    if (!out || !reg || medium >= KVREG_MEDIUM_COUNT) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return reg->pool_new(name, medium, out);
    KVREG_GUARD_END
}

KVREG_API int kvreg_pool_new(kvreg_pool **out, kvreg_registry *reg, const char *name) noexcept {
    return kvreg_pool_new_medium(out, reg, name, KVREG_MEDIUM_GPU);
}

KVREG_API uint32_t kvreg_pool_medium(const kvreg_pool *pool) noexcept {
    return pool ? pool->medium.load(std::memory_order_relaxed) : KVREG_MEDIUM_GPU;
}

KVREG_API void kvreg_pool_free(kvreg_pool *pool) noexcept {
    if (pool && pool->reg) pool->reg->pool_free(pool);
}

KVREG_API uint32_t kvreg_pool_id(const kvreg_pool *pool) noexcept { return pool ? pool->id : 0; }

KVREG_API const char *kvreg_pool_name(const kvreg_pool *pool) noexcept {
    const std::string *name = pool ? pool->name.load(std::memory_order_relaxed) : nullptr;
    return name ? name->c_str() : "";
}

KVREG_API size_t kvreg_pool_size(const kvreg_pool *pool) noexcept {
    if (!pool || !pool->live.load(std::memory_order_acquire)) return 0;
    return static_cast<size_t>(pool->reg->pool_size(pool));
}

KVREG_API int kvreg_register(kvreg_pool *pool, const kvreg_block_desc *desc, kvreg_block *out) noexcept {
    if (!pool || !desc || !out) return KVREG_EINVAL;
    EventBatch batch(pool->reg->log);
    return register_one(pool->reg, pool, *desc, out, batch);
}

KVREG_API int kvreg_register_batch(kvreg_pool *pool, const kvreg_block_desc *descs, size_t n,
                                   kvreg_block *out_blocks, int *out_status, size_t *n_registered) noexcept {
    if (!pool || (n > 0 && (!descs || !out_blocks))) return KVREG_EINVAL;
    EventBatch batch(pool->reg->log, n);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + kPrefetchAhead < n) pool->reg->prefetch(descs[i + kPrefetchAhead].sequence_hash);
        out_blocks[i] = KVREG_BLOCK_NONE;
        const int rc = register_one(pool->reg, pool, descs[i], &out_blocks[i], batch);
        if (out_status) out_status[i] = rc;
        if (rc == KVREG_OK) ok++;
    }
    if (n_registered) *n_registered = ok;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_register(kvreg_pool *pool, const kvreg_pool_block_desc *desc, kvreg_block *out) noexcept {
    if (!pool || !desc || !out || !sized_ok(*desc)) return KVREG_EINVAL;
    const kvreg_block_desc d = desc_from(*desc);
    EventBatch batch(pool->reg->log);
    return register_one(pool->reg, pool, d, out, batch);
}

KVREG_API int kvreg_pool_register_batch(kvreg_pool *pool, const kvreg_pool_block_desc *descs, size_t n,
                                        kvreg_block *out_blocks, int *out_status, size_t *n_registered) noexcept {
    if (!pool || (n > 0 && (!descs || !out_blocks))) return KVREG_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!sized_ok(descs[i])) return KVREG_EINVAL; // checked first: nothing registered
    EventBatch batch(pool->reg->log, n);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + kPrefetchAhead < n) pool->reg->prefetch(descs[i + kPrefetchAhead].sequence_hash);
        out_blocks[i] = KVREG_BLOCK_NONE;
        const kvreg_block_desc d = desc_from(descs[i]);
        const int rc = register_one(pool->reg, pool, d, &out_blocks[i], batch);
        if (out_status) out_status[i] = rc;
        if (rc == KVREG_OK) ok++;
    }
    if (n_registered) *n_registered = ok;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_register_sequence_block(kvreg_pool *pool, const kvreg_sequence *seq, size_t index,
                                            kvreg_block *out) noexcept {
    const kvreg::Sequence *s = kvreg::sequence_of(seq);
    if (!pool || !s || !out) return KVREG_EINVAL;
    if (index == s->num_blocks()) return KVREG_ESTATE; // the partial block
    if (index > s->num_blocks()) return KVREG_ERANGE;
    const kvreg_block_desc d = desc_of(*s, index);
    EventBatch batch(pool->reg->log);
    return register_one(pool->reg, pool, d, out, batch);
}

KVREG_API int kvreg_pool_register_sequence(kvreg_pool *pool, const kvreg_sequence *seq, size_t first,
                                      size_t count, kvreg_block *out_blocks, int *out_status,
                                      size_t *n_registered) noexcept {
    const kvreg::Sequence *s = kvreg::sequence_of(seq);
    if (!pool || !s || (count > 0 && !out_blocks)) return KVREG_EINVAL;
    if (first > s->num_blocks() || count > s->num_blocks() - first) return KVREG_ERANGE;
    EventBatch batch(pool->reg->log, count);
    size_t ok = 0;
    for (size_t i = 0; i < count; i++) {
        if (i + kPrefetchAhead < count) pool->reg->prefetch(s->block(first + i + kPrefetchAhead).sequence_hash);
        const kvreg_block_desc d = desc_of(*s, first + i);
        out_blocks[i] = KVREG_BLOCK_NONE;
        const int rc = register_one(pool->reg, pool, d, &out_blocks[i], batch);
        if (out_status) out_status[i] = rc;
        if (rc == KVREG_OK) ok++;
    }
    if (n_registered) *n_registered = ok;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_acquire(kvreg_pool *pool, uint64_t sequence_hash, kvreg_block *out) noexcept {
    if (!pool || !out) return KVREG_EINVAL;
    return pool->reg->acquire(pool, sequence_hash, out);
}

KVREG_API int kvreg_pool_acquire_prefix(kvreg_pool *pool, const uint64_t *hashes, size_t n,
                                   kvreg_block *out_blocks, size_t *n_acquired) noexcept {
    if (!pool || !n_acquired || (n > 0 && (!hashes || !out_blocks))) return KVREG_EINVAL;
    size_t got = 0;
    for (; got < n; got++) {
        const int rc = pool->reg->acquire(pool, hashes[got], &out_blocks[got]);
        if (rc == KVREG_ENOENT) break;
        if (rc != KVREG_OK) {
            // Give back what this call took, so a failed call changes nothing of ours.
            EventBatch batch(pool->reg->log, got);
            for (size_t i = 0; i < got; i++) release_one(pool->reg, pool, out_blocks[i], batch);
            return rc;
        }
    }
    *n_acquired = got;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_release(kvreg_pool *pool, kvreg_block block) noexcept {
    if (!pool) return KVREG_EINVAL;
    EventBatch batch(pool->reg->log);
    return release_one(pool->reg, pool, block, batch);
}

KVREG_API int kvreg_pool_release_batch(kvreg_pool *pool, const kvreg_block *blocks, size_t n,
                                  int *out_status, size_t *n_released) noexcept {
    if (!pool || (n > 0 && !blocks)) return KVREG_EINVAL;
    EventBatch batch(pool->reg->log, n);
    size_t ok = 0;
    const bool prefetch = pool->reg->prefetches_releases(); // reserved registries only
    for (size_t i = 0; i < n; i++) {
        if (prefetch && i + kPrefetchAhead < n) pool->reg->prefetch_release(pool, blocks[i + kPrefetchAhead]);
        const int rc = release_one(pool->reg, pool, blocks[i], batch);
        if (out_status) out_status[i] = rc;
        if (rc == KVREG_OK) ok++;
    }
    if (n_released) *n_released = ok;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_contains(const kvreg_pool *pool, uint64_t sequence_hash, int *present) noexcept {
    if (!pool || !present) return KVREG_EINVAL;
    const int rc = pool->reg->pool_contains(pool, sequence_hash);
    if (rc < 0) return rc;
    *present = rc;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_match(const kvreg_pool *pool, const uint64_t *hashes, size_t n,
                               size_t *n_matched) noexcept {
    if (!pool || !n_matched || (n > 0 && !hashes)) return KVREG_EINVAL;
    size_t got = 0;
    for (; got < n; got++) {
        const int rc = pool->reg->pool_contains(pool, hashes[got]);
        if (rc < 0) return rc;
        if (rc == 0) break;
    }
    *n_matched = got;
    return KVREG_OK;
}

KVREG_API int kvreg_pool_block_info(const kvreg_pool *pool, kvreg_block block, kvreg_block_info *out) noexcept {
    if (!pool || !out) return KVREG_EINVAL;
    return pool->reg->block_info(pool, block, out);
}

KVREG_API int kvreg_pool_block_refcount(const kvreg_pool *pool, kvreg_block block, uint32_t *refcount) noexcept {
    if (!pool || !refcount) return KVREG_EINVAL;
    return pool->reg->block_refcount(pool, block, refcount);
}

KVREG_API int kvreg_pool_block_tokens(const kvreg_pool *pool, kvreg_block block, uint32_t *out, size_t cap,
                                 size_t *n_tokens) noexcept {
    if (!pool || !n_tokens || (cap > 0 && !out)) return KVREG_EINVAL;
    return pool->reg->block_tokens(pool, block, out, cap, n_tokens);
}

} // extern "C"

// Pool options are fixed when the pool is made: _set knows them and refuses (KVREG_ESTATE).
extern "C" {

KVREG_API int kvreg_pool_set(kvreg_pool *pool, uint32_t option, uint64_t) noexcept {
    if (!pool) return KVREG_EINVAL;
    return option == KVREG_POOL_OPT_MEDIUM || option == KVREG_POOL_OPT_ID ? KVREG_ESTATE : KVREG_EINVAL;
}

KVREG_API int kvreg_pool_get(const kvreg_pool *pool, uint32_t option, uint64_t *value) noexcept {
    if (!pool || !value) return KVREG_EINVAL;
    switch (option) {
    case KVREG_POOL_OPT_MEDIUM: *value = kvreg_pool_medium(pool); return KVREG_OK;
    case KVREG_POOL_OPT_ID: *value = kvreg_pool_id(pool); return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_pool_get_string(const kvreg_pool *pool, uint32_t option, char *buf, size_t cap,
                                    size_t *len) noexcept {
    if (!pool || option != KVREG_POOL_NAME) return KVREG_EINVAL;
    return kvreg::string_out(kvreg_pool_name(pool), buf, cap, len);
}

} // extern "C"
