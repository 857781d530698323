// The replay service (see net_replay.hpp). Compiled only with KVREG_WITH_ZMQ.
#include "net/replay.hpp"

#include <cerrno>
#include <cstring>
#include <new>

#include "kvreg_net.h"
#include "net/zmq.hpp"

namespace kvreg::net {

namespace {

const unsigned char kEndSeq[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// What libzmq holds for one batch it was given zero-copy: released by libzmq (on its I/O
// thread, or ours) once the batch is written to the network or dropped.
struct Lease {
    ReplayEntry *entry;
    ReplayServer::Tally *tally;
    uint64_t len;
    // Stored (release) once the lease is complete, read (acquire) by release(): libzmq hands
    // the message to its I/O thread through atomics a race detector cannot see, so this is
    // the hand-over it sees (the sender's writes to the lease, tally and entry come before).
    std::atomic<bool> handed{false};
};

void release(void *, void *hint) noexcept {
    Lease *l = static_cast<Lease *>(hint);
    (void)l->handed.load(std::memory_order_acquire);
    l->tally->bytes.fetch_sub(l->len, std::memory_order_release);
    l->tally->counters->queued.fetch_sub(l->len, std::memory_order_relaxed);
    l->entry->unref();
    l->tally->unref();
    delete l;
}

} // namespace

void ReplayServer::Tally::unref() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        counters->slots.fetch_sub(1, std::memory_order_release); // the slot is free again
        delete this;
    }
}

void ReplayServer::configure(void *router, const std::string *topic, const std::string *end_topic, uint64_t max_replays,
                             uint64_t max_bytes) noexcept {
    router_ = router;
    topic_ = topic;
    end_topic_ = end_topic;
    max_replays_ = max_replays ? max_replays : 1;
    share_ = max_bytes / max_replays_;
    if (share_ == 0) share_ = 1;
}

void ReplayServer::reset() noexcept {
    for (auto &s : streams_) s->tally->unref();
    streams_.clear();
    rr_ = 0;
}

bool ReplayServer::send_head(const std::string &id, bool &gone_peer) noexcept {
    // The only frame that can fail: ROUTER_MANDATORY makes it EAGAIN when the requester's
    // queue is at the high-water mark, EHOSTUNREACH when it is gone. The frames after it in
    // the same message always go (libzmq checks the limit per message).
    if (zmq_send(router_, id.data(), id.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) return true;
    gone_peer = errno != EAGAIN;
    return false;
}

bool ReplayServer::send_marker(const std::string &id, const char *topic, bool &gone_peer) noexcept {
    if (!send_head(id, gone_peer)) return false;
    zmq_send(router_, "", 0, ZMQ_SNDMORE);
    zmq_send(router_, topic, std::strlen(topic), ZMQ_SNDMORE);
    zmq_send(router_, kEndSeq, 8, ZMQ_SNDMORE);
    zmq_send(router_, "", 0, 0);
    return true;
}

ReplayServer::Sent ReplayServer::send_batch(Stream &s, uint64_t seq, ReplayEntry *e) noexcept {
    Lease *l = new (std::nothrow) Lease{e, s.tally, e->len, {false}};
    if (!l) return Sent::later; // out of memory: tried again at the next step
    zmq_msg_t payload;
    if (zmq_msg_init_data(&payload, e->data(), e->len, release, l) != 0) {
        delete l;
        return Sent::later;
    }
    // From here the lease is libzmq's: release() runs whatever happens to the message.
    e->ref();
    s.tally->refs.fetch_add(1, std::memory_order_relaxed);
    s.tally->bytes.fetch_add(l->len, std::memory_order_relaxed);
    c_.queued.fetch_add(l->len, std::memory_order_relaxed);
    l->handed.store(true, std::memory_order_release);
    unsigned char seq8[8];
    put_be64(seq8, seq);
    bool gone_peer = false;
    if (!send_head(s.id, gone_peer)) {
        zmq_msg_close(&payload); // release(): nothing was queued
        return gone_peer ? Sent::peer_gone : Sent::later;
    }
    zmq_send(router_, "", 0, ZMQ_SNDMORE);
    zmq_send(router_, topic_->data(), topic_->size(), ZMQ_SNDMORE);
    zmq_send(router_, seq8, 8, ZMQ_SNDMORE);
    if (zmq_msg_send(&payload, router_, 0) < 0) zmq_msg_close(&payload);
    c_.batches.fetch_add(1, std::memory_order_relaxed);
    return Sent::ok;
}

void ReplayServer::begin(Stream &s, uint64_t start, const ReplayRing &ring, uint64_t next_seq) noexcept {
    // vLLM's answer: every kept batch with seq >= start, as the ring is now (batches made
    // meanwhile go live); a start no longer kept begins at the oldest kept.
    const uint64_t first = ring.size() ? ring.first_seq() : next_seq;
    s.next = start < first ? first : start;
    s.end = next_seq;
    if (s.next > s.end) s.next = s.end;
    s.end_topic = nullptr;
}

void ReplayServer::on_request(const Frames &req, const ReplayRing &ring, uint64_t next_seq) noexcept {
    // [identity, "", start8] (a REQ client, or a DEALER that sends the empty delimiter itself).
    if (req.count() != 3 || req.size(1) != 0 || req.size(2) != 8) {
        c_.bad.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const uint64_t start = get_be64(req.data(2));
    try {
        std::string id(reinterpret_cast<const char *>(req.data(0)), req.size(0));
        for (auto &s : streams_) {
            if (s->id != id) continue;
            // Its answer is still going: this one follows it (never interleaved with it).
            if (s->waiting.size() >= kQueuedPerStream) {
                c_.bad.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            s->waiting.push_back(start);
            return;
        }
        if (c_.slots.load(std::memory_order_acquire) >= max_replays_) {
            // Busy: the end marker at once, nothing before it. A requester that does not read
            // even this finds its queue full and the marker dropped: it is counted either way.
            c_.busy.fetch_add(1, std::memory_order_relaxed); // before: the requester may look
            bool gone_peer = false;
            send_marker(id, KVREG_PUB_REPLAY_BUSY, gone_peer);
            return;
        }
        auto s = std::make_unique<Stream>();
        s->id = std::move(id);
        Tally *t = new Tally;
        t->counters = &c_;
        c_.slots.fetch_add(1, std::memory_order_relaxed);
        s->tally = t;
        begin(*s, start, ring, next_seq);
        try {
            streams_.push_back(std::move(s)); // strong guarantee: s is still ours if it throws
        } catch (...) {
            t->unref();
            throw;
        }
    } catch (...) {
        c_.bad.fetch_add(1, std::memory_order_relaxed); // out of memory: not answered
    }
}

size_t ReplayServer::advance(Stream &s, const ReplayRing &ring, uint64_t next_seq, size_t max, bool &done,
                             bool &blocked) noexcept {
    size_t sent = 0;
    done = blocked = false;
    while (sent < max) {
        if (!s.end_topic && s.next < s.end) {
            ReplayEntry *e = ring.at(s.next);
            if (!e) {
                // Overwritten before this reader took it (or lost to out of memory).
                s.end_topic = KVREG_PUB_REPLAY_GONE;
                continue;
            }
            // This slot's share of the queue is full: wait until libzmq writes some out.
            const uint64_t held = s.tally->bytes.load(std::memory_order_acquire);
            if (held > 0 && held + e->len > share_) {
                blocked = true;
                return sent;
            }
            const Sent r = send_batch(s, s.next, e);
            if (r != Sent::ok) {
                // peer_gone: the requester went away, nothing more to send to it.
                (r == Sent::peer_gone ? done : blocked) = true;
                return sent;
            }
            s.next++;
            sent++;
            continue;
        }
        // The batches are done (or gone): the end marker, then the next request, if any.
        const char *topic = s.end_topic ? s.end_topic : end_topic_->c_str();
        bool gone_peer = false;
        if (!send_marker(s.id, topic, gone_peer)) {
            if (gone_peer) {
                done = true;
            } else {
                blocked = true;
            }
            return sent;
        }
        sent++;
        if (s.end_topic) { // KVREG_PUB_REPLAY_GONE
            c_.gone.fetch_add(1, std::memory_order_relaxed);
        } else {
            c_.served.fetch_add(1, std::memory_order_relaxed);
        }
        if (s.waiting.empty()) {
            done = true;
            return sent;
        }
        const uint64_t start = s.waiting.front();
        s.waiting.pop_front();
        begin(s, start, ring, next_seq);
    }
    return sent;
}

bool ReplayServer::step(const ReplayRing &ring, uint64_t next_seq, Frames &frames) noexcept {
    size_t requests = 0;
    while (requests < kRequestsPerStep && frames.recv(router_, ZMQ_DONTWAIT)) {
        on_request(frames, ring, next_seq);
        requests++;
    }
    bool more = requests == kRequestsPerStep; // more may be waiting
    size_t budget = kBatchesPerStep;
    const size_t n = streams_.size();
    for (size_t k = 0; k < n && budget > 0; k++) {
        Stream &s = *streams_[(rr_ + k) % n];
        bool done = false, blocked = false;
        const size_t sent = advance(s, ring, next_seq, budget < kSlice ? budget : kSlice, done, blocked);
        budget -= sent;
        if (done) {
            s.tally->unref(); // the slot stays held while libzmq has batches of it
            s.tally = nullptr;
        } else if (!blocked) {
            more = true; // its slice ran out, not its requester's patience
        }
    }
    if (n) rr_ = (rr_ + 1) % n;
    if (budget == 0) more = true;
    // Finished streams go (order kept: the round robin only needs to move on).
    for (size_t i = 0; i < streams_.size();) {
        if (streams_[i]->tally) {
            i++;
        } else {
            streams_.erase(streams_.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
    return more;
}

} // namespace kvreg::net
