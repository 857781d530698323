// Multi-threaded stress test of the event stream.
//
// Workers register, acquire, release, batch-register, batch-release and prefix-acquire over a
// small skewed set of hashes in three stable pools, and also hammer two "churn" pools that a
// churn thread keeps freeing and re-creating (and, in INLINE mode, swaps the callback). Every
// event is applied by a consumer: the callback (INLINE) or a thread draining the queue (POLL).
//
// Checked:
//  - event_id contiguous from 0, callbacks never concurrent, a replaced callback never called;
//  - per hash, strictly alternating Register/Remove starting with Register, with the hashes,
//    parent and tokens the hash was registered with;
//  - no Remove while a pool holds the hash: a worker holding a reference in a stable pool records
//    [next_event_id after its acquire returned, next_event_id before its release); no Remove of
//    that hash may carry an id in that interval;
//  - a worker's own live references: release and queries succeed;
//  - at quiescence the set rebuilt from events equals kvreg_registry_contains and the union of
//    kvreg_pool_contains over all live pools; stats agree with the events counted.
//
// Modes: inline (the callback consumes; it also re-enters the registry now and then: queries,
// and a register + release in a pool of its own), poll (one consumer thread drains), poll2 (two
// consumer threads poll concurrently; events are merged by event_id, so a duplicated or lost
// event shows as a wrong or missing id; tokens are not read there, as another poll invalidates
// them).
//
// Usage: kvreg-stress inline|poll|poll2 [seed]. Env KVREG_STRESS_SECONDS (default 2 per mode).
#include <kvreg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "kvreg_answer.h"

namespace {

constexpr int kHashes = 48;
constexpr int kStable = 3;
constexpr int kChurn = 2;
// Six workers, the churn thread and one or two consumers: 8-9 threads on the 2-core CI
// machines, so threads are regularly descheduled in the middle of a call.
constexpr int kWorkers = 6;

unsigned long g_seed = 1;
const char *g_mode = "";

[[noreturn]] void fail(const char *fmt, ...)
{
    va_list ap;
    std::fprintf(stderr, "stress FAIL [mode=%s seed=%lu]: ", g_mode, g_seed);
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
    std::abort();
}

void expect_status(int got, int want, const char *what)
{
    if (got != want)
        fail("%s: status %d (%s), expected %d", what, got, kvreg_strerror(got), want);
}

struct Rng {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
    // Skewed: half the picks favour the low indexes (hot hashes every pool and thread contends
    // on), half are uniform so that hashes keep entering and leaving the registry.
    int hash()
    {
        if (below(2))
            return static_cast<int>(below(kHashes));
        return static_cast<int>((below(kHashes) * below(kHashes)) / kHashes);
    }
};

struct Hash {
    kvreg_block_desc desc{};
    uint32_t tok[4]{};
};

std::vector<Hash> g_hash;

void init_hashes()
{
    g_hash.resize(kHashes);
    for (int i = 0; i < kHashes; i++) {
        Hash &h = g_hash[static_cast<size_t>(i)];
        // one low word for all: every hash lands in the same shard whatever the shard count
        h.desc.sequence_hash = (static_cast<uint64_t>(i + 1) << 40) | 0xC0FFEEull;
        h.desc.block_hash = h.desc.sequence_hash * 3;
        h.desc.has_parent = i % 4 != 0;
        h.desc.parent_sequence_hash = h.desc.has_parent ? g_hash[static_cast<size_t>(i - 1)].desc.sequence_hash : 0;
        for (uint32_t t = 0; t < 4; t++)
            h.tok[t] = static_cast<uint32_t>(i) * 4 + t;
        if (i % 2 == 0) { // half with tokens, half by hash only
            h.desc.tokens = h.tok;
            h.desc.n_tokens = 4;
            h.desc.block_size = 4;
        }
    }
}

int hash_index(uint64_t seq)
{
    uint64_t i = (seq >> 40) - 1;
    if ((seq & 0xFFFFFFFFFFull) != 0xC0FFEEull || i >= static_cast<uint64_t>(kHashes))
        return -1;
    return static_cast<int>(i);
}

// ---- the consumer: applies every event in order --------------------------------------------
// Hashes a callback registers while re-entering (see reenter()): outside the universe, one per
// re-entry, with the thread that must deliver their events.
constexpr uint64_t kCbBase = 0xCB00000000000000ull;
struct CbPending {
    uint64_t hash;
    std::thread::id thread;
    int state;
};
std::vector<CbPending> g_cb_pending; // touched only from callbacks, which never overlap

void apply_cb_event(const kvreg_event &e)
{
    for (size_t k = 0; k < g_cb_pending.size(); k++) {
        CbPending &c = g_cb_pending[k];
        if (c.hash != e.sequence_hash)
            continue;
        if (c.thread != std::this_thread::get_id())
            fail("event %llu caused inside a callback was delivered on another thread",
                 static_cast<unsigned long long>(e.event_id));
        if ((c.state == 0 && e.kind != KVREG_EVENT_REGISTER) || (c.state == 1 && e.kind != KVREG_EVENT_REMOVE))
            fail("re-entrant hash: kind %u out of order", e.kind);
        if (++c.state == 2) {
            c = g_cb_pending.back();
            g_cb_pending.pop_back();
        }
        return;
    }
    fail("event %llu for a re-entrant hash nobody registered (or delivered twice)",
         static_cast<unsigned long long>(e.event_id));
}

struct Consumer {
    bool check_tokens = true;
    uint64_t next_id = 0;
    uint64_t n_register = 0, n_remove = 0;
    int state[kHashes]{};
    std::vector<uint64_t> removes[kHashes]; // ids of each hash's Removes, ascending
    std::atomic<int> inside{0};

    void apply(const kvreg_event &e)
    {
        if (e.event_id != next_id)
            fail("event_id %llu, expected %llu (gap or reorder)",
                 static_cast<unsigned long long>(e.event_id), static_cast<unsigned long long>(next_id));
        next_id++;
        if ((e.sequence_hash & 0xFF00000000000000ull) == kCbBase) {
            apply_cb_event(e);
            (e.kind == KVREG_EVENT_REGISTER ? n_register : n_remove)++;
            return;
        }
        int i = hash_index(e.sequence_hash);
        if (i < 0)
            fail("event for unknown hash %llu", static_cast<unsigned long long>(e.sequence_hash));
        const Hash &h = g_hash[static_cast<size_t>(i)];
        if (e.block_hash != h.desc.block_hash || e.has_parent != h.desc.has_parent ||
            e.parent_sequence_hash != h.desc.parent_sequence_hash)
            fail("event %llu: block/parent hashes differ from the registration",
                 static_cast<unsigned long long>(e.event_id));
        if (e.pool_id < 1 || e.pool_id > KVREG_MAX_POOLS)
            fail("event pool_id %u", e.pool_id);
        if (e.kind == KVREG_EVENT_REGISTER) {
            if (state[i])
                fail("Register of hash #%d twice without a Remove (event %llu)", i,
                     static_cast<unsigned long long>(e.event_id));
            if (check_tokens && (e.n_tokens != h.desc.n_tokens ||
                                 (e.n_tokens && std::memcmp(e.tokens, h.tok, sizeof h.tok) != 0)))
                fail("Register event tokens differ from the registration");
            state[i] = 1;
            n_register++;
        } else if (e.kind == KVREG_EVENT_REMOVE) {
            if (!state[i])
                fail("Remove of hash #%d that is not registered (event %llu)", i,
                     static_cast<unsigned long long>(e.event_id));
            state[i] = 0;
            n_remove++;
            removes[i].push_back(e.event_id);
        } else {
            fail("event kind %u", e.kind);
        }
    }
};

Consumer g_consumer;

kvreg_registry *g_reg = nullptr;
kvreg_pool *g_cbpool = nullptr; // used only from inside callbacks
uint64_t g_reentries = 0;

// From inside the callback, while other threads keep calling in: queries, and a register +
// release of a fresh hash, whose Register and Remove must be delivered after this callback
// returns, on this thread, in order (checked by apply_cb_event()).
void reenter(const kvreg_event &e)
{
    if (kvt_registry_has(g_reg, e.sequence_hash) < 0)
        fail("kvreg_registry_contains from a callback failed");
    uint64_t v = 0;
    expect_status(kvreg_registry_stat(g_reg, KVREG_STAT_NEXT_EVENT_ID, &v), KVREG_OK, "stat in a callback");
    if (v <= e.event_id)
        fail("NEXT_EVENT_ID %llu inside the callback of event %llu", static_cast<unsigned long long>(v),
             static_cast<unsigned long long>(e.event_id));
    kvreg_block_desc d{};
    d.sequence_hash = kCbBase | ++g_reentries;
    d.block_hash = d.sequence_hash;
    g_cb_pending.push_back(CbPending{d.sequence_hash, std::this_thread::get_id(), 0});
    kvreg_block b = KVREG_BLOCK_NONE;
    expect_status(kvreg_register(g_cbpool, &d, &b), KVREG_OK, "kvreg_register from a callback");
    expect_status(kvreg_release(g_cbpool, b), KVREG_OK, "kvreg_release from a callback");
}

struct CallbackData {
    std::atomic<int> retired{0};
    std::atomic<int> destroyed{0};
};

void on_events(const kvreg_event *ev, size_t n, void *ud)
{
    auto *cd = static_cast<CallbackData *>(ud);
    if (cd->retired.load())
        fail("a replaced callback was called");
    int zero = 0;
    if (!g_consumer.inside.compare_exchange_strong(zero, 1))
        fail("two callbacks of one registry ran at once");
    for (size_t k = 0; k < n; k++)
        g_consumer.apply(ev[k]);
    for (size_t k = 0; k < n; k++)
        if (ev[k].event_id % 61 == 0)
            reenter(ev[k]);
    g_consumer.inside.store(0);
}

void on_destroy(void *ud)
{
    static_cast<CallbackData *>(ud)->destroyed.fetch_add(1);
}

// ---- shared state -------------------------------------------------------------------------
kvreg_pool *g_stable[kStable];
std::atomic<kvreg_pool *> g_churn[kChurn];
std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_ops{0};
bool g_poll = false;
int g_pollers = 1;

uint64_t next_event_id()
{
    uint64_t v = 0;
    expect_status(kvreg_registry_stat(g_reg, KVREG_STAT_NEXT_EVENT_ID, &v), KVREG_OK, "stat");
    return v;
}

struct Pin { // a reference held from event id `from` up to `to` (exclusive)
    int hash;
    uint64_t from, to;
};

struct Ref {
    int pool;
    int hash;
    kvreg_block b;
    uint64_t from;
};

struct Worker {
    Rng rng{};
    std::vector<Ref> refs;
    std::vector<Pin> pins;
    uint64_t ops = 0;

    void took(int pool, int hash, kvreg_block b)
    {
        if (b == KVREG_BLOCK_NONE)
            fail("KVREG_BLOCK_NONE returned with KVREG_OK");
        refs.push_back(Ref{pool, hash, b, next_event_id()});
    }

    void drop(size_t k, bool batch_done)
    {
        Ref r = refs[k];
        refs[k] = refs.back();
        refs.pop_back();
        (void)batch_done;
        pins.push_back(Pin{r.hash, r.from, next_event_id()}); // every interval, however long the run
        // pin interval closed before the release: a Remove after this point is allowed
    }

    void op_register()
    {
        int p = static_cast<int>(rng.below(kStable)), i = rng.hash();
        kvreg_block b = KVREG_BLOCK_NONE;
        int st = kvreg_register(g_stable[p], &g_hash[static_cast<size_t>(i)].desc, &b);
        if (st == KVREG_OK)
            took(p, i, b);
        else if (st == KVREG_EEXIST)
            op_acquire(p, i);
        else
            expect_status(st, KVREG_OK, "kvreg_register");
    }

    void op_acquire(int p, int i)
    {
        kvreg_block b = KVREG_BLOCK_NONE;
        int st = kvreg_acquire(g_stable[p], g_hash[static_cast<size_t>(i)].desc.sequence_hash, &b);
        if (st == KVREG_OK)
            took(p, i, b);
        else if (st != KVREG_ENOENT) // it may have left the pool since
            expect_status(st, KVREG_OK, "kvreg_acquire");
    }

    void op_release()
    {
        if (refs.empty()) {
            op_register();
            return;
        }
        size_t k = rng.below(static_cast<unsigned>(refs.size()));
        Ref r = refs[k];
        // while we hold it, the pool must answer for it
        expect_status(kvt_pool_has(g_stable[r.pool], g_hash[static_cast<size_t>(r.hash)].desc.sequence_hash), 1,
                      "kvreg_pool_contains of a held hash");
        expect_status(kvt_registry_has(g_reg, g_hash[static_cast<size_t>(r.hash)].desc.sequence_hash), 1,
                      "kvreg_registry_contains of a held hash");
        uint32_t rc = 0;
        expect_status(kvreg_block_refcount(g_stable[r.pool], r.b, &rc), KVREG_OK, "refcount of a held block");
        if (rc < 1)
            fail("refcount %u of a held block", rc);
        drop(k, false);
        expect_status(kvreg_release(g_stable[r.pool], r.b), KVREG_OK, "kvreg_release of a held block");
    }

    void op_register_batch()
    {
        int p = static_cast<int>(rng.below(kStable));
        size_t n = 1 + rng.below(8);
        kvreg_block_desc d[8];
        kvreg_block out[8];
        int status[8], idx[8];
        size_t nreg = 0;
        for (size_t k = 0; k < n; k++) {
            idx[k] = rng.hash();
            d[k] = g_hash[static_cast<size_t>(idx[k])].desc;
        }
        expect_status(kvreg_register_batch(g_stable[p], d, n, out, status, &nreg), KVREG_OK,
                      "kvreg_register_batch");
        size_t ok = 0;
        for (size_t k = 0; k < n; k++) {
            if (status[k] == KVREG_OK) {
                took(p, idx[k], out[k]);
                ok++;
            } else if (status[k] != KVREG_EEXIST) {
                expect_status(status[k], KVREG_OK, "batch block status");
            }
        }
        if (ok != nreg)
            fail("n_registered %zu, %zu statuses OK", nreg, ok);
    }

    void op_release_batch()
    {
        int p = static_cast<int>(rng.below(kStable));
        kvreg_block b[8];
        int status[8];
        size_t n = 0, nrel = 0;
        for (size_t k = 0; k < refs.size() && n < 8;) {
            if (refs[k].pool == p && rng.below(2)) {
                b[n++] = refs[k].b;
                drop(k, true);
            } else {
                k++;
            }
        }
        if (n == 0)
            return;
        expect_status(kvreg_release_batch(g_stable[p], b, n, status, &nrel), KVREG_OK,
                      "kvreg_release_batch");
        for (size_t k = 0; k < n; k++)
            expect_status(status[k], KVREG_OK, "release batch status of a held block");
        if (nrel != n)
            fail("n_released %zu of %zu held blocks", nrel, n);
    }

    void op_prefix()
    {
        int p = static_cast<int>(rng.below(kStable));
        uint64_t hs[6];
        int idx[6];
        kvreg_block out[6];
        size_t n = 1 + rng.below(6), got = 0;
        int start = static_cast<int>(rng.below(4)) * 4; // a parent chain: i, i+1, ...
        for (size_t k = 0; k < n; k++) {
            idx[k] = start + static_cast<int>(k);
            hs[k] = g_hash[static_cast<size_t>(idx[k])].desc.sequence_hash;
        }
        expect_status(kvreg_acquire_prefix(g_stable[p], hs, n, out, &got), KVREG_OK,
                      "kvreg_acquire_prefix");
        if (got > n)
            fail("prefix of %zu from %zu hashes", got, n);
        for (size_t k = 0; k < got; k++)
            took(p, idx[k], out[k]);
    }

    // Churn pools may be freed under us: every status a stale pool can give is fine, the point
    // is that nothing crashes and the event stream stays consistent.
    void op_churn()
    {
        kvreg_pool *pool = g_churn[rng.below(kChurn)].load();
        int i = rng.hash();
        kvreg_block b = KVREG_BLOCK_NONE;
        int st = kvreg_register(pool, &g_hash[static_cast<size_t>(i)].desc, &b);
        if (st != KVREG_OK && st != KVREG_EEXIST && st != KVREG_ESTALE)
            expect_status(st, KVREG_OK, "register in a churn pool");
        if (st == KVREG_OK && rng.below(16) != 0) { // mostly released: keep churn pools small
            st = kvreg_release(pool, b);
            if (st != KVREG_OK && st != KVREG_ESTALE)
                expect_status(st, KVREG_OK, "release in a churn pool");
        }
    }

    void run()
    {
        while (!g_stop.load(std::memory_order_relaxed)) {
            // POLL: do not outrun the consumer by more than half the queue (flow control)
            if (g_poll && (ops & 255) == 0) {
                uint64_t q = 0;
                kvreg_registry_stat(g_reg, KVREG_STAT_EVENTS_QUEUED, &q);
                while (q > (1u << 19) && !g_stop.load()) {
                    std::this_thread::yield();
                    kvreg_registry_stat(g_reg, KVREG_STAT_EVENTS_QUEUED, &q);
                }
            }
            unsigned c = rng.below(16);
            if (c < 4)
                op_register();
            else if (c < 6)
                op_acquire(static_cast<int>(rng.below(kStable)), rng.hash());
            else if (c < 10 || refs.size() > 8)
                op_release();
            else if (c < 11)
                op_register_batch();
            else if (c < 12)
                op_release_batch();
            else if (c < 13)
                op_prefix();
            else
                op_churn();
            ops++;
        }
        g_ops.fetch_add(ops);
    }
};

std::vector<CallbackData *> g_cbs;

void churn_thread(Rng rng)
{
    while (!g_stop.load(std::memory_order_relaxed)) {
        int s = static_cast<int>(rng.below(kChurn));
        kvreg_pool *old = g_churn[s].load();
        kvreg_pool *np = nullptr;
        expect_status(kvreg_pool_new(&np, g_reg, "churn"), KVREG_OK, "kvreg_pool_new");
        g_churn[s].store(np);
        kvreg_pool_free(old);
        if (!g_poll && rng.below(8) == 0) {
            auto *cd = new CallbackData;
            CallbackData *prev = g_cbs.back();
            g_cbs.push_back(cd);
            expect_status(kvreg_registry_set_event_fn(g_reg, on_events, cd, on_destroy), KVREG_OK,
                          "kvreg_registry_set_event_fn");
            // the header: when it returns the old callback is not running, will not run again,
            // and its destroy has run
            prev->retired.store(1);
            if (prev->destroyed.load() != 1)
                fail("replaced callback's destroy ran %d times", prev->destroyed.load());
        }
        std::this_thread::yield();
    }
}

// poll2: pollers put what they got here; events are applied once the next id has arrived
std::mutex g_merge_mu;
std::vector<kvreg_event> g_pending; // kept sorted by event_id

void merge(const kvreg_event *ev, size_t n)
{
    std::lock_guard<std::mutex> lk(g_merge_mu);
    for (size_t k = 0; k < n; k++) {
        kvreg_event e = ev[k];
        e.tokens = nullptr;
        auto at = std::lower_bound(g_pending.begin(), g_pending.end(), e,
                                   [](const kvreg_event &a, const kvreg_event &b) { return a.event_id < b.event_id; });
        if (at != g_pending.end() && at->event_id == e.event_id)
            fail("event %llu polled twice", static_cast<unsigned long long>(e.event_id));
        g_pending.insert(at, e);
    }
    size_t done = 0;
    while (done < g_pending.size() && g_pending[done].event_id == g_consumer.next_id)
        g_consumer.apply(g_pending[done++]);
    g_pending.erase(g_pending.begin(), g_pending.begin() + static_cast<long>(done));
    // A poller preempted between its poll and this merge legitimately holds back the next id
    // while the other keeps going; a lost event shows when drain() ends with events pending.
    if (g_pending.size() > (1u << 22))
        fail("event %llu never arrived", static_cast<unsigned long long>(g_consumer.next_id));
}

void poller_thread()
{
    while (!g_stop.load(std::memory_order_relaxed)) {
        kvreg_event ev[64];
        size_t n = 0;
        expect_status(kvreg_registry_poll(g_reg, ev, 64, &n), KVREG_OK, "kvreg_registry_poll");
        merge(ev, n);
        if (n == 0)
            std::this_thread::yield();
    }
}

void drain()
{
    kvreg_event ev[256];
    size_t n = 0;
    do {
        expect_status(kvreg_registry_poll(g_reg, ev, 256, &n), KVREG_OK, "kvreg_registry_poll");
        if (g_pollers > 1) {
            merge(ev, n);
            continue;
        }
        for (size_t k = 0; k < n; k++)
            g_consumer.apply(ev[k]);
    } while (n > 0);
    if (!g_pending.empty())
        fail("%zu polled events wait for event %llu, which never came", g_pending.size(),
             static_cast<unsigned long long>(g_consumer.next_id));
}

void consumer_thread()
{
    while (!g_stop.load(std::memory_order_relaxed)) {
        kvreg_event ev[256];
        size_t n = 0;
        expect_status(kvreg_registry_poll(g_reg, ev, 256, &n), KVREG_OK, "kvreg_registry_poll");
        for (size_t k = 0; k < n; k++)
            g_consumer.apply(ev[k]);
        if (n == 0)
            std::this_thread::yield();
    }
}

void check_pins(const std::vector<Worker> &workers)
{
    size_t checked = 0;
    for (const Worker &w : workers) {
        for (const Pin &p : w.pins) {
            const std::vector<uint64_t> &r = g_consumer.removes[p.hash];
            auto it = std::lower_bound(r.begin(), r.end(), p.from);
            if (it != r.end() && *it < p.to)
                fail("Remove of hash #%d (event %llu) while a pool held it (events %llu..%llu)",
                     p.hash, static_cast<unsigned long long>(*it),
                     static_cast<unsigned long long>(p.from), static_cast<unsigned long long>(p.to));
            checked++;
        }
    }
    std::printf("stress: %zu held-reference intervals checked against the Removes\n", checked);
}

void check_quiescent(const char *when, bool pools_live)
{
    if (g_poll)
        drain();
    for (int i = 0; i < kHashes; i++) {
        uint64_t sh = g_hash[static_cast<size_t>(i)].desc.sequence_hash;
        int in_pools = 0;
        for (int p = 0; pools_live && p < kStable; p++)
            in_pools |= kvt_pool_has(g_stable[p], sh);
        for (int p = 0; pools_live && p < kChurn; p++)
            in_pools |= kvt_pool_has(g_churn[p].load(), sh);
        if (pools_live)
            in_pools |= kvt_pool_has(g_cbpool, sh);
        int reg = kvt_registry_has(g_reg, sh);
        if (reg != g_consumer.state[i] || in_pools != g_consumer.state[i])
            fail("%s: hash #%d: events say %d, registry %d, pools %d", when, i,
                 g_consumer.state[i], reg, in_pools);
    }
    uint64_t v = 0;
    expect_status(kvreg_registry_stat(g_reg, KVREG_STAT_NEXT_EVENT_ID, &v), KVREG_OK, "stat");
    if (v != g_consumer.next_id)
        fail("%s: NEXT_EVENT_ID %llu, consumer saw %llu", when, static_cast<unsigned long long>(v),
             static_cast<unsigned long long>(g_consumer.next_id));
    expect_status(kvreg_registry_stat(g_reg, KVREG_STAT_EVENTS_REGISTER, &v), KVREG_OK, "stat");
    if (v != g_consumer.n_register)
        fail("%s: EVENTS_REGISTER %llu, consumer saw %llu", when, static_cast<unsigned long long>(v),
             static_cast<unsigned long long>(g_consumer.n_register));
    expect_status(kvreg_registry_stat(g_reg, KVREG_STAT_EVENTS_REMOVE, &v), KVREG_OK, "stat");
    if (v != g_consumer.n_remove)
        fail("%s: EVENTS_REMOVE mismatch", when);
    expect_status(kvreg_registry_stat(g_reg, KVREG_STAT_EVENTS_DROPPED, &v), KVREG_OK, "stat");
    if (v != 0)
        fail("%s: %llu events dropped", when, static_cast<unsigned long long>(v));
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2 || (std::strcmp(argv[1], "inline") != 0 && std::strcmp(argv[1], "poll") != 0 &&
                     std::strcmp(argv[1], "poll2") != 0)) {
        std::fprintf(stderr, "usage: %s inline|poll|poll2 [seed]\n", argv[0]);
        return 2;
    }
    g_mode = argv[1];
    g_poll = std::strncmp(argv[1], "poll", 4) == 0;
    g_pollers = std::strcmp(argv[1], "poll2") == 0 ? 2 : 1;
    g_consumer.check_tokens = g_pollers == 1;
    if (argc > 2)
        g_seed = std::strtoul(argv[2], nullptr, 10);
    else if (const char *s = std::getenv("KVREG_STRESS_SEED"))
        g_seed = std::strtoul(s, nullptr, 10);
    double seconds = 2;
    if (const char *s = std::getenv("KVREG_STRESS_SECONDS"))
        seconds = std::atof(s);
    std::printf("stress: mode=%s seed=%lu seconds=%.1f (replay: %s %s %lu)\n", g_mode, g_seed,
                seconds, argv[0], g_mode, g_seed);
    std::fflush(stdout);
    init_hashes();

    Rng cfg_rng{g_seed};
    kvreg_config *cfg = nullptr;
    expect_status(kvreg_config_new(&cfg), KVREG_OK, "kvreg_config_new");
    expect_status(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, g_poll ? KVREG_DELIVERY_POLL : KVREG_DELIVERY_INLINE),
                  KVREG_OK, "DELIVERY");
    expect_status(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, cfg_rng.below(2)), KVREG_OK, "KEEP_TOKENS");
    expect_status(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1u << cfg_rng.below(7)), KVREG_OK, "SHARDS");
    expect_status(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 1u << 20), KVREG_OK, "POLL_CAPACITY");
    // inline and poll2 reserve memory (pinned record chunks, which kvreg_release_batch reads
    // without a lock to prefetch: ThreadSanitizer watches that here); poll does not.
    const uint64_t reserve = std::strcmp(g_mode, "poll") == 0 ? 0 : 1000 + cfg_rng.below(8000);
    expect_status(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, reserve), KVREG_OK, "RESERVE_BLOCKS");
    std::printf("stress %s: reserve_blocks %llu\n", g_mode, static_cast<unsigned long long>(reserve));
    if (!g_poll) {
        g_cbs.push_back(new CallbackData);
        expect_status(kvreg_config_set_event_fn(cfg, on_events, g_cbs.back(), on_destroy), KVREG_OK,
                      "kvreg_config_set_event_fn");
    }
    expect_status(kvreg_registry_new(&g_reg, cfg), KVREG_OK, "kvreg_registry_new");
    kvreg_config_free(cfg);
    for (int p = 0; p < kStable; p++)
        expect_status(kvreg_pool_new(&g_stable[p], g_reg, "stable"), KVREG_OK, "kvreg_pool_new");
    for (int p = 0; p < kChurn; p++) {
        kvreg_pool *np = nullptr;
        expect_status(kvreg_pool_new(&np, g_reg, "churn"), KVREG_OK, "kvreg_pool_new");
        g_churn[p].store(np);
    }
    expect_status(kvreg_pool_new(&g_cbpool, g_reg, "callback"), KVREG_OK, "kvreg_pool_new");

    std::vector<Worker> workers(kWorkers);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; w++) {
        workers[static_cast<size_t>(w)].rng.s = g_seed * 1000 + static_cast<uint64_t>(w);
        threads.emplace_back([&workers, w] { workers[static_cast<size_t>(w)].run(); });
    }
    threads.emplace_back(churn_thread, Rng{g_seed * 1000 + 999});
    if (g_pollers > 1)
        for (int k = 0; k < g_pollers; k++)
            threads.emplace_back(poller_thread);
    else if (g_poll)
        threads.emplace_back(consumer_thread);

    // the run is bounded by time; the main thread only waits for the deadline
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_until(deadline);
    g_stop.store(true);
    for (auto &t : threads)
        t.join();

    check_quiescent("quiescence", true);
    check_pins(workers);

    // Release what the workers still hold (all must succeed), retire the churn pools: afterwards
    // every hash the stable pools do not hold must have had its Remove.
    for (Worker &w : workers)
        while (!w.refs.empty()) {
            Ref r = w.refs.back();
            w.refs.pop_back();
            expect_status(kvreg_release(g_stable[r.pool], r.b), KVREG_OK, "final release");
        }
    for (int p = 0; p < kChurn; p++)
        kvreg_pool_free(g_churn[p].load());
    for (int p = 0; p < kStable; p++)
        kvreg_pool_free(g_stable[p]);
    kvreg_pool_free(g_cbpool);
    check_quiescent("after freeing every pool", false);
    for (int i = 0; i < kHashes; i++)
        if (g_consumer.state[i])
            fail("hash #%d still registered with no pool left", i);

    kvreg_registry_free(g_reg);
    for (CallbackData *cd : g_cbs) {
        if (cd->destroyed.load() != 1)
            fail("destroy ran %d times", cd->destroyed.load());
        delete cd;
    }
    std::printf("stress: mode=%s %llu operations, %llu events checked (%llu Register, %llu Remove), "
                "%llu callback re-entries\n",
                g_mode, static_cast<unsigned long long>(g_ops.load()),
                static_cast<unsigned long long>(g_consumer.next_id),
                static_cast<unsigned long long>(g_consumer.n_register),
                static_cast<unsigned long long>(g_consumer.n_remove),
                static_cast<unsigned long long>(g_reentries));
    return 0;
}
