// The dump's fields, shared by the writer (dump.cpp) and the loader (load.cpp). The format is
// documented once, in docs/design/index.md ("Dump format"); these are its constants.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "index/mix.hpp"
#include "kvreg_index.h"

namespace kvreg::index::dump_format {

constexpr unsigned char kMagic[8] = {'K', 'V', 'R', 'E', 'G', 'I', 'D', 'X'};
constexpr uint32_t kVersion = KVREG_INDEX_DUMP_VERSION; // what a dump writes
constexpr uint32_t kOldestVersion = 1;                   // the oldest a load reads
constexpr size_t kHeader = 40;       // magic, version, hashes, profile, block size, salt, workers
constexpr size_t kWorkerHead = 40;   // id, dp, flags, next seq, model partition, groups
constexpr size_t kGroupHead = 16;    // partition, records
constexpr size_t kTrailer = 8;       // checksum
constexpr size_t kOwnRecord = 9;     // router hash, tiers
constexpr size_t kEngineRecord = 17; // engine hash, router hash, tiers
constexpr uint32_t kSeqKnown = 1;    // worker flag: next_seq is the seq the next batch must carry

// What a group's records ascend by (none repeats): version 1, the record's key (router hash in
// OWN mode, engine hash in ENGINE mode); since version 2 the key mixed (mix_hash()), so that
// a load fills the mapping (and in OWN mode the table's shards) in slot order
// (docs/design/index.md, "Format, version 2", has the figures).
constexpr uint64_t record_order(uint64_t key, uint32_t version) noexcept {
    return version >= 2 ? mix_hash(key) : key;
}

inline void put32(unsigned char *p, uint32_t v) noexcept {
    for (int i = 0; i < 4; i++) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline void put64(unsigned char *p, uint64_t v) noexcept {
    for (int i = 0; i < 8; i++) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
// One load each where the host is little-endian (the byte loop was not merged into one by the
// compiler: a fifth of a load's time).
inline uint32_t get32(const unsigned char *p) noexcept {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return std::endian::native == std::endian::little ? v : __builtin_bswap32(v);
}
inline uint64_t get64(const unsigned char *p) noexcept {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return std::endian::native == std::endian::little ? v : __builtin_bswap64(v);
}

} // namespace kvreg::index::dump_format
