// Partitions: one index serving several models and LoRA adapters without cross-matching. A
// partition id is a u64 (0: the default, no partition); a table key is the router hash mixed
// with it, so the same prompt's blocks under two partitions are two keys. The default costs
// nothing: its keys are the router hashes themselves. The rule is documented in
// kvreg_index.h (kvreg_index_partition_id) and docs/design/index.md.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hash.hpp"

namespace kvreg::index {

// The seed of a model name's id: ASCII "kvregmdl".
constexpr uint64_t kModelSeed = UINT64_C(0x6c646d676572766b);

// A bijection with f(0) = 0 (splitmix64's finalizer), so a partition other than 0 changes
// every key and two partitions never map one hash to one key.
inline uint64_t partition_mix(uint64_t p) noexcept {
    p = (p ^ (p >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    p = (p ^ (p >> 27)) * UINT64_C(0x94D049BB133111EB);
    return p ^ (p >> 31);
}

// The table key of router hash h in partition p (its own inverse: key_of(key_of(h, p), p) == h).
inline uint64_t key_of(uint64_t h, uint64_t p) noexcept { return p ? h ^ partition_mix(p) : h; }

// Never 0 for a name (0 is the default partition).
inline uint64_t name_id(const char *name, uint64_t seed) noexcept {
    const uint64_t v = hash_bytes(name, std::strlen(name), seed);
    return v ? v : 1;
}

// The partition of (model, lora): a model name alone gives XXH3-64(name, seed kModelSeed); a
// LoRA name on top gives XXH3-64(lora, seed = the model's partition); NULL or "" names nothing.
inline uint64_t partition_id(const char *model, const char *lora) noexcept {
    const uint64_t m = model && *model ? name_id(model, kModelSeed) : 0;
    return lora && *lora ? name_id(lora, m) : m;
}
inline uint64_t lora_partition(uint64_t model, const char *lora) noexcept {
    return lora && *lora ? name_id(lora, model) : model;
}

} // namespace kvreg::index
