// Allocation failure: global operator new / new[] (every variant) are replaced
// (replace_new.hpp), and the k-th allocation after arming fails, for k = 1, 2, ... until the
// call under test needs no more than k-1 allocations. Each failing call must return
// KVREG_ENOMEM and leave the registry exactly
// as it was: statistics, queries, reference counts, delivered events; and the same call made
// again without injected failures must then behave as in an undisturbed run.
//
// Linked with the static internal library so the replacement also covers the library's own
// allocations without relying on symbol interposition.
#include <kvreg.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>
#include "kvreg_answer.h"

#include "replace_new.hpp"

namespace {
long g_countdown = 0; // > 0: armed; the allocation that brings it to 0 fails
long g_seen = 0;      // allocations attempted while armed
} // namespace

bool replaced_new_fails(std::size_t)
{
    if (g_countdown <= 0)
        return false;
    g_seen++;
    return --g_countdown == 0;
}

namespace {

int g_failures = 0;
const char *g_case = "";
// An event delivered without its tokens (n_tokens 0) because memory ran out is a difference,
// except where kvreg.h allows it: kvreg_pool_free ("a Remove goes out without its tokens").
bool g_allow_tokenless = false;
long g_tokenless = 0;

void check(bool ok, const char *what, long k)
{
    if (!ok) {
        std::fprintf(stderr, "FAIL %s, failing allocation #%ld: %s\n", g_case, k, what);
        g_failures++;
    }
}

// Events are recorded into fixed storage: the recorder itself must not allocate while armed.
struct Recorder {
    kvreg_event ev[4096];
    size_t n = 0;
};

void record(const kvreg_event *ev, size_t n, void *ud)
{
    auto *r = static_cast<Recorder *>(ud);
    for (size_t i = 0; i < n && r->n < 4096; i++) {
        r->ev[r->n] = ev[i];
        r->ev[r->n].tokens = nullptr; // borrowed; contents are compared through n_tokens only
        r->n++;
    }
}

const uint32_t kTokens[4] = {11, 12, 13, 14};

kvreg_block_desc desc(uint64_t h)
{
    kvreg_block_desc d{};
    d.sequence_hash = h;
    d.block_hash = h * 7;
    d.has_parent = h > 1;
    d.parent_sequence_hash = h - 1;
    d.tokens = kTokens;
    d.n_tokens = 4;
    d.block_size = 4;
    return d;
}

// The world one case runs in: a registry (KEEP_TOKENS), pools a and b, `fill` hashes registered
// in a (so that containers are at different fill levels), hash 1000 in both, and a sequence.
struct World {
    Recorder rec;
    kvreg_registry *reg = nullptr;
    kvreg_pool *a = nullptr, *b = nullptr;
    kvreg_sequence *seq = nullptr;
    std::vector<kvreg_block> held; // handles in a
    kvreg_block shared_b = 0;
    bool poll;

    World(int fill, bool poll_mode) : poll(poll_mode)
    {
        kvreg_config *cfg = nullptr;
        kvreg_config_new(&cfg);
        kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 1);
        kvreg_config_set(cfg, KVREG_OPT_SHARDS, 2);
        if (poll)
            kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL);
        else
            kvreg_config_set_event_fn(cfg, record, &rec, nullptr);
        if (kvreg_registry_new(&reg, cfg) != KVREG_OK)
            std::abort();
        kvreg_config_free(cfg);
        kvreg_pool_new(&a, reg, "a");
        kvreg_pool_new(&b, reg, "b");
        for (int i = 0; i < fill; i++) {
            kvreg_block h = 0;
            kvreg_block_desc d = desc(static_cast<uint64_t>(i) + 1);
            kvreg_register(a, &d, &h);
            held.push_back(h);
        }
        kvreg_block h = 0;
        kvreg_block_desc d = desc(1000);
        kvreg_register(a, &d, &h);
        held.push_back(h);
        kvreg_register(b, &d, &shared_b);
        kvreg_sequence_new(&seq, 4, KVREG_ROUTER_SALT);
        uint32_t t[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        kvreg_sequence_extend(seq, t, 10, nullptr);
    }
    ~World()
    {
        kvreg_sequence_free(seq);
        kvreg_registry_free(reg);
    }
};

// Everything observable about a world: the state (v) and the event stream (ev, dropped and
// queued counts), kept apart so a void call may be judged by state plus accounted-for drops.
struct Snapshot {
    std::vector<uint64_t> v;
    std::vector<uint64_t> ev; // kind, pool, id, hash, n_tokens per delivered event
    uint64_t dropped = 0, queued = 0;
    bool operator==(const Snapshot &o) const
    {
        return v == o.v && same_events(ev, o.ev) && dropped == o.dropped && queued == o.queued;
    }
    // equal, except (where allowed) an event that lost its tokens in delivery
    static bool same_events(const std::vector<uint64_t> &got, const std::vector<uint64_t> &want)
    {
        if (got.size() != want.size())
            return false;
        long tokenless = 0;
        for (size_t i = 0; i < got.size(); i++) {
            if (got[i] == want[i])
                continue;
            if (i % 5 == 4 && got[i] == 0 && g_allow_tokenless) {
                tokenless++;
                continue;
            }
            return false;
        }
        g_tokenless += tokenless;
        return true;
    }
};

// A call that cannot report KVREG_ENOMEM (kvreg_pool_free) must still change the state exactly
// as undisturbed. Its events may only be lost visibly: dropped, counted, their ids skipped.
bool same_but_dropped(const Snapshot &got, const Snapshot &want)
{
    if (got.v != want.v)
        return false;
    uint64_t lost = (want.ev.size() - got.ev.size()) / 5 + (want.queued - got.queued);
    if (got.ev.size() > want.ev.size() || got.queued > want.queued ||
        got.dropped - want.dropped != lost)
        return false;
    for (size_t i = 0; i < got.ev.size(); i += 5) { // what was delivered is a subsequence
        bool found = false;
        std::vector<uint64_t> g(got.ev.begin() + static_cast<long>(i), got.ev.begin() + static_cast<long>(i) + 5);
        for (size_t j = 0; j < want.ev.size() && !found; j += 5)
            found = Snapshot::same_events(g, std::vector<uint64_t>(want.ev.begin() + static_cast<long>(j),
                                                                   want.ev.begin() + static_cast<long>(j) + 5));
        if (!found)
            return false;
    }
    return true;
}

Snapshot snap(World &w)
{
    Snapshot s;
    for (uint32_t st = KVREG_STAT_HASHES; st <= KVREG_STAT_TOKEN_BYTES; st++) {
        uint64_t x = 0;
        kvreg_registry_stat(w.reg, st, &x);
        if (st == KVREG_STAT_EVENTS_DROPPED)
            s.dropped = x;
        else if (st == KVREG_STAT_EVENTS_QUEUED)
            s.queued = x;
        else
            s.v.push_back(x);
    }
    for (uint64_t h : {1ull, 2ull, 3ull, 50ull, 51ull, 52ull, 1000ull, 2000ull}) {
        s.v.push_back(static_cast<uint64_t>(kvt_registry_has(w.reg, h)));
        s.v.push_back(static_cast<uint64_t>(kvt_pool_has(w.a, h)));
        s.v.push_back(static_cast<uint64_t>(kvt_pool_has(w.b, h)));
    }
    s.v.push_back(kvreg_pool_size(w.a));
    s.v.push_back(kvreg_pool_size(w.b));
    for (kvreg_block h : w.held) {
        uint32_t rc = 0;
        s.v.push_back(static_cast<uint64_t>(kvreg_block_refcount(w.a, h, &rc)));
        s.v.push_back(rc);
    }
    for (size_t i = 0; i < w.rec.n; i++) {
        const kvreg_event &e = w.rec.ev[i];
        s.ev.insert(s.ev.end(), {e.kind, e.pool_id, e.event_id, e.sequence_hash, e.n_tokens});
    }
    s.v.push_back(kvreg_sequence_total_tokens(w.seq));
    s.v.push_back(kvreg_sequence_num_blocks(w.seq));
    return s;
}

using Op = std::function<int(World &)>;

// Run op in a fresh world with the k-th allocation failing, k = 1, 2, ...
void run_case(const char *name, int fill, bool poll, const Op &op, bool may_drop = false)
{
    g_case = name;
    g_allow_tokenless = may_drop;
    // the undisturbed run: what the call does, and how the world looks afterwards
    Snapshot want;
    int want_st;
    {
        World w(fill, poll);
        want_st = op(w);
        want = snap(w);
    }
    for (long k = 1; k < 10000; k++) {
        World w(fill, poll);
        Snapshot before = snap(w);
        g_seen = 0;
        g_countdown = k;
        int st = op(w);
        bool reached = g_seen >= k;
        g_countdown = 0;
        if (!reached) { // the call needed fewer than k allocations: it must simply succeed
            check(st == want_st && snap(w) == want, "run with no failure differs", k);
            return;
        }
        if (st == KVREG_ENOMEM) {
            check(snap(w) == before, "KVREG_ENOMEM changed the registry", k);
            // and nothing is left half-done: the same call now behaves as undisturbed
            int again = op(w);
            check(again == want_st && snap(w) == want, "retry after KVREG_ENOMEM differs", k);
        } else {
            // a failure the library absorbed (e.g. an optional reserve): result must be exact
            Snapshot got = snap(w);
            // POLL: "a queue that cannot grow for lack of memory drops like a full one (counted,
            // id gap); the registry's state is never rolled back for a lost event" (kvreg.h)
            bool ok = st == want_st && (got == want || ((may_drop || poll) && same_but_dropped(got, want)));
            if (!ok && std::getenv("ALLOC_FAIL_DEBUG")) {
                std::fprintf(stderr, "state %s; events got %zu want %zu; dropped %llu/%llu queued %llu/%llu\n",
                             got.v == want.v ? "same" : "differs", got.ev.size() / 5, want.ev.size() / 5,
                             static_cast<unsigned long long>(got.dropped), static_cast<unsigned long long>(want.dropped),
                             static_cast<unsigned long long>(got.queued), static_cast<unsigned long long>(want.queued));
                for (size_t i = 0; i < got.ev.size(); i++)
                    std::fprintf(stderr, "%llu%s", static_cast<unsigned long long>(got.ev[i]), i % 5 == 4 ? "\n" : " ");
                std::fprintf(stderr, "--\n");
                for (size_t i = 0; i < want.ev.size(); i++)
                    std::fprintf(stderr, "%llu%s", static_cast<unsigned long long>(want.ev[i]), i % 5 == 4 ? "\n" : " ");
            }
            check(ok, "absorbed allocation failure changed the outcome", k);
        }
    }
    check(false, "did not converge", 10000);
}

// A batch reports KVREG_ENOMEM per block: the blocks that failed must be exactly absent (no
// reference, no event), the others registered with their events; registering the failed ones
// again must then give the undisturbed final state.
void run_batch_case(int fill, bool poll)
{
    g_case = "kvreg_register_batch (five new blocks)";
    kvreg_block_desc d[5] = {desc(50), desc(51), desc(52), desc(53), desc(54)};
    Snapshot want;
    {
        World w(fill, poll);
        kvreg_block h[5];
        kvreg_register_batch(w.a, d, 5, h, nullptr, nullptr);
        want = snap(w);
    }
    for (long k = 1; k < 10000; k++) {
        World w(fill, poll);
        kvreg_block h[5];
        int status[5];
        uint64_t hashes0 = 0, next0 = 0, hashes1 = 0, next1 = 0;
        size_t ev0 = w.rec.n, nreg = 99;
        kvreg_registry_stat(w.reg, KVREG_STAT_HASHES, &hashes0);
        kvreg_registry_stat(w.reg, KVREG_STAT_NEXT_EVENT_ID, &next0);
        g_seen = 0;
        g_countdown = k;
        int st = kvreg_register_batch(w.a, d, 5, h, status, &nreg);
        bool reached = g_seen >= k;
        g_countdown = 0;
        check(st == KVREG_OK, "batch call status", k);
        size_t ok = 0;
        for (int i = 0; i < 5; i++) {
            check(status[i] == KVREG_OK || status[i] == KVREG_ENOMEM, "batch item status", k);
            check(kvt_pool_has(w.a, d[i].sequence_hash) == (status[i] == KVREG_OK),
                  "a failed batch item is registered, or a successful one is not", k);
            check((status[i] == KVREG_OK) == (h[i] != KVREG_BLOCK_NONE), "batch item handle", k);
            ok += status[i] == KVREG_OK;
        }
        check(nreg == ok, "n_registered", k);
        kvreg_registry_stat(w.reg, KVREG_STAT_HASHES, &hashes1);
        kvreg_registry_stat(w.reg, KVREG_STAT_NEXT_EVENT_ID, &next1);
        check(hashes1 - hashes0 == ok && next1 - next0 == ok, "one Register per registered item", k);
        for (size_t e = ev0; !poll && e < w.rec.n; e++)
            check(w.rec.ev[e].kind == KVREG_EVENT_REGISTER && w.rec.ev[e].sequence_hash >= 50 &&
                      w.rec.ev[e].sequence_hash < 55 &&
                      status[w.rec.ev[e].sequence_hash - 50] == KVREG_OK &&
                      w.rec.ev[e].n_tokens == 4,
                  "Register event of a batch item", k);
        check(poll || w.rec.n - ev0 == ok, "events delivered for the batch", k);
        for (int i = 0; i < 5; i++) {
            if (status[i] == KVREG_OK)
                continue;
            kvreg_block x = 0;
            check(kvreg_register(w.a, &d[i], &x) == KVREG_OK, "registering a failed item again", k);
        }
        check(snap(w).v == want.v, "final state after retrying the failed items", k);
        if (!reached)
            return;
    }
}

} // namespace

int main()
{
    // valgrind substitutes its own operator new for ours: nothing could be injected
    if (under_valgrind()) {
        std::printf("SKIP: under valgrind, which replaces operator new (run it natively or under ASan)\n");
        return 77;
    }
    int cases = 0;
    auto each_fill = [&](const char *name, bool poll, const Op &op, bool may_drop = false) {
        for (int fill : {0, 1, 3, 7, 15, 31, 63}) {
            run_case(name, fill, poll, op, may_drop);
            cases++;
        }
    };
    for (bool poll : {false, true}) {
        each_fill("kvreg_register (new hash)", poll, [](World &w) {
            kvreg_block h = 0;
            kvreg_block_desc d = desc(50);
            return kvreg_register(w.a, &d, &h);
        });
        each_fill("kvreg_register (hash held by another pool)", poll, [](World &w) {
            kvreg_block h = 0;
            kvreg_block_desc d = desc(1);
            return kvreg_register(w.b, &d, &h);
        });
        each_fill("kvreg_register_batch (one block)", poll, [](World &w) {
            kvreg_block h = 0;
            kvreg_block_desc d = desc(51);
            int status = 0;
            int st = kvreg_register_batch(w.a, &d, 1, &h, &status, nullptr);
            return st == KVREG_OK ? status : st;
        });
        for (int fill : {0, 1, 7, 31}) {
            run_batch_case(fill, poll);
            cases++;
        }
        each_fill("kvreg_register_sequence_block", poll, [](World &w) {
            kvreg_block h = 0;
            return kvreg_register_sequence_block(w.b, w.seq, 1, &h);
        });
        each_fill("kvreg_acquire", poll, [](World &w) {
            kvreg_block h = 0;
            return kvreg_acquire(w.a, 1000, &h);
        });
        each_fill("kvreg_release (last reference: Remove)", poll, [](World &w) {
            return kvreg_release(w.a, w.held.front());
        });
        each_fill("kvreg_release (shared hash)", poll, [](World &w) {
            return kvreg_release(w.b, w.shared_b);
        });
        each_fill("kvreg_register_sequence (one block)", poll, [](World &w) {
            kvreg_block h = 0;
            int status = 0;
            int st = kvreg_register_sequence(w.a, w.seq, 1, 1, &h, &status, nullptr);
            return st == KVREG_OK ? status : st;
        });
        each_fill("kvreg_release_batch (last reference)", poll, [](World &w) {
            int status = 0;
            int st = kvreg_release_batch(w.a, &w.held.front(), 1, &status, nullptr);
            return st == KVREG_OK ? status : st;
        });
        each_fill("kvreg_acquire_prefix", poll, [](World &w) {
            uint64_t hs[2] = {1000, 1};
            kvreg_block out[2];
            size_t n = 0;
            return kvreg_acquire_prefix(w.a, hs, 2, out, &n);
        });
        // void: it cannot report a failure, so it must not be disturbed by one
        each_fill("kvreg_pool_free", poll, [](World &w) {
            kvreg_pool_free(w.a);
            return 0;
        }, true);
        each_fill("kvreg_pool_new", poll, [](World &w) {
            kvreg_pool *p = nullptr;
            return kvreg_pool_new(&p, w.reg, "a pool name long enough to need the heap, surely");
        });
    }
    each_fill("kvreg_registry_poll", true, [](World &w) {
        kvreg_event ev[8];
        size_t n = 0;
        return kvreg_registry_poll(w.reg, ev, 8, &n);
    });
    each_fill("kvreg_sequence_extend", false, [](World &w) {
        uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        return kvreg_sequence_extend(w.seq, t, 9, nullptr);
    });
    each_fill("kvreg_registry_set_event_fn", false, [](World &w) {
        return kvreg_registry_set_event_fn(w.reg, record, &w.rec, nullptr);
    });
    each_fill("kvreg_sequence_unwind", false, [](World &w) {
        return kvreg_sequence_unwind(w.seq, 7);
    });
    each_fill("kvreg_sequence_append", false, [](World &w) {
        return kvreg_sequence_append(w.seq, 77, nullptr);
    });
    run_case("kvreg_registry_new", 0, false, [](World &) {
        kvreg_registry *r = nullptr;
        int st = kvreg_registry_new(&r, nullptr);
        if (st == KVREG_OK)
            kvreg_registry_free(r);
        else if (r != nullptr)
            return -100; // output written on failure
        return st;
    });
    run_case("kvreg_config_new", 0, false, [](World &) {
        kvreg_config *c = nullptr;
        int st = kvreg_config_new(&c);
        kvreg_config_free(c);
        return st;
    });
    run_case("kvreg_sequence_new", 0, false, [](World &) {
        kvreg_sequence *s = nullptr;
        int st = kvreg_sequence_new(&s, 4, 0);
        kvreg_sequence_free(s);
        return st;
    });
    cases += 3;
    std::printf("alloc_fail: %d cases, %d failures; kvreg_pool_free sent %ld Removes without tokens\n",
                cases, g_failures, g_tokenless);
    return g_failures ? 1 : 0;
}
