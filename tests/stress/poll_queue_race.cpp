// The POLL queue's lock-free hand-off (poll_queue.hpp), alone: one producer, two pollers.
//
// The producer pushes runs of 1 to 1,100 events into a queue of capacity 600, so runs are
// cut short (the rest "dropped"); it numbers only the events the queue took, so the pollers
// must see ids 0, 1, 2, ... with no gap and no repeat. Token counts cycle through 16 (the
// usual block), 0, 3, 300 and, every 997th event, 70,000 (more than the largest arena a
// budget gives: a chunk of its own), so chunks are closed both full and by their arena, the
// token budget moves both ways, and spare chunks are offered back with every size. Each
// token is a function of its event's id, checked by the poller.
//
// The two pollers sleep in wait_for_events() and take with caps of 1 to 700; they serialise
// their take-and-check on a mutex of their own, as kvreg.h asks of pollers that read tokens
// (a take frees the chunks the previous take lent). What races is the producer against
// either poller: closing, linking and recycling chunks while they are read. TSan runs this
// in CI. Ends with every event taken, the queue empty, and its bytes back to a few chunks.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "internal_check.hpp"
#include "events/poll_queue.hpp"

namespace {

constexpr uint64_t kEvents = 400000;
constexpr size_t kCapacity = 600;
constexpr uint32_t kHuge = 70000;

uint32_t tokens_for(uint64_t id) {
    if (id % 997 == 0) return kHuge;
    static const uint32_t cycle[] = {16, 16, 16, 0, 3, 16, 300, 16};
    return cycle[id % 8];
}

uint32_t token_value(uint64_t id, uint32_t i) { return static_cast<uint32_t>(id * 2654435761u) ^ i; }

uint64_t splitmix(uint64_t &s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct Shared {
    kvreg::PollQueue q{kCapacity};
    std::atomic<bool> stop{false};
    std::mutex take_check; // pollers that read tokens serialise (kvreg.h)
    uint64_t next_id = 0;  // under take_check
    uint64_t taken = 0;
    uint64_t bad_ids = 0, bad_tokens = 0;
    uint64_t cut_runs = 0; // the producer's: runs the queue took only part of
};

void producer(Shared &s) {
    std::vector<uint32_t> buf(kHuge);
    uint64_t id = 0, rng = 7;
    while (id < kEvents) {
        const size_t run = 1 + splitmix(rng) % 1100;
        const size_t want = std::min<uint64_t>(run, kEvents - id);
        const size_t done = s.q.push_each(want, [&](size_t k, kvreg_event &e) noexcept {
            const uint64_t eid = id + k;
            const uint32_t n = tokens_for(eid);
            for (uint32_t i = 0; i < n; i++) buf[i] = token_value(eid, i);
            e = kvreg_event{};
            e.kind = KVREG_EVENT_REGISTER;
            e.event_id = eid;
            e.sequence_hash = eid * 3;
            e.n_tokens = n;
            e.tokens = n ? buf.data() : nullptr;
        });
        s.cut_runs += done < want;
        id += done; // the rest of the run was dropped: those ids are made again next time
        if (done == 0) std::this_thread::yield(); // full: the pollers are behind
    }
    s.stop.store(true, std::memory_order_release);
    s.q.wakeup(); // wake-ups merge: a poller that stops passes it on to the other
}

void poller(Shared &s, uint64_t seed) {
    std::vector<kvreg_event> out(700);
    uint64_t rng = seed;
    for (;;) {
        const bool stopping = s.stop.load(std::memory_order_acquire);
        if (!stopping) s.q.wait_for_events(-1);
        std::lock_guard<std::mutex> lk(s.take_check);
        const size_t cap = 1 + splitmix(rng) % out.size();
        size_t n = 0;
        CHECK(s.q.take(out.data(), cap, &n, false) == KVREG_OK);
        CHECK(n <= cap);
        for (size_t i = 0; i < n; i++) {
            const kvreg_event &e = out[i];
            if (e.event_id != s.next_id || e.sequence_hash != e.event_id * 3) s.bad_ids++;
            s.next_id = e.event_id + 1;
            const uint32_t want = tokens_for(e.event_id);
            if (e.n_tokens != want || (want != 0) != (e.tokens != nullptr)) {
                s.bad_tokens++;
                continue;
            }
            for (uint32_t t = 0; t < e.n_tokens; t++)
                if (e.tokens[t] != token_value(e.event_id, t)) {
                    s.bad_tokens++;
                    break;
                }
        }
        s.taken += n;
        if (stopping && n == 0) { // stop was set before this take: it took the last
            s.q.wakeup(); // for the other poller, maybe asleep (one wake-up ends one wait)
            return;
        }
    }
}

} // namespace

int main() {
    Shared s;
    std::thread a(poller, std::ref(s), 1), b(poller, std::ref(s), 2);
    std::thread p(producer, std::ref(s));
    p.join();
    a.join();
    b.join();
    std::printf("poll_queue_race: %llu events taken, %llu runs cut short, %llu bad ids, %llu bad tokens, "
                "%zu bytes left\n",
                static_cast<unsigned long long>(s.taken), static_cast<unsigned long long>(s.cut_runs),
                static_cast<unsigned long long>(s.bad_ids),
                static_cast<unsigned long long>(s.bad_tokens), s.q.bytes());
    CHECK(s.taken == kEvents);
    CHECK(s.next_id == kEvents);
    CHECK(s.bad_ids == 0);
    CHECK(s.bad_tokens == 0);
    CHECK(s.q.size() == 0);
    CHECK(s.cut_runs > 0); // the capacity was reached: drops were exercised
    // The tail, the last take's chunks (at most 700 events: up to four of 256), the spare, each
    // with at most a huge event's arena: far below what 400,000 events would have needed.
    CHECK(s.q.bytes() <= 6 * (256 * sizeof(kvreg_event) + 4 * size_t{kHuge} * 4));
    return check_failures() != 0;
}
