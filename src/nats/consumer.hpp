// The NATS JetStream consumer behind kvreg_nats_consumer (contract in kvreg_nats.h): a durable
// pull consumer whose messages are decoded, put in per-worker seq order and applied to a
// kvreg_index on the caller's thread, each acknowledged once applied or judged.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "nats/conn.hpp"
#include "kvreg_nats.h"

namespace kvreg::nats {

class Consumer {
  public:
    explicit Consumer(kvreg_index *idx) : idx_(idx) {}
    ~Consumer();
    Consumer(const Consumer &) = delete;
    Consumer &operator=(const Consumer &) = delete;

    int set(uint32_t option, uint64_t value) noexcept;
    int set_string(uint32_t option, const char *value); // throws bad_alloc
    // The value in effect (KVREG_EINVAL: unknown option; get_string: KVREG_ENOENT while a
    // string option is NULL). Any thread, also during run(): they take opts_mu_ only.
    int get(uint32_t option, uint64_t *value) const noexcept;
    int get_string(uint32_t option, std::string &out) const; // throws bad_alloc
    int set_notice_fn(kvreg_nats_notice_fn fn, void *user) noexcept;
    int start();                                         // throws bad_alloc
    int run(int timeout_ms);                             // throws bad_alloc
    int stop() noexcept {
        stop_.store(true, std::memory_order_release);
        return KVREG_OK;
    }
    int stat(uint32_t stat, uint64_t *value) const noexcept;
    int worker(uint64_t worker_id, uint32_t rank, uint64_t *instance, uint64_t *next) const noexcept;
    int snapshot(uint64_t *out_seq); // throws bad_alloc

  private:
    using Clock = std::chrono::steady_clock;
    enum Stat { messages, batches, events, duplicates, lost, resets, malformed, stale, held,
                fetch_errors, snapshots, snapshot_seq, restored, snapshots_rejected, expired,
                snapshot_errors, snapshot_orphans, start_us, restore_read_us, restore_load_us, n_stats };
    struct Worker {
        uint64_t instance = 0, next = 0;
        std::map<uint64_t, natsMsg *> held; // seq -> message, not acknowledged yet
        Clock::time_point held_since;
        Clock::time_point last_applied; // liveness: a worker still sending is never expired
        bool expired = false;           // removed from the index; set back by its next batch
    };
    using Key = std::pair<uint64_t, uint32_t>;

    // The connection and what hangs on it (subscription, liveness lookups) and the decoders,
    // freed in the order Conn::stop requires; the destructor's and a failed start()'s end.
    void release() noexcept;
    bool fetch(int64_t wait_ms, bool no_wait); // false: the request could not be sent
    void reply(natsMsg *m, const char *what) noexcept; // +ACK / +TERM; counts in handled_max_
    void handle(natsMsg *m);
    void apply(const Key &k, Worker &w, natsMsg *m, const BatchHeader &h);
    void drain(const Key &k, Worker &w);
    // LOSS for the seqs before w's first held batch (why: the notice's text), then what is
    // held in order from there.
    void give_up(const Key &k, Worker &w, const char *why = "batches never arrived within the reorder window");
    // Within the replica-wide bound on held batches (bound_held in consumer.cpp).
    void bound_held();
    static uint64_t held_size(natsMsg *m) noexcept; // what a held message counts in held_bytes_
    void drop_held(Worker &w, bool ack) noexcept;
    void check_held_timeouts();
    void check_liveness();
    // The newest valid snapshot into the index (start_seq: the first sequence after it; left
    // 0 when none was); bucket_seen: the bucket answered with an object's info (it exists).
    // The stream is checked with the snapshots' slots, in one round trip: KVREG_EPROTO when it
    // is not there or the server did not answer (the index untouched), else KVREG_OK.
    int restore(uint64_t &start_seq, bool &bucket_seen);
    // The durable (consumer_durable.cpp). Its requests are answered on inbox_, in the order
    // sent; DurableState follows the last one sent:
    //   kNone      nothing sent, or a creation refused
    //   kDeleting  the old durable's deletion sent      -> kDeleted once answered
    //   kCreating  its creation from durable_seq_ sent   -> kMade, or kNone if refused
    // durable_request: the creation's JSON for a start at start_seq (0: the stream's first
    // message), the one definition of the durable's settings. send_durable sends one request
    // without waiting; await_durable reads every outstanding answer (false: none came in 5 s);
    // request_durable sends one and takes its answer at once; make_durable ends in kMade from
    // start_seq, requesting what is missing.
    enum class DurableState { kNone, kDeleting, kDeleted, kCreating, kMade };
    enum class DurableStep { kDelete, kCreate };
    std::string durable_request(uint64_t start_seq) const;     // throws bad_alloc
    std::string durable_subject(DurableStep step) const;       // throws bad_alloc
    std::string durable_start() const;                         // throws bad_alloc
    bool send_durable(DurableStep step, uint64_t start_seq);   // throws bad_alloc
    bool await_durable();                                      // throws bad_alloc
    bool request_durable(DurableStep step, uint64_t start_seq); // throws bad_alloc
    bool make_durable(uint64_t start_seq);                     // throws bad_alloc
    void maybe_snapshot();              // when a threshold is reached
    void notice(uint32_t kind, const Key *k, uint64_t instance, uint64_t first, uint64_t last,
                uint64_t n, bool has_seq, natsMsg *m, const char *text) noexcept;
    static uint64_t micros_since(Clock::time_point t) noexcept {
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
    }
    void count(Stat s, int64_t n = 1) noexcept {
        stats_[s].fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }

    kvreg_index *idx_;
    // Options: written by set/set_string and start (the snapshot name's default), under
    // opts_mu_, which get/get_string take too; start() and run() read them without it.
    mutable std::mutex opts_mu_;
    uint64_t fetch_batch_ = 256, ack_wait_ms_ = 5000, max_ack_pending_ = 65536;
    uint64_t reorder_window_ = 4096, reorder_ms_ = 30000, max_msg_bytes_ = 64u << 20;
    uint64_t resume_ = 0, connect_timeout_ms_ = 2000;
    uint64_t snap_events_ = 0, snap_ms_ = 0, snap_keep_ = 2, snap_purge_ = 0, snap_chunk_ = 131072;
    uint64_t restore_ = 1, liveness_check_ms_ = 1000, snap_orphan_ms_ = 60000;
    uint64_t max_held_bytes_ = 256u << 20;
    std::string snap_bucket_, snap_name_, liveness_bucket_;
    std::string url_ = "nats://127.0.0.1:4222", stream_ = "KVREG_EVENTS", durable_ = "kvreg-router";
    std::string filter_;
    kvreg_nats_notice_fn notice_fn_ = nullptr;
    void *notice_user_ = nullptr;

    bool started_ = false;
    Conn conn_;
    natsSubscription *sub_ = nullptr;
    std::string inbox_, next_subject_;
    ApiInbox api_; // several API requests at once (<inbox_>.<n>): the stream and snapshot slots
    // The durable's requests sent and not yet answered, the start of the last creation sent.
    uint64_t durable_answers_ = 0, durable_seq_ = 0;
    DurableState durable_state_ = DurableState::kNone;
    kvreg_wire_decoder *decoders_[5] = {};
    std::map<Key, Worker> workers_;
    size_t n_held_ = 0;       // held batches, every worker's
    uint64_t held_bytes_ = 0; // their payload bytes
    kvStore *kv_ = nullptr;            // liveness bucket, through live_js_
    jsCtx *live_js_ = nullptr;         // its own context: lookups wait at most a check period
    uint64_t liveness_ttl_ms_ = 0;     // the bucket's TTL
    Clock::time_point next_liveness_;
    // Liveness decides nothing until this time: a TTL after the connection came back (the keys
    // aged out while the server was away), so that every live worker has put its key again.
    Clock::time_point liveness_from_;
    uint64_t reconnects_seen_ = 0;
    // The pull request in flight (fetch()): open until its last message came, the server ended
    // it (a status) or request_until_ passed; a new one is sent only then, so the inbox holds
    // at most one batch however slowly the replica applies.
    bool request_open_ = false;
    uint64_t request_left_ = 0;
    Clock::time_point request_until_;
    // The highest stream sequence this replica acknowledged (applied or judged): a snapshot
    // never claims more, whatever the server says the durable's floor is (a purge moves it).
    uint64_t handled_max_ = 0;
    uint64_t events_since_snap_ = 0;
    Clock::time_point last_snap_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> stats_[n_stats] = {};
};

} // namespace kvreg::nats
