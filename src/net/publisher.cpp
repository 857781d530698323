// The publisher's sender thread and its setup/teardown (see net_publisher.hpp).
#include "net/publisher.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <system_error>

#include "core/registry.hpp"
#include "net/endpoint.hpp"
#include "net/instance.hpp"
#include "net/zmq.hpp"
#include "wire/utf8.hpp"

namespace kvreg::net {

namespace {
constexpr size_t kPollBatch = KVREG_EVENTS_PER_CALL;
// The replay ROUTER's per-requester queues, in messages (one batch or marker each): with
// the byte share of net_replay.hpp they bound what a requester that does not read can make
// libzmq hold. A request's frames are at most 8 bytes: a frame past 4 KiB disconnects its
// sender (not less: the limit applies to the handshake's READY command too, which carries a
// routing id of up to 255 bytes and the socket's metadata).
constexpr int kReplaySndHwm = 64;
constexpr int kReplayRcvHwm = 64;
constexpr int64_t kReplayMaxMsgSize = 4096;
// The PUB socket's ZMQ_MAXMSGSIZE. Upstream a PUB only ever needs subscriptions: 1 byte
// (ZMTP 3.0) or the 10 of ZMTP 3.1's "\x09SUBSCRIBE" command, plus a prefix; a prefix longer
// than the topic frame matches nothing this publisher sends. Yet libzmq reads any frame an
// XSUB peer sends up to this size (and queues up to ZMQ_RCVHWM of them while the sender
// thread does not touch the socket): with no limit, 64 upstream messages of 8 MiB grew the
// publisher by 512 MiB. A larger frame disconnects its sender from its size header, before
// its body is read. Never below the ROUTER's 4 KiB: the limit applies to the handshake's
// READY command too (the peer's socket type and metadata).
constexpr size_t kSubscribeCommand = 10;
int64_t pub_max_msg_size(size_t topic_len) {
    return std::max<int64_t>(kReplayMaxMsgSize, static_cast<int64_t>(topic_len + kSubscribeCommand));
}
} // namespace

int Publisher::set(uint32_t option, uint64_t v) noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    if (state_ != State::fresh) return KVREG_ESTATE;
    switch (option) {
    case KVREG_PUB_OPT_HWM:
        if (v > INT_MAX) return KVREG_EINVAL;
        hwm_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_DP_RANK:
        if (v > 65535) return KVREG_EINVAL;
        dp_rank_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_BUFFER_STEPS:
        if (v < 1 || v > (UINT64_C(1) << 24)) return KVREG_EINVAL;
        buffer_steps_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_LINGER_MS:
        if (v > 3600000) return KVREG_EINVAL;
        linger_ms_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_LINGER_MS:
        if (v > 3600000) return KVREG_EINVAL;
        replay_linger_ms_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_MAX_EVENTS:
        if (v < 1 || v > UINT32_MAX) return KVREG_EINVAL;
        max_events_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_FORMAT:
        if (v != KVREG_WIRE_VLLM && v != KVREG_WIRE_VLLM_LEGACY) return KVREG_EINVAL;
        format_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_BLOCK_SIZE:
        if (v > UINT32_MAX) return KVREG_EINVAL;
        block_size_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_BATCH_US:
        if (v > 1000000) return KVREG_EINVAL;
        batch_us_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_POLL_MS:
        if (v < 1 || v > 1000) return KVREG_EINVAL;
        replay_poll_ms_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_TOPIC_INSTANCE:
        if (v > 1) return KVREG_EINVAL;
        topic_instance_ = v == 1;
        return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_MAX:
        if (v < 1 || v > 1024) return KVREG_EINVAL;
        replay_max_ = v;
        return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_MAX_BYTES:
        if (v < (UINT64_C(64) << 10) || v > (UINT64_C(1) << 40)) return KVREG_EINVAL;
        replay_max_bytes_ = v;
        return KVREG_OK;
    default:
        return KVREG_EINVAL;
    }
}

int Publisher::set_string(uint32_t option, const char *value) {
    std::lock_guard<std::mutex> lk(opts_mu_);
    if (state_ != State::fresh) return KVREG_ESTATE;
    switch (option) {
    case KVREG_PUB_ENDPOINT:
        if (!value || !*value) return KVREG_EINVAL;
        endpoint_ = value;
        return KVREG_OK;
    case KVREG_PUB_REPLAY_ENDPOINT:
        has_replay_ = value != nullptr;
        replay_endpoint_ = value ? value : "";
        return KVREG_OK;
    case KVREG_PUB_TOPIC:
        topic_ = value ? value : "";
        return KVREG_OK;
    case KVREG_PUB_LORA_NAME:
        if (value && !wire::valid_utf8(value)) return KVREG_EINVAL; // written as a msgpack str
        has_lora_ = value != nullptr;
        lora_name_ = value ? value : "";
        return KVREG_OK;
    default:
        return KVREG_EINVAL;
    }
}

int Publisher::get(uint32_t option, uint64_t *v) const noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    switch (option) {
    case KVREG_PUB_OPT_HWM: *v = hwm_; return KVREG_OK;
    case KVREG_PUB_OPT_DP_RANK: *v = dp_rank_; return KVREG_OK;
    case KVREG_PUB_OPT_BUFFER_STEPS: *v = buffer_steps_; return KVREG_OK;
    case KVREG_PUB_OPT_LINGER_MS: *v = linger_ms_; return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_LINGER_MS: *v = replay_linger_ms_; return KVREG_OK;
    case KVREG_PUB_OPT_MAX_EVENTS: *v = max_events_; return KVREG_OK;
    case KVREG_PUB_OPT_FORMAT: *v = format_; return KVREG_OK;
    case KVREG_PUB_OPT_BLOCK_SIZE: *v = block_size_; return KVREG_OK;
    case KVREG_PUB_OPT_BATCH_US: *v = batch_us_; return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_POLL_MS: *v = replay_poll_ms_; return KVREG_OK;
    case KVREG_PUB_OPT_TOPIC_INSTANCE: *v = topic_instance_ ? 1 : 0; return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_MAX: *v = replay_max_; return KVREG_OK;
    case KVREG_PUB_OPT_REPLAY_MAX_BYTES: *v = replay_max_bytes_; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Publisher::get_string(uint32_t option, std::string &out) const {
    std::lock_guard<std::mutex> lk(opts_mu_);
    switch (option) {
    case KVREG_PUB_ENDPOINT: out = endpoint_; return KVREG_OK;
    case KVREG_PUB_REPLAY_ENDPOINT:
        if (!has_replay_) return KVREG_ENOENT;
        out = replay_endpoint_;
        return KVREG_OK;
    case KVREG_PUB_TOPIC: out = topic_; return KVREG_OK; // after start with TOPIC_INSTANCE: suffixed
    case KVREG_PUB_LORA_NAME:
        if (!has_lora_) return KVREG_ENOENT;
        out = lora_name_;
        return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Publisher::start() {
    if (state_ != State::fresh) return KVREG_ESTATE;
    std::string ep, rep;
    if (!offset_endpoint(endpoint_, static_cast<uint32_t>(dp_rank_), ep)) return KVREG_EINVAL;
    if (has_replay_ && !offset_endpoint(replay_endpoint_, static_cast<uint32_t>(dp_rank_), rep))
        return KVREG_EINVAL;

    int rc = kvreg_wire_encoder_new(&enc_, static_cast<uint32_t>(format_));
    if (rc != KVREG_OK) return rc;
    if ((rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_DP_RANK, dp_rank_)) != KVREG_OK ||
        (rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_MAX_EVENTS, max_events_)) != KVREG_OK ||
        (rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_BLOCK_SIZE, block_size_)) != KVREG_OK ||
        (has_lora_ && (rc = kvreg_wire_encoder_set_lora_name(enc_, lora_name_.c_str())) != KVREG_OK)) {
        close_all();
        return rc;
    }
    ctx_ = zmq_ctx_new();
    if (!ctx_) {
        close_all();
        return KVREG_ENOMEM;
    }
    rc = KVREG_EINVAL;
    pub_ = zmq_socket(ctx_, ZMQ_PUB);
    // The topic as sent: with TOPIC_INSTANCE it gets "|kvreg-instance=<16 hex>" below.
    const size_t sent_topic = topic_.size() + (topic_instance_ ? 1 + instance_tag(0).size() : 0);
    const int64_t pub_max_msg = pub_max_msg_size(sent_topic);
    // At a subscriber's high-water mark libzmq drops the batch for that subscriber alone,
    // without telling the sender (the subscriber sees the gap and replays it). Not NODROP:
    // with it a send fails for every subscriber as soon as one is full, so one that never
    // reads made the publisher drop everything for all (10,000 of 300,000 batches reached a
    // reader that kept up). MAXMSGSIZE before the bind or connect: libzmq copies a socket's
    // options into each connection then.
    if (!pub_ || !set_int(pub_, ZMQ_SNDHWM, static_cast<int>(hwm_)) ||
        !set_int(pub_, ZMQ_LINGER, static_cast<int>(linger_ms_)) ||
        zmq_setsockopt(pub_, ZMQ_MAXMSGSIZE, &pub_max_msg, sizeof pub_max_msg) != 0 ||
        !open_endpoint(pub_, ep, false, actual_endpoint_)) {
        close_all();
        return rc;
    }
    if (has_replay_) {
        router_ = zmq_socket(ctx_, ZMQ_ROUTER);
        // MANDATORY: at a requester's high-water mark a send fails (EAGAIN) instead of
        // dropping part of an answer, and an answer to a requester that went away fails
        // (EHOSTUNREACH) instead of queueing; SNDTIMEO 0: no send ever waits.
        const int64_t max_msg = kReplayMaxMsgSize;
        if (!router_ || !set_int(router_, ZMQ_SNDHWM, kReplaySndHwm) ||
            !set_int(router_, ZMQ_RCVHWM, kReplayRcvHwm) || !set_int(router_, ZMQ_ROUTER_MANDATORY, 1) ||
            !set_int(router_, ZMQ_SNDTIMEO, 0) ||
            zmq_setsockopt(router_, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg) != 0 ||
            !set_int(router_, ZMQ_LINGER, 0) || !open_endpoint(router_, rep, true, actual_replay_)) {
            close_all();
            return rc;
        }
    }
    // From here a failure (memory, the thread) puts the configured topic back: a start
    // retried later tags it once, with its own instance (a failed start used to leave its
    // tag on, and the next one added a second).
    std::string configured;
    bool tagged = false;
    try {
        // A new id per start: what lets subscribers see this process is not the one before.
        instance_.store(new_instance(), std::memory_order_relaxed);
        end_topic_ = instance_tag(instance_.load(std::memory_order_relaxed));
        if (topic_instance_) {
            configured = topic_;
            std::string with_tag = topic_ + kInstanceSep + end_topic_;
            std::lock_guard<std::mutex> lk(opts_mu_); // a getter may read topic_ now
            topic_.swap(with_tag);
            tagged = true;
        }
        ring_ = ReplayRing(static_cast<size_t>(buffer_steps_));
        replay_.configure(router_, &topic_, &end_topic_, replay_max_, replay_max_bytes_);
        uint64_t dropped_now = 0;
        kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_DROPPED, &dropped_now);
        dropped_at_start_.store(dropped_now, std::memory_order_relaxed);
        thread_ = std::thread(&Publisher::run, this);
    } catch (const std::exception &) { // std::bad_alloc, std::system_error (no thread)
        if (tagged) {
            std::lock_guard<std::mutex> lk(opts_mu_);
            topic_.swap(configured);
        }
        instance_.store(0, std::memory_order_relaxed); // no instance ran (the INSTANCE stat)
        ring_ = ReplayRing();
        close_all();
        return KVREG_ENOMEM;
    }
    state_ = State::running;
    return KVREG_OK;
}

int Publisher::endpoint(uint32_t which, char *buf, size_t cap, size_t *len) const noexcept {
    if (state_ == State::fresh) return KVREG_ESTATE;
    if (which == KVREG_PUB_ENDPOINT) return copy_out(actual_endpoint_, buf, cap, len);
    if (which != KVREG_PUB_REPLAY_ENDPOINT) return KVREG_EINVAL;
    if (!has_replay_) return KVREG_ENOENT;
    return copy_out(actual_replay_, buf, cap, len);
}

int Publisher::stop() noexcept {
    if (state_ != State::running) return KVREG_OK;
    kvreg_registry_flush(reg_); // every event emitted before this call is now queued
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms_);
    stopping_.store(true, std::memory_order_release);
    kvreg_registry_wakeup(reg_);
    thread_.join();
    close_all();
    state_ = State::stopped;
    return KVREG_OK;
}

void Publisher::close_all() noexcept {
    if (pub_) zmq_close(pub_);
    if (router_) zmq_close(router_);
    pub_ = router_ = nullptr;
    if (ctx_) term_context(ctx_); // waits up to the PUB's linger for frames still queued
    ctx_ = nullptr;
    replay_.reset(); // libzmq has released every batch the answers queued
    kvreg_wire_encoder_free(enc_);
    enc_ = nullptr;
}

int Publisher::stat(uint32_t s, uint64_t *value) const noexcept {
    static const Stat map[] = {n_stats, sent, dropped, events_sent, n_stats /* replay */,
                               n_stats /* replay */, n_stats /* replay */, next_seq, n_stats /* lost */,
                               unsent, send_errors, skipped, handled};
    if (s == KVREG_PUB_STAT_INSTANCE) {
        *value = instance_.load(std::memory_order_relaxed);
        return KVREG_OK;
    }
    if (s == KVREG_PUB_STAT_EVENTS_LOST) {
        // state_ first: start() stores dropped_at_start_ before it leaves fresh.
        if (state_.load() == State::fresh) {
            *value = 0;
            return KVREG_OK;
        }
        const uint64_t at_start = dropped_at_start_.load(std::memory_order_relaxed);
        uint64_t now = at_start;
        kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_DROPPED, &now);
        *value = now - at_start;
        return KVREG_OK;
    }
    const ReplayServer::Counters &r = replay_.counters();
    switch (s) {
    case KVREG_PUB_STAT_REPLAYS_SERVED: *value = r.served.load(std::memory_order_relaxed); return KVREG_OK;
    case KVREG_PUB_STAT_REPLAY_BATCHES: *value = r.batches.load(std::memory_order_relaxed); return KVREG_OK;
    case KVREG_PUB_STAT_BAD_REQUESTS: *value = r.bad.load(std::memory_order_relaxed); return KVREG_OK;
    case KVREG_PUB_STAT_REPLAYS_BUSY: *value = r.busy.load(std::memory_order_relaxed); return KVREG_OK;
    case KVREG_PUB_STAT_REPLAYS_GONE: *value = r.gone.load(std::memory_order_relaxed); return KVREG_OK;
    case KVREG_PUB_STAT_REPLAYS_ACTIVE: *value = r.slots.load(std::memory_order_relaxed); return KVREG_OK;
    case KVREG_PUB_STAT_REPLAY_QUEUED_BYTES: *value = r.queued.load(std::memory_order_relaxed); return KVREG_OK;
    default: break;
    }
    if (s == 0 || s >= sizeof map / sizeof map[0]) return KVREG_EINVAL;
    *value = stats_[map[s]].load(std::memory_order_relaxed);
    return KVREG_OK;
}

// ------------------------------------------------------------------------ the sender thread
void Publisher::run() noexcept {
    std::vector<kvreg_event> events;
    try {
        events.resize(kPollBatch);
    } catch (...) {
        return; // stop() still works; nothing was sent
    }
    Frames frames;
    bool replay_ready = false; // a replay can send more at once: do not wait
    for (;;) {
        const bool stopping = stopping_.load(std::memory_order_acquire);
        // Idle with a replay socket: wake now and then to answer requests (the registry's
        // wait and the socket cannot be waited on together).
        const int timeout = stopping || replay_ready ? 0 : router_ ? static_cast<int>(replay_poll_ms_) : -1;
        size_t n = 0;
        reg_->log.owner_poll_wait(events.data(), events.size(), &n, timeout);
        if (n) {
            publish(events.data(), n);
            // After publish(), never before: between taking events from the queue and making
            // their batches, "queue empty and every seq sent" is already true; this count is
            // what says the events are done.
            count(handled, n);
        }
        // One bounded step of the replays per round: live batches never wait behind more.
        if (router_) replay_ready = serve_replays(frames);
        if (stopping && (n == 0 || std::chrono::steady_clock::now() >= deadline_)) break;
        // The queue is drained: let events gather for a moment instead of waking for each
        // one. Fewer, fuller batches cost the engine's threads fewer wake-ups and the
        // network fewer messages; an event after a quiet spell still goes out at once.
        if (n && n < events.size() && batch_us_ && !stopping_.load(std::memory_order_relaxed))
            std::this_thread::sleep_for(std::chrono::microseconds(batch_us_));
    }
    uint64_t left = 0;
    kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_QUEUED, &left);
    count(unsent, left);
    if (router_ && replay_linger_ms_) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(replay_linger_ms_);
        for (auto now = std::chrono::steady_clock::now(); now < until; now = std::chrono::steady_clock::now()) {
            if (serve_replays(frames)) continue;
            // Every answer waits for its requester: sleep until a request comes, retrying
            // the waiting answers every REPLAY_POLL_MS.
            zmq_pollitem_t item = {router_, 0, ZMQ_POLLIN, 0};
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
            zmq_poll(&item, 1, static_cast<long>(std::min<int64_t>(ms + 1, static_cast<int64_t>(replay_poll_ms_))));
        }
    }
}

void Publisher::publish(const kvreg_event *events, size_t n) noexcept {
    // The one place events become payloads: the encoder takes as many as fit one batch.
    for (size_t off = 0; off < n;) {
        size_t used = 0;
        const uint8_t *payload = nullptr;
        size_t len = 0;
        const int rc = kvreg_wire_encode(enc_, events + off, n - off, -1.0, &used, &payload, &len);
        if (rc == KVREG_ESTATE || rc == KVREG_EINVAL) {
            // An event the format cannot carry (vLLM: a Register without tokens, or with
            // another block size): skipped, never sent half-right. No seq is used.
            count(skipped);
            off++;
            continue;
        }
        if (rc != KVREG_OK || used == 0) {
            count(send_errors); // out of memory: the rest of this poll is lost, no seq used
            return;
        }
        send_batch(payload, len, used);
        off += used;
    }
}

void Publisher::send_batch(const unsigned char *payload, size_t len, size_t n_events) noexcept {
    const uint64_t seq = seq_++;
    stats_[next_seq].store(seq_, std::memory_order_relaxed);
    // Kept for replay only when there is a replay socket to ask: without one, a ring of
    // BUFFER_STEPS copies (up to 10,000 batches of up to ~100 KB) was memory nobody could use,
    // and filling it cost the sender a page fault per fresh 4 KB.
    if (router_) {
        try {
            ring_.push(seq, payload, len);
        } catch (...) {
            // Out of memory: this batch cannot be replayed. Still send it live.
        }
    }
    unsigned char seq8[8];
    put_be64(seq8, seq);
    // A PUB socket does not refuse at the high-water mark (see above), so EAGAIN does not
    // come; DONTWAIT on the first frame keeps the sender from ever blocking all the same, and
    // the other frames go without it so that a message is never cut short.
    if (zmq_send(pub_, topic_.data(), topic_.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        count(errno == EAGAIN ? dropped : send_errors);
        return;
    }
    if (zmq_send(pub_, seq8, 8, ZMQ_SNDMORE) < 0 || zmq_send(pub_, payload, len, 0) < 0) {
        count(send_errors);
        return;
    }
    count(sent);
    count(events_sent, n_events);
}

bool Publisher::serve_replays(Frames &frames) noexcept { return replay_.step(ring_, seq_, frames); }

} // namespace kvreg::net
