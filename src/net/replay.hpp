// The publisher's replay service on its ROUTER socket (kvreg_net.h: "Replay"), run by the
// sender thread in bounded steps between live batches.
//
// An answer is a stream: a cursor over the ring's seqs, sent a slice at a time, each batch
// zero-copy from the ring's shared entry (net_replay_ring.hpp). What bounds it:
//  - slots: at most max_replays replays hold one. A slot is held from the request until the
//    answer is sent AND libzmq has let go of every batch it queued (written to the network,
//    or dropped when the requester went away). A request finding no free slot gets the busy
//    end marker at once.
//  - bytes: each slot may have at most max_bytes / max_replays bytes queued in libzmq (at
//    least one batch), counted exactly: libzmq calls release() when it is done with a batch.
//    So everything the answers queue is at most max_bytes, plus one batch per slot larger
//    than its share, whatever the requesters do.
//  - per step: at most kRequestsPerStep requests read and kBatchesPerStep batches queued, so
//    live batches never wait behind more than one step.
//  - sends never block: the identity frame goes with ZMQ_DONTWAIT and ROUTER_MANDATORY, so a
//    requester whose queue is at the high-water mark gets EAGAIN, and its stream waits.
//  - a reader that falls behind the ring (the ring overwrote its next batch while it did not
//    read) gets the gone end marker after the batches it was sent: never a silent jump.
// One requester (identity) has one stream at a time; its further requests wait behind it (at
// most kQueuedPerStream) so that answers are never interleaved.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "net/replay_ring.hpp"

namespace kvreg::net {

class Frames;

class ReplayServer {
  public:
    static constexpr size_t kRequestsPerStep = 64;
    static constexpr size_t kBatchesPerStep = 256;
    static constexpr size_t kSlice = 32; // batches per stream per step (round robin)
    static constexpr size_t kQueuedPerStream = 4;

    ReplayServer() = default;
    ~ReplayServer() { reset(); }
    ReplayServer(const ReplayServer &) = delete;
    ReplayServer &operator=(const ReplayServer &) = delete;

    // end_topic: the topic frame of a complete answer's end marker (the publisher's instance tag,
    // kvreg_net.h "Publisher instance"); busy and gone markers carry their own names instead.
    void configure(void *router, const std::string *topic, const std::string *end_topic, uint64_t max_replays,
                   uint64_t max_bytes) noexcept;
    // Read waiting requests and queue one bounded slice of the answers. true: a stream can
    // send more right now (come back without waiting); false: every stream waits for its
    // requester (or there is none).
    bool step(const ReplayRing &ring, uint64_t next_seq, Frames &frames) noexcept;
    // Forget every stream; call once libzmq's context is closed (it has released every batch).
    void reset() noexcept;

    // Counters, readable from any thread.
    struct Counters {
        std::atomic<uint64_t> served{0}, batches{0}, bad{0}, busy{0}, gone{0};
        std::atomic<uint64_t> slots{0};  // replays holding a slot
        std::atomic<uint64_t> queued{0}; // bytes of answers libzmq holds
    };
    const Counters &counters() const noexcept { return c_; }

    // One slot: alive while its stream runs or libzmq holds a batch it queued.
    struct Tally {
        std::atomic<uint32_t> refs{1};
        std::atomic<uint64_t> bytes{0};
        Counters *counters = nullptr;
        void unref() noexcept;
    };

  private:
    struct Stream {
        std::string id;
        uint64_t next = 0, end = 0;
        const char *end_topic = nullptr; // the end marker is due: *end_topic_ (complete) or KVREG_PUB_REPLAY_GONE
        Tally *tally = nullptr;
        std::deque<uint64_t> waiting; // later requests of the same requester
    };

    void on_request(const Frames &req, const ReplayRing &ring, uint64_t next_seq) noexcept;
    void begin(Stream &s, uint64_t start, const ReplayRing &ring, uint64_t next_seq) noexcept;
    // Queue up to max batches of s; returns how many went, and sets done when s is finished.
    size_t advance(Stream &s, const ReplayRing &ring, uint64_t next_seq, size_t max, bool &done,
                   bool &blocked) noexcept;
    bool send_head(const std::string &id, bool &gone_peer) noexcept;
    bool send_marker(const std::string &id, const char *topic, bool &gone_peer) noexcept;
    enum class Sent { ok, later, peer_gone };
    Sent send_batch(Stream &s, uint64_t seq, ReplayEntry *e) noexcept;

    void *router_ = nullptr;
    const std::string *topic_ = nullptr;
    const std::string *end_topic_ = nullptr;
    uint64_t max_replays_ = 8;
    uint64_t share_ = 4u << 20;
    std::vector<std::unique_ptr<Stream>> streams_;
    size_t rr_ = 0; // round robin start
    Counters c_;
};

} // namespace kvreg::net
