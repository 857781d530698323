// Subscriber: per-publisher ordering (see net_subscriber.hpp and kvreg_net.h). Each stream
// delivers seqs in order, once each; a gap asks its endpoint's replay ROUTER for the missing
// seqs while later live batches wait; whatever cannot be had is named in a LOSS notice.
#include "net/subscriber.hpp"

#include <zmq.h>

#include "net/zmq.hpp"

namespace kvreg::net {

void Subscriber::on_live(Stream &s, uint64_t seq, const unsigned char *p, size_t len, bool restarted) {
    if (s.replaying || s.wants_replay) {
        hold(s, seq, p, len, restarted);
        return;
    }
    if (restarted && s.started) {
        // The live seqs went back: a new publisher process numbers from 0 again.
        notice(KVREG_SUB_RESET, &s, s.ep, s.next, seq, "seq went back: the publisher restarted");
        s.started = false;
        s.next = 0;
    }
    if (seq == s.next) {
        deliver(s, seq, p, len, false);
        probe(s); // learn the publisher's instance id once the stream runs
    } else if (seq > s.next) {
        on_gap(s, seq, p, len);
    } else {
        // Already delivered (a replay answered before this live copy arrived), or before the
        // seq the stream starts from.
        count(KVREG_SUB_STAT_DUPLICATES);
    }
}

void Subscriber::on_gap(Stream &s, uint64_t seq, const unsigned char *p, size_t len) {
    Endpoint &e = eps_[s.ep];
    const bool replay = e.has_replay && Clock::now() >= e.no_replay_until;
    notice(KVREG_SUB_GAP, &s, s.ep, s.next, seq - 1,
           s.started ? "seqs missing (publisher high-water mark or network)"
                     : "joined late: earlier seqs missing",
           replay);
    if (replay) {
        hold(s, seq, p, len, false);
        request_replay(s, s.next);
        return;
    }
    notice(KVREG_SUB_LOSS, &s, s.ep, s.next, seq - 1,
           e.has_replay ? "lost: the last replay failed, not retried yet" : "lost: no replay endpoint");
    deliver(s, seq, p, len, false);
}

void Subscriber::hold(Stream &s, uint64_t seq, const unsigned char *p, size_t len, bool restarted) {
    // Beyond the limit, newer batches are not kept: the next replay fetches them.
    if (s.waiting.size() >= max_waiting_ ||
        stats_[KVREG_SUB_STAT_HELD_BYTES].load(std::memory_order_relaxed) + len > max_held_bytes_) {
        count(KVREG_SUB_STAT_HELD_DROPPED);
        return;
    }
    s.waiting.push_back(Waiting{seq, std::vector<unsigned char>(p, p + len), restarted});
    count(KVREG_SUB_STAT_HELD_BATCHES);
    count(KVREG_SUB_STAT_HELD_BYTES, len);
}

void Subscriber::unhold(const Waiting &w) {
    uncount(KVREG_SUB_STAT_HELD_BATCHES);
    uncount(KVREG_SUB_STAT_HELD_BYTES, w.payload.size());
}

void Subscriber::request_replay(Stream &s, uint64_t from) {
    Endpoint &e = eps_[s.ep];
    s.replay_from = from;
    if (e.replay_owner && e.replay_owner != &s) {
        s.wants_replay = true; // the DEALER is busy with another stream's replay
        return;
    }
    unsigned char start[8];
    put_be64(start, from);
    // DEALER: the client sends the empty delimiter a REQ socket would add.
    if (zmq_send(e.dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(e.dealer, start, 8, ZMQ_DONTWAIT) < 0) {
        s.wants_replay = false;
        s.replaying = true; // let the timeout path report and move on
        e.replay_owner = &s;
        e.replay_deadline = Clock::now();
        return;
    }
    if (!s.probing) count(KVREG_SUB_STAT_REPLAYS);
    s.wants_replay = false;
    s.replaying = true;
    s.replay_count = 0;
    e.replay_owner = &s;
    e.replay_grace = false;
    e.replay_deadline = Clock::now() + std::chrono::milliseconds(replay_timeout_ms_);
}

// Held live batches older than a replayed one come before it: the replay answer can start
// after some of them (the ring moved on while the request was in flight), and then they are
// the only copy. Only what is neither held nor in the answer is lost.
void Subscriber::release_held_before(Stream &s, uint64_t seq) {
    while (!s.waiting.empty() && s.waiting.front().seq < seq && !s.waiting.front().restarted) {
        Waiting w = std::move(s.waiting.front());
        s.waiting.pop_front();
        unhold(w);
        if (w.seq < s.next) {
            count(KVREG_SUB_STAT_DUPLICATES);
            continue;
        }
        if (w.seq > s.next)
            notice(KVREG_SUB_LOSS, &s, s.ep, s.next, w.seq - 1,
                   "lost: not received live and no longer in the publisher's replay ring");
        deliver(s, w.seq, w.payload.data(), w.payload.size(), false);
    }
}

void Subscriber::on_replay_batch(Stream &s, uint64_t seq, const unsigned char *p, size_t len) {
    release_held_before(s, seq);
    if (seq < s.next) {
        count(KVREG_SUB_STAT_DUPLICATES);
        return;
    }
    if (seq > s.next)
        notice(KVREG_SUB_LOSS, &s, s.ep, s.next, seq - 1, "lost: no longer in the publisher's replay ring");
    s.replay_count++;
    deliver(s, seq, p, len, true);
}

// A probe: a replay request from the next seq, whose answer is normally just the end marker,
// which names the publisher's instance when it is a kvreg publisher. Once per stream, and
// again after its endpoint reconnects (read_monitor).
void Subscriber::probe(Stream &s) {
    const Endpoint &e = eps_[s.ep];
    if (s.probed || !e.has_replay || !e.dealer || s.replaying || s.wants_replay ||
        Clock::now() < e.no_replay_until)
        return;
    s.probed = true;
    s.probing = true;
    request_replay(s, s.next);
}

// The end marker named another instance than the one this stream knew: the publisher
// restarted (whatever its seqs look like). The consumer is told (RESET: drop what you know of
// it), what is held is dropped (it may be the old process's), and the stream starts again
// from the new process's first kept seq.
void Subscriber::restarted_instance(Stream &s, uint64_t instance) {
    notice(KVREG_SUB_RESET, &s, s.ep, s.next, s.next, "the publisher's instance id changed: it restarted");
    for (const Waiting &w : s.waiting) unhold(w);
    s.waiting.clear();
    s.instance = instance;
    s.started = false;
    s.next = 0;
    s.live_seen = false;
    s.probed = true;
    request_replay(s, 0);
}

void Subscriber::finish_replay(Stream &s, bool timed_out, uint64_t instance) {
    Endpoint &e = eps_[s.ep];
    e.replay_owner = nullptr;
    s.replaying = false;
    const bool was_probe = s.probing;
    s.probing = false;
    if (!timed_out) {
        s.probed = true;
        if (instance && s.instance && instance != s.instance) {
            if (!was_probe) notice(KVREG_SUB_REPLAY_DONE, &s, s.ep, s.replay_count, 0, "replay done", false, false);
            restarted_instance(s, instance);
            return;
        }
        if (instance) s.instance = instance;
    }
    if (timed_out) {
        // The ROUTER is gone or stuck: a fresh DEALER, so that a late answer to the abandoned
        // request cannot be mistaken for the next one, and no replay for a while.
        zmq_close(e.dealer);
        e.dealer = nullptr;
        open_dealer(e);
        if (!e.dealer) e.has_replay = false;
        e.no_replay_until = Clock::now() + std::chrono::milliseconds(replay_timeout_ms_) * 5;
        notice(KVREG_SUB_REPLAY_DONE, &s, s.ep, s.replay_count, 0, "replay timed out", false, false);
    } else if (!was_probe) {
        notice(KVREG_SUB_REPLAY_DONE, &s, s.ep, s.replay_count, 0, "replay done", false, false);
    }
    // A timed-out replay leaves what it did not give lost. After an answer, the held batches
    // go through the live path: a gap still before the first of them (it was sent after the
    // ring answered) asks again, and the ring has it then, or the next answer starts later
    // than asked and reports the loss; each round makes progress.
    if (timed_out && !s.waiting.empty() && s.waiting.front().seq > s.next) {
        notice(KVREG_SUB_LOSS, &s, s.ep, s.next, s.waiting.front().seq - 1, "lost: the replay did not answer");
        s.next = s.waiting.front().seq;
    }
    std::deque<Waiting> held;
    held.swap(s.waiting);
    for (const Waiting &w : held) unhold(w);
    // on_live() counts a held batch the replay already delivered as a duplicate, reports a
    // restart seen when it came, and a new gap holds the rest again.
    for (Waiting &w : held) on_live(s, w.seq, w.payload.data(), w.payload.size(), w.restarted);
    // Another stream of this endpoint waited for the DEALER.
    if (!e.replay_owner) {
        Stream *waiting = nullptr;
        for_each_stream([&](Stream &o) {
            if (!waiting && o.ep == s.ep && o.wants_replay) waiting = &o;
        });
        if (waiting) request_replay(*waiting, waiting->replay_from);
    }
}

void Subscriber::deliver(Stream &s, uint64_t seq, const unsigned char *p, size_t len, bool replayed) {
    s.started = true;
    s.next = seq + 1;
    const kvreg_wire_event *events = nullptr;
    size_t n = 0;
    if (kvreg_wire_decode(dec_, p, len, &events, &n, nullptr) != KVREG_OK) {
        notice(KVREG_SUB_MALFORMED, &s, s.ep, seq, seq, kvreg_wire_decoder_error(dec_));
        return;
    }
    count(KVREG_SUB_STAT_BATCHES);
    count(KVREG_SUB_STAT_EVENTS, n);
    if (replayed) count(KVREG_SUB_STAT_REPLAYED);
    if (!batch_fn_) return;
    kvreg_sub_batch b{};
    b.publisher = static_cast<uint32_t>(s.ep);
    b.replayed = replayed;
    b.endpoint = eps_[s.ep].endpoint.c_str();
    b.topic = s.topic.c_str();
    b.pod = s.pod.c_str();
    b.model = s.model.c_str();
    b.seq = seq;
    if (n) {
        b.ts = events[0].ts;
        b.dp_rank = events[0].dp_rank;
        b.has_dp_rank = events[0].has_dp_rank;
    }
    b.events = events;
    b.n_events = n;
    in_callback_ = true;
    batch_fn_(&b, batch_ud_);
    in_callback_ = false;
}

} // namespace kvreg::net
