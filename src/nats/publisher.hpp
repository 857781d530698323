// The NATS JetStream publisher behind kvreg_nats_publisher (contract in kvreg_nats.h): one
// sender thread polls the registry, encodes batches with the kvreg_wire encoder, numbers them
// and publishes them asynchronously; libnats' ack callback counts them done or hands failed
// ones back for a resend, each on its own schedule, in seq order among those due.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nats/conn.hpp"
#include "kvreg_nats.h"

namespace kvreg::nats {

class Publisher {
  public:
    explicit Publisher(kvreg_registry *reg) : reg_(reg) {}
    ~Publisher() { stop(); }
    Publisher(const Publisher &) = delete;
    Publisher &operator=(const Publisher &) = delete;

    int set(uint32_t option, uint64_t value) noexcept;
    int set_string(uint32_t option, const char *value); // throws bad_alloc
    // The value in effect (KVREG_EINVAL: unknown option; get_string: KVREG_ENOENT while a
    // string option is NULL). Any thread, any time: they take opts_mu_ only.
    int get(uint32_t option, uint64_t *value) const noexcept;
    int get_string(uint32_t option, std::string &out) const; // throws bad_alloc
    int start();                                         // throws bad_alloc
    int stop() noexcept;
    int stat(uint32_t stat, uint64_t *value) const noexcept;

  private:
    enum class State { fresh, running, stopped };
    enum Stat { batches, acked, duplicates, retries, in_flight, events_sent, resyncs, skipped,
                unsent, unacked, errors, handled, refused, n_stats };
    using Clock = std::chrono::steady_clock;

    void run() noexcept; // the sender thread
    // Encode events[0..n) into batches and publish them; false when stopping cut it short,
    // with *done (if given) the events before the cut (in batches, or skipped).
    bool publish(const kvreg_event *events, size_t n, size_t *done = nullptr) noexcept;
    // A batch's two headers (for seq_) and the bytes they add to its message as the server
    // counts them against max_payload.
    struct BatchHeaders {
        std::string id, batch; // Nats-Msg-Id, Kvreg-Batch
        size_t bytes = 0;
    };
    bool batch_headers(BatchHeaders &out) const noexcept; // false: out of memory
    bool send_batch(const uint8_t *payload, size_t len, size_t n_events, const BatchHeaders &hdrs) noexcept;
    bool resync() noexcept;           // Cleared + snapshot; moves next_event_id_
    int heartbeat() noexcept;         // puts the liveness key when due; ms until the next one
    bool wait_window() noexcept;      // until in_flight < max (false: stop's bound ran out)
    void resend_failed() noexcept;    // the failed batches that are due, oldest seq first
    struct Failed {
        natsMsg *msg;                 // owned; keeps its headers (the same Nats-Msg-Id)
        uint64_t seq;
        Clock::time_point retry_at;   // its own next turn
        bool too_big;                 // the stream refused it for its size: never resent as is
        bool emptied;                 // already sent again with no events (empty_in_place)
    };
    // Under mu_: keep m (seq) for a resend RETRY_MS from now; throws bad_alloc.
    void add_failed(natsMsg *m, uint64_t seq, bool too_big = false);
    // f's seq again with no events (same subject and headers) in place of f.msg, which no
    // longer fits; a resync follows. Sender thread. false: out of memory (f unchanged).
    bool empty_in_place(Failed &f) noexcept;
    // f even empty does not fit (a limit below its headers): dropped for good, its seq a gap
    // the consumers report; the worker resyncs. Sender thread.
    void give_up(Failed &f) noexcept;
    // A heartbeat goes out (sender thread): when the liveness key may have expired since the
    // last one (a reconnect, or a gap of about the TTL), a resync is due.
    void alive_out(Clock::time_point now) noexcept;
    static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *self) noexcept;
    bool past_deadline() const noexcept {
        return stopping_.load(std::memory_order_acquire) && Clock::now() >= deadline_;
    }
    void count(Stat s, uint64_t n = 1) noexcept { stats_[s].fetch_add(n, std::memory_order_relaxed); }

    kvreg_registry *reg_;
    // Options. Written only by set/set_string and start (the subject's layout, the drawn
    // instance), always under opts_mu_, which get/get_string take too; the sender thread reads
    // them without it (they no longer change once it runs).
    mutable std::mutex opts_mu_;
    uint64_t format_ = KVREG_WIRE_VLLM, worker_ = 0, rank_ = 0, max_in_flight_ = 256;
    uint64_t ack_timeout_ms_ = 5000, retry_ms_ = 100, max_events_ = 1024, block_size_ = 0;
    uint64_t batch_us_ = 1000, linger_ms_ = 5000, instance_ = 0, create_stream_ = 1;
    uint64_t max_age_s_ = 3600, dup_window_ms_ = 120000, connect_timeout_ms_ = 2000;
    uint64_t heartbeat_ms_ = 1000, liveness_ttl_ms_ = 5000;
    std::string liveness_bucket_;
    bool has_instance_ = false, has_lora_ = false;
    std::string url_ = "nats://127.0.0.1:4222", stream_ = "KVREG_EVENTS", prefix_ = "kvreg.events";
    std::string namespace_ = "default", component_ = "backend", subject_, lora_;

    // Running state: the connection and encoder belong to the sender thread between start()
    // and the join in stop().
    std::atomic<State> state_{State::fresh};
    Conn conn_;
    kvreg_wire_encoder *enc_ = nullptr;
    uint64_t max_payload_ = 0;    // sender thread: the server's, headers and payload together
    uint64_t stream_max_msg_ = 0; // sender thread: the stream's max_msg_size, the same way (0: none)
    bool resync_due_ = false;     // sender thread: a batch was emptied (empty_in_place), or the
                                  // liveness key may have expired (heartbeat())
    std::string hb_subject_, hb_value_; // "$KV.<bucket>.<worker>.<rank>", the instance
    Clock::time_point next_hb_;         // sender thread
    uint64_t key_ttl_ms_ = 0;           // the bucket's TTL as the server keeps it (0: none)
    uint64_t hb_ms_ = 0;                // the heartbeat period in use: HEARTBEAT_MS, at most a
                                        // third of key_ttl_ms_ (a bucket made by another)
    Clock::time_point last_out_;        // sender thread: the last heartbeat sent while connected
    bool out_seen_ = false;             // sender thread: one was
    uint64_t out_reconnects_ = 0;       // sender thread: the connection's reconnects at that one
    uint64_t seq_ = 0;            // sender thread
    bool published_ = false;      // sender thread (read by stop() after the join): an async publish was made
    uint64_t next_event_id_ = 0;  // sender thread: the id the next polled event should have
    uint64_t dropped_at_start_ = 0;
    uint64_t last_dropped_ = 0;   // sender thread: KVREG_STAT_EVENTS_DROPPED at the last resync
    // Shared with the ack callback (libnats' thread).
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Failed> failed_;    // resent by the sender thread, each when due
    uint64_t in_flight_ = 0;        // published, not acknowledged (failed_ included)
    Clock::time_point retry_at_;    // under mu_: the earliest retry_at of failed_
    Clock::time_point deadline_;    // written before stopping_ is set
    std::atomic<bool> stopping_{false};
    std::atomic<uint64_t> stats_[n_stats] = {};
    std::thread thread_;
};

} // namespace kvreg::nats
