// The NATS consumer: durable setup, fetch loop, per-worker ordering (see consumer.hpp).
#include "nats/consumer.hpp"

#include <algorithm>
#include <vector>

#include "nats/objstore.hpp"
#include "nats/snapshot.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace kvreg::nats {

// How long past its expiry a pull request whose end never came still counts as open (fetch()).
constexpr int64_t kRequestGraceMs = 50;

Consumer::~Consumer() {
    // Held messages are not acknowledged: the stream redelivers them to this durable's next run.
    for (auto &kv : workers_) drop_held(kv.second, false);
    // The last fetch's messages may still be arriving. Unsubscribe first: the flush below then
    // returns once the server's answer has come after the last of them, so the connection is
    // not closed in the middle of one (libnats 3.4 leaks the message a close interrupts: its
    // parser's buffer for a payload split across reads). Acks are published without waiting:
    // the flush also sends the last ones, so that a durable resumed later starts after what
    // this run applied (bounded; a lost ack only means a redelivery, which the index's seq
    // check does not apply twice).
    if (sub_) natsSubscription_Unsubscribe(sub_);
    if (conn_.nc) natsConnection_FlushTimeout(conn_.nc, 1000);
    release();
}

void Consumer::release() noexcept {
    // Stop the connection's reader before the subscription goes (Conn::stop says why).
    conn_.stop();
    if (sub_) natsSubscription_Destroy(sub_);
    sub_ = nullptr;
    api_.close();
    if (kv_) kvStore_Destroy(kv_);
    kv_ = nullptr;
    if (live_js_) jsCtx_Destroy(live_js_);
    live_js_ = nullptr;
    conn_.close();
    for (auto *&d : decoders_) {
        kvreg_wire_decoder_free(d);
        d = nullptr;
    }
}

int Consumer::set(uint32_t option, uint64_t v) noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    if (started_) return KVREG_ESTATE;
    auto in = [&](uint64_t lo, uint64_t hi, uint64_t &dst) {
        if (v < lo || v > hi) return KVREG_EINVAL;
        dst = v;
        return KVREG_OK;
    };
    switch (option) {
    case KVREG_NATS_CON_OPT_FETCH_BATCH: return in(1, 65536, fetch_batch_);
    case KVREG_NATS_CON_OPT_ACK_WAIT_MS: return in(100, kMaxMillis, ack_wait_ms_);
    case KVREG_NATS_CON_OPT_MAX_ACK_PENDING: return in(1, INT64_MAX, max_ack_pending_);
    case KVREG_NATS_CON_OPT_REORDER_WINDOW: return in(1, UINT32_MAX, reorder_window_);
    case KVREG_NATS_CON_OPT_REORDER_MS: return in(0, 3600000, reorder_ms_);
    case KVREG_NATS_CON_OPT_MAX_MSG_BYTES: return in(1, INT32_MAX, max_msg_bytes_);
    case KVREG_NATS_CON_OPT_RESUME: return in(0, 1, resume_);
    case KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS: return in(1, 3600000, connect_timeout_ms_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS: return in(0, UINT64_MAX, snap_events_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_MS: return in(0, kMaxMillis, snap_ms_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_KEEP: return in(1, 16, snap_keep_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_PURGE: return in(0, 1, snap_purge_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_CHUNK_BYTES: return in(256, 16u << 20, snap_chunk_);
    case KVREG_NATS_CON_OPT_RESTORE: return in(0, 1, restore_);
    case KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS: return in(10, 3600000, liveness_check_ms_);
    case KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS: return in(0, kMaxMillis, snap_orphan_ms_);
    case KVREG_NATS_CON_OPT_MAX_HELD_BYTES: return in(1, UINT64_MAX, max_held_bytes_);
    default: return KVREG_EINVAL;
    }
}

int Consumer::set_string(uint32_t option, const char *value) {
    std::lock_guard<std::mutex> lk(opts_mu_);
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

int Consumer::get(uint32_t option, uint64_t *v) const noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    switch (option) {
    case KVREG_NATS_CON_OPT_FETCH_BATCH: *v = fetch_batch_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_ACK_WAIT_MS: *v = ack_wait_ms_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_MAX_ACK_PENDING: *v = max_ack_pending_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_REORDER_WINDOW: *v = reorder_window_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_REORDER_MS: *v = reorder_ms_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_MAX_MSG_BYTES: *v = max_msg_bytes_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_RESUME: *v = resume_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS: *v = connect_timeout_ms_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS: *v = snap_events_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_SNAPSHOT_MS: *v = snap_ms_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_SNAPSHOT_KEEP: *v = snap_keep_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_SNAPSHOT_PURGE: *v = snap_purge_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_SNAPSHOT_CHUNK_BYTES: *v = snap_chunk_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_RESTORE: *v = restore_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS: *v = liveness_check_ms_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS: *v = snap_orphan_ms_; return KVREG_OK;
    case KVREG_NATS_CON_OPT_MAX_HELD_BYTES: *v = max_held_bytes_; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Consumer::get_string(uint32_t option, std::string &out) const {
    std::lock_guard<std::mutex> lk(opts_mu_);
    const std::string *s = nullptr;
    switch (option) {
    case KVREG_NATS_URL: s = &url_; break;
    case KVREG_NATS_STREAM: s = &stream_; break;
    case KVREG_NATS_DURABLE: s = &durable_; break;
    case KVREG_NATS_SNAPSHOT_NAME: s = snap_name_.empty() ? &stream_ : &snap_name_; break; // its default
    case KVREG_NATS_FILTER: // NULL and "" both mean none (every message of the stream)
        if (filter_.empty()) return KVREG_ENOENT;
        s = &filter_;
        break;
    case KVREG_NATS_SNAPSHOT_BUCKET:
        if (snap_bucket_.empty()) return KVREG_ENOENT; // set_string refuses "": empty is "none"
        s = &snap_bucket_;
        break;
    case KVREG_NATS_LIVENESS_BUCKET:
        if (liveness_bucket_.empty()) return KVREG_ENOENT;
        s = &liveness_bucket_;
        break;
    default: return KVREG_EINVAL;
    }
    out = *s;
    return KVREG_OK;
}

int Consumer::set_notice_fn(kvreg_nats_notice_fn fn, void *user) noexcept {
    if (started_) return KVREG_ESTATE;
    notice_fn_ = fn;
    notice_user_ = user;
    return KVREG_OK;
}

int Consumer::start() {
    if (started_) return KVREG_ESTATE;
    // START_US on every way out; the restore's parts are added as they happen.
    struct StartTimer {
        std::atomic<uint64_t> &out;
        Clock::time_point t0 = Clock::now();
        ~StartTimer() { out.store(micros_since(t0), std::memory_order_relaxed); }
    } timer{stats_[start_us]};
    stats_[restore_read_us].store(0, std::memory_order_relaxed);
    stats_[restore_load_us].store(0, std::memory_order_relaxed);
    durable_answers_ = 0; // a start() that failed may have left some
    durable_state_ = DurableState::kNone;
    if (snap_name_.empty()) {
        std::string name = stream_;
        std::lock_guard<std::mutex> lk(opts_mu_); // a getter may read snap_name_ now
        snap_name_.swap(name);
    }
    if (!valid_token(stream_) || !valid_token(durable_) ||
        (!liveness_bucket_.empty() && !valid_bucket(liveness_bucket_)) ||
        (!snap_bucket_.empty() && !valid_bucket(snap_bucket_)))
        return KVREG_EINVAL;
    // Every way out of a start() that fails releases what it made (release()): the consumer
    // can be started again.
    const auto fail = [this](int rc) noexcept {
        release();
        return rc;
    };
    for (uint32_t f = 1; f <= 4; f++) {
        const int rc = kvreg_wire_decoder_new(&decoders_[f], f);
        if (rc != KVREG_OK) return fail(rc);
    }
    std::string err;
    // With liveness, a connection that hangs without closing ends after two unanswered pings
    // a check period apart, rather than libnats' default 2 min.
    const uint64_t ping_ms = liveness_bucket_.empty() ? 0 : std::clamp<uint64_t>(liveness_check_ms_, 100, 60000);
    uint64_t known = 0;
    kvreg_index_stat(idx_, KVREG_INDEX_STAT_WORKERS, &known);
    const bool restoring = !resume_ && restore_ && !snap_bucket_.empty() && known == 0;
    // A restore checks the stream together with its snapshot slots (restore(): one round trip
    // for all), after the liveness bucket below is made but before the index is touched.
    if (!conn_.open(url_, connect_timeout_ms_, nullptr, ping_ms) ||
        (!restoring && !ensure_stream(conn_.js, StreamSpec{stream_, "", 0, 0}, false, err)))
        return fail(KVREG_EPROTO);
    if (!liveness_bucket_.empty()) {
        // Lookups through a context of their own, which waits at most a check period (at least
        // 100 ms, at most the 5 s of the others) for an answer: a connection that hangs held
        // run() for the whole request timeout at each lookup.
        jsOptions jo;
        jsOptions_Init(&jo);
        jo.Wait = static_cast<int64_t>(std::clamp<uint64_t>(liveness_check_ms_, 100, 5000));
        if (!ensure_kv_bucket(conn_.js, liveness_bucket_, 5000) ||
            natsConnection_JetStream(&live_js_, conn_.nc, &jo) != NATS_OK ||
            js_KeyValue(&kv_, live_js_, liveness_bucket_.c_str()) != NATS_OK || !kv_ttl_ms(kv_, liveness_ttl_ms_))
            return fail(KVREG_EPROTO);
        next_liveness_ = Clock::now() + std::chrono::milliseconds(liveness_check_ms_);
    }
    // Pull requests are ours (see fetch()): a plain subscription on an inbox receives the
    // messages, with no limit on what waits in it (the requests bound that). Before them it
    // receives the answers about the durable (send_durable).
    natsInbox *inbox = nullptr;
    if (natsInbox_Create(&inbox) != NATS_OK) return fail(KVREG_ENOMEM);
    try {
        inbox_ = inbox;
        next_subject_ = "$JS.API.CONSUMER.MSG.NEXT." + stream_ + "." + durable_;
    } catch (...) {
        natsInbox_Destroy(inbox);
        fail(KVREG_ENOMEM);
        throw;
    }
    natsInbox_Destroy(inbox);
    if (natsConnection_SubscribeSync(&sub_, conn_.nc, inbox_.c_str()) != NATS_OK ||
        natsSubscription_SetPendingLimits(sub_, -1, -1) != NATS_OK ||
        (!snap_bucket_.empty() && !api_.open(conn_.nc, inbox_))) // snapshots' requests only
        return fail(KVREG_EPROTO);
    // The index starts from the newest valid snapshot (the durable then starts after the
    // sequence it covers) or empty, and then must see the whole stream: unless asked to
    // resume, the durable is made again (a restore has sent its requests already, for the
    // sequence its snapshot names: make_durable then finds them answered).
    try {
        uint64_t start_seq = 0;
        bool bucket_seen = false;
        if (restoring && restore(start_seq, bucket_seen) != KVREG_OK) return fail(KVREG_EPROTO);
        // The bucket the snapshots go to, made if need be (not asked again when the restore
        // read an object's info from it).
        if (!snap_bucket_.empty() && !bucket_seen && !ObjectStore(conn_.nc, conn_.js, snap_bucket_).ensure())
            return fail(KVREG_EPROTO);
        if (!make_durable(start_seq)) {
            // As before this was asynchronous: a durable that exists (resuming, with other
            // settings; or made by another replica of the same name) is taken as it is.
            jsConsumerInfo *ci = nullptr;
            if (js_GetConsumerInfo(&ci, conn_.js, stream_.c_str(), durable_.c_str(), nullptr, nullptr) != NATS_OK)
                return fail(KVREG_EPROTO);
            jsConsumerInfo_Destroy(ci);
        }
    } catch (...) {
        fail(KVREG_ENOMEM);
        throw;
    }
    started_ = true;
    last_snap_ = Clock::now();
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
        if (!fetch(wait, timeout_ms == 0)) {
            // Server away or restarting: libnats reconnects; try again shortly.
            count(fetch_errors);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (n_held_) check_held_timeouts();
        if (kv_ && liveness_ttl_ms_ && Clock::now() >= next_liveness_) check_liveness();
        if (events_since_snap_ && !snap_bucket_.empty() && conn_.up()) maybe_snapshot(); // else when it is back
        if (timeout_ms == 0) break;
    }
    return KVREG_OK;
}

// One pull request ({"batch": N, "expires": wait}) and its answer: messages go to handle() one
// by one as they come (late ones of an earlier request too), until N came or the server says
// the request is over (404 no messages, 408 expired) or wait passed. With no_wait (run(0):
// what is ready, now) the server answers at once: the messages it has, up to N, then 404 or
// 408, rather than holding the request open until it expires. libnats 3.4's Fetch is not
// used: after a reconnect it can collect more messages than the batch it was given room for.
static uint64_t stream_seq_of(const char *reply) noexcept; // below

bool Consumer::fetch(int64_t wait_ms, bool no_wait) {
    const auto now = Clock::now();
    int pending = 0, pending_bytes = 0;
    if ((!request_open_ || now >= request_until_) &&
        !(natsSubscription_GetPending(sub_, &pending, &pending_bytes) == NATS_OK && pending > 0)) {
        // Only connected: a request sent while the server is away waits in libnats' reconnect
        // buffer, and every one sent meanwhile was answered at once when it came back (8,000
        // messages within 250 ms of a 6 s outage).
        if (!conn_.up()) return false;
        char req[96];
        if (no_wait) // no expiry: nats-server 2.9 holds a no_wait request that has one until it expires
            std::snprintf(req, sizeof req, "{\"batch\":%" PRIu64 ",\"no_wait\":true}", fetch_batch_);
        else
            std::snprintf(req, sizeof req, "{\"batch\":%" PRIu64 ",\"expires\":%" PRId64 "}", fetch_batch_,
                          wait_ms > 10 ? (wait_ms - 5) * 1000000 : wait_ms * 1000000);
        if (natsConnection_PublishRequestString(conn_.nc, next_subject_.c_str(), inbox_.c_str(), req) != NATS_OK)
            return false;
        // Its end is normally a status or its last message. The server drops a request it
        // finds expired when it gets to it (a busy host: a 15 ms one got no answer at all),
        // and an answer can be lost in a reconnect: kRequestGraceMs past its expiry, with the
        // inbox empty, it is over all the same.
        request_open_ = true;
        request_left_ = fetch_batch_;
        request_until_ = now + std::chrono::milliseconds((no_wait ? 0 : wait_ms) + kRequestGraceMs);
    }
    // Read what this request brings for up to wait_ms. A request still open from an earlier
    // call, or messages still in the inbox, are read on before another request goes out, so a
    // slow replica holds about one batch (two at most, when an open request's time ran out
    // while its last messages were on their way): one sent on every call while the last ones'
    // messages still waited made it hold thousands (13,528 messages, +328 MB, after 8 s at
    // 2 ms a message).
    const auto deadline = now + std::chrono::milliseconds(wait_ms);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        natsMsg *m = nullptr;
        const natsStatus s = natsSubscription_NextMsg(&m, sub_, left > 0 ? left : 1);
        if (s == NATS_TIMEOUT) return true;
        if (s != NATS_OK) return false;
        if (const char *subj = natsMsg_GetSubject(m); subj && inbox_ == subj) {
            // Not from the stream, whose messages keep their own subjects (an empty one with a
            // Status header among them is a publisher's, handled as any other): the server's
            // status about the request, or a late answer about the durable (make_durable took
            // the durable as it was).
            const char *status = nullptr;
            const bool over = natsMsg_GetDataLength(m) == 0 && natsMsgHeader_Get(m, "Status", &status) == NATS_OK &&
                              status && status[0] != '1'; // 100 heartbeat; 404, 408, 409: over
            natsMsg_Destroy(m);
            if (over) {
                request_open_ = false;
                return true;
            }
            continue;
        }
        if (request_left_ > 0 && --request_left_ == 0) request_open_ = false; // its last message
        handle(m);
        if (!request_open_ || left <= 0) return true;
    }
}

void Consumer::reply(natsMsg *m, const char *what) noexcept {
    const char *r = natsMsg_GetReply(m);
    if (!r || !*r) return;
    // Not while libnats reconnects (it would wait out the attempt: conn.hpp, Conn::up()): the
    // server sends the message again after ACK_WAIT, and its seq check skips it then.
    if (conn_.up()) natsConnection_PublishString(conn_.nc, r, what);
    handled_max_ = std::max(handled_max_, stream_seq_of(r));
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
        try {
            found = workers_.emplace(k, Worker{}).first;
        } catch (...) {
            natsMsg_Destroy(m); // not acknowledged: redelivered later
            throw;
        }
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
            held_bytes_ += held_size(m) - held_size(it->second);
            natsMsg_Destroy(it->second);
            it->second = m;
            bound_held();
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
        held_bytes_ += held_size(m);
        count(held);
        if (w.held.size() > reorder_window_) give_up(k, w);
        bound_held();
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
    w.last_applied = Clock::now();
    w.expired = false;
    events_since_snap_ += n + 1; // a batch of nothing still moves the position
    reply(m, "+ACK");
    natsMsg_Destroy(m);
}

void Consumer::drain(const Key &k, Worker &w) {
    while (!w.held.empty() && w.held.begin()->first == w.next) {
        natsMsg *m = w.held.begin()->second;
        w.held.erase(w.held.begin());
        n_held_--;
        held_bytes_ -= held_size(m);
        count(held, -1);
        const char *hv = nullptr;
        BatchHeader h;
        natsMsgHeader_Get(m, kBatchHeader, &hv);
        parse_header(hv, h); // it parsed when it was held
        apply(k, w, m, h);
    }
    if (!w.held.empty()) w.held_since = Clock::now();
}

void Consumer::give_up(const Key &k, Worker &w, const char *why) {
    const uint64_t first = w.next, last = w.held.begin()->first - 1;
    count(lost, static_cast<int64_t>(last - first + 1));
    notice(KVREG_NATS_NOTICE_LOSS, &k, w.instance, first, last, last - first + 1, true, nullptr, why);
    w.next = last + 1;
    drain(k, w);
}

uint64_t Consumer::held_size(natsMsg *m) noexcept {
    const int len = natsMsg_GetDataLength(m);
    return len > 0 ? static_cast<uint64_t>(len) : 0;
}

// Held batches wait in memory, unacknowledged, for the ones missing before them. Per worker
// the reorder window bounds them; across workers, MAX_HELD_BYTES (many workers each missing a
// batch held 1.2 GB of 1 MB messages for REORDER_MS), and the durable's MAX_ACK_PENDING: with
// that many unacknowledged the server delivers nothing new, the missing batches included, so
// waiting out REORDER_MS could not bring them. Past either, the gap whose batches have waited
// longest is given up now (a LOSS notice; its held batches apply), until within both.
void Consumer::bound_held() {
    while (n_held_ > 0 && (held_bytes_ > max_held_bytes_ || n_held_ >= max_ack_pending_)) {
        auto oldest = workers_.end();
        for (auto it = workers_.begin(); it != workers_.end(); ++it)
            if (!it->second.held.empty() && (oldest == workers_.end() || it->second.held_since < oldest->second.held_since))
                oldest = it;
        if (oldest == workers_.end()) return; // n_held_ counts only workers' held batches
        give_up(oldest->first, oldest->second,
                held_bytes_ > max_held_bytes_
                    ? "batches held for the missing ones passed KVREG_NATS_CON_OPT_MAX_HELD_BYTES"
                    : "as many batches held as MAX_ACK_PENDING: the server sends nothing new until they are acknowledged");
    }
}

void Consumer::drop_held(Worker &w, bool ack) noexcept {
    for (auto &kv : w.held) {
        if (ack) reply(kv.second, "+ACK");
        held_bytes_ -= held_size(kv.second);
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

// A worker is expired when its key is missing from the bucket (the server dropped it TTL after
// its last heartbeat) and no batch of it applied within the TTL either: a worker without
// heartbeats that still sends is kept. The server away decides nothing: no lookup is tried
// while the connection is down (each would wait out the request timeout, 5 s, and hold up
// stop()), and after it comes back nothing expires for a TTL, because every key aged out
// while the server was away (an outage longer than the TTL expired live workers, whose
// entries nothing brought back) and each live worker needs a heartbeat to put its key again.
void Consumer::check_liveness() {
    const auto now = Clock::now();
    next_liveness_ = now + std::chrono::milliseconds(liveness_check_ms_);
    const auto ttl = std::chrono::milliseconds(liveness_ttl_ms_);
    if (!conn_.up()) {
        liveness_from_ = now + ttl; // at least: the TTL counts again from the reconnect below
        return;
    }
    const uint64_t n = conn_.reconnects();
    if (n != reconnects_seen_) {
        reconnects_seen_ = n;
        liveness_from_ = now + ttl;
    }
    if (now < liveness_from_) return;
    for (auto &kv : workers_) {
        Worker &w = kv.second;
        if (w.expired || now - w.last_applied < ttl) continue;
        const std::string key = std::to_string(kv.first.first) + "." + std::to_string(kv.first.second);
        kvEntry *e = nullptr;
        const natsStatus st = kvStore_Get(&e, kv_, key.c_str());
        if (e) kvEntry_Destroy(e);
        if (st == NATS_TIMEOUT) break; // no answer: no more lookups this round (each would wait)
        if (st != NATS_NOT_FOUND) continue;
        w.expired = true;
        kvreg_index_remove_worker(idx_, kv.first.first, kv.first.second);
        count(expired);
        notice(KVREG_NATS_NOTICE_EXPIRED, &kv.first, w.instance, 0, 0, 0, false, nullptr,
               "the worker's liveness key expired: its entries were removed");
    }
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

// ------------------------------------------------------------------------ snapshots
// Objects "<name>.0" .. "<name>.<keep-1>" hold the newest snapshots; each write replaces the
// slot that is missing, unreadable or oldest.
namespace {
struct Slot {
    std::string name;
    ObjectInfo info;
    int rc = KVREG_ENOENT;
    std::string why;
};
// Every slot's newest info, asked for at once; the requests in `also` go with them (their
// answers in also_answers, in order: empty when none came).
std::vector<Slot> read_slots(ObjectStore &os, ApiInbox &api, const std::string &name, uint64_t keep,
                             const std::vector<ApiRequest> &also = {},
                             std::vector<std::string> *also_answers = nullptr) {
    std::vector<Slot> slots(keep);
    std::vector<ApiRequest> reqs(also);
    reqs.reserve(also.size() + keep);
    for (uint64_t k = 0; k < keep; k++) {
        slots[k].name = name + "." + std::to_string(k);
        reqs.push_back(os.info_request(slots[k].name));
    }
    std::vector<std::string> answers;
    api.request_all(reqs, answers, 5000); // not sent: every answer empty (the server is away)
    if (also_answers) also_answers->assign(answers.begin(), answers.begin() + static_cast<ptrdiff_t>(also.size()));
    for (uint64_t k = 0; k < keep; k++) {
        slots[k].rc = ObjectStore::info_from(answers[also.size() + k], slots[k].info, slots[k].why);
        if (slots[k].rc == KVREG_OK && !slots[k].info.has_seq) {
            slots[k].rc = KVREG_EINVAL;
            slots[k].why = "object info carries no kvreg-stream-seq";
        }
    }
    return slots;
}

// A number in a stream-info answer's state ("bytes", "last_seq"); false when it does not say.
bool stream_state(const std::string &answer, const char *field, uint64_t &value) {
    std::string state, v;
    return api_ok(answer, "stream_info_response") && json_member(answer, "state", state) &&
           json_member(state, field, v) && to_u64(v, value);
}

// A slot that names a stream sequence the event stream has not reached was written by no
// replica of this stream's life (a snapshot covers at most what its writer acknowledged, and
// a stream's last sequence only grows): one from before the stream was made again, or a
// forged one. Not restored, and not in the way of a write. The stream's info is asked in the
// same round trip as the slots: a snapshot written between the two answers may name a
// sequence past the one read, and is then taken for such a slot (a restore uses an older
// one, a write replaces it): never a wrong index, at most more to replay.
void refuse_past_stream(std::vector<Slot> &slots, const std::string &stream_info) {
    uint64_t last = 0;
    if (!stream_state(stream_info, "last_seq", last)) return;
    for (Slot &sl : slots)
        if (sl.rc == KVREG_OK && sl.info.stream_seq > last) {
            sl.rc = KVREG_EINVAL;
            sl.why = "it covers stream sequence " + std::to_string(sl.info.stream_seq) + ", past the stream's last (" +
                     std::to_string(last) + ")";
        }
}
} // namespace

int Consumer::restore(uint64_t &start_seq, bool &bucket_seen) {
    ObjectStore os(conn_.nc, conn_.js, snap_bucket_);
    // The event stream (it must exist), the bucket's own stream (what it holds bounds what an
    // object there can be: the load sizes the index by the object's info before its bytes
    // come) and every slot, in one round trip.
    std::vector<std::string> answers;
    std::vector<Slot> slots = read_slots(os, api_, snap_name_, snap_keep_,
                                         {{"$JS.API.STREAM.INFO." + stream_, ""}, {"$JS.API.STREAM.INFO." + os.stream(), ""}},
                                         &answers);
    if (!api_ok(answers[0], "stream_info_response")) return KVREG_EPROTO; // no stream, or no answer
    uint64_t bucket_bytes = 0;
    const bool bucket_known = stream_state(answers[1], "bytes", bucket_bytes);
    refuse_past_stream(slots, answers[0]);
    std::stable_sort(slots.begin(), slots.end(), [](const Slot &a, const Slot &b) {
        return (a.rc == KVREG_OK ? a.info.stream_seq + 1 : 0) > (b.rc == KVREG_OK ? b.info.stream_seq + 1 : 0);
    });
    for (Slot &sl : slots) {
        if (sl.rc == KVREG_ENOENT || sl.rc == KVREG_EPROTO) continue;
        bucket_seen = true; // it holds an object's info, good or bad
        std::string why = sl.why;
        SnapPosition pos;
        int rc = sl.rc;
        bool server_away = false;
        if (rc == KVREG_OK && !bucket_known) {
            rc = KVREG_EINVAL;
            why = "the bucket's size is unknown (no answer about its stream)";
        }
        if (rc == KVREG_OK) {
            // The snapshot loads as its chunks arrive: the load of one chunk runs while the
            // next ones are on their way. READ_US is the whole of it, LOAD_US its loading.
            SnapshotLoader sload(idx_, sl.info.size, sl.info.stream_seq);
            int64_t load_us = 0;
            uint64_t fed = 0;
            const auto t_read = Clock::now();
            rc = os.get(
                sl.info,
                [&](const char *data, size_t len) {
                    // Where the digest is checked (version 1, or a position that did not
                    // check), a rejected snapshot is read to its end all the same: a digest
                    // that does not match says more (the object is damaged) than what the load
                    // found. A version 2 body checks itself (snapshot.hpp): no digest, and
                    // once refused, no more of it.
                    // The durable's requests go out while the snapshot loads: the old one's
                    // deletion with the first chunk, the creation (its answer in, so that
                    // they cannot cross) before the last chunk loads (the table's fill comes
                    // with it, the longest step: the server makes the durable meanwhile).
                    // Not for a snapshot already refused. make_durable() finishes or redoes.
                    if (fed == 0 && durable_state_ == DurableState::kNone) send_durable(DurableStep::kDelete, 0);
                    fed += len;
                    if (fed == sl.info.size && !sload.failed() && await_durable() &&
                        durable_state_ == DurableState::kDeleted)
                        send_durable(DurableStep::kCreate, sl.info.stream_seq + 1);
                    const auto t = Clock::now();
                    sload.feed(data, len);
                    load_us += static_cast<int64_t>(micros_since(t));
                    using V = ObjectStore::SinkVerdict;
                    return sload.refused_self_checked() ? V::kRefused
                           : sload.self_checked()       ? V::kSelfChecked
                                                        : V::kDigest;
                },
                why, bucket_bytes);
            if (rc == KVREG_OK) {
                const auto t = Clock::now();
                rc = sload.finish(pos);
                load_us += static_cast<int64_t>(micros_since(t));
                if (rc != KVREG_OK) why = sload.why();
            } else {
                sload.abandon(); // the object did not check out, or the server went away
                server_away = rc == KVREG_EPROTO;
            }
            count(restore_read_us, static_cast<int64_t>(micros_since(t_read)));
            count(restore_load_us, load_us);
        }
        if (server_away) continue; // nothing known about this one
        const std::string text = "snapshot " + sl.name + (rc == KVREG_OK ? " restored" : " rejected: " + why);
        if (rc != KVREG_OK) {
            count(snapshots_rejected);
            notice(KVREG_NATS_NOTICE_SNAPSHOT, nullptr, 0, sl.info.stream_seq, sl.info.stream_seq, 0,
                   false, nullptr, text.c_str());
            continue;
        }
        for (const SnapWorker &w : pos.workers) {
            Worker &dst = workers_[Key{w.worker, w.rank}];
            dst.instance = w.instance;
            dst.next = w.next;
            dst.last_applied = Clock::now();
        }
        stats_[restored].store(1, std::memory_order_relaxed);
        stats_[snapshot_seq].store(pos.stream_seq, std::memory_order_relaxed);
        notice(KVREG_NATS_NOTICE_SNAPSHOT, nullptr, 0, pos.stream_seq, pos.stream_seq, 1, false, nullptr,
               text.c_str());
        start_seq = pos.stream_seq + 1;
        return KVREG_OK;
    }
    return KVREG_OK;
}

void Consumer::maybe_snapshot() {
    const auto now = Clock::now();
    if (!((snap_events_ && events_since_snap_ >= snap_events_) ||
          (snap_ms_ && now - last_snap_ >= std::chrono::milliseconds(snap_ms_))))
        return;
    if (snapshot(nullptr) != KVREG_OK) count(snapshot_errors);
    events_since_snap_ = 0;
    last_snap_ = now;
}

int Consumer::snapshot(uint64_t *out_seq) {
    if (!started_ || snap_bucket_.empty()) return KVREG_ESTATE;
    // What the snapshot covers: every message up to the durable's ack floor was applied (or
    // judged). Acks go out without waiting, so flush them first; the index may be ahead of
    // the floor (held batches, acks in flight), and a restore from floor + 1 skips the
    // batches it already has by their seqs.
    jsConsumerInfo *ci = nullptr;
    if (natsConnection_FlushTimeout(conn_.nc, 2000) != NATS_OK ||
        js_GetConsumerInfo(&ci, conn_.js, stream_.c_str(), durable_.c_str(), nullptr, nullptr) != NATS_OK)
        return KVREG_EPROTO;
    SnapPosition pos;
    pos.stream_seq = ci->AckFloor.Stream;
    jsConsumerInfo_Destroy(ci);
    // Never more than this replica handled itself: a purge moves every durable's floor up to
    // the purge point, and a replica behind it wrote a snapshot claiming batches it never
    // applied (a replica restoring it held 80 of 200 blocks and reported no loss). Nor past a
    // batch it holds unacknowledged (out of order): that one is not in the index yet.
    pos.stream_seq = std::min(pos.stream_seq, handled_max_);
    for (const auto &kv : workers_)
        for (const auto &h : kv.second.held)
            if (const uint64_t s = stream_seq_of(natsMsg_GetReply(h.second)); s > 0)
                pos.stream_seq = std::min(pos.stream_seq, s - 1);
    pos.workers.reserve(workers_.size());
    for (const auto &kv : workers_) {
        SnapWorker w;
        w.worker = kv.first.first;
        w.rank = kv.first.second;
        w.instance = kv.second.instance;
        w.next = kv.second.next;
        pos.workers.push_back(w);
    }
    std::string body;
    int rc = encode_snapshot(pos, idx_, body);
    if (rc != KVREG_OK) return rc;
    ObjectStore os(conn_.nc, conn_.js, snap_bucket_);
    std::vector<std::string> answers;
    std::vector<Slot> slots = read_slots(os, api_, snap_name_, snap_keep_, {{"$JS.API.STREAM.INFO." + stream_, ""}}, &answers);
    refuse_past_stream(slots, answers[0]);
    // A replica behind the bucket's newest snapshot has nothing to add: it would replace a
    // snapshot that covers more (with one slot, the only one) and a restore would replay more
    // (after a purge: batches the stream no longer has).
    for (const Slot &sl : slots)
        if (sl.rc == KVREG_OK && sl.info.stream_seq > pos.stream_seq) {
            const std::string text = "snapshot not written: " + sl.name + " covers more (seq " +
                                     std::to_string(sl.info.stream_seq) + ", this replica " +
                                     std::to_string(pos.stream_seq) + ")";
            notice(KVREG_NATS_NOTICE_SNAPSHOT, nullptr, 0, sl.info.stream_seq, sl.info.stream_seq, 3, false, nullptr,
                   text.c_str());
            if (out_seq) *out_seq = sl.info.stream_seq;
            return KVREG_OK;
        }
    size_t slot = 0;
    for (size_t k = 0; k < slots.size(); k++) {
        if (slots[k].rc != KVREG_OK) {
            slot = k;
            break;
        }
        if (slots[k].info.stream_seq < slots[slot].info.stream_seq) slot = k;
    }
    // Each chunk is one message: leave room under max_payload for its subject and headers.
    const int64_t maxp = natsConnection_GetMaxPayload(conn_.nc);
    const size_t room = maxp > 1024 ? static_cast<size_t>(maxp) - 512 : 256;
    rc = os.put(slots[slot].name, body, std::min<size_t>(snap_chunk_, room), pos.stream_seq);
    if (rc != KVREG_OK) return rc;
    count(snapshots);
    stats_[snapshot_seq].store(pos.stream_seq, std::memory_order_relaxed);
    const std::string text = "snapshot " + slots[slot].name + " written";
    notice(KVREG_NATS_NOTICE_SNAPSHOT, nullptr, 0, pos.stream_seq, pos.stream_seq, 2, false, nullptr, text.c_str());
    if (out_seq) *out_seq = pos.stream_seq;
    // Replicas share the snapshot names: two writing one name at once both store chunks and
    // the later metadata wins, so the other's chunks are named by nothing; so are a writer's
    // that died between its chunks and its metadata. Swept here, past an age that no writer
    // still at work reaches.
    if (snap_orphan_ms_) {
        const int64_t n = os.sweep_orphans(snap_orphan_ms_);
        if (n > 0) count(snapshot_orphans, n);
    }
    if (snap_purge_) {
        // Below the oldest snapshot kept, the stream is no longer needed by a replica that
        // restores one of them.
        slots[slot].rc = KVREG_OK;
        slots[slot].info.stream_seq = pos.stream_seq;
        uint64_t oldest = pos.stream_seq;
        for (const Slot &sl : slots)
            if (sl.rc == KVREG_OK) oldest = std::min(oldest, sl.info.stream_seq);
        if (oldest) {
            jsOptions o;
            jsOptions_Init(&o);
            o.Stream.Purge.Sequence = oldest + 1;
            js_PurgeStream(conn_.js, stream_.c_str(), &o, nullptr);
        }
    }
    return KVREG_OK;
}

} // namespace kvreg::nats
