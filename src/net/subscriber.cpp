// Subscriber: options, sockets, the run loop and frame checks (see net_subscriber.hpp).
#include "net/subscriber.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <random>
#include <thread>

#include "net/endpoint.hpp"
#include "net/instance.hpp"
#include "net/zmq.hpp"

namespace kvreg::net {

namespace {
// Most messages read from one socket before looking at the others (fairness between
// publishers), and the longest a run waits without checking the stop flag.
constexpr int kDrainPerSocket = 1024;
constexpr long kStopCheckMs = 100;
constexpr int kMonitorEvents = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED;
} // namespace

Subscriber::~Subscriber() {
    for (Endpoint &e : eps_) {
        if (e.monitor) zmq_close(e.monitor);
        if (e.sub) zmq_close(e.sub);
        if (e.dealer) zmq_close(e.dealer);
    }
    if (ctx_) term_context(ctx_);
    kvreg_wire_decoder_free(dec_);
}

int Subscriber::init() {
    std::random_device rd; // the back-off's jitter differs between subscribers
    rng_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    ctx_ = zmq_ctx_new();
    if (!ctx_) return KVREG_ENOMEM;
    return kvreg_wire_decoder_new(&dec_, static_cast<uint32_t>(format_));
}

int Subscriber::set(uint32_t option, uint64_t v) noexcept {
    if (in_callback_) return KVREG_EBUSY;
    std::lock_guard<std::mutex> lk(opts_mu_);
    if (!eps_.empty()) return KVREG_ESTATE;
    switch (option) {
    case KVREG_SUB_OPT_FORMAT: {
        kvreg_wire_decoder *d = nullptr;
        if (v > UINT32_MAX) return KVREG_EINVAL;
        const int rc = kvreg_wire_decoder_new(&d, static_cast<uint32_t>(v));
        if (rc != KVREG_OK) return rc;
        kvreg_wire_decoder_free(dec_);
        dec_ = d;
        format_ = v;
        return KVREG_OK;
    }
    case KVREG_SUB_OPT_FROM_SEQ:
        from_seq_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_REPLAY_TIMEOUT_MS:
        if (v < 1 || v > 3600000) return KVREG_EINVAL;
        replay_timeout_ms_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_RCVHWM:
        if (v > INT_MAX) return KVREG_EINVAL;
        rcvhwm_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_MAX_MSG_SIZE:
        if (v > INT64_MAX) return KVREG_EINVAL;
        max_msg_size_ = v == 0 ? -1 : static_cast<int64_t>(v);
        return KVREG_OK;
    case KVREG_SUB_OPT_MAX_PUBLISHERS:
        if (v < 1) return KVREG_EINVAL;
        max_publishers_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_IDLE_MS:
        idle_ms_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_MAX_HELD_BYTES:
        max_held_bytes_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_RCV_BYTES:
        rcv_bytes_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_MAX_WAITING:
        if (v < 1) return KVREG_EINVAL;
        max_waiting_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_MALFORMED_PAUSE_MS:
        if (v > 60000) return KVREG_EINVAL;
        malformed_pause_ms_ = v;
        return KVREG_OK;
    case KVREG_SUB_OPT_MAX_HELD_BYTES_PUBLISHER:
        max_held_publisher_ = v;
        return KVREG_OK;
    default:
        return KVREG_EINVAL;
    }
}

int Subscriber::set_string(uint32_t option, const char *value) {
    if (in_callback_) return KVREG_EBUSY;
    if (option != KVREG_SUB_TOPIC) return KVREG_EINVAL;
    if (!eps_.empty()) return KVREG_ESTATE;
    std::string copy(value ? value : "");
    std::lock_guard<std::mutex> lk(opts_mu_);
    topic_.swap(copy);
    return KVREG_OK;
}

int Subscriber::get(uint32_t option, uint64_t *v) const noexcept {
    std::lock_guard<std::mutex> lk(opts_mu_);
    switch (option) {
    case KVREG_SUB_OPT_FORMAT: *v = format_; return KVREG_OK;
    case KVREG_SUB_OPT_FROM_SEQ: *v = from_seq_; return KVREG_OK;
    case KVREG_SUB_OPT_REPLAY_TIMEOUT_MS: *v = replay_timeout_ms_; return KVREG_OK;
    case KVREG_SUB_OPT_RCVHWM: *v = rcvhwm_; return KVREG_OK;
    case KVREG_SUB_OPT_MAX_WAITING: *v = max_waiting_; return KVREG_OK;
    case KVREG_SUB_OPT_MAX_MSG_SIZE: // stored as libzmq wants it: -1 for "no limit"
        *v = max_msg_size_ < 0 ? 0 : static_cast<uint64_t>(max_msg_size_);
        return KVREG_OK;
    case KVREG_SUB_OPT_MAX_PUBLISHERS: *v = max_publishers_; return KVREG_OK;
    case KVREG_SUB_OPT_IDLE_MS: *v = idle_ms_; return KVREG_OK;
    case KVREG_SUB_OPT_MAX_HELD_BYTES: *v = max_held_bytes_; return KVREG_OK;
    case KVREG_SUB_OPT_RCV_BYTES: *v = rcv_bytes_; return KVREG_OK;
    case KVREG_SUB_OPT_MALFORMED_PAUSE_MS: *v = malformed_pause_ms_; return KVREG_OK;
    case KVREG_SUB_OPT_MAX_HELD_BYTES_PUBLISHER: *v = max_held_publisher_; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

int Subscriber::get_string(uint32_t option, std::string &out) const {
    if (option != KVREG_SUB_TOPIC) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lk(opts_mu_);
    out = topic_;
    return KVREG_OK;
}

// One DEALER per request: opened when a replay or probe is asked for, closed when it ends
// (marker, deadline, cap, busy probe). A ROUTER learns a requester's identity only from its
// request, so between requests it has nobody to send to: what it sends after an answer (a
// peer that answered a probe, then pushed 300 x 1 MiB while run() was idle) goes nowhere,
// where a DEALER kept open read all of it into this process. A late answer to an abandoned
// request cannot be taken for the next one's either. Costs a connection per request.
bool Subscriber::open_dealer(Endpoint &e) {
    e.dealer = zmq_socket(ctx_, ZMQ_DEALER);
    std::string actual;
    // No receive limit while a request is in flight: a foreign ROUTER (vLLM's, SGLang's)
    // drops what its send queue cannot take, so a limit here would cut answers whenever
    // run() falls behind (a kvreg publisher's answer is bounded by its ring and waits).
    // Linger 0: an abandoned replay's frames are not worth waiting for.
    if (!e.dealer || !set_int(e.dealer, ZMQ_RCVHWM, 0) || !set_int(e.dealer, ZMQ_LINGER, 0) ||
        zmq_setsockopt(e.dealer, ZMQ_MAXMSGSIZE, &max_msg_size_, sizeof max_msg_size_) != 0 ||
        !open_endpoint(e.dealer, e.replay_endpoint, false, actual)) {
        if (e.dealer) zmq_close(e.dealer);
        e.dealer = nullptr;
        return false;
    }
    return true;
}

void Subscriber::close_dealer(Endpoint &e) noexcept {
    if (e.dealer) zmq_close(e.dealer);
    e.dealer = nullptr;
}

int Subscriber::add(const char *endpoint, const char *replay, uint32_t *index) {
    if (in_callback_) return KVREG_EBUSY;
    if (!endpoint || !*endpoint || (replay && !*replay) || eps_.size() >= UINT32_MAX) return KVREG_EINVAL;
    eps_.emplace_back();
    Endpoint &e = eps_.back();
    e.endpoint = endpoint;
    e.has_replay = replay != nullptr;
    if (replay) e.replay_endpoint = replay;
    e.sub = zmq_socket(ctx_, ZMQ_SUB);
    // MAXMSGSIZE: libzmq drops a connection whose next message is larger, from its size
    // header, before reading the body (a peer cannot make us hold it).
    bool ok = e.sub && set_int(e.sub, ZMQ_RCVHWM, 1) && // until trusted (trust())
              set_int(e.sub, ZMQ_LINGER, 0) &&
              zmq_setsockopt(e.sub, ZMQ_MAXMSGSIZE, &max_msg_size_, sizeof max_msg_size_) == 0 &&
              zmq_setsockopt(e.sub, ZMQ_SUBSCRIBE, topic_.data(), topic_.size()) == 0;
    if (ok) {
        // The monitor exists before the first connection, so that connection is event 1 and
        // any later one (a reconnect: maybe a restarted publisher) is seen as such. Its
        // events also report connections libzmq closed (a message over MAX_MSG_SIZE).
        const std::string mon = "inproc://kvreg-sub-monitor-" + std::to_string(eps_.size() - 1);
        ok = zmq_socket_monitor(e.sub, mon.c_str(), kMonitorEvents) == 0 &&
             (e.monitor = zmq_socket(ctx_, ZMQ_PAIR)) != nullptr && set_int(e.monitor, ZMQ_LINGER, 0) &&
             zmq_connect(e.monitor, mon.c_str()) == 0;
    }
    ok = ok && open_endpoint(e.sub, e.endpoint, false, e.actual);
    if (ok && e.has_replay) { // checks the replay endpoint; the first request opens it again
        ok = open_dealer(e);
        close_dealer(e);
    }
    if (!ok) {
        if (e.monitor) zmq_close(e.monitor);
        if (e.dealer) zmq_close(e.dealer);
        if (e.sub) zmq_close(e.sub);
        eps_.pop_back();
        return KVREG_EINVAL;
    }
    // libzmq attaches a new connection's pipe (and sends it our subscription) only when this
    // thread next touches the socket: touch it now, so that a bound socket's first peers
    // are not left without a subscription until the first run (see kvreg_net.h).
    int events = 0;
    size_t elen = sizeof events;
    zmq_getsockopt(e.sub, ZMQ_EVENTS, &events, &elen);
    if (index) *index = static_cast<uint32_t>(eps_.size() - 1);
    return KVREG_OK;
}

// libzmq bounds its receive queue in messages (ZMQ_RCVHWM, per connection); a byte budget
// becomes a message count through the largest message it lets in. Past it libzmq stops
// reading the connection: the backlog waits in the kernel and at the publisher, whose own
// high-water mark drops batches as a gap (replayed or reported).
int Subscriber::live_rcvhwm() const noexcept {
    uint64_t hwm = rcvhwm_; // 0: no count bound
    if (rcv_bytes_ && max_msg_size_ > 0) {
        uint64_t by_bytes = rcv_bytes_ / static_cast<uint64_t>(max_msg_size_);
        if (by_bytes < 1) by_bytes = 1;
        if (hwm == 0 || by_bytes < hwm) hwm = by_bytes;
    }
    return hwm > INT_MAX ? INT_MAX : static_cast<int>(hwm);
}

void Subscriber::trust(Endpoint &e, bool replayed) {
    if (!replayed) e.malformed_run = 0;
    e.spoken = true;
    if (e.trusted) return;
    e.trusted = true;
    set_int(e.sub, ZMQ_RCVHWM, live_rcvhwm()); // libzmq applies it to the live pipes too
}

void Subscriber::malformed_live(Endpoint &e) {
    if (e.trusted) {
        e.trusted = false;
        set_int(e.sub, ZMQ_RCVHWM, 1);
    }
    if (malformed_pause_ms_ == 0) return;
    const uint32_t doublings = e.spoken ? std::min<uint32_t>(e.malformed_run, 6) : 6;
    e.malformed_run++;
    e.read_after = Clock::now() + std::chrono::milliseconds(malformed_pause_ms_ << doublings);
    count(KVREG_SUB_STAT_MALFORMED_PAUSES);
}

int Subscriber::endpoint(uint32_t index, char *buf, size_t cap, size_t *len) const noexcept {
    if (index >= eps_.size()) return KVREG_ERANGE;
    return copy_out(eps_[index].actual, buf, cap, len);
}

int Subscriber::set_batch_fn(kvreg_sub_batch_fn fn, void *ud) noexcept {
    if (in_callback_) return KVREG_EBUSY;
    batch_fn_ = fn;
    batch_ud_ = ud;
    return KVREG_OK;
}

int Subscriber::set_notice_fn(kvreg_sub_notice_fn fn, void *ud) noexcept {
    if (in_callback_) return KVREG_EBUSY;
    notice_fn_ = fn;
    notice_ud_ = ud;
    return KVREG_OK;
}

int Subscriber::stat(uint32_t s, uint64_t *value) const noexcept {
    if (s < 1 || s > kLastStat) return KVREG_EINVAL;
    *value = stats_[s].load(std::memory_order_relaxed);
    return KVREG_OK;
}

int Subscriber::instance(uint32_t publisher, const char *topic, uint64_t *value) const {
    const size_t ep = publisher;
    std::string key(reinterpret_cast<const char *>(&ep), sizeof ep);
    key.append(topic);
    const auto it = streams_.find(key);
    if (it == streams_.end()) return KVREG_ENOENT;
    *value = it->second->instance;
    return KVREG_OK;
}

void Subscriber::notice(uint32_t kind, const Stream *s, size_t ep, uint64_t first, uint64_t last,
                        const char *message, bool replay_requested, bool has_seq) {
    if (kind == KVREG_SUB_LOSS) count(KVREG_SUB_STAT_LOST, last - first + 1);
    if (kind == KVREG_SUB_GAP) count(KVREG_SUB_STAT_GAPS);
    if (kind == KVREG_SUB_RESET) count(KVREG_SUB_STAT_RESETS);
    if (kind == KVREG_SUB_MALFORMED) count(KVREG_SUB_STAT_MALFORMED);
    if (kind == KVREG_SUB_DISCONNECTED) count(KVREG_SUB_STAT_DISCONNECTS);
    if (!notice_fn_) return;
    kvreg_sub_notice n{};
    n.kind = kind;
    n.publisher = static_cast<uint32_t>(ep);
    n.endpoint = eps_[ep].endpoint.c_str();
    n.topic = s ? s->topic.c_str() : "";
    n.first = first;
    n.last = last;
    n.count = kind == KVREG_SUB_GAP || kind == KVREG_SUB_LOSS ? last - first + 1 : 0;
    if (kind == KVREG_SUB_REPLAY_DONE) { // first carries the count
        n.count = first;
        n.first = n.last = 0;
    }
    n.replay_requested = replay_requested;
    n.has_seq = has_seq;
    n.message = message;
    in_callback_ = true;
    notice_fn_(&n, notice_ud_);
    in_callback_ = false;
}

Subscriber::Stream *Subscriber::stream_for(size_t ep, std::string_view t) {
    const auto now = Clock::now();
    key_.assign(reinterpret_cast<const char *>(&ep), sizeof ep);
    key_.append(t);
    const auto it = streams_.find(key_);
    if (it != streams_.end()) {
        Stream &s = *it->second;
        s.last_active = now;
        lru_.splice(lru_.begin(), lru_, s.lru);
        return &s;
    }
    // A FROM_SEQ stream of this endpoint learns its topic, or a new publisher. What may throw
    // (std::bad_alloc) comes before the stream is linked anywhere, so a throw leaves the
    // subscriber as it was: its strings, its LRU node, the map's room (so that the insert
    // does not rehash) and, for the map, its node.
    auto adopt = unknown_.end();
    for (auto u = unknown_.begin(); u != unknown_.end(); ++u)
        if ((*u)->ep == ep) {
            adopt = u;
            break;
        }
    const bool adopted = adopt != unknown_.end();
    if (!adopted && !make_room()) {
        notice(KVREG_SUB_EVICTED, nullptr, ep, 0, 0,
               "message of a new publisher dropped: KVREG_SUB_OPT_MAX_PUBLISHERS reached and "
               "the oldest are busy with replays",
               false, false);
        return nullptr;
    }
    StreamMap::node_type node; // the last evicted stream, made new (capacities kept), or empty
    std::unique_ptr<Stream> up;
    if (!adopted) {
        if (spare_) {
            node = std::move(spare_);
            node.mapped()->reset();
        } else {
            up = std::make_unique<Stream>();
        }
    }
    Stream *s = adopted ? adopt->get() : up ? up.get() : node.mapped().get();
    s->topic.assign(t);
    parse_topic(s->topic, s->pod, s->model);
    std::list<Stream *> link;
    if (!spare_lru_.empty()) link.splice(link.begin(), spare_lru_, spare_lru_.begin());
    else link.push_back(nullptr);
    streams_.reserve(streams_.size() + 1);
    if (node) {
        node.key().assign(key_);
        streams_.insert(std::move(node)); // no rehash (reserved): does not throw
    } else {
        streams_.emplace(key_, adopted ? std::move(*adopt) : std::move(up)); // the node first: a throw moves nothing
    }
    // Linked: nothing below throws.
    if (adopted) {
        unknown_.erase(adopt); // counted in its endpoint's streams when it was made
    } else {
        s->ep = ep;
        s->next = from_seq_ == UINT64_MAX ? 0 : from_seq_;
        eps_[ep].streams++;
    }
    s->topic_known = true;
    s->last_active = now;
    link.front() = s;
    lru_.splice(lru_.begin(), link);
    s->lru = lru_.begin();
    count(KVREG_SUB_STAT_PUBLISHERS);
    return s;
}

// Before a new stream is made: drop the ones idle for IDLE_MS, and the least recently active
// one when MAX_PUBLISHERS are kept. A stream with a replay running or asked for, or batches
// held, is never dropped (its state is in use); only a few of the oldest are looked at.
bool Subscriber::make_room() {
    const auto now = Clock::now();
    const auto idle = std::chrono::milliseconds(idle_ms_);
    auto it = lru_.end();
    for (int looked = 0; it != lru_.begin() && looked < 8; looked++) {
        --it;
        Stream *old = *it;
        const bool over = streams_.size() >= max_publishers_;
        const bool stale = idle_ms_ && now - old->last_active >= idle;
        if (!over && !stale) return true;
        if (old->holds() || !old->waiting.empty()) continue;
        const size_t ep = old->ep;
        // Reported before it goes: the notice names its topic.
        notice(KVREG_SUB_EVICTED, old, ep, old->next, old->next,
               stale ? "publisher state dropped after KVREG_SUB_OPT_IDLE_MS without a message; "
                       "if it sends again it is a new stream"
                     : "publisher state dropped: KVREG_SUB_OPT_MAX_PUBLISHERS reached; if it "
                       "sends again it is a new stream",
               false, false);
        auto next = std::next(it);
        // Not key_: it holds the key of the stream being made. The stream and its lru_ node
        // are kept for the next new one (spare_), the one kept before freed.
        evict_key_.assign(reinterpret_cast<const char *>(&ep), sizeof ep);
        evict_key_.append(old->topic);
        spare_lru_.clear();
        spare_lru_.splice(spare_lru_.begin(), lru_, it);
        spare_ = streams_.extract(evict_key_);
        eps_[ep].streams--; // never a holding one: the pause condition stays true to its counts
        uncount(KVREG_SUB_STAT_PUBLISHERS);
        count(KVREG_SUB_STAT_EVICTED);
        it = next;
        looked--; // an eviction does not use up the look-ahead
    }
    return streams_.size() < max_publishers_;
}

// With FROM_SEQ, every publisher with a replay endpoint is asked for its history before any
// live message arrives (its topic is learned from the answers).
void Subscriber::start_from_seq() {
    if (from_seq_ == UINT64_MAX) return;
    for (size_t i = 0; i < eps_.size(); i++) {
        if (!eps_[i].has_replay) continue;
        unknown_.push_back(std::make_unique<Stream>());
        Stream &s = *unknown_.back();
        s.ep = i;
        eps_[i].streams++;
        s.topic_known = false;
        s.next = from_seq_;
        request_replay(s, from_seq_);
    }
}

void Subscriber::read_live(size_t ep, Frames &f) {
    // [topic, seq as 8 bytes big-endian, payload], as vLLM sends and its consumers require.
    count(KVREG_SUB_STAT_LIVE_READ);
    if (f.count() != 3) {
        notice(KVREG_SUB_MALFORMED, nullptr, ep, 0, 0, "live message without exactly 3 frames", false, false);
        malformed_live(eps_[ep]);
        return;
    }
    if (f.size(1) != 8 || get_be64(f.data(1)) == UINT64_MAX) { // 2^64 - 1: the end marker's, next would wrap
        notice(KVREG_SUB_MALFORMED, nullptr, ep, 0, 0,
               f.size(1) != 8 ? "live message whose seq frame is not 8 bytes"
                              : "live message with the end marker's seq (2^64 - 1)",
               false, false);
        malformed_live(eps_[ep]);
        return;
    }
    std::string_view topic(reinterpret_cast<const char *>(f.data(0)), f.size(0));
    const uint64_t instance = strip_topic_instance(topic);
    // A stream keeps its topic about three times (key, topic, pod) for as long as it lives:
    // unbounded topics would let a peer make each of MAX_PUBLISHERS streams cost MAX_MSG_SIZE
    // several times over. Checked before any stream state exists.
    if (topic.size() > KVREG_SUB_MAX_TOPIC_LEN) {
        notice(KVREG_SUB_MALFORMED, nullptr, ep, 0, 0,
               "live message whose topic is longer than KVREG_SUB_MAX_TOPIC_LEN", false, false);
        malformed_live(eps_[ep]);
        return;
    }
    Stream *sp = stream_for(ep, topic);
    if (!sp) return;
    Stream &s = *sp;
    const uint64_t seq = get_be64(f.data(1));
    // A new instance id is a restart whatever the seq; without ids, only a seq that went back
    // (or a restart whose batch the held bounds refused: Stream::restart_pending).
    bool restarted = (s.live_seen && seq <= s.live_last) || s.restart_pending;
    s.restart_pending = false; // hold() sets it again if it refuses this one too
    if (instance) {
        if (s.instance && instance != s.instance) restarted = true;
        s.instance = instance;
    } else if (restarted) {
        // A foreign (or untagged) publisher went back: whatever id was known is the old
        // process's; learn the new one from the next end marker.
        s.instance = 0;
        s.probed = false;
    }
    s.live_seen = true;
    s.live_last = seq;
    Payload p;
    f.take(2, p); // a move: held as received if it must wait (see Payload)
    on_live(s, seq, p, restarted);
}

void Subscriber::read_replay(size_t ep, Frames &f) {
    // After the empty delimiter: [topic, seq8, payload] (vLLM >= 0.26) or [seq8, payload]
    // (older vLLM, SGLang). The end marker has seq ff x 8 and an empty payload.
    Endpoint &e = eps_[ep];
    Stream *s = e.replay_owner;
    const size_t n = f.count();
    if (n < 3 || n > 4 || f.size(0) != 0 || f.size(n - 2) != 8) {
        notice(KVREG_SUB_MALFORMED, s, ep, 0, 0, "replay message that is not [\"\", topic, seq, payload]",
               false, false);
        return;
    }
    // An answer nobody waits for (cannot happen: the DEALER is closed when its request
    // ends), or one that comes while the owner waits out a busy answer (a ROUTER answering
    // twice).
    if (!s || s->stage == Stage::kBusyWait) return;
    std::string_view topic;
    if (n == 4) topic = {reinterpret_cast<const char *>(f.data(1)), f.size(1)};
    const uint64_t seq = get_be64(f.data(n - 2));
    if (seq == UINT64_MAX && f.size(n - 1) == 0) {
        if (topic == KVREG_PUB_REPLAY_BUSY) {
            on_busy(*s);
            return;
        }
        // A kvreg publisher names its instance in the marker's topic frame (else 0).
        finish_replay(*s, e.replay_foreign ? End::kForeign : End::kMarker, parse_instance_tag(topic));
        return;
    }
    if (seq == UINT64_MAX) { // the marker's seq with a payload: no batch has it (next would wrap)
        notice(KVREG_SUB_MALFORMED, s, ep, seq, seq, "replay batch with the end marker's seq (2^64 - 1): not applied");
        return;
    }
    uint64_t answer_instance = 0;
    if (n == 4) {
        answer_instance = strip_topic_instance(topic);
        if (topic.size() > KVREG_SUB_MAX_TOPIC_LEN) {
            // No stream can have it (read_live()): not the asking topic, nor one to adopt.
            e.replay_foreign = true;
            notice(KVREG_SUB_MALFORMED, s, ep, seq, seq,
                   "replay batch whose topic is longer than KVREG_SUB_MAX_TOPIC_LEN: not applied");
            return;
        }
        if (!s->topic_known) {
            if (!stream_for(ep, topic)) return; // adopts s (always has room: s exists)
        } else if (topic != s->topic) {
            // The ROUTER answered with another publisher's batches (it serves another topic
            // than the one whose gap asked: several publishers share this endpoint). Applying
            // them would put one publisher's blocks under another's name.
            e.replay_foreign = true;
            notice(KVREG_SUB_MALFORMED, s, ep, seq, seq,
                   "replay batch of another topic than the one asked for: not applied");
            return;
        }
        // Tagged with another instance than the stream's: the ROUTER answering is a new process
        // (the publisher restarted since the request). Its batches continue no numbering of
        // the old one's: the answer ends here as the marker of the new instance would end it
        // (RESET, then a resync from 0), none of it applied. Applied, they went out as the old
        // stream's and again after the RESET.
        if (answer_instance && s->instance && answer_instance != s->instance) {
            finish_replay(*s, End::kMarker, answer_instance);
            return;
        }
    }
    // The deadline runs from the request; only progress (a seq not delivered before) moves
    // it: a peer that repeats itself cannot keep the gap open. Nor can one that makes
    // progress slowly (a seq per timeout of a gap of millions): never past the cap.
    const uint64_t before = s->next;
    on_replay_batch(*s, seq, f.data(n - 1), f.size(n - 1));
    if (s->next > before && e.replay_owner == s) {
        e.replay_deadline = capped(e, Clock::now());
        e.replay_grace = false;
    }
}

void Subscriber::read_monitor(size_t ep) {
    // [event u16 + value u32, address]. Every connection after the first may be a new
    // publisher process on the same address: ask each stream's replay ROUTER for its id.
    Endpoint &e = eps_[ep];
    Frames f;
    while (e.monitor && f.recv(e.monitor, ZMQ_DONTWAIT)) {
        if (f.count() < 1 || f.size(0) < 6) continue;
        const uint16_t event = static_cast<uint16_t>(f.data(0)[0] | f.data(0)[1] << 8); // host order (LE)
        if (event == ZMQ_EVENT_DISCONNECTED) {
            // libzmq reports a message over ZMQ_MAXMSGSIZE only by closing the connection.
            notice(KVREG_SUB_DISCONNECTED, nullptr, ep, 0, 0,
                   "a connection closed: its publisher went away, or sent a message over "
                   "KVREG_SUB_OPT_MAX_MSG_SIZE (dropped unread)",
                   false, false);
            continue;
        }
        if (event != ZMQ_EVENT_CONNECTED && event != ZMQ_EVENT_ACCEPTED) continue;
        if (++e.connects < 2 || !e.has_replay) continue;
        for_each_stream([&](Stream &s) {
            if (s.ep != ep) return;
            s.probed = false;
            probe(s);
        });
    }
}

void Subscriber::check_replay_timeouts() {
    const auto now = Clock::now();
    for (Endpoint &e : eps_) {
        if (!e.replay_owner) continue;
        if (e.replay_owner->stage == Stage::kBusyWait && now >= e.retry_at && now < e.replay_deadline) {
            retry_busy(e);
            continue;
        }
        if (now < e.replay_deadline) continue;
        // Silence is measured at the socket: answers already waiting there (the run loop was
        // busy elsewhere) are not a timeout.
        int events = 0;
        size_t len = sizeof events;
        // Once per deadline: a flood of duplicates also leaves answers waiting, and must not
        // hold the gap open for ever.
        // (Not in kBusyWait: nothing it would read counts.)
        // (Nor past the cap: a peer that keeps answers waiting gets no more time than one
        // whose answers are read.)
        if (!e.replay_grace && e.replay_owner->stage != Stage::kBusyWait && now < e.replay_cap && e.dealer &&
            zmq_getsockopt(e.dealer, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN)) {
            e.replay_grace = true;
            e.replay_deadline = capped(e, now);
            continue;
        }
        finish_replay(*e.replay_owner, e.replay_owner->stage == Stage::kBusyWait ? End::kBusy
                                       : now >= e.replay_cap                     ? End::kCapped
                                                                                 : End::kTimeout);
    }
}

int Subscriber::run(int timeout_ms) {
    if (in_callback_) return KVREG_EBUSY;
    if (timeout_ms < -1) return KVREG_EINVAL;
    if (!ran_) {
        ran_ = true;
        start_from_seq();
    }
    const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    Frames frames;
    std::vector<zmq_pollitem_t> items;
    std::vector<std::pair<size_t, bool>> owners; // (endpoint, is the DEALER)
    std::vector<size_t> monitors;                // items that are monitor sockets
    for (bool first = true;; first = false) {
        if (stop_.exchange(false, std::memory_order_acq_rel)) break;
        const auto now = Clock::now();
        if (!first && timeout_ms >= 0 && now >= until) break;
        long wait = timeout_ms < 0 ? kStopCheckMs
                                   : std::min<long>(kStopCheckMs, static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1);
        if (first && timeout_ms == 0) wait = 0;
        items.clear();
        owners.clear();
        monitors.clear();
        for (size_t i = 0; i < eps_.size(); i++) {
            if (reads_live(eps_[i], now)) {
                items.push_back({eps_[i].sub, 0, ZMQ_POLLIN, 0});
                owners.push_back({i, false});
            } else if (!live_paused(eps_[i])) { // a malformed back-off: wake when it ends
                const auto left =
                    std::chrono::duration_cast<std::chrono::milliseconds>(eps_[i].read_after - now).count();
                wait = std::min<long>(wait, static_cast<long>(left) + 1);
            }
            if (eps_[i].monitor) {
                items.push_back({eps_[i].monitor, 0, ZMQ_POLLIN, 0});
                owners.push_back({i, true});
                monitors.push_back(items.size() - 1);
            }
            if (eps_[i].dealer) {
                items.push_back({eps_[i].dealer, 0, ZMQ_POLLIN, 0});
                owners.push_back({i, true});
            }
            // (Also when the owner's DEALER failed to open: its deadline reports that.)
            if (eps_[i].replay_owner) {
                const bool busy = eps_[i].replay_owner->stage == Stage::kBusyWait;
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    (busy ? std::min(eps_[i].retry_at, eps_[i].replay_deadline) : eps_[i].replay_deadline) -
                    now).count();
                wait = std::min<long>(wait, left < 0 ? 0 : static_cast<long>(left) + 1);
            }
        }
        if (items.empty()) {
            if (timeout_ms == 0) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(wait)); // nothing to read
            continue;
        }
        if (zmq_poll(items.data(), static_cast<int>(items.size()), wait) < 0) break;
        for (size_t k = 0; k < items.size(); k++) {
            if (!(items[k].revents & ZMQ_POLLIN)) continue;
            const auto [ep, dealer] = owners[k];
            if (std::find(monitors.begin(), monitors.end(), k) != monitors.end()) {
                read_monitor(ep);
                continue;
            }
            void *sock = dealer ? eps_[ep].dealer : eps_[ep].sub;
            // A replay that ends closes this DEALER (the next request opens another): stop
            // reading it then. A SUB socket that became paused (held bounds or a malformed
            // message) is not read on.
            for (int m = 0; m < kDrainPerSocket && sock && sock == (dealer ? eps_[ep].dealer : eps_[ep].sub) &&
                            (dealer || reads_live(eps_[ep], now));
                 m++) {
                if (!frames.recv(sock, ZMQ_DONTWAIT)) break;
                if (dealer) read_replay(ep, frames);
                else read_live(ep, frames);
                if (stop_.load(std::memory_order_relaxed)) break;
                // run(timeout) ends on time whatever keeps arriving (a message is at most
                // MAX_MSG_SIZE: one decode is the most it can overrun).
                if (timeout_ms > 0 && Clock::now() >= until) break;
            }
            if (timeout_ms > 0 && Clock::now() >= until) break;
        }
        check_replay_timeouts();
        if (timeout_ms == 0) break;
    }
    return KVREG_OK;
}

} // namespace kvreg::net
