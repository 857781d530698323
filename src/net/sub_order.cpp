// Subscriber: per-publisher ordering (see subscriber.hpp and kvreg_net.h). Each stream
// delivers seqs in order, once each; a gap asks its endpoint's replay ROUTER for the missing
// seqs while later live batches wait; whatever cannot be had is named in a LOSS notice.
//
// The protocol, one stream ((endpoint, topic)) at a time; its Stage says where it is:
//   kLive       A live seq equal to `next` is delivered. One below is a duplicate (a replay
//               delivered it first). One above is a gap: GAP notice, the batch is held, and a
//               replay from `next` is asked (kReplaying), or with no replay endpoint (or one
//               that failed lately) a LOSS notice and the batch is delivered. A live seq at or
//               below the last live one, or a new instance in the topic, is a restart: RESET,
//               and the stream starts again from 0. Once a stream delivers in order it sends a
//               probe (a replay request from `next`, normally answered by the end marker
//               alone) to learn the publisher's instance id (kProbing) when its endpoint's
//               DEALER is free (else at a later delivery); again after its SUB socket
//               reconnects.
//   kReplayQueued  One DEALER per endpoint runs one request at a time: a stream whose gap
//               finds it taken waits (live batches held) until that one ends; if that one
//               failed, the waiting streams do not ask the same ROUTER: back to kLive, their
//               gaps reported lost. (A probe never waits: streams whose probes could not be
//               answered would pin every publisher slot.)
//   kProbing    Live batches are held (while the stream knows no instance yet, only what
//               cannot be delivered in order: the answer cannot be a restart then). The end
//               marker names the instance: the same, or
//   kReplaying  none known, and the stream is back to kLive; another, and the publisher
//               restarted: RESET, held batches dropped, a replay from 0. A replayed batch is
//               delivered in order (held live batches older than it first); the deadline runs
//               from the request and only a new seq moves it, never past the cap
//               (KVREG_SUB_REPLAY_CAP_TIMEOUTS timeouts from the request). A batch of another
//               topic (the ROUTER serves another publisher) is refused with a MALFORMED notice,
//               and the answer counts as failed. Busy marker: kBusyWait (a probe just ends, and
//               asks again after a back-off).
//   kBusyWait   Asks again at retry_at: a bounded exponential back-off with jitter (backoff()),
//               each busy answer counted (STAT_REPLAYS_BUSY); the deadline does not move.
//   (bounds)    A live batch past MAX_HELD_BYTES, its endpoint's share of it (all the
//               endpoint's streams together) or its stream's MAX_WAITING is not held (the
//               next round fetches it); once that happens on an endpoint whose streams all
//               hold, its SUB socket is not read until one of them leaves holding
//               (live_paused()). A malformed live message pauses its endpoint's SUB
//               socket for a back-off (malformed_live()); nothing is dropped for it.
//   end         At the marker, the held batches go through kLive again (a new gap asks
//               again: each round makes progress; an answer that brought nothing from where it
//               asked, the marker alone, reports the gap lost instead). A probe that got no
//               marker is asked again after its back-off. At the deadline or the cap (or a failed
//               answer): REPLAY_DONE says why, LOSS for the seqs before the first held batch,
//               and no replay from that endpoint for 5 timeouts. Every end closes the DEALER
//               (each request opens a fresh one: between requests a ROUTER has nobody to send
//               to). Then the next queued stream of the endpoint gets the DEALER.
#include "net/subscriber.hpp"

#include <zmq.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "net/zmq.hpp"

namespace kvreg::net {

void Subscriber::enter(Stream &s, Stage to) {
    // kMoves[from][to]: the moves the protocol above makes. Anything else is a bug (debug
    // builds stop at it).
    static constexpr bool kMoves[5][5] = {
        //               Live   Probing RpQueued Replaying BusyWait
        /* Live      */ {false, true,   true,    true,     false},
        /* Probing   */ {true,  false,  false,   false,    false},
        /* RpQueued  */ {true,  false,  false,   true,     false},
        /* Replaying */ {true,  false,  false,   false,    true},
        /* BusyWait  */ {true,  false,  false,   true,     false},
    };
    if (!kMoves[static_cast<size_t>(s.stage)][static_cast<size_t>(to)]) {
#ifndef NDEBUG
        std::abort();
#endif
    }
    const bool held = s.holds();
    s.stage = to;
    if (held == s.holds()) return;
    Endpoint &e = eps_[s.ep];
    if (s.holds()) {
        e.holding++;
    } else {
        e.holding--;
        e.hold_refused = false; // a replay ended: its batches may be held again
    }
}

void Subscriber::on_live(Stream &s, uint64_t seq, Payload &p, bool restarted) {
    if (s.holds()) {
        // A probe of a stream whose instance is not known yet only learns it: its answer
        // cannot be a restart (finish_replay()), so the next seq need not wait for it. It is
        // delivered unless something is held already (order) or the seqs went back.
        if (s.stage == Stage::kProbing && s.instance == 0 && s.waiting.empty() && !restarted && seq == s.next) {
            deliver(s, seq, p.data(), p.size(), false);
            return;
        }
        hold(s, seq, p, restarted);
        return;
    }
    if (restarted && s.delivered) {
        // The live seqs went back: a new publisher process numbers from 0 again.
        notice(KVREG_SUB_RESET, &s, s.ep, s.next, seq, "seq went back: the publisher restarted");
        s.delivered = 0;
        s.next = 0;
    }
    if (seq == s.next) {
        deliver(s, seq, p.data(), p.size(), false);
        probe(s); // learn the publisher's instance id once the stream runs
    } else if (seq > s.next) {
        on_gap(s, seq, p);
    } else {
        // Already delivered (a replay answered before this live copy arrived), or before the
        // seq the stream starts from.
        count(KVREG_SUB_STAT_DUPLICATES);
    }
}

void Subscriber::on_gap(Stream &s, uint64_t seq, Payload &p) {
    Endpoint &e = eps_[s.ep];
    const bool replay = e.has_replay && Clock::now() >= e.no_replay_until;
    notice(KVREG_SUB_GAP, &s, s.ep, s.next, seq - 1,
           s.delivered ? "seqs missing (publisher high-water mark or network)"
                       : "joined late: earlier seqs missing",
           replay);
    if (replay) {
        hold(s, seq, p, false);
        request_replay(s, s.next);
        return;
    }
    notice(KVREG_SUB_LOSS, &s, s.ep, s.next, seq - 1,
           e.has_replay ? "lost: the last replay failed, not retried yet" : "lost: no replay endpoint");
    deliver(s, seq, p.data(), p.size(), false);
}

void Subscriber::hold(Stream &s, uint64_t seq, Payload &p, bool restarted) {
    // Beyond the limit, newer batches are not kept: the next replay fetches them. A held
    // batch costs its payload and kHeldOverhead (its entry, its buffer's header): counted by
    // payload alone, 100,000 batches of 40 bytes were 4 MB of a bound they took 20 MB of.
    const size_t cost = held_cost(p);
    Endpoint &e = eps_[s.ep];
    if (s.waiting.size() >= max_waiting_ ||
        stats_[KVREG_SUB_STAT_HELD_BYTES].load(std::memory_order_relaxed) + cost > max_held_bytes_ ||
        e.held_bytes + cost > held_share()) {
        count(KVREG_SUB_STAT_HELD_DROPPED);
        if (restarted) s.restart_pending = true; // the next live batch carries it
        const bool was_paused = live_paused(e);
        e.hold_refused = true;
        if (!was_paused && live_paused(e)) count(KVREG_SUB_STAT_LIVE_PAUSES);
        return;
    }
    // A large batch itself is kept, not a copy: a peer that makes us hold megabytes costs
    // this thread (every other publisher's too) no work per byte. A small one is copied out
    // of libzmq's shared receive buffer (Payload::own_exact()).
    if (p.size() < kOwnBelow) p.own_exact();
    s.waiting.push_back(Waiting{seq, std::move(p), restarted});
    e.held_bytes += cost;
    count(KVREG_SUB_STAT_HELD_BATCHES);
    count(KVREG_SUB_STAT_HELD_BYTES, cost);
}

void Subscriber::unhold(Stream &s, const Waiting &w) {
    const size_t cost = held_cost(w.payload);
    eps_[s.ep].held_bytes -= cost;
    uncount(KVREG_SUB_STAT_HELD_BATCHES);
    uncount(KVREG_SUB_STAT_HELD_BYTES, cost);
}

// [\"\", start8]: the DEALER sends the empty delimiter a REQ socket would add.
bool Subscriber::send_request(Endpoint &e, uint64_t from) {
    unsigned char start[8];
    put_be64(start, from);
    return e.dealer && zmq_send(e.dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
           zmq_send(e.dealer, start, 8, ZMQ_DONTWAIT) >= 0;
}

void Subscriber::request_replay(Stream &s, uint64_t from, bool probe) {
    Endpoint &e = eps_[s.ep];
    s.replay_from = from;
    if (e.replay_owner && e.replay_owner != &s) {
        enter(s, Stage::kReplayQueued); // probe() never gets here: it waits for a free DEALER
        return;
    }
    enter(s, probe ? Stage::kProbing : Stage::kReplaying);
    s.replay_count = 0;
    e.replay_owner = &s;
    e.replay_grace = false;
    e.replay_foreign = false;
    const auto now = Clock::now();
    e.replay_cap = now + std::chrono::milliseconds(replay_timeout_ms_) * KVREG_SUB_REPLAY_CAP_TIMEOUTS;
    e.replay_deadline = capped(e, now);
    if (!e.dealer) open_dealer(e); // a fresh one per request (see open_dealer())
    if (!send_request(e, from)) {
        e.replay_deadline = Clock::now(); // let the timeout path report and move on
        return;
    }
    if (!probe) count(KVREG_SUB_STAT_REPLAYS);
}

// Bounded exponential back-off with jitter: the n-th busy answer in a row waits a random time
// in [d/2, d], d = 5 ms x 2^n, at most a quarter of the replay timeout (so a replay asks a
// busy publisher a few times before its deadline, never in a loop). The jitter spreads
// subscribers that were refused together.
Clock::duration Subscriber::backoff(uint32_t busy) noexcept {
    const uint64_t cap_us = replay_timeout_ms_ * 1000 / 4;
    uint64_t d_us = UINT64_C(5000) << (busy < 20 ? busy : 20);
    if (d_us > cap_us) d_us = cap_us;
    if (d_us < 2) d_us = 2;
    uint64_t z = (rng_ += UINT64_C(0x9E3779B97F4A7C15)); // splitmix64
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return std::chrono::microseconds(d_us / 2 + z % (d_us / 2 + 1));
}

// The ROUTER answered the running request with its busy marker (too many replays in flight
// there): no batch came and none will for this request.
void Subscriber::on_busy(Stream &s) {
    Endpoint &e = eps_[s.ep];
    count(KVREG_SUB_STAT_REPLAYS_BUSY);
    const Clock::time_point at = Clock::now() + backoff(e.busy++);
    if (s.stage == Stage::kProbing) {
        e.probe_after = at;
        finish_replay(s, End::kProbeBusy);
        return;
    }
    e.retry_at = at;
    enter(s, Stage::kBusyWait);
}

// A kBusyWait owner whose retry_at has come asks again (from its next seq); the deadline
// stays where the first request put it.
void Subscriber::retry_busy(Endpoint &e) {
    Stream &s = *e.replay_owner;
    enter(s, Stage::kReplaying);
    if (!send_request(e, s.next)) {
        e.replay_deadline = Clock::now();
        return;
    }
    count(KVREG_SUB_STAT_REPLAYS);
}

// Held live batches older than a replayed one come before it: the replay answer can start
// after some of them (the ring moved on while the request was in flight), and then they are
// the only copy. Only what is neither held nor in the answer is lost.
void Subscriber::release_held_before(Stream &s, uint64_t seq) {
    while (!s.waiting.empty() && s.waiting.front().seq < seq && !s.waiting.front().restarted) {
        Waiting w = std::move(s.waiting.front());
        s.waiting.pop_front();
        unhold(s, w);
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
    const auto now = Clock::now();
    if (s.probed || !e.has_replay || e.replay_owner || s.stage != Stage::kLive ||
        now < e.no_replay_until || now < e.probe_after)
        return;
    s.probed = true;
    request_replay(s, s.next, true);
}

// The end marker named another instance than the one this stream knew: the publisher
// restarted (whatever its seqs look like). The consumer is told (RESET: drop what you know of
// it), what is held is dropped (it may be the old process's), and the stream starts again
// from the new process's first kept seq.
void Subscriber::restarted_instance(Stream &s, uint64_t instance) {
    notice(KVREG_SUB_RESET, &s, s.ep, s.next, s.next, "the publisher's instance id changed: it restarted");
    for (const Waiting &w : s.waiting) unhold(s, w);
    s.waiting.clear();
    s.instance = instance;
    s.delivered = 0;
    s.next = 0;
    s.live_seen = false;
    s.probed = true;
    request_replay(s, 0);
}

void Subscriber::finish_replay(Stream &s, End how, uint64_t instance) {
    Endpoint &e = eps_[s.ep];
    e.replay_owner = nullptr;
    // Whatever the ROUTER sends from now on has nowhere to go; after a failure, a late answer
    // to this request cannot be mistaken for the next one's.
    close_dealer(e);
    const bool was_probe = s.stage == Stage::kProbing;
    enter(s, Stage::kLive);
    const bool failed =
        how == End::kTimeout || how == End::kBusy || how == End::kForeign || how == End::kCapped;
    // A probe that got no marker (busy, or no answer) is asked again at a later delivery,
    // after the back-off (probe_after, no_replay_until): it once never was, the stream never
    // learned its publisher's instance, and a restart later went unnoticed.
    if (was_probe && how != End::kMarker) s.probed = false;
    if (how == End::kMarker) {
        e.busy = 0;
        s.probed = true;
        if (instance && s.instance && instance != s.instance) {
            if (!was_probe) notice(KVREG_SUB_REPLAY_DONE, &s, s.ep, s.replay_count, 0, "replay done", false, false);
            restarted_instance(s, instance);
            return;
        }
        if (instance) s.instance = instance;
    }
    if (failed) {
        // The ROUTER is gone, stuck, busy or serving another publisher: no replay for a while
        // (its DEALER is closed above, as after every request).
        e.busy = 0;
        e.no_replay_until = Clock::now() + std::chrono::milliseconds(replay_timeout_ms_) * 5;
        notice(KVREG_SUB_REPLAY_DONE, &s, s.ep, s.replay_count, 0,
               how == End::kBusy      ? "replay given up: the publisher answered busy until the deadline"
               : how == End::kForeign ? "replay failed: the answer carried another topic's batches"
               : how == End::kCapped  ? "replay given up: not done KVREG_SUB_REPLAY_CAP_TIMEOUTS x "
                                        "REPLAY_TIMEOUT_MS after its request"
                                      : "replay timed out",
               false, false);
    } else if (how == End::kMarker && !was_probe) {
        notice(KVREG_SUB_REPLAY_DONE, &s, s.ep, s.replay_count, 0, "replay done", false, false);
    }
    // A failed replay leaves what it did not give lost. After an answer, the held batches
    // go through the live path: a gap still before the first of them (it was sent after the
    // ring answered) asks again, and the ring has it then, or the next answer starts later
    // than asked and reports the loss; each round makes progress.
    // An answer that brought nothing from where it was asked (the marker alone) made no
    // progress: the ring has none of the gap, which is lost. Taken for a success, the held
    // batches found the same gap and asked again, for ever.
    const bool empty = how == End::kMarker && !was_probe && s.next == s.replay_from;
    if ((failed || empty) && !s.waiting.empty() && s.waiting.front().seq > s.next) {
        notice(KVREG_SUB_LOSS, &s, s.ep, s.next, s.waiting.front().seq - 1,
               empty                  ? "lost: the replay's answer held none of them (not in the publisher's ring)"
               : how == End::kBusy    ? "lost: the publisher answered busy until the replay deadline"
               : how == End::kForeign ? "lost: the replay answered with another topic's batches"
               : how == End::kCapped  ? "lost: the replay was not done by its cap"
                                      : "lost: the replay did not answer");
        s.next = s.waiting.front().seq;
    }
    std::deque<Waiting> held;
    held.swap(s.waiting);
    for (const Waiting &w : held) unhold(s, w);
    // on_live() counts a held batch the replay already delivered as a duplicate, reports a
    // restart seen when it came, and a new gap holds the rest again.
    for (Waiting &w : held) on_live(s, w.seq, w.payload, w.restarted);
    // Another stream of this endpoint waited for the DEALER. After a failure the ROUTER is
    // not asked again for a while (no_replay_until): every waiting stream goes back to kLive,
    // where its held batches find their gaps again and report them lost.
    if (failed) {
        std::vector<Stream *> queued;
        for_each_stream([&](Stream &o) {
            if (o.ep == s.ep && o.stage == Stage::kReplayQueued) queued.push_back(&o);
        });
        for (Stream *o : queued) {
            enter(*o, Stage::kLive);
            std::deque<Waiting> h;
            h.swap(o->waiting);
            for (const Waiting &w : h) unhold(*o, w);
            for (Waiting &w : h) on_live(*o, w.seq, w.payload, w.restarted);
        }
    } else if (!e.replay_owner) {
        Stream *queued = nullptr;
        for_each_stream([&](Stream &o) {
            if (!queued && o.ep == s.ep && o.stage == Stage::kReplayQueued) queued = &o;
        });
        if (queued) request_replay(*queued, queued->replay_from);
    }
}

void Subscriber::deliver(Stream &s, uint64_t seq, const unsigned char *p, size_t len, bool replayed) {
    s.delivered++;
    s.next = seq + 1;
    const kvreg_wire_event *events = nullptr;
    size_t n = 0;
    if (kvreg_wire_decode(dec_, p, len, &events, &n, nullptr) != KVREG_OK) {
        notice(KVREG_SUB_MALFORMED, &s, s.ep, seq, seq, kvreg_wire_decoder_error(dec_));
        if (!replayed) malformed_live(eps_[s.ep]);
        return;
    }
    trust(eps_[s.ep], replayed);
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
