// The subscriber behind kvreg_subscriber (see kvreg_net.h for the contract).
//   subscriber.cpp  options, sockets, the run loop, frame checks;
//   sub_order.cpp   per-publisher ordering: the protocol's stages (its head comment walks
//                   through them), seq tracking, gaps, replays, resets, delivery.
// Everything runs on the thread in run(); the stats and the stop flag are atomics so that
// other threads may read and set them.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kvreg_net.h"
#include "net/zmq.hpp"

namespace kvreg::net {

constexpr uint32_t kLastStat = KVREG_SUB_STAT_MALFORMED_PAUSES;
using Clock = std::chrono::steady_clock;

class Subscriber {
  public:
    Subscriber() = default;
    ~Subscriber();
    Subscriber(const Subscriber &) = delete;
    Subscriber &operator=(const Subscriber &) = delete;

    int init();                                            // the context and the decoder
    int set(uint32_t option, uint64_t value) noexcept;
    int set_string(uint32_t option, const char *value);    // throws bad_alloc
    // The value in effect (KVREG_EINVAL: unknown option). Any thread, also during run():
    // they take opts_mu_ only, which run() never holds.
    int get(uint32_t option, uint64_t *value) const noexcept;
    int get_string(uint32_t option, std::string &out) const; // throws bad_alloc
    int add(const char *endpoint, const char *replay, uint32_t *index); // throws bad_alloc
    int endpoint(uint32_t index, char *buf, size_t cap, size_t *len) const noexcept;
    int set_batch_fn(kvreg_sub_batch_fn fn, void *ud) noexcept;
    int set_notice_fn(kvreg_sub_notice_fn fn, void *ud) noexcept;
    int run(int timeout_ms);                               // throws bad_alloc
    void stop() noexcept { stop_.store(true, std::memory_order_release); }
    int stat(uint32_t stat, uint64_t *value) const noexcept;
    int instance(uint32_t publisher, const char *topic, uint64_t *value) const; // throws bad_alloc

  private:
    struct Waiting {
        uint64_t seq;
        Payload payload; // the frame as received (moved, not copied: see Payload)
        bool restarted; // the live stream went back when it came (see Stream::live_last)
    };
    // Where a stream is in the protocol. sub_order.cpp walks through the protocol and owns
    // every change (enter(), checked against its table of allowed moves).
    enum class Stage : uint8_t {
        kLive,         // in order: a live seq that is the next one is delivered at once
        kProbing,      // a probe is in flight on the DEALER; live batches are held
        kReplayQueued, // a replay waits for the DEALER; live batches are held
        kReplaying,    // a replay is in flight on the DEALER; live batches are held
        kBusyWait,     // the replay ROUTER answered busy: asks again at the endpoint's retry_at
    };
    // How a replay (or probe) ended.
    enum class End : uint8_t {
        kMarker,    // the end marker (or the gone marker) came
        kTimeout,   // the deadline passed in kReplaying or kProbing
        kBusy,      // the deadline passed in kBusyWait: the ROUTER stayed busy
        kProbeBusy, // a probe was answered busy: asked again later (Endpoint::probe_after)
        kForeign,   // the end marker came after batches of another topic (none applied)
        kCapped,    // still answering at the cap (Endpoint::replay_cap): progress, but no end
    };
    // One publisher: an (endpoint, topic) pair.
    struct Stream {
        size_t ep = 0;
        std::string topic, pod, model;
        bool topic_known = true; // false for a stream made for FROM_SEQ before any message
        Stage stage = Stage::kLive;
        uint64_t delivered = 0;  // seqs delivered (or skipped as malformed) since the start or a reset
        uint64_t next = 0;       // the seq expected next
        uint64_t replay_from = 0;
        uint64_t replay_count = 0;
        std::deque<Waiting> waiting; // live batches that came during the replay (their bytes:
                                     // Endpoint::held_bytes)
        // The last seq read from the SUB socket. One publisher process sends its seqs in
        // order on that connection, so a live seq at or below it means a new process (a
        // restart). A live seq below `next` alone does not: the replay's connection can
        // overtake the live one, and then a live batch arrives after the replay delivered it.
        bool live_seen = false;
        uint64_t live_last = 0;
        // A live batch that showed a restart was refused by the held bounds (hold()): the next
        // live batch carries the restart instead. live_last has moved on, so without this the
        // new process's later seqs looked like the old one's, and those below `next` were
        // dropped as duplicates with no RESET and no loss reported.
        bool restart_pending = false;
        // The publisher's instance id (net_instance.hpp; 0: not known, e.g. a foreign
        // publisher). probed: an end marker was read since the stream began or its endpoint
        // last reconnected; until then a short replay request (a probe) asks for one.
        uint64_t instance = 0;
        bool probed = false;
        // Recency, for idle eviction and the MAX_PUBLISHERS bound (net_subscriber.cpp).
        Clock::time_point last_active{};
        std::list<Stream *>::iterator lru{};
        bool holds() const { return stage != Stage::kLive; } // live batches wait for the DEALER
        // Made new for reuse (spare_ below): every field as a new stream has it, the strings
        // and the deque keeping their storage. A field added above must be reset here too.
        void reset() noexcept {
            ep = 0;
            topic.clear();
            pod.clear();
            model.clear();
            topic_known = true;
            stage = Stage::kLive;
            delivered = next = replay_from = replay_count = 0;
            waiting.clear();
            live_seen = false;
            live_last = 0;
            restart_pending = false;
            instance = 0;
            probed = false;
            last_active = {};
            lru = {};
        }
    };
    struct Endpoint {
        std::string endpoint, replay_endpoint, actual;
        bool has_replay = false;
        // dealer: open only while a request (replay or probe) is in flight, i.e. while
        // replay_owner is set: request_replay() opens it, finish_replay() closes it.
        void *sub = nullptr, *dealer = nullptr;
        Stream *replay_owner = nullptr;
        // replay_deadline: the request plus REPLAY_TIMEOUT_MS, moved by progress and the grace,
        // never past replay_cap: the request plus KVREG_SUB_REPLAY_CAP_TIMEOUTS timeouts.
        Clock::time_point replay_deadline{}, replay_cap{};
        bool replay_grace = false; // the deadline was moved once for answers waiting unread
        bool replay_foreign = false; // the running answer carried another topic's batches
        Clock::time_point no_replay_until{}; // after a replay timed out
        // The ROUTER's busy answers (KVREG_PUB_REPLAY_BUSY) in a row: the back-off grows with
        // them. retry_at: when a kBusyWait owner asks again; probe_after: when a probe may.
        uint32_t busy = 0;
        Clock::time_point retry_at{}, probe_after{};
        // Connection events of the SUB socket (with a replay endpoint only): a reconnect may
        // be a restarted publisher, so its streams are probed again.
        void *monitor = nullptr;
        uint64_t connects = 0;
        // Back-pressure (see live_paused()): streams of this endpoint, those of them holding
        // (Stream::holds(), kept by enter()), and whether a live batch of one of them was
        // refused by the held bounds since one last left holding.
        uint32_t streams = 0, holding = 0;
        bool hold_refused = false;
        // Payload bytes of the live batches its streams hold, all together (at most
        // held_share()): one peer's share whatever number of topics it sends.
        uint64_t held_bytes = 0;
        // Malformed live messages in a row, and until when the SUB socket is not read for
        // them (see malformed_live()).
        uint32_t malformed_run = 0;
        Clock::time_point read_after{};
        // Whether a live or replayed batch of this endpoint decoded since it was added or
        // last sent a malformed live message: until then its SUB socket reads one message
        // ahead (see trust()). spoken: one ever decoded (malformed_live()'s first pause).
        bool trusted = false, spoken = false;
    };

    // net_subscriber.cpp
    bool open_dealer(Endpoint &e);
    static void close_dealer(Endpoint &e) noexcept;
    // The SUB socket is not read while every stream on it waits for a replay and the held
    // bounds already refused one of its batches: what it would read could only be dropped
    // (the replay fetches it), so it stays with libzmq (RCVHWM), the kernel and the
    // publisher, whose own high-water mark drops it as a gap. Reading resumes when one of
    // those streams ends its replay (marker or deadline). A socket that also carries a
    // stream in order is read on (that stream must not wait for another's replay).
    static bool live_paused(const Endpoint &e) noexcept {
        return e.hold_refused && e.holding > 0 && e.holding == e.streams;
    }
    // Whether run() reads the SUB socket now: not while live_paused(), nor during the
    // back-off that malformed live messages earn their endpoint.
    static bool reads_live(const Endpoint &e, Clock::time_point now) noexcept {
        return !live_paused(e) && now >= e.read_after;
    }
    // A live message of e was malformed: the SUB socket is not read for MALFORMED_PAUSE_MS,
    // doubled for each further malformed one in a row (up to 64x); 64x from the first when
    // no batch of e ever decoded (a peer that has not shown it speaks any format we read is
    // not a publisher with one bad batch). A peer that sends bytes we cannot use gets at most
    // one message read per pause; what it sends meanwhile waits in libzmq (RCVHWM), the
    // kernel and its own send queue, not in this process.
    void malformed_live(Endpoint &e);
    // A batch of e decoded (live, or replayed through e's DEALER): its read-ahead goes from
    // one message to live_rcvhwm() if it was not trusted; a malformed live message puts it
    // back (malformed_live()). A live one also ends the malformed run.
    void trust(Endpoint &e, bool replayed);
    // The held bytes one endpoint (all its streams together) may take of MAX_HELD_BYTES:
    // MAX_HELD_BYTES_PUBLISHER, or a quarter of MAX_HELD_BYTES when that is 0. Per endpoint, not
    // per stream: a peer chooses its topics, so a share per stream let one with 4 topics (each
    // with a gap) take all of MAX_HELD_BYTES and refuse every other endpoint's held batches.
    uint64_t held_share() const noexcept {
        return max_held_publisher_ ? max_held_publisher_ : max_held_bytes_ / 4;
    }
    int live_rcvhwm() const noexcept;
    void read_live(size_t ep, Frames &f);
    void read_replay(size_t ep, Frames &f);
    void check_replay_timeouts();
    // A deadline REPLAY_TIMEOUT_MS from now, but not past the running replay's cap.
    Clock::time_point capped(const Endpoint &e, Clock::time_point now) const noexcept {
        return std::min(now + std::chrono::milliseconds(replay_timeout_ms_), e.replay_cap);
    }
    void start_from_seq();
    Stream *stream_for(size_t ep, std::string_view topic); // nullptr: no room (a notice said so)
    bool make_room();
    template <class F> void for_each_stream(F f) {
        for (auto &kv : streams_) f(*kv.second);
        for (auto &u : unknown_) f(*u);
    }
    void notice(uint32_t kind, const Stream *s, size_t ep, uint64_t first, uint64_t last,
                const char *message, bool replay_requested = false, bool has_seq = true);
    void count(uint32_t stat, uint64_t n = 1) noexcept {
        stats_[stat].fetch_add(n, std::memory_order_relaxed);
    }
    void uncount(uint32_t stat, uint64_t n = 1) noexcept { // gauges
        stats_[stat].fetch_sub(n, std::memory_order_relaxed);
    }

    // net_sub_order.cpp
    // p: the batch; hold() moves it into the stream's held batches, else it is left as is.
    void on_live(Stream &s, uint64_t seq, Payload &p, bool restarted);
    void on_gap(Stream &s, uint64_t seq, Payload &p);
    void hold(Stream &s, uint64_t seq, Payload &p, bool restarted);
    // What a held batch counts against the held bounds and STAT_HELD_BYTES: its payload and
    // an entry's overhead. Payloads below kOwnBelow are copied into buffers of their own.
    static constexpr size_t kHeldOverhead = KVREG_SUB_HELD_OVERHEAD, kOwnBelow = size_t{64} << 10;
    static size_t held_cost(const Payload &p) noexcept { return p.size() + kHeldOverhead; }
    void unhold(Stream &s, const Waiting &w);
    void release_held_before(Stream &s, uint64_t seq);
    void enter(Stream &s, Stage to);
    void request_replay(Stream &s, uint64_t from, bool probe = false);
    bool send_request(Endpoint &e, uint64_t from);
    void on_busy(Stream &s);
    void retry_busy(Endpoint &e);
    Clock::duration backoff(uint32_t busy) noexcept;
    void on_replay_batch(Stream &s, uint64_t seq, const unsigned char *p, size_t len);
    void finish_replay(Stream &s, End how, uint64_t instance = 0);
    void probe(Stream &s);
    void restarted_instance(Stream &s, uint64_t instance);
    void read_monitor(size_t ep);
    void deliver(Stream &s, uint64_t seq, const unsigned char *p, size_t len, bool replayed);

    // Options: written by set/set_string only (before the first add), under opts_mu_, which
    // get/get_string take too; run() and add() read them without it.
    mutable std::mutex opts_mu_;
    uint64_t format_ = KVREG_WIRE_VLLM, from_seq_ = UINT64_MAX, replay_timeout_ms_ = 2000;
    uint64_t rcvhwm_ = 100000, max_waiting_ = 100000, rcv_bytes_ = UINT64_C(64) << 20;
    int64_t max_msg_size_ = INT64_C(16) << 20;
    uint64_t max_publishers_ = 10000, idle_ms_ = 600000, max_held_bytes_ = UINT64_C(256) << 20;
    uint64_t malformed_pause_ms_ = 10, max_held_publisher_ = 0;
    std::string topic_;
    // State.
    void *ctx_ = nullptr;
    kvreg_wire_decoder *dec_ = nullptr;
    std::vector<Endpoint> eps_;
    // Streams by (endpoint, topic) key: O(1) per message. lru_ orders them by last message
    // (front: newest); unknown_ holds FROM_SEQ streams until their topic is known.
    using StreamMap = std::unordered_map<std::string, std::unique_ptr<Stream>>;
    StreamMap streams_;
    std::list<Stream *> lru_;
    std::vector<std::unique_ptr<Stream>> unknown_;
    std::string key_;       // reused: no allocation per message to look a stream up
    std::string evict_key_; // make_room()'s, reused the same way
    // The last stream evicted, kept whole (its map node with key and Stream, its lru_ node in
    // spare_lru_) for the next new one: a peer that sends each message on a new topic made
    // every message allocate a stream (its strings, its deque) and free the evicted one, a
    // dozen allocations; recycled (Stream::reset), their capacity is reused.
    StreamMap::node_type spare_;
    std::list<Stream *> spare_lru_;
    kvreg_sub_batch_fn batch_fn_ = nullptr;
    void *batch_ud_ = nullptr;
    kvreg_sub_notice_fn notice_fn_ = nullptr;
    void *notice_ud_ = nullptr;
    bool in_callback_ = false;
    bool ran_ = false;
    uint64_t rng_ = 0; // the back-off's jitter (splitmix64), seeded per subscriber in init()
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> stats_[kLastStat + 1] = {};
};

} // namespace kvreg::net
