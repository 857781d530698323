// The POLL queue's memory follows its length (internal: reads EventLog::queue_bytes()).
//
// kvreg.h (KVREG_OPT_DELIVERY): "The queue's memory follows its length (it is given back as
// the consumer drains it)". The failure this guards against is a queue that gives memory back
// only when it is empty: a consumer that is always some events behind never empties it, so
// its memory grows with every event that ever passed through. Three consumers:
//
//   drained:  200,000 events queued, then all polled: the bytes go back below 256 KiB (one
//             spare chunk of 1,024 events and the last poll's chunk, lent until the next
//             poll, stay);
//   behind:   10,000 events queued, then 500,000 rounds of "2 produced, 2 polled", so the
//             queue never empties while 1M events pass through it;
//   lagging:  2 polled for every 1,024 produced, 200 rounds (the queue grows to ~204,000).
//
// Throughout, queue_bytes() <= queued * (sizeof(kvreg_event) + 16 + sizeof(size_t)) + 4 chunks,
// where 16 is the largest token payload of an event here (4 tokens), sizeof(size_t) allows for
// an index to each event's tokens, and a chunk is 1,024 such events (the partly filled chunks
// at both ends, the spare, the last poll's chunk or token copies).
// Single-threaded: every call delivers before it returns, so nothing here waits or sleeps.
#include <kvreg.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "internal_check.hpp"
#include "core/registry.hpp"

namespace {


constexpr size_t kPerEvent = sizeof(kvreg_event) + 4 * sizeof(uint32_t) + sizeof(size_t);
constexpr size_t kChunkEvents = 1024;
constexpr size_t kSlack = 4 * kChunkEvents * kPerEvent;
constexpr size_t kDrainedBound = 256 * 1024;

const uint32_t kTokens[4] = {1, 2, 3, 4};

struct Fixture {
    kvreg_registry *reg = nullptr;
    kvreg_pool *pool = nullptr;
    uint64_t next_hash = 1;
    size_t peak = 0;

    Fixture()
    {
        kvreg::Options opt;
        opt.poll_mode = true;
        opt.poll_capacity = uint64_t{1} << 20;
        reg = new kvreg_registry(opt);
        if (kvreg_pool_new(&pool, reg, "p") != KVREG_OK) std::abort();
    }
    ~Fixture() { kvreg_registry_free(reg); }

    uint64_t stat(uint32_t s) const
    {
        uint64_t v = 0;
        CHECK(kvreg_registry_stat(reg, s, &v) == KVREG_OK);
        return v;
    }
    // One Register event with 4 tokens; the block stays registered.
    void register_one()
    {
        kvreg_block_desc d{};
        d.sequence_hash = next_hash++;
        d.block_hash = d.sequence_hash;
        d.tokens = kTokens;
        d.n_tokens = 4;
        kvreg_block b = 0;
        CHECK(kvreg_register(pool, &d, &b) == KVREG_OK);
    }
    // A Register (4 tokens) and a Remove (none): two events, the registry itself stays small.
    void churn_one()
    {
        kvreg_block_desc d{};
        d.sequence_hash = next_hash++;
        d.block_hash = d.sequence_hash;
        d.tokens = kTokens;
        d.n_tokens = 4;
        kvreg_block b = 0;
        CHECK(kvreg_register(pool, &d, &b) == KVREG_OK);
        CHECK(kvreg_release(pool, b) == KVREG_OK);
    }
    size_t poll(size_t want)
    {
        static kvreg_event out[kChunkEvents];
        size_t got = 0;
        CHECK(want <= kChunkEvents);
        CHECK(kvreg_registry_poll(reg, out, want, &got) == KVREG_OK);
        return got;
    }
    // The bound, checked against what is queued now.
    void check_bound(const char *phase)
    {
        const size_t queued = reg->log.stat_queued();
        const size_t bytes = reg->log.queue_bytes();
        if (bytes > peak) peak = bytes;
        if (bytes > queued * kPerEvent + kSlack) {
            std::fprintf(stderr, "%s: %zu bytes for %zu queued events (bound %zu)\n", phase, bytes, queued,
                         queued * kPerEvent + kSlack);
            CHECK(bytes <= queued * kPerEvent + kSlack);
        }
    }
    void drain_and_check(const char *phase)
    {
        while (poll(kChunkEvents) > 0) check_bound(phase);
        CHECK(stat(KVREG_STAT_EVENTS_QUEUED) == 0);
        const size_t bytes = reg->log.queue_bytes();
        if (bytes >= kDrainedBound) std::fprintf(stderr, "%s: %zu bytes left after draining\n", phase, bytes);
        CHECK(bytes < kDrainedBound);
    }
};

void drained()
{
    Fixture f;
    for (int i = 0; i < 200000; i++) {
        f.register_one();
        if (i % 1024 == 0) f.check_bound("drained/fill");
    }
    CHECK(f.stat(KVREG_STAT_EVENTS_QUEUED) == 200000);
    CHECK(f.stat(KVREG_STAT_EVENTS_DROPPED) == 0);
    f.check_bound("drained/full");
    // the queue did hold its events: at least their own bytes
    CHECK(f.reg->log.queue_bytes() >= 200000 * sizeof(kvreg_event));
    f.drain_and_check("drained/drain");
    std::printf("drained: peak %zu bytes for 200000 events, %zu after draining\n", f.peak,
                f.reg->log.queue_bytes());
}

void behind()
{
    Fixture f;
    for (int i = 0; i < 5000; i++) f.churn_one(); // 10,000 queued
    CHECK(f.stat(KVREG_STAT_EVENTS_QUEUED) == 10000);
    for (int round = 0; round < 500000; round++) {
        f.churn_one();
        CHECK(f.poll(2) == 2);
        f.check_bound("behind");
        if (check_failures()) return;
    }
    CHECK(f.stat(KVREG_STAT_EVENTS_QUEUED) == 10000); // never emptied
    CHECK(f.stat(KVREG_STAT_EVENTS_DROPPED) == 0);
    f.drain_and_check("behind/drain");
    std::printf("behind: peak %zu bytes with 10000 queued, 1010000 events through\n", f.peak);
}

void lagging()
{
    Fixture f;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 512; i++) f.churn_one();
        f.check_bound("lagging/produce");
        CHECK(f.poll(2) == 2);
        f.check_bound("lagging/poll");
        if (check_failures()) return;
    }
    CHECK(f.stat(KVREG_STAT_EVENTS_QUEUED) == 200 * (1024 - 2));
    CHECK(f.stat(KVREG_STAT_EVENTS_DROPPED) == 0);
    f.drain_and_check("lagging/drain");
    std::printf("lagging: peak %zu bytes for %d queued\n", f.peak, 200 * (1024 - 2));
}

} // namespace

int main()
{
    drained();
    behind();
    lagging();
    if (check_failures()) {
        std::fprintf(stderr, "poll_memory: %d failure(s)\n", check_failures());
        return 1;
    }
    return 0;
}
