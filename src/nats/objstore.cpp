// The object store's layout over JetStream (see objstore.hpp).
#include "nats/objstore.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "kvreg.h"
#include "nats/conn.hpp"
#include "nats/sha256.hpp"

namespace kvreg::nats {

std::string base64url(const uint8_t *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    out.reserve((n + 2) / 3 * 4);
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out += A[v >> 18 & 63];
        out += A[v >> 12 & 63];
        out += i + 1 < n ? A[v >> 6 & 63] : '=';
        out += i + 2 < n ? A[v & 63] : '=';
    }
    return out;
}

std::string sha256_digest(const std::string &data) {
    Sha256 h;
    h.update(data.data(), data.size());
    const auto d = h.finish();
    return "SHA-256=" + base64url(d.data(), d.size());
}

namespace {
// A fresh object id: 22 base62 characters, as NATS's NUIDs look.
std::string new_nuid() {
    static const char A[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    std::random_device rd;
    std::string s(22, '0');
    for (auto &c : s) c = A[rd() % 62];
    return s;
}

bool purge_subject(jsCtx *js, const std::string &stream, const std::string &subject) noexcept {
    jsOptions o;
    jsOptions_Init(&o);
    o.Stream.Purge.Subject = subject.c_str();
    return js_PurgeStream(js, stream.c_str(), &o, nullptr) == NATS_OK;
}
} // namespace

std::string ObjectStore::meta_subject(const std::string &name) const {
    return "$O." + bucket_ + ".M." + base64url(reinterpret_cast<const uint8_t *>(name.data()), name.size());
}

bool ObjectStore::ensure() noexcept {
    try {
        const std::string name = stream();
        jsStreamInfo *si = nullptr;
        if (js_GetStreamInfo(&si, js_, name.c_str(), nullptr, nullptr) == NATS_OK) {
            jsStreamInfo_Destroy(si);
            return true;
        }
        const std::string c = "$O." + bucket_ + ".C.>", m = "$O." + bucket_ + ".M.>";
        const char *subjects[2] = {c.c_str(), m.c_str()};
        jsStreamConfig cfg;
        jsStreamConfig_Init(&cfg);
        cfg.Name = name.c_str();
        cfg.Subjects = subjects;
        cfg.SubjectsLen = 2;
        cfg.Storage = js_FileStorage;
        cfg.Discard = js_DiscardNew;
        cfg.AllowRollup = true;
        cfg.AllowDirect = true;
        natsStatus s = js_AddStream(&si, js_, &cfg, nullptr, nullptr);
        if (s != NATS_OK) s = js_GetStreamInfo(&si, js_, name.c_str(), nullptr, nullptr); // raced
        if (s == NATS_OK) jsStreamInfo_Destroy(si);
        return s == NATS_OK;
    } catch (...) {
        return false;
    }
}

uint64_t ObjectStore::stored_count(const std::string &subject) {
    SubjectCounts counts;
    if (!subjects(subject, counts)) return UINT64_MAX;
    for (const auto &[name, n] : counts)
        if (name == subject) return n;
    return 0;
}

bool ObjectStore::subjects(const std::string &filter, SubjectCounts &out) {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Stream.Info.SubjectsFilter = filter.c_str();
    jsStreamInfo *si = nullptr;
    if (js_GetStreamInfo(&si, js_, stream().c_str(), &jo, nullptr) != NATS_OK) return false;
    bool ok = true;
    try {
        if (si->State.Subjects)
            for (int i = 0; i < si->State.Subjects->Count; i++)
                if (si->State.Subjects->List[i].Msgs > 0)
                    out.emplace_back(si->State.Subjects->List[i].Subject, si->State.Subjects->List[i].Msgs);
    } catch (...) {
        ok = false;
    }
    jsStreamInfo_Destroy(si);
    return ok;
}

int64_t ObjectStore::sweep_orphans(uint64_t older_than_ms) {
    // Chunks first, then the metadata: a writer that finishes in between has its chunks on
    // the first list and its metadata on the second, so they are never taken for orphans.
    SubjectCounts chunks, metas;
    const std::string cprefix = "$O." + bucket_ + ".C.";
    if (!subjects(cprefix + ">", chunks) || !subjects("$O." + bucket_ + ".M.>", metas)) return -1;
    std::vector<std::string> named;
    for (const auto &[m, n_meta] : metas) {
        natsMsg *msg = nullptr;
        if (js_GetLastMsg(&msg, js_, stream().c_str(), m.c_str(), nullptr, nullptr) != NATS_OK) return -1;
        const OwnedMsg own = own_msg(msg);
        const std::string j = msg_text(msg);
        std::string nuid;
        if (json_member(j, "nuid", nuid)) named.push_back(cprefix + nuid);
    }
    int64_t purged = 0;
    // Message times are the server's wall clock (UTC); a clock skew between the hosts moves
    // the age by as much, which the grace (a minute by default) absorbs.
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    for (const auto &[c, n_chunks] : chunks) {
        if (std::find(named.begin(), named.end(), c) != named.end()) continue;
        natsMsg *msg = nullptr;
        if (js_GetLastMsg(&msg, js_, stream().c_str(), c.c_str(), nullptr, nullptr) != NATS_OK) continue;
        const int64_t t = natsMsg_GetTime(msg);
        natsMsg_Destroy(msg);
        if (t <= 0 || now_ns - t < static_cast<int64_t>(older_than_ms) * 1000000) continue; // a writer at work
        if (purge_subject(js_, stream(), c)) purged++;
    }
    return purged;
}

namespace {
// Standard base64 with padding (the data of a JetStream message-get answer); false when text
// is not that.
bool base64_decode(const std::string &text, std::string &out) {
    if (text.size() % 4 != 0) return false;
    out.clear();
    out.reserve(text.size() / 4 * 3);
    const auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        return c == '+' ? 62 : c == '/' ? 63 : -1;
    };
    for (size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        const size_t pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            const int d = k >= 4 - pad ? 0 : value(text[i + k]);
            if (d < 0) return false;
            v = v << 6 | static_cast<uint32_t>(d);
        }
        out += static_cast<char>(v >> 16);
        if (pad < 2) out += static_cast<char>(v >> 8 & 0xff);
        if (pad < 1) out += static_cast<char>(v & 0xff);
    }
    return true;
}

// An object's info from its metadata's JSON (the one definition of what it must hold).
int parse_info(const std::string &j, ObjectInfo &out, std::string &why) {
    std::string v;
    out = ObjectInfo{};
    // Deleted: other clients write true, and leave the digest out.
    if (json_member(j, "deleted", v) && v != "false") return KVREG_ENOENT;
    if (!json_member(j, "nuid", out.nuid) || !json_member(j, "digest", out.digest) ||
        !json_member(j, "size", v) || !to_u64(v, out.size) || !json_member(j, "chunks", v) ||
        !to_u64(v, out.chunks)) {
        why = "object info does not parse";
        return KVREG_EINVAL;
    }
    for (char c : out.nuid)
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) {
            why = "object info names a bad nuid";
            return KVREG_EINVAL;
        }
    if (out.nuid.empty()) {
        why = "object info names no nuid";
        return KVREG_EINVAL;
    }
    std::string meta;
    out.has_seq = json_member(j, "metadata", meta) && json_member(meta, "kvreg-stream-seq", v) &&
                  to_u64(v, out.stream_seq);
    return KVREG_OK;
}
} // namespace

int ObjectStore::info(const std::string &name, ObjectInfo &out, std::string &why) {
    natsMsg *m = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    const natsStatus s = js_GetLastMsg(&m, js_, stream().c_str(), meta_subject(name).c_str(), nullptr, &jerr);
    if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return KVREG_ENOENT;
    if (s != NATS_OK) return KVREG_EPROTO;
    const OwnedMsg own = own_msg(m);
    return parse_info(msg_text(m), out, why);
}

ApiRequest ObjectStore::info_request(const std::string &name) const {
    return ApiRequest{"$JS.API.STREAM.MSG.GET." + stream(), "{\"last_by_subj\":\"" + meta_subject(name) + "\"}"};
}

int ObjectStore::info_from(const std::string &answer, ObjectInfo &out, std::string &why) {
    // A stream_msg_get_response: {"type":..., "message":{"subject", "seq", "hdrs", "data" (the
    // metadata, base64), "time"}}, or {"type":..., "error":{"code":404, ...}} where the name
    // has none (err_code 10037, as info()'s NOT_FOUND) or the bucket's stream is missing
    // (10059, where info() said EPROTO: either way no snapshot is there, and both callers
    // treat the two alike); another error, or no answer: the server is away.
    if (answer.empty()) return KVREG_EPROTO;
    if (!api_ok(answer, "stream_msg_get_response")) {
        std::string error, code;
        return json_member(answer, "error", error) && json_member(error, "code", code) && code == "404" ? KVREG_ENOENT
                                                                                                      : KVREG_EPROTO;
    }
    std::string message, data, j;
    if (!json_member(answer, "message", message) || !json_member(message, "data", data) || !base64_decode(data, j)) {
        why = "object info does not parse";
        return KVREG_EINVAL;
    }
    return parse_info(j, out, why);
}

int ObjectStore::put(const std::string &name, const std::string &data, size_t chunk, uint64_t stream_seq) {
    if (chunk == 0) return KVREG_EINVAL;
    ObjectInfo old;
    std::string why;
    const bool had_old = info(name, old, why) == KVREG_OK;
    const std::string nuid = new_nuid(), csubj = chunk_subject(nuid);
    uint64_t chunks = 0;
    // Chunks go out asynchronously (no round trip each), then all their acks are awaited and
    // the stream asked how many it stored: a chunk lost on the way (whose failure libnats
    // reports to no one here) is caught before any metadata names the object.
    bool sent = true;
    for (size_t off = 0; off < data.size() && sent; off += chunk, chunks++) {
        const size_t n = std::min(chunk, data.size() - off);
        sent = js_PublishAsync(js_, csubj.c_str(), data.data() + off, static_cast<int>(n), nullptr) == NATS_OK;
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 10000;
    if (!sent || js_PublishAsyncComplete(js_, &po) != NATS_OK || stored_count(csubj) != chunks) {
        purge_subject(js_, stream(), csubj); // a half-written object is never named by any info
        return KVREG_EPROTO;
    }
    char mtime[40];
    const std::time_t now = std::time(nullptr);
    std::tm tm;
    gmtime_r(&now, &tm);
    std::strftime(mtime, sizeof mtime, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char nums[200];
    std::snprintf(nums, sizeof nums, "\"size\":%zu,\"mtime\":\"%s\",\"chunks\":%" PRIu64 ",", data.size(), mtime, chunks);
    const std::string meta = "{\"name\":\"" + name + "\",\"description\":\"kvreg index snapshot\",\"metadata\":{" +
                             "\"kvreg-stream-seq\":\"" + std::to_string(stream_seq) + "\"},\"options\":{" +
                             "\"max_chunk_size\":" + std::to_string(chunk) + "},\"bucket\":\"" + bucket_ +
                             "\",\"nuid\":\"" + nuid + "\"," + nums + "\"digest\":\"" + sha256_digest(data) + "\"}";
    natsMsg *m = nullptr;
    const std::string msubj = meta_subject(name);
    bool ok = natsMsg_Create(&m, msubj.c_str(), nullptr, meta.data(), static_cast<int>(meta.size())) == NATS_OK &&
              natsMsgHeader_Set(m, "Nats-Rollup", "sub") == NATS_OK &&
              js_PublishMsg(nullptr, js_, m, nullptr, nullptr) == NATS_OK;
    natsMsg_Destroy(m);
    if (!ok) {
        purge_subject(js_, stream(), csubj);
        return KVREG_EPROTO;
    }
    if (had_old && old.nuid != nuid) purge_subject(js_, stream(), chunk_subject(old.nuid));
    return KVREG_OK;
}

namespace {
// The consumer sequence a JetStream-delivered message carries in its reply subject:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending> (9 tokens), or with
// a domain and an account hash in front and a random token after (12 or more). 0: neither.
uint64_t consumer_seq_of(const char *reply) noexcept {
    if (!reply) return 0;
    const char *tok[16];
    int n = 0;
    for (const char *p = reply; n < 16; n++) {
        tok[n] = p;
        p = std::strchr(p, '.');
        if (!p) {
            n++;
            break;
        }
        p++;
    }
    const int at = n == 9 ? 6 : n >= 12 ? 8 : -1;
    if (at < 0) return 0;
    uint64_t v = 0;
    for (const char *p = tok[at]; *p >= '0' && *p <= '9'; p++) v = v * 10 + static_cast<uint64_t>(*p - '0');
    return v;
}

// One object's chunks, pushed by an ephemeral consumer of our own to an inbox subscription:
// the consumer's creation answers how many chunks the stream holds (no separate request),
// and it is let go with one round trip (the unsubscribe's flush), a deletion nobody waits
// for, and the server's inactivity threshold behind both. libnats' ordered consumer costs a
// request for the count, and a consumer deletion plus a flush, each a round trip, at the end.
// Flow control keeps the server from running ahead of a slow reader (by at most its own
// window, a few tens of MB), so the subscription itself has no limit that could drop a chunk;
// a lost or repeated chunk (consumer sequences not 1, 2, 3, ...) fails the read at once.
class ChunkFeed {
  public:
    ChunkFeed(natsConnection *nc, jsCtx *js, std::string stream) : nc_(nc), js_(js), stream_(std::move(stream)) {}
    ~ChunkFeed() { close(); }
    ChunkFeed(const ChunkFeed &) = delete;
    ChunkFeed &operator=(const ChunkFeed &) = delete;
    // KVREG_OK with stored (chunks the stream holds on subject), or KVREG_EPROTO. Throws
    // std::bad_alloc.
    int open(const std::string &subject, uint64_t &stored) {
        {
            natsInbox *inbox = nullptr;
            if (natsInbox_Create(&inbox) != NATS_OK) return KVREG_EPROTO;
            const std::unique_ptr<natsInbox, void (*)(natsInbox *)> own(inbox, natsInbox_Destroy);
            inbox_ = inbox;
        }
        // Subscribed before the consumer exists: the server sees the SUB before the request.
        if (natsConnection_SubscribeSync(&sub_, nc_, inbox_.c_str()) != NATS_OK ||
            natsSubscription_SetPendingLimits(sub_, -1, -1) != NATS_OK)
            return KVREG_EPROTO;
        jsConsumerConfig cc;
        jsConsumerConfig_Init(&cc);
        cc.DeliverSubject = inbox_.c_str();
        cc.FilterSubject = subject.c_str();
        cc.DeliverPolicy = js_DeliverAll;
        cc.AckPolicy = js_AckNone;
        cc.FlowControl = true;
        cc.Heartbeat = int64_t(1) * 1000000000; // the server requires it with flow control
        cc.InactiveThreshold = int64_t(2) * 1000000000;
        cc.MemoryStorage = true;
        cc.Replicas = 1;
        jsConsumerInfo *ci = nullptr;
        if (js_AddConsumer(&ci, js_, stream_.c_str(), &cc, nullptr, nullptr) != NATS_OK) return KVREG_EPROTO;
        const std::unique_ptr<jsConsumerInfo, void (*)(jsConsumerInfo *)> own(ci, jsConsumerInfo_Destroy);
        name_ = ci->Name ? ci->Name : "";
        // Pending as the consumer was made, plus what it had delivered by then.
        stored = ci->NumPending + ci->Delivered.Consumer;
        return KVREG_OK;
    }
    // The next chunk, within 5 s however many flow-control and heartbeat messages come
    // meanwhile (those are answered on the way): KVREG_OK, KVREG_EINVAL (out of order: why
    // says so) or KVREG_EPROTO (none came). Throws std::bad_alloc.
    int next(OwnedMsg &out, std::string &why) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (;;) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            natsMsg *raw = nullptr;
            if (left <= 0 || natsSubscription_NextMsg(&raw, sub_, left) != NATS_OK) return KVREG_EPROTO;
            OwnedMsg m = own_msg(raw);
            const char *subj = natsMsg_GetSubject(raw);
            if (subj && inbox_ == subj) { // the server's own: flow control, heartbeat
                const char *reply = natsMsg_GetReply(raw), *stalled = nullptr;
                if (reply && *reply) natsConnection_Publish(nc_, reply, nullptr, 0);
                if (natsMsgHeader_Get(raw, "Nats-Consumer-Stalled", &stalled) == NATS_OK && stalled && *stalled)
                    natsConnection_Publish(nc_, stalled, nullptr, 0);
                continue;
            }
            if (consumer_seq_of(natsMsg_GetReply(raw)) != ++seq_) {
                why = "a chunk was lost or repeated on its way (consumer sequence " + std::to_string(seq_) + ")";
                return KVREG_EINVAL;
            }
            out = std::move(m);
            return KVREG_OK;
        }
    }
    void close() noexcept {
        if (!sub_) return;
        drop_subscription(nc_, sub_); // a round trip first: chunks may still be on their way (Conn::stop)
        sub_ = nullptr;
        if (name_.empty()) return;
        try { // the answer goes to an inbox no one listens on
            const std::string del = "$JS.API.CONSUMER.DELETE." + stream_ + "." + name_;
            natsInbox *inbox = nullptr;
            if (natsInbox_Create(&inbox) != NATS_OK) return;
            natsConnection_PublishRequest(nc_, del.c_str(), inbox, nullptr, 0);
            natsInbox_Destroy(inbox);
        } catch (...) {
        }
    }

  private:
    natsConnection *nc_;
    jsCtx *js_;
    std::string stream_, inbox_, name_;
    natsSubscription *sub_ = nullptr;
    uint64_t seq_ = 0;
};
} // namespace

int ObjectStore::get(const ObjectInfo &info, const ChunkSink &sink, std::string &why, uint64_t max_size) {
    if (info.size > (uint64_t(1) << 40)) {
        why = "object info claims an absurd size";
        return KVREG_EINVAL;
    }
    uint64_t got = 0, bytes = 0;
    Sha256 sha;
    bool self_checked = false; // the sink checks the content itself: no digest (see get())
    if (info.chunks > 0) {
        ChunkFeed feed(nc_, js_, stream());
        uint64_t stored = 0;
        if (const int rc = feed.open(chunk_subject(info.nuid), stored); rc != KVREG_OK) return rc;
        // A missing chunk is known before waiting for a message that never comes.
        if (stored < info.chunks) {
            why = "chunks missing (" + std::to_string(stored) + " of " + std::to_string(info.chunks) + " stored)";
            return KVREG_EINVAL;
        }
        if (info.size > max_size) {
            why = "object info claims more bytes (" + std::to_string(info.size) + ") than its bucket holds (" +
                  std::to_string(max_size) + ")";
            return KVREG_EINVAL;
        }
        // Each chunk is hashed and handed on as it comes, while the next ones are on their way.
        for (; got < info.chunks; got++) {
            OwnedMsg m = own_msg(nullptr); // destroyed on every way out, a throw from sink included
            if (const int rc = feed.next(m, why); rc != KVREG_OK) return rc; // EPROTO: the server went away
            const int len = natsMsg_GetDataLength(m.get());
            if (len < 0 || bytes + static_cast<uint64_t>(len) > info.size) {
                why = "chunks do not add up to the object's size";
                return KVREG_EINVAL;
            }
            // The info's size is untrusted, and the sink sizes things by it: never more than
            // the stored chunks hold (an object's chunks are as big as its first but the last).
            if (got == 0 && info.size > stored * static_cast<uint64_t>(len)) {
                why = "object info claims more than its chunks hold";
                return KVREG_EINVAL;
            }
            bytes += static_cast<uint64_t>(len);
            if (!self_checked) sha.update(natsMsg_GetData(m.get()), static_cast<size_t>(len));
            const SinkVerdict v = sink(natsMsg_GetData(m.get()), static_cast<size_t>(len));
            if (v == SinkVerdict::kRefused) return KVREG_OK; // refused by its own checks: no need for the rest
            self_checked = self_checked || v == SinkVerdict::kSelfChecked;
        }
    }
    if (bytes != info.size) {
        why = "chunks hold fewer bytes than the object's size";
        return KVREG_EINVAL;
    }
    if (self_checked) return KVREG_OK;
    const auto d = sha.finish();
    if ("SHA-256=" + base64url(d.data(), d.size()) != info.digest) {
        why = "content does not match the object's SHA-256 digest";
        return KVREG_EINVAL;
    }
    return KVREG_OK;
}

} // namespace kvreg::nats
