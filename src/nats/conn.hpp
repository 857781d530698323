// What the NATS publisher and consumer share: one connection with a JetStream context, the
// stream check/creation, and the Kvreg-Batch header (see kvreg_nats.h for the protocol).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nats/nats.h>

namespace kvreg::nats {

// The largest durations the options take: libnats and the server count time in int64
// nanoseconds (and a std::chrono duration of steady_clock would overflow past them too).
constexpr uint64_t kMaxMillis = INT64_MAX / 1000000;
constexpr uint64_t kMaxSeconds = INT64_MAX / 1000000000;

// A connection that reconnects for ever, with its JetStream context. Owned by one object.
struct Conn {
    static constexpr int64_t kWriteDeadlineMs = 2000;
    natsConnection *nc = nullptr;
    jsCtx *js = nullptr;
    ~Conn() { close(); }
    // Connect to url within timeout_ms; jso (may be NULL) configures the context; ping_ms (0:
    // libnats' 2 min) is how often the client pings the server: two unanswered pings end a
    // connection that hangs without closing (then it reconnects). Writes have a deadline of
    // kWriteDeadlineMs: a server that stops reading ends the connection (then it reconnects)
    // instead of blocking the thread that writes, with libnats' connection lock held, for as
    // long as it hangs. false: no server answered (nothing left open).
    bool open(const std::string &url, uint64_t timeout_ms, jsOptions *jso, uint64_t ping_ms = 0) noexcept;
    // Stop the connection's threads (natsConnection_Close joins its reader): after this no
    // message is being delivered to any subscription, so they may be destroyed. libnats 3.4
    // (Debian 12) lets its reader deliver to a subscription being destroyed, a use after free
    // (a crash or a hang; fixed in nats.c 3.6): destroy subscriptions only after stop(), or
    // through drop_subscription() while the connection stays open.
    void stop() noexcept;
    void close() noexcept; // stop(), then the context and the connection
    // Whether the connection is up, as libnats' disconnected, reconnected and closed
    // callbacks said last. Read without the connection's lock, which every natsConnection_*
    // call takes (natsConnection_Status too) and libnats' reconnect thread holds through each
    // attempt: against a server that accepts and never answers that is the whole connect
    // timeout, and a replica's run(50) that asked for the status waited 2 s.
    bool up() const noexcept { return link_ && link_->up.load(std::memory_order_acquire); }
    // How many times it reconnected so far (the reconnected callbacks), read the same way.
    uint64_t reconnects() const noexcept { return link_ ? link_->reconnects.load(std::memory_order_acquire) : 0; }

    Conn() = default;
    Conn(const Conn &) = delete;
    Conn &operator=(const Conn &) = delete;

  private:
    // What libnats' callbacks write (on its callback thread), shared with them: the closed
    // callback, the connection's last, drops their reference, close() drops the Conn's, and
    // the last one frees it. close() waited for that callback at first, and so stalled 5 s
    // when it ran on libnats' callback thread itself (a free from another connection's
    // callback), holding up every connection's callbacks meanwhile.
    struct Link {
        std::atomic<bool> up{false};
        std::atomic<uint64_t> reconnects{0};
        std::atomic<int> refs{2};
    };
    static void release(Link *l) noexcept;
    Link *link_ = nullptr;
};

// Destroy sub while nc stays open: unsubscribe, then a round trip (the reader thread has
// handled every message the server sent before it), then destroy (see Conn::stop).
void drop_subscription(natsConnection *nc, natsSubscription *sub) noexcept;

struct StreamSpec {
    std::string name, subjects; // subjects: one pattern, e.g. "kvreg.events.>"
    uint64_t max_age_s = 3600, duplicate_window_ms = 120000;
};

// true when the stream exists or was created (create == true), else false and why in err.
// max_msg_size (may be null): the stream's limit on one message, headers included (0: none).
bool ensure_stream(jsCtx *js, const StreamSpec &spec, bool create, std::string &err,
                   uint64_t *max_msg_size = nullptr) noexcept;
// The stream's max_msg_size now (0: none); false when the server did not answer.
bool stream_max_msg_size(jsCtx *js, const std::string &stream, uint64_t &out) noexcept;

// true when the key-value bucket exists or was created with this TTL (its max age), one value
// per key.
bool ensure_kv_bucket(jsCtx *js, const std::string &bucket, uint64_t ttl_ms) noexcept;
// The TTL of kv's keys in ms (its max age; 0: keys never expire). false: no answer.
bool kv_ttl_ms(kvStore *kv, uint64_t &ttl_ms) noexcept;
// A bucket name as JetStream accepts it: [A-Za-z0-9_-]+.
bool valid_bucket(const std::string &s) noexcept;

// The Kvreg-Batch header: "1 <worker> <rank> <instance> <seq> <format>".
struct BatchHeader {
    uint64_t worker = 0, instance = 0, seq = 0;
    uint32_t rank = 0, format = 0;
};
constexpr const char *kBatchHeader = "Kvreg-Batch";
std::string format_header(const BatchHeader &h);
bool parse_header(const char *text, BatchHeader &out) noexcept;

// JetStream API requests several at a time, each answered on its own subject under base
// (<base>.<number>), all on one subscription kept for the connection's life: every request is
// written before the first answer is awaited, so together they cost one round trip where one
// at a time they cost one each (a restore's start asks for the stream and for every snapshot
// slot's metadata at once). An answer that comes after its call gave up has an old number and
// is dropped by a later call. Used by one thread at a time.
struct ApiRequest {
    std::string subject, body;
};
class ApiInbox {
  public:
    ApiInbox() = default;
    ApiInbox(const ApiInbox &) = delete;
    ApiInbox &operator=(const ApiInbox &) = delete;
    ~ApiInbox() { close(); }
    // Subscribe <base>.* on nc. false: it could not (nothing left open).
    bool open(natsConnection *nc, const std::string &base) noexcept;
    // Only after Conn::stop() (see there why).
    void close() noexcept;
    // answers[i]: request i's answer, empty when none came within timeout_ms (or the server
    // answered with a status and no body: no JetStream). false: they could not be sent.
    // Throws bad_alloc.
    bool request_all(const std::vector<ApiRequest> &reqs, std::vector<std::string> &answers, int64_t timeout_ms);

  private:
    natsConnection *nc_ = nullptr;
    natsSubscription *sub_ = nullptr;
    std::string base_;
    uint64_t next_ = 0; // the number the next request's answer subject gets
};
// Whether answer is a JetStream API answer of type (e.g. "stream_info_response") that names no
// error: the server writes the "error" member right after the type.
bool api_ok(const std::string &answer, const char *type);

// A message's payload as text (an API answer, an object's info): empty when it has none.
std::string msg_text(natsMsg *m); // throws bad_alloc
// A message this code owns: destroyed on every way out.
using OwnedMsg = std::unique_ptr<natsMsg, void (*)(natsMsg *)>;
inline OwnedMsg own_msg(natsMsg *m) noexcept { return OwnedMsg(m, natsMsg_Destroy); }
// A decimal u64 of 1 to 19 digits and nothing else (untrusted text: a field, a subject token).
bool to_u64(std::string_view s, uint64_t &v) noexcept;

// The value of member key of the JSON object that is text (the outermost one: members of the
// objects inside it are not seen, so another client's metadata cannot stand in for a field):
// a string's characters (false when it holds an escape: no member read here needs one), a
// number or true/false/null as written, or an object's or array's whole text (to look into
// with json_member again). false when absent, or when the text is not one valid JSON value
// nested at most kJsonMaxDepth deep (untrusted: read with the wire decoders' JsonDoc).
// Throws bad_alloc.
constexpr unsigned kJsonMaxDepth = 32;
bool json_member(std::string_view text, const char *key, std::string &out);

// A subject token: non-empty, no '.', '*', '>' or whitespace.
bool valid_token(const std::string &s) noexcept;

} // namespace kvreg::nats
