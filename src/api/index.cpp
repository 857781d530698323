// C entry points of kvreg_index.h: argument checks and the exception firewall around Index.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "api/guard.hpp"
#include "index/handle.hpp"
#include "index/index.hpp"
#include "index/partition.hpp"

struct kvreg_index_config {
    kvreg::index::Options opt;
};

extern "C" {

KVREG_API int kvreg_index_config_new(kvreg_index_config **out) noexcept {
    if (!out) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    *out = new kvreg_index_config();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_index_config_free(kvreg_index_config *cfg) noexcept { delete cfg; }

KVREG_API int kvreg_index_config_set(kvreg_index_config *cfg, uint32_t option, uint64_t value) noexcept {
    if (!cfg) return KVREG_EINVAL;
    kvreg::index::Options &o = cfg->opt;
    switch (option) {
    case KVREG_INDEX_OPT_BLOCK_SIZE:
        if (value < 1 || value > (1u << 20)) return KVREG_EINVAL;
        o.block_size = static_cast<uint32_t>(value);
        return KVREG_OK;
    case KVREG_INDEX_OPT_HASHES:
        if (value != KVREG_INDEX_HASHES_ENGINE && value != KVREG_INDEX_HASHES_OWN) return KVREG_EINVAL;
        o.own_hashes = value == KVREG_INDEX_HASHES_OWN;
        return KVREG_OK;
    case KVREG_INDEX_OPT_PROFILE:
        if (value != KVREG_INDEX_PROFILE_DYNAMO && value != KVREG_INDEX_PROFILE_KV_ROUTER) return KVREG_EINVAL;
        o.kv_router_profile = value == KVREG_INDEX_PROFILE_KV_ROUTER;
        return KVREG_OK;
    case KVREG_INDEX_OPT_SALT:
        o.salt = value;
        return KVREG_OK;
    case KVREG_INDEX_OPT_SHARDS:
        if (value < 1 || value > kvreg::index::HolderTable::kMaxShards || (value & (value - 1)) != 0)
            return KVREG_EINVAL;
        o.shards = static_cast<uint32_t>(value);
        return KVREG_OK;
    case KVREG_INDEX_OPT_EXPECTED_ENTRIES:
        if (value > (UINT64_C(1) << 32)) return KVREG_EINVAL;
        o.expected_entries = value;
        return KVREG_OK;
    default:
        if (option >= KVREG_INDEX_OPT_WEIGHT && option < KVREG_INDEX_OPT_WEIGHT + KVREG_MEDIUM_COUNT) {
            if (value > 1000000) return KVREG_EINVAL;
            o.weight[option - KVREG_INDEX_OPT_WEIGHT] = static_cast<uint32_t>(value);
            return KVREG_OK;
        }
        return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_index_config_get(const kvreg_index_config *cfg, uint32_t option, uint64_t *value) noexcept {
    if (!cfg || !value) return KVREG_EINVAL;
    const kvreg::index::Options &o = cfg->opt;
    switch (option) {
    case KVREG_INDEX_OPT_BLOCK_SIZE: *value = o.block_size; return KVREG_OK;
    case KVREG_INDEX_OPT_HASHES: *value = o.own_hashes ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE; return KVREG_OK;
    case KVREG_INDEX_OPT_PROFILE:
        *value = o.kv_router_profile ? KVREG_INDEX_PROFILE_KV_ROUTER : KVREG_INDEX_PROFILE_DYNAMO;
        return KVREG_OK;
    case KVREG_INDEX_OPT_SALT: *value = o.salt; return KVREG_OK;
    case KVREG_INDEX_OPT_SHARDS: *value = o.shards; return KVREG_OK;
    case KVREG_INDEX_OPT_EXPECTED_ENTRIES: *value = o.expected_entries; return KVREG_OK;
    default:
        if (option >= KVREG_INDEX_OPT_WEIGHT && option < KVREG_INDEX_OPT_WEIGHT + KVREG_MEDIUM_COUNT) {
            *value = o.weight[option - KVREG_INDEX_OPT_WEIGHT];
            return KVREG_OK;
        }
        return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_index_new(kvreg_index **out, const kvreg_index_config *cfg) noexcept {
    if (!out) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    *out = new kvreg_index(cfg ? cfg->opt : kvreg::index::Options{});
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_index_free(kvreg_index *idx) noexcept { delete idx; }

KVREG_API int kvreg_index_apply(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank, uint64_t seq,
                                const kvreg_wire_event *events, size_t n, kvreg_index_apply_info *info) noexcept {
    if (!idx || (!events && n > 0)) return KVREG_EINVAL;
    kvreg_index_apply_info local;
    KVREG_GUARD_BEGIN
    const int rc = idx->impl.apply(worker_id, dp_rank, seq, events, n, info ? *info : local);
    return rc;
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_clear_worker(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank,
                                       uint64_t next_seq) noexcept {
    if (!idx) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.clear_worker(worker_id, dp_rank, next_seq);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_remove_worker(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank) noexcept {
    if (!idx) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.remove_worker(worker_id, dp_rank);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_hashes(const kvreg_index *idx, const uint64_t *hashes, size_t n, size_t top_k,
                                       kvreg_index_match *out, size_t cap, size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!hashes && n > 0)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.query(hashes, n, top_k, out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_tokens(const kvreg_index *idx, const uint32_t *tokens, size_t n_tokens,
                                       size_t top_k, kvreg_index_match *out, size_t cap,
                                       size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!tokens && n_tokens > 0)) return KVREG_EINVAL;
    if (n_tokens > SIZE_MAX / 4) return KVREG_EOVERFLOW;
    KVREG_GUARD_BEGIN
    std::vector<uint64_t> hashes;
    idx->impl.hash_tokens(tokens, n_tokens, hashes);
    return idx->impl.query(hashes.data(), hashes.size(), top_k, out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_depths(const kvreg_index *idx, const uint64_t *hashes, size_t n,
                                       kvreg_index_depth *out, size_t cap, size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!hashes && n > 0)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.depths(hashes, n, out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_depths_tokens(const kvreg_index *idx, const uint32_t *tokens, size_t n_tokens,
                                              kvreg_index_depth *out, size_t cap, size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!tokens && n_tokens > 0)) return KVREG_EINVAL;
    if (n_tokens > SIZE_MAX / 4) return KVREG_EOVERFLOW;
    KVREG_GUARD_BEGIN
    std::vector<uint64_t> hashes;
    idx->impl.hash_tokens(tokens, n_tokens, hashes);
    return idx->impl.depths(hashes.data(), hashes.size(), out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_stat(const kvreg_index *idx, uint32_t stat, uint64_t *value) noexcept {
    if (!idx || !value) return KVREG_EINVAL;
    bool known = false;
    const uint64_t v = idx->impl.stat(stat, &known);
    if (!known) return KVREG_EINVAL;
    *value = v;
    return KVREG_OK;
}

KVREG_API int kvreg_index_dump(const kvreg_index *idx, kvreg_index_write_fn write, void *ctx) noexcept {
    if (!idx || !write) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.dump(write, ctx);
    KVREG_GUARD_END
}

namespace {
// kvreg_index_dump_alloc's sink: one malloc'd buffer, doubled as it fills.
struct Grow {
    unsigned char *data = nullptr;
    size_t len = 0, cap = 0;
};
int grow_write(const void *data, size_t len, void *ctx) {
    Grow &g = *static_cast<Grow *>(ctx);
    if (g.cap - g.len < len) {
        size_t cap = g.cap ? g.cap : 4096;
        while (cap - g.len < len) cap *= 2;
        void *p = std::realloc(g.data, cap);
        if (!p) return KVREG_ENOMEM;
        g.data = static_cast<unsigned char *>(p);
        g.cap = cap;
    }
    std::memcpy(g.data + g.len, data, len);
    g.len += len;
    return 0;
}
} // namespace

KVREG_API int kvreg_index_dump_alloc(const kvreg_index *idx, void **data, size_t *len) noexcept {
    if (!idx || !data || !len) return KVREG_EINVAL;
    Grow g;
    int rc;
    try {
        rc = idx->impl.dump(grow_write, &g);
    } catch (const std::bad_alloc &) {
        rc = KVREG_ENOMEM;
    }
    if (rc != KVREG_OK) {
        std::free(g.data);
        return rc;
    }
    *data = g.data;
    *len = g.len;
    return KVREG_OK;
}

KVREG_API int kvreg_index_load(kvreg_index *idx, const void *data, size_t len) noexcept {
    if (!idx || (!data && len > 0)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.load(static_cast<const unsigned char *>(data), len);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_digest(const kvreg_index *idx, uint64_t *out) noexcept {
    if (!idx || !out) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    *out = idx->impl.digest();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_workers(const kvreg_index *idx, void *out, size_t cap, size_t struct_size,
                                  size_t *n) noexcept {
    constexpr size_t kMin = offsetof(kvreg_index_worker_info, mapped_hashes) + sizeof(uint64_t);
    if (!idx || !n || (!out && cap > 0) || struct_size < kMin) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::vector<kvreg::index::Index::WorkerInfo> all;
    idx->impl.worker_infos(all);
    *n = all.size();
    if (cap < all.size()) return KVREG_ERANGE;
    for (size_t i = 0; i < all.size(); i++) {
        const auto &w = all[i];
        kvreg_index_worker_info info{};
        info.worker_id = w.id;
        info.dp_rank = w.dp;
        info.next_seq = w.next_seq;
        info.entries = w.entries;
        for (unsigned t = 0; t < KVREG_MEDIUM_COUNT; t++) info.tier_entries[t] = w.tiers[t];
        info.mapped_hashes = w.mapped;
        info.partition = w.partition;
        unsigned char *dst = static_cast<unsigned char *>(out) + i * struct_size;
        const size_t k = std::min(struct_size, sizeof info);
        std::memcpy(dst, &info, k);
        if (struct_size > k) std::memset(dst + k, 0, struct_size - k);
    }
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_partition_id(const char *model_name, const char *lora_name, uint64_t *out) noexcept {
    if (!out) return KVREG_EINVAL;
    *out = kvreg::index::partition_id(model_name, lora_name);
    return KVREG_OK;
}

KVREG_API int kvreg_index_set_worker_partition(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank,
                                               uint64_t partition) noexcept {
    if (!idx) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return idx->impl.set_partition(worker_id, dp_rank, partition);
    KVREG_GUARD_END
}

namespace {
// A prompt's router hashes as partition p's table keys (p 0: the hashes themselves, no copy).
const uint64_t *keys_in(uint64_t p, const uint64_t *hashes, size_t n, std::vector<uint64_t> &buf) {
    if (p == 0) return hashes;
    buf.resize(n);
    for (size_t i = 0; i < n; i++) buf[i] = kvreg::index::key_of(hashes[i], p);
    return buf.data();
}
} // namespace

KVREG_API int kvreg_index_query_hashes_in(const kvreg_index *idx, uint64_t partition, const uint64_t *hashes,
                                          size_t n, size_t top_k, kvreg_index_match *out, size_t cap,
                                          size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!hashes && n > 0)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::vector<uint64_t> buf;
    return idx->impl.query(keys_in(partition, hashes, n, buf), n, top_k, out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_tokens_in(const kvreg_index *idx, uint64_t partition, const uint32_t *tokens,
                                          size_t n_tokens, size_t top_k, kvreg_index_match *out, size_t cap,
                                          size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!tokens && n_tokens > 0)) return KVREG_EINVAL;
    if (n_tokens > SIZE_MAX / 4) return KVREG_EOVERFLOW;
    KVREG_GUARD_BEGIN
    std::vector<uint64_t> hashes;
    idx->impl.hash_tokens(tokens, n_tokens, hashes);
    for (uint64_t &h : hashes) h = kvreg::index::key_of(h, partition);
    return idx->impl.query(hashes.data(), hashes.size(), top_k, out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_depths_in(const kvreg_index *idx, uint64_t partition, const uint64_t *hashes,
                                          size_t n, kvreg_index_depth *out, size_t cap, size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!hashes && n > 0)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::vector<uint64_t> buf;
    return idx->impl.depths(keys_in(partition, hashes, n, buf), n, out, cap, n_matches);
    KVREG_GUARD_END
}

KVREG_API int kvreg_index_query_depths_tokens_in(const kvreg_index *idx, uint64_t partition, const uint32_t *tokens,
                                                 size_t n_tokens, kvreg_index_depth *out, size_t cap,
                                                 size_t *n_matches) noexcept {
    if (!idx || !n_matches || (!tokens && n_tokens > 0)) return KVREG_EINVAL;
    if (n_tokens > SIZE_MAX / 4) return KVREG_EOVERFLOW;
    KVREG_GUARD_BEGIN
    std::vector<uint64_t> hashes;
    idx->impl.hash_tokens(tokens, n_tokens, hashes);
    for (uint64_t &h : hashes) h = kvreg::index::key_of(h, partition);
    return idx->impl.depths(hashes.data(), hashes.size(), out, cap, n_matches);
    KVREG_GUARD_END
}

} // extern "C"
