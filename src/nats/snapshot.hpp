// A replica's snapshot: what a kvreg_nats_consumer writes into the object store and restores
// from (docs/nats.md "Snapshots" has the byte layout). The body is the consumer's position
// (the stream sequence it covers, and per worker the instance it follows and the next seq it
// expects) followed by the index's own dump (kvreg_index_dump, checksummed by itself); the
// object store's SHA-256 digest covers the whole. Version 2 (written since 0.6's last stop)
// also checksums the position, so a version 2 body checks itself whole and a restore need not
// compute the digest (a restore's start() 0.91x in process, 0.96x in a fresh process:
// docs/nats.md); version 1 is still read, checked by the digest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "index/index.hpp"
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
constexpr uint32_t kSnapVersion = 2;        // written
constexpr uint32_t kSnapVersionNoHeadSum = 1; // read too: its position has no checksum

// The body: the position, then the index's dump streamed straight after it. KVREG_* status of
// the dump on failure.
int encode_snapshot(const SnapPosition &pos, const kvreg_index *idx, std::string &out);
// Restoring a snapshot as its chunks arrive (consumer.cpp): the position is parsed once it is
// whole, then the index's dump goes straight into the index (index::Index::Loader) while the
// next chunks are on their way. The index must know no worker. Whatever fails (here, or the
// object's own digest: abandon()), the index is left empty.
class SnapshotLoader {
  public:
    // size: the object's size; expect_seq: the stream sequence its info names (the body
    // must name the same).
    SnapshotLoader(kvreg_index *idx, uint64_t size, uint64_t expect_seq);
    // The next chunk, in order. false: the snapshot is rejected (why() says why; finish()
    // returns its status).
    bool feed(const char *data, size_t len) noexcept;
    // After the last chunk: KVREG_OK with the position, or the rejection's status.
    int finish(SnapPosition &pos); // throws std::bad_alloc (the index emptied)
    void abandon() noexcept; // the object did not check out: undo the load
    const std::string &why() const noexcept { return why_; }
    bool failed() const noexcept { return rc_ != KVREG_OK; } // rejected already
    // The body checks itself: a version 2 position whose checksum matched (the dump's own
    // checksum covers the rest; finish() fails unless it matches too). The object's digest
    // then adds nothing.
    bool self_checked() const noexcept { return loader_ && version_ == kSnapVersion; }
    // ...and a self-checked body already refused: the rest of it need not be read.
    bool refused_self_checked() const noexcept { return self_checked() && failed(); }

  private:
    bool take(const char *data, size_t len); // feed() but for running out of memory
    bool reject(int rc, std::string why) noexcept;
    bool parse_head(); // head_ is whole: the position, and the loader for the dump after it
    kvreg::index::Index &idx_;
    const uint64_t size_, expect_seq_;
    uint64_t head_len_ = 0; // the position's length once its worker count is known
    uint32_t version_ = 0;
    std::string head_;      // the position, until it is whole
    SnapPosition pos_;
    std::unique_ptr<kvreg::index::Index::Loader> loader_;
    int rc_ = KVREG_OK;
    std::string why_;
};

} // namespace kvreg::nats
