// The NATS publisher's setup, sender thread and ack handling (see publisher.hpp).
#include "nats/publisher.hpp"
#include "core/registry.hpp"
#include "wire/utf8.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <system_error>
#include <time.h>

namespace kvreg::nats {

namespace {
constexpr size_t kPollBatch = KVREG_EVENTS_PER_CALL;

uint64_t batch_seq(natsMsg *m) noexcept {
    const char *v = nullptr;
    BatchHeader h;
    if (natsMsgHeader_Get(m, kBatchHeader, &v) == NATS_OK && parse_header(v, h)) return h.seq;
    return UINT64_MAX;
}

// What a header adds to a message as the server counts it against max_payload: libnats sends
// the headers as "NATS/1.0\r\n", then "<key>: <value>\r\n" for each, then "\r\n", and the
// server's limit is on those bytes and the payload together (HPUB's total size).
constexpr const char *kMsgIdHeader = "Nats-Msg-Id"; // JetStream's de-duplication key
constexpr size_t kHeadersFraming = sizeof "NATS/1.0\r\n" - 1 + 2;
size_t header_field_bytes(const char *key, const std::string &value) noexcept {
    return std::strlen(key) + 2 + value.size() + 2;
}

// Every '.'-separated token of a subject is valid (a prefix may have several).
bool valid_subject(const std::string &s) noexcept {
    size_t start = 0;
    for (;;) {
        const size_t dot = s.find('.', start);
        if (!valid_token(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start)))
            return false;
        if (dot == std::string::npos) return true;
        start = dot + 1;
    }
}
} // namespace

int Publisher::set(uint32_t option, uint64_t v) noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    if (state_ != State::fresh) return KVREG_ESTATE;
    auto in = [&](uint64_t lo, uint64_t hi, uint64_t &dst) {
        if (v < lo || v > hi) return KVREG_EINVAL;
        dst = v;
        return KVREG_OK;
    };
    switch (option) {
    case KVREG_NATS_PUB_OPT_FORMAT:
        if (v != KVREG_WIRE_VLLM && v != KVREG_WIRE_VLLM_LEGACY && v != KVREG_WIRE_DYNAMO_JSON &&
            v != KVREG_WIRE_DYNAMO_MSGPACK)
            return KVREG_EINVAL;
        format_ = v;
        return KVREG_OK;
    case KVREG_NATS_PUB_OPT_WORKER_ID: worker_ = v; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_DP_RANK: return in(0, INT32_MAX, rank_);
    case KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT: return in(1, 65536, max_in_flight_);
    case KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS: return in(10, 3600000, ack_timeout_ms_);
    case KVREG_NATS_PUB_OPT_RETRY_MS: return in(1, 60000, retry_ms_);
    case KVREG_NATS_PUB_OPT_MAX_EVENTS: return in(1, UINT32_MAX, max_events_);
    case KVREG_NATS_PUB_OPT_BLOCK_SIZE: return in(0, UINT32_MAX, block_size_);
    case KVREG_NATS_PUB_OPT_BATCH_US: return in(0, 1000000, batch_us_);
    case KVREG_NATS_PUB_OPT_LINGER_MS: return in(0, 3600000, linger_ms_);
    case KVREG_NATS_PUB_OPT_INSTANCE:
        instance_ = v;
        has_instance_ = true;
        return KVREG_OK;
    case KVREG_NATS_PUB_OPT_CREATE_STREAM: return in(0, 1, create_stream_);
    case KVREG_NATS_PUB_OPT_MAX_AGE_S: return in(1, kMaxSeconds, max_age_s_);
    case KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS: return in(1, kMaxMillis, dup_window_ms_);
    case KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS: return in(1, 3600000, connect_timeout_ms_);
    case KVREG_NATS_PUB_OPT_HEARTBEAT_MS: return in(10, 3600000, heartbeat_ms_);
    case KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS: return in(100, kMaxMillis, liveness_ttl_ms_);
    default: return KVREG_EINVAL;
    }
}

int Publisher::set_string(uint32_t option, const char *value) {
    std::lock_guard<std::mutex> lk(opts_mu_);
    if (state_ != State::fresh) return KVREG_ESTATE;
    const bool needs_value = option != KVREG_NATS_SUBJECT && option != KVREG_NATS_LORA_NAME;
    if (needs_value && (!value || !*value)) return KVREG_EINVAL;
    switch (option) {
    case KVREG_NATS_URL: url_ = value; return KVREG_OK;
    case KVREG_NATS_STREAM: stream_ = value; return KVREG_OK;
    case KVREG_NATS_SUBJECT_PREFIX: prefix_ = value; return KVREG_OK;
    case KVREG_NATS_NAMESPACE: namespace_ = value; return KVREG_OK;
    case KVREG_NATS_COMPONENT: component_ = value; return KVREG_OK;
    case KVREG_NATS_LIVENESS_BUCKET: liveness_bucket_ = value; return KVREG_OK;
    case KVREG_NATS_SUBJECT: subject_ = value ? value : ""; return KVREG_OK;
    case KVREG_NATS_LORA_NAME:
        if (value && !wire::valid_utf8(value)) return KVREG_EINVAL; // written as a msgpack str
        has_lora_ = value != nullptr;
        lora_ = value ? value : "";
        return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Publisher::get(uint32_t option, uint64_t *v) const noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    switch (option) {
    case KVREG_NATS_PUB_OPT_FORMAT: *v = format_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_WORKER_ID: *v = worker_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_DP_RANK: *v = rank_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT: *v = max_in_flight_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS: *v = ack_timeout_ms_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_RETRY_MS: *v = retry_ms_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_MAX_EVENTS: *v = max_events_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_BLOCK_SIZE: *v = block_size_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_BATCH_US: *v = batch_us_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_LINGER_MS: *v = linger_ms_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_INSTANCE: *v = instance_; return KVREG_OK; // 0 until set or drawn
    case KVREG_NATS_PUB_OPT_CREATE_STREAM: *v = create_stream_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_MAX_AGE_S: *v = max_age_s_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS: *v = dup_window_ms_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS: *v = connect_timeout_ms_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_HEARTBEAT_MS: *v = heartbeat_ms_; return KVREG_OK;
    case KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS: *v = liveness_ttl_ms_; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Publisher::get_string(uint32_t option, std::string &out) const {
    std::lock_guard<std::mutex> lk(opts_mu_);
    const std::string *s = nullptr;
    switch (option) {
    case KVREG_NATS_URL: s = &url_; break;
    case KVREG_NATS_STREAM: s = &stream_; break;
    case KVREG_NATS_SUBJECT_PREFIX: s = &prefix_; break;
    case KVREG_NATS_NAMESPACE: s = &namespace_; break;
    case KVREG_NATS_COMPONENT: s = &component_; break;
    case KVREG_NATS_SUBJECT: // empty until set, or until start fills in the layout
        if (subject_.empty()) return KVREG_ENOENT;
        s = &subject_;
        break;
    case KVREG_NATS_LORA_NAME:
        if (!has_lora_) return KVREG_ENOENT;
        s = &lora_;
        break;
    case KVREG_NATS_LIVENESS_BUCKET: // set_string refuses an empty name: empty is "none"
        if (liveness_bucket_.empty()) return KVREG_ENOENT;
        s = &liveness_bucket_;
        break;
    default: return KVREG_EINVAL;
    }
    out = *s;
    return KVREG_OK;
}

int Publisher::start() {
    if (state_ != State::fresh) return KVREG_ESTATE;
    // The layout fills in the subject for this start only: a start that fails leaves it
    // empty again, so that the next one follows options changed meanwhile (until 0.6 a failed
    // start kept it, and the retry published under the old namespace and worker).
    struct LayoutSubject {
        Publisher &p;
        bool filled = false;
        ~LayoutSubject() {
            if (!filled || p.state_ == State::running) return;
            std::lock_guard<std::mutex> lk(p.opts_mu_);
            p.subject_.clear();
        }
    } layout_subject{*this};
    if (subject_.empty()) {
        std::string layout = prefix_ + "." + namespace_ + "." + component_ + "." +
                             std::to_string(worker_) + "." + std::to_string(rank_);
        std::lock_guard<std::mutex> lk(opts_mu_); // a getter may read subject_ now
        subject_.swap(layout);
        layout_subject.filled = true;
    }
    if (!valid_subject(prefix_) || !valid_token(namespace_) || !valid_token(component_) ||
        !valid_subject(subject_) || !valid_token(stream_) ||
        (!liveness_bucket_.empty() && !valid_bucket(liveness_bucket_)))
        return KVREG_EINVAL;
    if (!has_instance_) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        std::lock_guard<std::mutex> lk(opts_mu_);
        instance_ = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
    }
    int rc = kvreg_wire_encoder_new(&enc_, static_cast<uint32_t>(format_));
    if (rc == KVREG_OK) rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_DP_RANK, rank_);
    if (rc == KVREG_OK) rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_MAX_EVENTS, max_events_);
    if (rc == KVREG_OK) rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_WORKER_ID, worker_);
    if (rc == KVREG_OK) rc = kvreg_wire_encoder_set(enc_, KVREG_WIRE_OPT_BLOCK_SIZE, block_size_);
    if (rc == KVREG_OK && has_lora_) rc = kvreg_wire_encoder_set_lora_name(enc_, lora_.c_str());
    if (rc != KVREG_OK) {
        kvreg_wire_encoder_free(enc_);
        enc_ = nullptr;
        return rc;
    }
    jsOptions jso;
    jsOptions_Init(&jso);
    // Our own window (max_in_flight_) is always reached first, so libnats never stalls a
    // publish on its own limit.
    jso.PublishAsync.MaxPending = static_cast<int64_t>(max_in_flight_) * 2 + 16;
    jso.PublishAsync.AckHandler = &Publisher::on_ack;
    jso.PublishAsync.AckHandlerClosure = this;
    std::string err;
    StreamSpec spec{stream_, prefix_ + ".>", max_age_s_, dup_window_ms_};
    // With liveness, a connection that hangs without closing must end within about the key's
    // TTL (pings every TTL / 2, two unanswered end it), so that the reconnect below is seen
    // (heartbeat()) rather than libnats' default 2 min later.
    const uint64_t ping_ms = liveness_bucket_.empty() ? 0 : std::clamp<uint64_t>(liveness_ttl_ms_ / 2, 100, 120000);
    if (!conn_.open(url_, connect_timeout_ms_, &jso, ping_ms) ||
        !ensure_stream(conn_.js, spec, create_stream_ != 0, err, &stream_max_msg_)) {
        conn_.close();
        kvreg_wire_encoder_free(enc_);
        enc_ = nullptr;
        return KVREG_EPROTO;
    }
    if (!liveness_bucket_.empty()) {
        // The key-value bucket is a stream KV_<bucket> on $KV.<bucket>.>; its max age is the
        // TTL, so a key whose worker stopped refreshing it is gone after TTL on every replica.
        kvStore *kv = nullptr;
        const bool ok = ensure_kv_bucket(conn_.js, liveness_bucket_, liveness_ttl_ms_) &&
                        js_KeyValue(&kv, conn_.js, liveness_bucket_.c_str()) == NATS_OK && kv_ttl_ms(kv, key_ttl_ms_);
        if (kv) kvStore_Destroy(kv);
        if (!ok) {
            conn_.close();
            kvreg_wire_encoder_free(enc_);
            enc_ = nullptr;
            return KVREG_EPROTO;
        }
        // A bucket made by someone else (a replica makes it with 5 s) may keep keys for less
        // than HEARTBEAT_MS: the key would lapse between two heartbeats of an idle worker, and
        // with no reconnect to see, the worker would never resync. A third of the TTL then.
        hb_ms_ = key_ttl_ms_ ? std::min(heartbeat_ms_, std::max<uint64_t>(10, key_ttl_ms_ / 3)) : heartbeat_ms_;
        hb_subject_ = "$KV." + liveness_bucket_ + "." + std::to_string(worker_) + "." + std::to_string(rank_);
        hb_value_ = std::to_string(instance_);
    }
    max_payload_ = static_cast<uint64_t>(natsConnection_GetMaxPayload(conn_.nc));
    kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_DROPPED, &dropped_at_start_);
    last_dropped_ = dropped_at_start_;
    try {
        thread_ = std::thread(&Publisher::run, this);
    } catch (const std::system_error &) {
        conn_.close();
        kvreg_wire_encoder_free(enc_);
        enc_ = nullptr;
        return KVREG_ENOMEM;
    }
    state_ = State::running;
    return KVREG_OK;
}

int Publisher::stop() noexcept {
    if (state_ != State::running) return KVREG_OK;
    kvreg_registry_flush(reg_); // everything emitted before this call is now queued
    {
        std::lock_guard<std::mutex> lk(mu_);
        deadline_ = Clock::now() + std::chrono::milliseconds(linger_ms_);
        stopping_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    kvreg_registry_wakeup(reg_);
    thread_.join();
    // Take back what is still waiting for an ack (libnats then calls no callback for it), then
    // close: the connection's threads are joined.
    // Only after a first async publish: libnats makes its pending map then, and
    // js_PublishAsyncGetPendingList reads it unchecked (a publisher stopped before it published
    // anything crashed here).
    natsMsgList pending = {nullptr, 0};
    size_t taken_back = 0;
    if (conn_.js && published_ && js_PublishAsyncGetPendingList(&pending, conn_.js) == NATS_OK) {
        taken_back = static_cast<size_t>(pending.Count);
        natsMsgList_Destroy(&pending);
    }
    {
        // An ack libnats' delivery thread took out of its pending map before we took the rest
        // is not in that list, and its callback may not have run yet: libnats calls it after
        // unlocking, and natsConnection_Close does not join that thread. Wait for every such
        // callback: each batch in flight is now taken back, waiting for a resend (failed_),
        // or in a callback about to take mu_. (Until 0.6 stop returned first; the callback
        // then ran on a freed publisher.)
        // Bounded all the same: if libnats could not hand the pending list back (out of
        // memory), those batches end by their ack or their ack timeout; past that bound
        // (which only a libnats bookkeeping fault could reach) stop goes on.
        std::unique_lock<std::mutex> lk(mu_);
        const auto bound = Clock::now() + std::chrono::milliseconds(ack_timeout_ms_ + 1000);
        if (!cv_.wait_until(lk, bound, [&] { return in_flight_ <= failed_.size() + taken_back; }))
            count(errors);
    }
    conn_.close();
    {
        std::lock_guard<std::mutex> lk(mu_);
        count(unacked, in_flight_);
        for (const Failed &f : failed_) natsMsg_Destroy(f.msg);
        failed_.clear();
    }
    kvreg_wire_encoder_free(enc_);
    enc_ = nullptr;
    state_ = State::stopped;
    return KVREG_OK;
}

int Publisher::stat(uint32_t s, uint64_t *value) const noexcept {
    static const Stat map[] = {n_stats, batches, acked, duplicates, retries, in_flight, events_sent,
                               n_stats /* lost */, resyncs, skipped, unsent, unacked, errors, handled, refused};
    if (s == KVREG_NATS_PUB_STAT_EVENTS_LOST) {
        uint64_t now = dropped_at_start_;
        if (state_ != State::fresh) kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_DROPPED, &now);
        *value = now - dropped_at_start_;
        return KVREG_OK;
    }
    if (s >= sizeof map / sizeof map[0]) return KVREG_EINVAL;
    const Stat which = map[s];
    if (which >= n_stats) return KVREG_EINVAL; // 0 (also GCC's -Warray-bounds under ASan)
    *value = stats_[which].load(std::memory_order_relaxed);
    return KVREG_OK;
}

// ------------------------------------------------------------------------ ack callback
// Runs on libnats' thread for every asynchronous publish: success retires the batch; a
// failure (an error from the stream, or no ack within ACK_TIMEOUT_MS) hands it back to the
// sender thread, which resends it with the same Nats-Msg-Id.
void Publisher::on_ack(jsCtx *, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *self_) noexcept {
    auto *self = static_cast<Publisher *>(self_);
    const bool ok = pa && !pae;
    // Everything this callback does to the publisher (and its registry) happens under mu_,
    // the wake-ups included: stop() waits under mu_ until every callback libnats started has
    // run this block, so once it has, none still touches the publisher.
    {
        std::lock_guard<std::mutex> lk(self->mu_);
        if (ok) {
            if (pa->Duplicate) self->count(duplicates);
            self->count(acked);
            self->in_flight_--;
        } else {
            self->count(errors);
            try {
                // Refused for its size: the stream's max_msg_size is below it (lowered since
                // the publisher read it). Resent as is it would be refused for ever.
                self->add_failed(msg, batch_seq(msg), pae && pae->ErrCode == JSStreamMessageExceedsMaximumErr);
                msg = nullptr; // kept for a resend
            } catch (...) {
                self->in_flight_--; // out of memory: lost; the consumers see the gap
            }
            kvreg_registry_wakeup(self->reg_); // the sender thread resends it
        }
        self->stats_[in_flight].store(self->in_flight_, std::memory_order_relaxed);
        self->cv_.notify_all();
    }
    natsMsg_Destroy(msg); // NULL-safe; libnats' message, not ours
}

// ------------------------------------------------------------------------ the sender thread
void Publisher::add_failed(natsMsg *m, uint64_t seq, bool too_big) {
    const auto at = Clock::now() + std::chrono::milliseconds(retry_ms_);
    failed_.push_back(Failed{m, seq, at, too_big, false});
    if (failed_.size() == 1 || at < retry_at_) retry_at_ = at;
}

bool Publisher::empty_in_place(Failed &f) noexcept {
    size_t used = 0, len = 0;
    const uint8_t *payload = nullptr;
    const char *id = nullptr, *batch = nullptr;
    natsMsg *m = nullptr;
    if (kvreg_wire_encode(enc_, nullptr, 0, -1.0, &used, &payload, &len) != KVREG_OK ||
        natsMsgHeader_Get(f.msg, kMsgIdHeader, &id) != NATS_OK || natsMsgHeader_Get(f.msg, kBatchHeader, &batch) != NATS_OK ||
        natsMsg_Create(&m, natsMsg_GetSubject(f.msg), nullptr, reinterpret_cast<const char *>(payload),
                       static_cast<int>(len)) != NATS_OK ||
        natsMsgHeader_Set(m, kMsgIdHeader, id) != NATS_OK || natsMsgHeader_Set(m, kBatchHeader, batch) != NATS_OK) {
        natsMsg_Destroy(m);
        return false;
    }
    natsMsg_Destroy(f.msg);
    f.msg = m;
    f.too_big = false;
    f.emptied = true;
    count(refused);
    resync_due_ = true;
    return true;
}

void Publisher::give_up(Failed &f) noexcept {
    natsMsg_Destroy(f.msg);
    f.msg = nullptr;
    count(errors);
    resync_due_ = true; // consumers report the seq lost after their reorder bound; this repairs
    std::lock_guard<std::mutex> lk(mu_);
    in_flight_--;
    stats_[in_flight].store(in_flight_, std::memory_order_relaxed);
    cv_.notify_all();
}

// Each failed batch has its own turn, RETRY_MS after its last failure, and is resent on its
// own: one the connection refuses again (closed or its buffer full) waits for its next turn
// while the others go. A resend is the same natsMsg, so the stream's de-duplication by
// Nats-Msg-Id still holds. A batch that no longer fits (the stream refused it for its size,
// or the connection does after a reconnect to a server with a smaller max_payload) would be
// refused at every resend: it goes out with no events under the same seq and Nats-Msg-Id
// (should an earlier copy have been stored after all, the stream keeps that one and answers
// "duplicate"), so that no consumer waits for that seq, and the worker resyncs (run()), which
// puts its lost events back in batches that fit the limits as they are now. Refused again
// empty, nothing fits: it is given up (give_up()).
void Publisher::resend_failed() noexcept {
    std::vector<Failed> todo;
    auto now = Clock::now();
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (failed_.empty() || now < retry_at_) return;
        todo.swap(failed_);
    }
    // Oldest first, so that a consumer waiting for the first missing seq gets it first.
    std::sort(todo.begin(), todo.end(), [](const Failed &a, const Failed &b) { return a.seq < b.seq; });
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = static_cast<int64_t>(ack_timeout_ms_);
    size_t kept = 0; // todo[0, kept): not due, or refused again
    bool limit_read = false;
    for (Failed &f : todo) {
        if (f.retry_at <= now) {
            if (f.too_big) {
                // What the stream takes now, for the resync's batches: asked once a pass (a
                // request: up to its 5 s timeout), and not while disconnected.
                if (!limit_read && conn_.up())
                    stream_max_msg_size(conn_.js, stream_, stream_max_msg_);
                limit_read = true;
                if (f.emptied) { // refused with no events: nothing this stream can take
                    give_up(f);
                    continue;
                }
                empty_in_place(f);
            }
            count(retries);
            published_ = true;
            natsStatus st = js_PublishMsgAsync(conn_.js, &f.msg, &po);
            if (st == NATS_MAX_PAYLOAD && f.msg) {
                if (f.emptied) {
                    give_up(f);
                    continue;
                }
                if (empty_in_place(f)) st = js_PublishMsgAsync(conn_.js, &f.msg, &po);
            }
            if (st == NATS_OK) continue; // libnats owns it
            count(errors);
            now = Clock::now();
            f.retry_at = now + std::chrono::milliseconds(retry_ms_);
        }
        todo[kept++] = f;
    }
    todo.resize(kept); // smaller: no allocation
    std::lock_guard<std::mutex> lk(mu_);
    try {
        failed_.insert(failed_.end(), todo.begin(), todo.end());
    } catch (...) {
        for (const Failed &f : todo) natsMsg_Destroy(f.msg); // out of memory: lost
        in_flight_ -= todo.size();
        stats_[in_flight].store(in_flight_, std::memory_order_relaxed);
    }
    for (size_t i = 0; i < failed_.size(); i++)
        if (i == 0 || failed_[i].retry_at < retry_at_) retry_at_ = failed_[i].retry_at;
}

bool Publisher::wait_window() noexcept {
    std::unique_lock<std::mutex> lk(mu_);
    while (in_flight_ >= max_in_flight_) {
        if (!failed_.empty() && Clock::now() >= retry_at_) {
            lk.unlock();
            resend_failed();
            lk.lock();
            continue;
        }
        if (past_deadline()) return false;
        // Waiting for acks is no reason to look dead: the liveness key is put on time, or
        // replicas would remove the worker's blocks after its TTL (a stream refusing every
        // batch for a while kept this loop going without a heartbeat).
        lk.unlock();
        const int hb = heartbeat();
        lk.lock();
        if (in_flight_ < max_in_flight_) break;
        auto until = Clock::now() + std::chrono::milliseconds(retry_ms_);
        if (!failed_.empty()) until = std::min(until, retry_at_); // the next one due
        if (hb >= 0) until = std::min(until, Clock::now() + std::chrono::milliseconds(hb));
        if (stopping_.load(std::memory_order_acquire)) until = std::min(until, deadline_);
        cv_.wait_until(lk, until);
    }
    return true;
}

bool Publisher::batch_headers(BatchHeaders &out) const noexcept {
    BatchHeader h;
    h.worker = worker_;
    h.rank = static_cast<uint32_t>(rank_);
    h.instance = instance_;
    h.seq = seq_;
    h.format = static_cast<uint32_t>(format_);
    try {
        out.batch = format_header(h);
        out.id = std::to_string(worker_) + "-" + std::to_string(rank_) + "-" + std::to_string(instance_) +
                 "-" + std::to_string(seq_);
    } catch (...) {
        return false;
    }
    out.bytes = kHeadersFraming + header_field_bytes(kMsgIdHeader, out.id) +
                header_field_bytes(kBatchHeader, out.batch);
    return true;
}

bool Publisher::send_batch(const uint8_t *payload, size_t len, size_t n_events, const BatchHeaders &hdrs) noexcept {
    if (!wait_window()) return false;
    natsMsg *m = nullptr;
    if (natsMsg_Create(&m, subject_.c_str(), nullptr, reinterpret_cast<const char *>(payload),
                       static_cast<int>(len)) != NATS_OK ||
        natsMsgHeader_Set(m, kMsgIdHeader, hdrs.id.c_str()) != NATS_OK ||
        natsMsgHeader_Set(m, kBatchHeader, hdrs.batch.c_str()) != NATS_OK) {
        natsMsg_Destroy(m);
        count(errors); // out of memory: no seq used
        return true;
    }
    const uint64_t seq = seq_++;
    stats_[batches].store(seq_, std::memory_order_relaxed);
    count(events_sent, n_events);
    {
        std::lock_guard<std::mutex> lk(mu_);
        in_flight_++;
        stats_[in_flight].store(in_flight_, std::memory_order_relaxed);
    }
    jsPubOptions po;
    jsPubOptions_Init(&po); // no option that adds a header: hdrs.bytes is all of them
    po.MaxWait = static_cast<int64_t>(ack_timeout_ms_);
    published_ = true;
    const natsStatus sent = js_PublishMsgAsync(conn_.js, &m, &po);
    heartbeat(); // when due: a long publish (a resync's thousands of batches) is no outage
    if (sent != NATS_OK && m) {
        // Not even queued (the connection refused it): resend it like a failed ack.
        count(errors);
        std::lock_guard<std::mutex> lk(mu_);
        try {
            add_failed(m, seq);
        } catch (...) {
            natsMsg_Destroy(m);
            in_flight_--;
            stats_[in_flight].store(in_flight_, std::memory_order_relaxed);
        }
    }
    return true;
}

bool Publisher::publish(const kvreg_event *events, size_t n, size_t *done) noexcept {
    for (size_t off = 0; off < n;) {
        // The server's max_payload counts the headers too: the payload gets what they leave.
        // The limit is read again each time: a reconnect may have reached a server with another.
        BatchHeaders hdrs;
        if (!batch_headers(hdrs)) {
            count(errors); // out of memory
            return true;
        }
        const int64_t server_max = natsConnection_GetMaxPayload(conn_.nc);
        if (server_max > 0) max_payload_ = static_cast<uint64_t>(server_max);
        // The stream's max_msg_size counts the headers too, and may be the smaller limit.
        const uint64_t most = stream_max_msg_ && stream_max_msg_ < max_payload_ ? stream_max_msg_ : max_payload_;
        const uint64_t room = most > hdrs.bytes ? most - hdrs.bytes : 0;
        size_t used = 0, len = 0;
        const uint8_t *payload = nullptr;
        int rc = kvreg_wire_encode(enc_, events + off, n - off, -1.0, &used, &payload, &len);
        // Over the room: fewer events per batch until it fits.
        size_t limit = used;
        while (rc == KVREG_OK && len > room && limit > 1) {
            limit = (limit + 1) / 2;
            rc = kvreg_wire_encode(enc_, events + off, limit, -1.0, &used, &payload, &len);
        }
        if (rc == KVREG_ESTATE || rc == KVREG_EINVAL || (rc == KVREG_OK && len > room)) {
            // An event the format cannot carry (or one alone larger than max_payload less the
            // headers): never sent half-right, no seq used.
            count(skipped);
            off++;
            continue;
        }
        if (rc != KVREG_OK || used == 0) {
            count(errors);
            return true;
        }
        if (!send_batch(payload, len, used, hdrs)) {
            if (done) *done = off;
            return false;
        }
        off += used;
    }
    return true;
}

bool Publisher::resync() noexcept {
    kvreg_snapshot *snap = nullptr;
    kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_DROPPED, &last_dropped_);
    if (kvreg_registry_snapshot(reg_, &snap) != KVREG_OK) {
        count(errors); // out of memory: the consumers keep the gap they were told about
        return true;
    }
    count(resyncs);
    kvreg_event cleared;
    std::memset(&cleared, 0, sizeof cleared);
    cleared.kind = KVREG_EVENT_CLEARED;
    cleared.event_id = KVREG_EVENT_ID_SNAPSHOT;
    const kvreg_event *evs = nullptr;
    size_t n = 0;
    kvreg_snapshot_events(snap, &evs, &n);
    const bool ok = publish(&cleared, 1) && publish(evs, n);
    next_event_id_ = kvreg_snapshot_position(snap);
    kvreg_snapshot_free(snap);
    return ok;
}

// A plain (core) publish into the bucket's subject: the stream stores it like a kvStore_Put,
// but the sender thread never waits for an answer (a server that is away delays nothing).
//
// A key that went unrefreshed for its TTL is gone, and replicas then removed the worker's
// blocks (consumer.cpp, check_liveness). A worker that is back sends them again only with
// events about them, and an idle one sends none: so the worker resyncs (run()) when its key
// may have expired:
//   - the heartbeats sent while connected (libnats holds the others until it reconnects)
//     are about a TTL apart (alive_out(): a sender that could not run; it heartbeats while
//     it waits for acks and while it publishes, so nothing else makes such a gap), or
//   - the connection reconnected since the last one: how long it was gone is not known (one
//     that hung without closing sent nothing for up to two pings, start() sets them to TTL / 2).
int Publisher::heartbeat() noexcept {
    if (hb_subject_.empty()) return -1;
    const auto now = Clock::now();
    if (now >= next_hb_) {
        alive_out(now);
        if (natsConnection_PublishString(conn_.nc, hb_subject_.c_str(), hb_value_.c_str()) != NATS_OK)
            count(errors);
        next_hb_ = now + std::chrono::milliseconds(hb_ms_);
    }
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_hb_ - now).count()) + 1;
}

void Publisher::alive_out(Clock::time_point now) noexcept {
    if (hb_subject_.empty() || !conn_.up()) return;
    const uint64_t n = conn_.reconnects();
    // The gap that may have let the key expire: the TTL less a margin of up to one heartbeat
    // period for the way, and always more than a period (heartbeats are a period apart).
    // With a period at or past the TTL the key lapses between any two heartbeats anyway:
    // only reconnects count then.
    bool gap = false;
    if (key_ttl_ms_ > hb_ms_) {
        const uint64_t margin = std::min(hb_ms_, (key_ttl_ms_ - hb_ms_) / 2);
        gap = now - last_out_ >= std::chrono::milliseconds(key_ttl_ms_ - margin);
    }
    if (out_seen_ && key_ttl_ms_ && (n != out_reconnects_ || gap)) resync_due_ = true;
    last_out_ = now;
    out_seen_ = true;
    out_reconnects_ = n;
}

void Publisher::run() noexcept {
    std::vector<kvreg_event> events;
    try {
        events.resize(kPollBatch);
    } catch (...) {
        return;
    }
    for (;;) {
        const bool stopping = stopping_.load(std::memory_order_acquire);
        resend_failed();
        if (!wait_window()) break;
        if (resync_due_) { // a batch went out emptied, or the liveness key may have expired
            resync_due_ = false;
            if (!resync()) break;
        }
        int timeout = stopping ? 0 : -1;
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (!failed_.empty() && !stopping) {
                const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(retry_at_ - Clock::now()).count();
                timeout = static_cast<int>(std::clamp<long long>(ms + 1, 0, 60000));
            }
        }
        const int hb = heartbeat();
        if (hb >= 0 && (timeout < 0 || hb < timeout)) timeout = stopping ? 0 : hb;
        size_t n = 0;
        reg_->log.owner_poll_wait(events.data(), events.size(), &n, timeout);
        bool cut = false;
        size_t done = n; // handled; past it stop's bound cut the rest off: unsent
        // Events of ids already covered by a snapshot are done; a jump in ids means the
        // registry's queue overflowed: resync first (the snapshot covers everything polled).
        for (size_t i = 0; i < n && !cut;) {
            const uint64_t id = events[i].event_id;
            if (id < next_event_id_) {
                i++;
                continue;
            }
            if (id > next_event_id_) {
                cut = !resync();
                if (cut) done = i;
                if (next_event_id_ <= id) next_event_id_ = id; // the snapshot failed: go on
                continue;
            }
            size_t j = i + 1;
            while (j < n && events[j].event_id == id + (j - i)) j++;
            size_t sent = 0;
            cut = !publish(events.data() + i, j - i, &sent);
            if (cut) done = i + sent;
            next_event_id_ = id + (j - i);
            i = j;
        }
        count(handled, done);
        count(unsent, n - done); // taken from the queue, never in a batch (until 0.6: not counted)
        // Drops at the tail of the stream (no later event shows the gap).
        uint64_t dropped = last_dropped_;
        kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_DROPPED, &dropped);
        if (!cut && dropped != last_dropped_ && n < events.size()) cut = !resync();
        if (cut || past_deadline()) break;
        if (stopping && n == 0) {
            // Queue drained: wait for the last acks (or failures to resend).
            std::unique_lock<std::mutex> lk(mu_);
            if (in_flight_ == 0) break;
            cv_.wait_until(lk, failed_.empty() ? deadline_ : std::min(deadline_, retry_at_));
            continue;
        }
        if (n && n < events.size() && batch_us_ && !stopping)
            std::this_thread::sleep_for(std::chrono::microseconds(batch_us_));
    }
    uint64_t left = 0;
    kvreg_registry_stat(reg_, KVREG_STAT_EVENTS_QUEUED, &left);
    count(unsent, left);
}

} // namespace kvreg::nats
