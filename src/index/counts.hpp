// A worker's per-tier counts of its entries in the holder table, shared by applying events
// (apply.cpp) and loading a dump (dump.cpp).
#pragma once

#include <cstdint>

#include "index/holder_table.hpp"
#include "index/workers.hpp"

namespace kvreg::index {

inline uint32_t tier_bit(unsigned tier) noexcept { return uint32_t{1} << tier; }
inline uint32_t one(unsigned tier) noexcept { return uint32_t{1} << (8 * tier); }

// One more (or one less) of a worker's engine hashes naming router hash rh in a tier (ENGINE
// mode). The table's byte counts up to 255; past that, the worker's overflow counts the rest
// (workers.hpp), and a count down takes from the overflow first. Throws std::bad_alloc only
// when the entry is new or the overflow must grow; either way nothing changed.
inline void count_up(HolderTable &table, Worker &w, uint64_t rh, uint32_t slot, unsigned tier) {
    bool full = false;
    table.update(rh, slot, [tier, &full](uint32_t c) {
        full = tier_byte(c, tier) == 255;
        return full ? c : c + one(tier);
    });
    if (full) w.overflow[rh][tier]++; // the table did not change: a throw here loses nothing
}
inline void count_down(HolderTable &table, Worker &w, uint64_t rh, uint32_t slot, unsigned tier) noexcept {
    if (!w.overflow.empty()) {
        const auto it = w.overflow.find(rh);
        if (it != w.overflow.end() && it->second[tier]) {
            it->second[tier]--;
            bool empty = true;
            for (const uint64_t n : it->second) empty &= n == 0;
            if (empty) w.overflow.erase(it);
            return;
        }
    }
    table.update(rh, slot, [tier](uint32_t c) { return tier_byte(c, tier) == 0 ? c : c - one(tier); });
}

} // namespace kvreg::index
