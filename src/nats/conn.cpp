// Connection, stream and header helpers shared by the NATS publisher and consumer.
#include "nats/conn.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <memory>
#include <new>

#include "kvreg.h"
#include "wire/doc.hpp"

namespace kvreg::nats {

void Conn::release(Link *l) noexcept {
    if (l->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete l;
}

bool Conn::open(const std::string &url, uint64_t timeout_ms, jsOptions *jso, uint64_t ping_ms) noexcept {
    link_ = new (std::nothrow) Link;
    if (!link_) return false;
    link_->up.store(true, std::memory_order_release); // before: a drop right after the connect is seen
    natsOptions *opts = nullptr;
    bool ok = natsOptions_Create(&opts) == NATS_OK &&
              (!ping_ms || (natsOptions_SetPingInterval(opts, static_cast<int64_t>(ping_ms)) == NATS_OK &&
                            natsOptions_SetMaxPingsOut(opts, 2) == NATS_OK)) &&
              natsOptions_SetServers(opts, nullptr, 0) == NATS_OK &&
              natsOptions_SetURL(opts, url.c_str()) == NATS_OK &&
              natsOptions_SetTimeout(opts, static_cast<int64_t>(timeout_ms)) == NATS_OK &&
              natsOptions_SetWriteDeadline(opts, kWriteDeadlineMs) == NATS_OK &&
              // A server restart must not end the plane: reconnect for ever, quickly (the
              // publisher bounds what waits meanwhile; see kvreg_nats.h).
              natsOptions_SetAllowReconnect(opts, true) == NATS_OK &&
              natsOptions_SetMaxReconnect(opts, -1) == NATS_OK &&
              natsOptions_SetReconnectWait(opts, 50) == NATS_OK &&
              natsOptions_SetDisconnectedCB(opts, [](natsConnection *, void *p) noexcept {
                  static_cast<Link *>(p)->up.store(false, std::memory_order_release);
              }, link_) == NATS_OK &&
              natsOptions_SetReconnectedCB(opts, [](natsConnection *, void *p) noexcept {
                  Link *l = static_cast<Link *>(p);
                  l->reconnects.fetch_add(1, std::memory_order_relaxed); // before up: seen with it
                  l->up.store(true, std::memory_order_release);
              }, link_) == NATS_OK &&
              natsOptions_SetClosedCB(opts, [](natsConnection *, void *p) noexcept {
                  Link *l = static_cast<Link *>(p);
                  l->up.store(false, std::memory_order_release);
                  release(l); // the callbacks' reference: this one is the last
              }, link_) == NATS_OK &&
              natsConnection_Connect(&nc, opts) == NATS_OK;
    natsOptions_Destroy(opts);
    if (ok) ok = natsConnection_JetStream(&js, nc, jso) == NATS_OK;
    if (!ok) close();
    return ok;
}

void Conn::stop() noexcept {
    if (nc) natsConnection_Close(nc);
}

void Conn::close() noexcept {
    stop(); // before the context: its publish-ack subscription is destroyed with it
    if (js) jsCtx_Destroy(js);
    js = nullptr;
    const bool had_connection = nc != nullptr;
    if (nc) natsConnection_Destroy(nc);
    nc = nullptr;
    if (!link_) return;
    // A connection that never came up posts no callback: its reference is dropped here.
    if (!had_connection) release(link_);
    release(link_);
    link_ = nullptr;
}

void drop_subscription(natsConnection *nc, natsSubscription *sub) noexcept {
    if (!sub) return;
    natsSubscription_Unsubscribe(sub);
    if (nc) natsConnection_FlushTimeout(nc, 1000);
    natsSubscription_Destroy(sub);
}

namespace {
uint64_t max_msg_of(const jsStreamInfo *si) noexcept {
    return si && si->Config && si->Config->MaxMsgSize > 0 ? static_cast<uint64_t>(si->Config->MaxMsgSize) : 0;
}
} // namespace

bool to_u64(std::string_view s, uint64_t &v) noexcept {
    if (s.empty() || s.size() > 19) return false;
    v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return true;
}

bool json_member(std::string_view text, const char *key, std::string &out) {
    // The wire decoders' reader: the whole text validated first (syntax, nesting within the
    // bound, nothing after it), then read by offset.
    const wire::JsonDoc doc(reinterpret_cast<const uint8_t *>(text.data()), text.size(), kJsonMaxDepth);
    size_t err_off = 0;
    const char *err = nullptr;
    if (!doc.validate(err_off, err)) return false;
    const wire::Val root = doc.read(0);
    if (root.kind != wire::Val::Map) return false;
    wire::Iter it = doc.begin(root);
    wire::Val k, v;
    while (doc.next(it, k) && doc.next(it, v)) {
        if (!doc.is(k, key)) continue;
        if (v.kind == wire::Val::Str) {
            if (v.escaped) return false;
            out.assign(v.s, v.len);
        } else {
            out.assign(text.substr(v.off, doc.value_end(v) - v.off));
        }
        return true;
    }
    return false;
}

std::string msg_text(natsMsg *m) {
    const int len = natsMsg_GetDataLength(m);
    return std::string(natsMsg_GetData(m) ? natsMsg_GetData(m) : "", len > 0 ? static_cast<size_t>(len) : 0);
}

bool ApiInbox::open(natsConnection *nc, const std::string &base) noexcept {
    close();
    std::string pattern;
    try {
        base_ = base + ".";
        pattern = base_ + "*";
    } catch (...) {
        return false;
    }
    if (natsConnection_SubscribeSync(&sub_, nc, pattern.c_str()) != NATS_OK) {
        sub_ = nullptr;
        return false;
    }
    if (natsSubscription_SetPendingLimits(sub_, -1, -1) != NATS_OK) {
        drop_subscription(nc, sub_); // the connection's reader is running (see Conn::stop)
        sub_ = nullptr;
        return false;
    }
    nc_ = nc;
    return true;
}

void ApiInbox::close() noexcept {
    if (sub_) natsSubscription_Destroy(sub_);
    sub_ = nullptr;
    nc_ = nullptr;
}

bool ApiInbox::request_all(const std::vector<ApiRequest> &reqs, std::vector<std::string> &answers, int64_t timeout_ms) {
    answers.assign(reqs.size(), std::string());
    if (!sub_) return false;
    if (reqs.empty()) return true;
    const uint64_t first = next_;
    next_ += reqs.size();
    for (size_t i = 0; i < reqs.size(); i++) {
        const std::string reply = base_ + std::to_string(first + i);
        if (natsConnection_PublishRequest(nc_, reqs[i].subject.c_str(), reply.c_str(), reqs[i].body.data(),
                                          static_cast<int>(reqs[i].body.size())) != NATS_OK)
            return false;
    }
    // Written now, not when libnats' flusher thread wakes (up to 1 ms later). The flush and
    // the answers share the one timeout.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    if (natsConnection_FlushTimeout(nc_, timeout_ms) != NATS_OK) return false;
    std::vector<bool> got(reqs.size(), false);
    for (size_t left = reqs.size(); left > 0;) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        const int64_t wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
        natsMsg *m = nullptr;
        if (natsSubscription_NextMsg(&m, sub_, wait) != NATS_OK) break;
        const OwnedMsg own = own_msg(m);
        const char *subj = natsMsg_GetSubject(m);
        uint64_t n = 0;
        if (!subj || std::strncmp(subj, base_.c_str(), base_.size()) != 0 || !to_u64(subj + base_.size(), n) ||
            n < first || n - first >= reqs.size() || got[n - first])
            continue; // a late answer to an earlier call
        got[n - first] = true;
        answers[n - first] = msg_text(m);
        left--;
    }
    return true;
}

bool api_ok(const std::string &answer, const char *type) {
    const std::string head = std::string("{\"type\":\"io.nats.jetstream.api.v1.") + type + "\",";
    return answer.compare(0, head.size(), head) == 0 && answer.compare(head.size(), 8, "\"error\":") != 0;
}

bool stream_max_msg_size(jsCtx *js, const std::string &stream, uint64_t &out) noexcept {
    jsStreamInfo *si = nullptr;
    if (js_GetStreamInfo(&si, js, stream.c_str(), nullptr, nullptr) != NATS_OK) return false;
    out = max_msg_of(si);
    jsStreamInfo_Destroy(si);
    return true;
}

namespace {
// err = text, or nothing when even that finds no memory (the caller's false says enough).
void set_error(std::string &err, const char *text) noexcept {
    try {
        err = text;
    } catch (...) {
        err.clear();
    }
}
} // namespace

bool ensure_stream(jsCtx *js, const StreamSpec &spec, bool create, std::string &err, uint64_t *max_msg_size) noexcept {
    jsStreamInfo *si = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsStatus s = js_GetStreamInfo(&si, js, spec.name.c_str(), nullptr, &jerr);
    if (s == NATS_OK) {
        if (max_msg_size) *max_msg_size = max_msg_of(si);
        jsStreamInfo_Destroy(si);
        return true;
    }
    if (s != NATS_NOT_FOUND || !create) {
        set_error(err, s == NATS_NOT_FOUND ? "stream not found" : natsStatus_GetText(s));
        return false;
    }
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char *subjects[1] = {spec.subjects.c_str()};
    cfg.Name = spec.name.c_str();
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Retention = js_LimitsPolicy;
    cfg.MaxAge = static_cast<int64_t>(spec.max_age_s) * 1000000000;        // nanoseconds
    cfg.Duplicates = static_cast<int64_t>(spec.duplicate_window_ms) * 1000000;
    s = js_AddStream(&si, js, &cfg, nullptr, &jerr);
    if (s == NATS_OK) {
        if (max_msg_size) *max_msg_size = max_msg_of(si);
        jsStreamInfo_Destroy(si);
        return true;
    }
    // Another engine may have created it in between: look again.
    if (js_GetStreamInfo(&si, js, spec.name.c_str(), nullptr, nullptr) == NATS_OK) {
        if (max_msg_size) *max_msg_size = max_msg_of(si);
        jsStreamInfo_Destroy(si);
        return true;
    }
    set_error(err, natsStatus_GetText(s));
    return false;
}

bool kv_ttl_ms(kvStore *kv, uint64_t &ttl_ms) noexcept {
    kvStatus *st = nullptr;
    if (kvStore_Status(&st, kv) != NATS_OK) return false;
    const int64_t ttl = kvStatus_TTL(st); // nanoseconds
    kvStatus_Destroy(st);
    ttl_ms = ttl > 0 ? static_cast<uint64_t>(ttl) / 1000000 : 0;
    return true;
}

bool ensure_kv_bucket(jsCtx *js, const std::string &bucket, uint64_t ttl_ms) noexcept {
    kvStore *kv = nullptr;
    if (js_KeyValue(&kv, js, bucket.c_str()) == NATS_OK) {
        kvStore_Destroy(kv);
        return true;
    }
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = bucket.c_str();
    cfg.History = 1;
    cfg.TTL = static_cast<int64_t>(ttl_ms) * 1000000;
    cfg.StorageType = js_FileStorage;
    natsStatus s = js_CreateKeyValue(&kv, js, &cfg);
    if (s != NATS_OK) s = js_KeyValue(&kv, js, bucket.c_str()); // made by another in between
    if (s == NATS_OK) kvStore_Destroy(kv);
    return s == NATS_OK;
}

bool valid_bucket(const std::string &s) noexcept {
    if (s.empty()) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    return true;
}

std::string format_header(const BatchHeader &h) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "1 %" PRIu64 " %" PRIu32 " %" PRIu64 " %" PRIu64 " %" PRIu32,
                  h.worker, h.rank, h.instance, h.seq, h.format);
    return buf;
}

namespace {
// One decimal field followed by a space (or the end for the last one).
bool field(const char *&p, uint64_t &v, bool last) noexcept {
    if (*p < '0' || *p > '9') return false;
    errno = 0;
    char *end = nullptr;
    v = std::strtoull(p, &end, 10);
    if (errno || end == p) return false;
    p = end;
    if (last) return *p == '\0';
    if (*p != ' ') return false;
    ++p;
    return true;
}
} // namespace

bool parse_header(const char *text, BatchHeader &out) noexcept {
    if (!text || text[0] != '1' || text[1] != ' ') return false;
    const char *p = text + 2;
    uint64_t w, r, i, s, f;
    if (!field(p, w, false) || !field(p, r, false) || !field(p, i, false) || !field(p, s, false) ||
        !field(p, f, true))
        return false;
    // A seq of 2^64 - 1 has no next (a replica's next seq would wrap to 0 and take the
    // worker's applied batches as missing): no publisher reaches it, a forged header does.
    if (r > INT32_MAX || f < 1 || f > 4 || s == UINT64_MAX) return false;
    out.worker = w;
    out.rank = static_cast<uint32_t>(r);
    out.instance = i;
    out.seq = s;
    out.format = static_cast<uint32_t>(f);
    return true;
}

bool valid_token(const std::string &s) noexcept {
    if (s.empty()) return false;
    for (char c : s)
        if (c == '.' || c == '*' || c == '>' || c == ' ' || c == '\t' || c == '\r' || c == '\n')
            return false;
    return true;
}

} // namespace kvreg::nats
