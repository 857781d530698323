// The index's one mixing of hashes: a multiplication by an odd constant (2^64 / the golden
// ratio), a bijection, so that hashes which are small integers still spread. The holder table
// takes its shard from the top bits (holder_table.hpp), a worker's mapping its home slot
// (engine_map.hpp), and a dump orders its records by it (dump_format.hpp, record_order()): so
// a load fills both in order, as long as all three use this one.
#pragma once

#include <cstdint>

namespace kvreg::index {

constexpr uint64_t kMixFactor = UINT64_C(0x9E3779B97F4A7C15);
constexpr uint64_t mix_hash(uint64_t h) noexcept { return h * kMixFactor; }

} // namespace kvreg::index
