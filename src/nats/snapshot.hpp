// A replica's snapshot: what a kvreg_nats_consumer writes into the object store and restores
// from (docs/nats.md "Snapshots" has the byte layout). The body is the consumer's position
// (the stream sequence it covers, and per worker the instance it follows and the next seq it
// expects) followed by the index's own dump (kvreg_index_dump, checksummed by itself); the
// object store's SHA-256 digest covers the whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvreg_index.h"

namespace kvreg::nats {

struct SnapWorker {
    uint64_t worker = 0, instance = 0, next = 0;
    uint32_t rank = 0;
};

struct SnapPosition {
    uint64_t stream_seq = 0;
    std::vector<SnapWorker> workers;
};

constexpr char kSnapMagic[8] = {'K', 'V', 'R', 'G', 'N', 'S', 'N', 'P'};
constexpr uint32_t kSnapVersion = 1;

// The body: the position, then the index's dump streamed straight after it. KVREG_* status of
// the dump on failure.
int encode_snapshot(const SnapPosition &pos, const kvreg_index *idx, std::string &out);
// Parse the body, check it covers expect_seq (what the object info says) and load its dump
// into idx (which must be empty). On failure why says what was wrong and the index is left
// empty (kvreg_index_load is all-or-nothing).
int decode_snapshot(const std::string &body, uint64_t expect_seq, kvreg_index *idx, SnapPosition &pos,
                    std::string &why);

} // namespace kvreg::nats
