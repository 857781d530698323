// The NATS consumer: durable setup, fetch loop, per-worker ordering (see consumer.hpp).
#include "nats/consumer.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace kvreg::nats {

Consumer::~Consumer() {
    // Held messages are not acknowledged: the stream redelivers them to this durable's next run.
    for (auto &kv : workers_) drop_held(kv.second, false);
    if (sub_) natsSubscription_Destroy(sub_);
    // Acks are published without waiting: send the last ones, so that a durable resumed later
    // starts after what this run applied (bounded; a lost ack only means a redelivery, which
    // the index's seq check does not apply twice).
    if (conn_.nc) natsConnection_FlushTimeout(conn_.nc, 1000);
    conn_.close();
    for (auto *d : decoders_) kvreg_wire_decoder_free(d);
}

int Consumer::set(uint32_t option, uint64_t v) noexcept {
    if (started_) return KVREG_ESTATE;
    auto in = [&](uint64_t lo, uint64_t hi, uint64_t &dst) {
        if (v < lo || v > hi) return KVREG_EINVAL;
        dst = v;
        return KVREG_OK;
    };
    switch (option) {
    case KVREG_NATS_CON_OPT_FETCH_BATCH: return in(1, 65536, fetch_batch_);
    case KVREG_NATS_CON_OPT_ACK_WAIT_MS: return in(100, UINT64_MAX / 1000000, ack_wait_ms_);
    case KVREG_NATS_CON_OPT_MAX_ACK_PENDING: return in(1, INT64_MAX, max_ack_pending_);
    case KVREG_NATS_CON_OPT_REORDER_WINDOW: return in(1, UINT32_MAX, reorder_window_);
    case KVREG_NATS_CON_OPT_REORDER_MS: return in(0, 3600000, reorder_ms_);
    case KVREG_NATS_CON_OPT_MAX_MSG_BYTES: return in(1, INT32_MAX, max_msg_bytes_);
    case KVREG_NATS_CON_OPT_RESUME: return in(0, 1, resume_);
    case KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS: return in(1, 3600000, connect_timeout_ms_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS: return in(0, UINT64_MAX, snap_events_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_MS: return in(0, UINT64_MAX / 1000000, snap_ms_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_KEEP: return in(1, 16, snap_keep_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_PURGE: return in(0, 1, snap_purge_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_CHUNK_BYTES: return in(256, 16u << 20, snap_chunk_);
    case KVREG_NATS_CON_OPT_RESTORE: return in(0, 1, restore_);
    case KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS: return in(10, 3600000, liveness_check_ms_);
    default: return KVREG_EINVAL;
    }
}

int Consumer::set_string(uint32_t option, const char *value) {
    if (started_) return KVREG_ESTATE;
    if (option == KVREG_NATS_FILTER) {
        filter_ = value ? value : "";
        return KVREG_OK;
    }
    if (!value || !*value) return KVREG_EINVAL;
    switch (option) {
    case KVREG_NATS_URL: url_ = value; return KVREG_OK;
    case KVREG_NATS_STREAM: stream_ = value; return KVREG_OK;
    case KVREG_NATS_DURABLE: durable_ = value; return KVREG_OK;
    case KVREG_NATS_SNAPSHOT_BUCKET: snap_bucket_ = value; return KVREG_OK;
    case KVREG_NATS_SNAPSHOT_NAME: snap_name_ = value; return KVREG_OK;
    case KVREG_NATS_LIVENESS_BUCKET: liveness_bucket_ = value; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Consumer::set_notice_fn(kvreg_nats_notice_fn fn, void *user) noexcept {
    if (started_) return KVREG_ESTATE;
    notice_fn_ = fn;
    notice_user_ = user;
    return KVREG_OK;
}

int Consumer::start() {
    if (started_) return KVREG_ESTATE;
    if (!valid_token(stream_) || !valid_token(durable_)) return KVREG_EINVAL;
    for (uint32_t f = 1; f <= 4; f++) {
        const int rc = kvreg_wire_decoder_new(&decoders_[f], f);
        if (rc != KVREG_OK) return rc;
    }
    std::string err;
    if (!conn_.open(url_, connect_timeout_ms_, nullptr) ||
        !ensure_stream(conn_.js, StreamSpec{stream_, "", 0, 0}, false, err)) {
        conn_.close();
        return KVREG_EPROTO;
    }
    // Without a snapshot to restore, the index starts empty and must see the whole stream:
    // the durable is made again from the first message unless asked to resume.
    if (!resume_) js_DeleteConsumer(conn_.js, stream_.c_str(), durable_.c_str(), nullptr, nullptr);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable_.c_str();
    cc.DeliverPolicy = js_DeliverAll;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = static_cast<int64_t>(ack_wait_ms_) * 1000000;
    cc.MaxAckPending = static_cast<int64_t>(max_ack_pending_);
    cc.MaxDeliver = -1;
    if (!filter_.empty()) cc.FilterSubject = filter_.c_str();
    jsConsumerInfo *ci = nullptr;
    if (js_AddConsumer(&ci, conn_.js, stream_.c_str(), &cc, nullptr, nullptr) != NATS_OK &&
        js_GetConsumerInfo(&ci, conn_.js, stream_.c_str(), durable_.c_str(), nullptr, nullptr) != NATS_OK) {
        conn_.close();
        return KVREG_EPROTO;
    }
    jsConsumerInfo_Destroy(ci);
    // Pull requests are ours (see fetch()): a plain subscription on an inbox receives the
    // messages, with no limit on what waits in it (the requests bound that).
    natsInbox *inbox = nullptr;
    if (natsInbox_Create(&inbox) != NATS_OK) {
        conn_.close();
        return KVREG_ENOMEM;
    }
    inbox_ = inbox;
    natsInbox_Destroy(inbox);
    next_subject_ = "$JS.API.CONSUMER.MSG.NEXT." + stream_ + "." + durable_;
    if (natsConnection_SubscribeSync(&sub_, conn_.nc, inbox_.c_str()) != NATS_OK ||
        natsSubscription_SetPendingLimits(sub_, -1, -1) != NATS_OK) {
        if (sub_) natsSubscription_Destroy(sub_);
        sub_ = nullptr;
        conn_.close();
        return KVREG_EPROTO;
    }
    started_ = true;
    return KVREG_OK;
}

int Consumer::run(int timeout_ms) {
    if (!started_) return KVREG_ESTATE;
    if (timeout_ms < -1) return KVREG_EINVAL;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    for (bool first = true;; first = false) {
        if (stop_.exchange(false, std::memory_order_acq_rel)) break;
        int64_t wait = 100;
        if (timeout_ms >= 0) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0 && !first) break;
            wait = std::max<int64_t>(1, std::min<int64_t>(wait, left));
            if (timeout_ms == 0) wait = 20; // one round trip for what is ready
        }
        if (!fetch(wait)) {
            // Server away or restarting: libnats reconnects; try again shortly.
            count(fetch_errors);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (n_held_) check_held_timeouts();
        if (timeout_ms == 0) break;
    }
    return KVREG_OK;
}

// One pull request ({"batch": N, "expires": wait}) and its answer: messages go to handle() one
// by one as they come (late ones of an earlier request too), until N came or the server says
// the request is over (404 no messages, 408 expired) or wait passed. libnats 3.4's Fetch is
// not used: after a reconnect it can collect more messages than the batch it was given room for.
bool Consumer::fetch(int64_t wait_ms) {
    char req[96];
    std::snprintf(req, sizeof req, "{\"batch\":%" PRIu64 ",\"expires\":%" PRId64 "}", fetch_batch_,
                  wait_ms > 10 ? (wait_ms - 5) * 1000000 : wait_ms * 1000000);
    if (natsConnection_PublishRequestString(conn_.nc, next_subject_.c_str(), inbox_.c_str(), req) != NATS_OK)
        return false;
    const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    for (uint64_t got = 0; got < fetch_batch_;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        natsMsg *m = nullptr;
        const natsStatus s = natsSubscription_NextMsg(&m, sub_, left > 0 ? left : 1);
        if (s == NATS_TIMEOUT) return true;
        if (s != NATS_OK) return false;
        const char *status = nullptr;
        if (natsMsg_GetDataLength(m) == 0 && natsMsgHeader_Get(m, "Status", &status) == NATS_OK) {
            const bool over = status && status[0] != '1'; // 100 heartbeat; 404, 408, 409: over
            natsMsg_Destroy(m);
            if (over) return true;
            continue;
        }
        got++;
        handle(m);
        if (left <= 0) return true;
    }
    return true;
}

void Consumer::reply(natsMsg *m, const char *what) noexcept {
    const char *r = natsMsg_GetReply(m);
    if (r && *r) natsConnection_PublishString(conn_.nc, r, what);
}

// The stream sequence from the ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>...
// (9 tokens), or with domain and account hash after $JS.ACK (12 tokens or more).
static uint64_t stream_seq_of(const char *reply) noexcept {
    if (!reply) return 0;
    const char *tok[16];
    int n = 0;
    for (const char *p = reply; *p && n < 16; n++) {
        tok[n] = p;
        const char *dot = std::strchr(p, '.');
        if (!dot) {
            n++;
            break;
        }
        p = dot + 1;
    }
    const int at = n == 9 ? 5 : n >= 12 ? 7 : -1;
    return at < 0 ? 0 : std::strtoull(tok[at], nullptr, 10);
}

void Consumer::notice(uint32_t kind, const Key *k, uint64_t instance, uint64_t first, uint64_t last,
                      uint64_t n, bool has_seq, natsMsg *m, const char *text) noexcept {
    if (!notice_fn_) return;
    kvreg_nats_notice nt = {};
    nt.kind = kind;
    if (k) {
        nt.worker_id = k->first;
        nt.dp_rank = k->second;
    }
    nt.instance = instance;
    nt.first = first;
    nt.last = last;
    nt.count = n;
    nt.has_seq = has_seq ? 1u : 0u;
    nt.subject = "";
    nt.message = text;
    if (m) {
        const char *subj = natsMsg_GetSubject(m);
        nt.subject = subj ? subj : "";
        nt.stream_seq = stream_seq_of(natsMsg_GetReply(m));
    }
    notice_fn_(&nt, notice_user_);
}

void Consumer::handle(natsMsg *m) {
    count(messages);
    const int len = natsMsg_GetDataLength(m);
    const char *hv = nullptr;
    BatchHeader h;
    if (len < 0 || static_cast<uint64_t>(len) > max_msg_bytes_) {
        char text[128];
        std::snprintf(text, sizeof text, "message of %d bytes is over the limit of %" PRIu64 " bytes", len,
                      max_msg_bytes_);
        count(malformed);
        notice(KVREG_NATS_NOTICE_MALFORMED, nullptr, 0, 0, 0, 0, false, m, text);
        reply(m, "+TERM");
        natsMsg_Destroy(m);
        return;
    }
    if (natsMsgHeader_Get(m, kBatchHeader, &hv) != NATS_OK || !parse_header(hv, h)) {
        count(malformed);
        notice(KVREG_NATS_NOTICE_MALFORMED, nullptr, 0, 0, 0, 0, false, m,
               "no valid Kvreg-Batch header (not a kvreg batch)");
        reply(m, "+TERM");
        natsMsg_Destroy(m);
        return;
    }
    const Key k{h.worker, h.rank};
    auto found = workers_.find(k);
    if (found == workers_.end()) {
        // First batch seen of this worker. Reading from the stream's start, seq 0 is expected:
        // a batch resent after a server restart can be stored after later ones, so a later
        // seq is held like any out-of-order one (if the stream's age limit dropped the first
        // ones, the reorder bound turns them into a LOSS). Resuming, the index already has
        // the earlier batches: this one is the worker's next.
        found = workers_.emplace(k, Worker{}).first;
        found->second.instance = h.instance;
        found->second.next = resume_ ? h.seq : 0;
    }
    Worker &w = found->second;
    if (h.instance < w.instance) {
        count(stale);
        reply(m, "+ACK");
        natsMsg_Destroy(m);
        return;
    }
    if (h.instance > w.instance) {
        count(resets);
        notice(KVREG_NATS_NOTICE_RESET, &k, h.instance, w.instance, h.instance, 0, true, m,
               "the worker restarted: its entries were dropped");
        drop_held(w, true); // of a run that is over: nothing to apply
        w.instance = h.instance;
        w.next = 0;
        kvreg_index_clear_worker(idx_, h.worker, h.rank, 0);
    }
    if (h.seq < w.next) {
        count(duplicates);
        reply(m, "+ACK");
        natsMsg_Destroy(m);
        return;
    }
    if (h.seq > w.next) {
        auto it = w.held.find(h.seq);
        if (it != w.held.end()) { // a redelivery of one we hold: keep the newer delivery
            natsMsg_Destroy(it->second);
            it->second = m;
            return;
        }
        if (w.held.empty()) w.held_since = Clock::now();
        try {
            w.held.emplace(h.seq, m);
        } catch (...) {
            natsMsg_Destroy(m); // not acknowledged: redelivered later
            throw;
        }
        n_held_++;
        count(held);
        if (w.held.size() > reorder_window_) give_up(k, w);
        return;
    }
    apply(k, w, m, h);
    drain(k, w);
}

void Consumer::apply(const Key &k, Worker &w, natsMsg *m, const BatchHeader &h) {
    const kvreg_wire_event *evs = nullptr;
    size_t n = 0, off = 0;
    kvreg_wire_decoder *dec = decoders_[h.format];
    int rc = kvreg_wire_decode(dec, natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m)), &evs,
                               &n, &off);
    if (rc != KVREG_OK) {
        char text[256];
        std::snprintf(text, sizeof text, "payload does not decode at byte %zu: %s", off,
                      kvreg_wire_decoder_error(dec));
        count(malformed);
        notice(KVREG_NATS_NOTICE_MALFORMED, &k, h.instance, h.seq, h.seq, 0, true, m, text);
        evs = nullptr;
        n = 0; // the seq is still used: the index moves past it
    }
    kvreg_index_apply_info info;
    rc = kvreg_index_apply(idx_, h.worker, h.rank, h.seq, evs, n, &info);
    if (rc != KVREG_OK) {
        char text[128];
        std::snprintf(text, sizeof text, "kvreg_index_apply: %s", kvreg_strerror(rc));
        notice(KVREG_NATS_NOTICE_APPLY, &k, h.instance, h.seq, h.seq, static_cast<uint64_t>(-static_cast<int64_t>(rc)),
               true, m, text);
    }
    count(batches);
    count(events, static_cast<int64_t>(n));
    w.next = h.seq + 1;
    reply(m, "+ACK");
    natsMsg_Destroy(m);
}

void Consumer::drain(const Key &k, Worker &w) {
    while (!w.held.empty() && w.held.begin()->first == w.next) {
        natsMsg *m = w.held.begin()->second;
        w.held.erase(w.held.begin());
        n_held_--;
        count(held, -1);
        const char *hv = nullptr;
        BatchHeader h;
        natsMsgHeader_Get(m, kBatchHeader, &hv);
        parse_header(hv, h); // it parsed when it was held
        apply(k, w, m, h);
    }
    if (!w.held.empty()) w.held_since = Clock::now();
}

void Consumer::give_up(const Key &k, Worker &w) {
    const uint64_t first = w.next, last = w.held.begin()->first - 1;
    count(lost, static_cast<int64_t>(last - first + 1));
    notice(KVREG_NATS_NOTICE_LOSS, &k, w.instance, first, last, last - first + 1, true, nullptr,
           "batches never arrived within the reorder window");
    w.next = last + 1;
    drain(k, w);
}

void Consumer::drop_held(Worker &w, bool ack) noexcept {
    for (auto &kv : w.held) {
        if (ack) reply(kv.second, "+ACK");
        natsMsg_Destroy(kv.second);
    }
    n_held_ -= w.held.size();
    count(held, -static_cast<int64_t>(w.held.size()));
    w.held.clear();
}

void Consumer::check_held_timeouts() {
    const auto now = Clock::now();
    for (auto &kv : workers_)
        if (!kv.second.held.empty() && now - kv.second.held_since >= std::chrono::milliseconds(reorder_ms_))
            give_up(kv.first, kv.second);
}

int Consumer::stat(uint32_t s, uint64_t *value) const noexcept {
    if (s == 0 || s > n_stats) return KVREG_EINVAL;
    *value = stats_[s - 1].load(std::memory_order_relaxed);
    return KVREG_OK;
}

int Consumer::worker(uint64_t worker_id, uint32_t rank, uint64_t *instance, uint64_t *next) const noexcept {
    auto it = workers_.find(Key{worker_id, rank});
    if (it == workers_.end()) return KVREG_ENOENT;
    if (instance) *instance = it->second.instance;
    if (next) *next = it->second.next;
    return KVREG_OK;
}

int Consumer::snapshot(uint64_t *) {
    if (!started_ || snap_bucket_.empty()) return KVREG_ESTATE;
    return KVREG_ENOTSUP;
}

} // namespace kvreg::nats
