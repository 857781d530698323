// The publisher behind kvreg_publisher (see kvreg_net.h for the contract): one sender thread
// takes the registry's events (POLL mode), encodes them into batches, numbers them and sends
// them on a PUB socket, keeping them in a replay ring it serves on a ROUTER socket
// (net_replay.hpp: bounded streams, served by the same thread between batches).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvreg_net.h"
#include "net/replay.hpp"
#include "net/replay_ring.hpp"

namespace kvreg::net {

class Frames;

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
    int endpoint(uint32_t which, char *buf, size_t cap, size_t *len) const noexcept;
    int stop() noexcept;
    int stat(uint32_t stat, uint64_t *value) const noexcept;

  private:
    enum class State { fresh, running, stopped };
    enum Stat { sent, dropped, events_sent, next_seq, unsent, send_errors, skipped, handled, n_stats };

    void run() noexcept;                                  // the sender thread
    void publish(const kvreg_event *events, size_t n) noexcept;
    void send_batch(const unsigned char *payload, size_t len, size_t n_events) noexcept;
    bool serve_replays(Frames &frames) noexcept;          // one bounded step (net_replay.hpp)
    void close_all() noexcept;
    void count(Stat s, uint64_t n = 1) noexcept { stats_[s].fetch_add(n, std::memory_order_relaxed); }

    kvreg_registry *reg_;
    // Options. Written only by set/set_string and start (its topic suffix), always under
    // opts_mu_, which get/get_string take too; the sender thread reads them without it (they
    // no longer change once it runs).
    mutable std::mutex opts_mu_;
    uint64_t hwm_ = 100000, dp_rank_ = 0, buffer_steps_ = 10000, linger_ms_ = 2000;
    uint64_t replay_linger_ms_ = 0, max_events_ = 1024, format_ = KVREG_WIRE_VLLM, replay_poll_ms_ = 5;
    uint64_t block_size_ = 0, batch_us_ = 1000;
    uint64_t replay_max_ = 8, replay_max_bytes_ = UINT64_C(32) << 20;
    std::string endpoint_ = "tcp://*:5557", replay_endpoint_, topic_, lora_name_;
    bool has_replay_ = false, has_lora_ = false, topic_instance_ = false;
    // This start's instance id (net_instance.hpp), and the end marker's topic frame naming it.
    std::atomic<uint64_t> instance_{0};
    std::string end_topic_;
    // Running state. The sockets and the encoder belong to the sender thread between start()
    // and the join in stop(); start() and stop() touch them only outside that window.
    std::atomic<State> state_{State::fresh}; // read by stat() on any thread
    void *ctx_ = nullptr, *pub_ = nullptr, *router_ = nullptr;
    kvreg_wire_encoder *enc_ = nullptr;
    std::string actual_endpoint_, actual_replay_;
    ReplayRing ring_;
    ReplayServer replay_; // its counters are read by stat() on any thread
    uint64_t seq_ = 0;             // sender thread
    std::atomic<uint64_t> dropped_at_start_{0}; // the registry's KVREG_STAT_EVENTS_DROPPED at start(); read by stat()
    std::chrono::steady_clock::time_point deadline_; // written before stopping_ is set
    std::atomic<bool> stopping_{false};
    std::atomic<uint64_t> stats_[n_stats] = {};
    std::thread thread_;
};

} // namespace kvreg::net
