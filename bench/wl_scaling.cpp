// kvreg-only workloads: what the registry-wide-lock-free core (event_log.hpp) promises, measured.
// The seed peer has no counterpart for any of them; their JSON lines say "kvreg_only": true.
//
//  disjoint   T threads, each with its own pool and its own sequences (distinct tokens, so no
//             hash is shared between threads), the `threads` schedule (R rounds, K sequences
//             registered then released). Every registration emits Register and every release
//             Remove, so delivery is on every call's path. --delivery inline: the counting
//             callback of events.cpp. --delivery poll: a consumer thread (not one of the T)
//             counts events with kvreg_registry_poll_wait. Then the same with 1 thread (thread
//             0's sequences), for scaling_ratio = ops/s(T) / ops/s(1). INLINE runs then
//             the T threads once more, each with a registry of its own (nothing shared:
//             not a lock, an index line, an event id or a ring slot): isolated_ratio =
//             ops/s(T isolated) / ops/s(1) is what this machine gives the same work with
//             no sharing at all, the ceiling of any shared registry's scaling_ratio.
//             Both modes report the CPUs kept busy (process CPU time / wall time) in
//             the 1-thread and T-thread runs, and cpu_ceiling_ratio = min(T, CPUs /
//             CPUs busy with 1 thread): the most scaling_ratio can be on this
//             machine if operations cost no more CPU shared than alone. In POLL mode
//             the consumer's CPU counts, since it runs on the same cores.
//  hol        head of line: thread A registers a block whose Register event makes the callback
//             sleep 50 ms (on A, A being the deliverer). While it sleeps, thread B makes --calls
//             calls that emit no event (acquire + release of a block it holds twice,
//             kvreg_pool_contains, kvreg_register returning KVREG_EEXIST), each timed.
//  pool_free  kvreg_pool_free of a 1-block pool with no other pool, then beside a pool holding
//             --big-pool blocks: the free visits only its own pool, so the two must be alike.
#include "bench.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include <sched.h>

namespace bench {

namespace {

// CPUs this process may run on.
unsigned usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return std::max(1u, std::thread::hardware_concurrency());
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
}

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// ------------------------------------------------------------------------------- disjoint

enum class Mode { kShared, kIsolated, kPoll };

// POLL mode: the consumer thread's view, with the checks the inline callback makes.
struct PollTally {
    EventCounts c;
    uint64_t waits = 0;      // kvreg_registry_poll_wait calls
    uint64_t nonempty = 0;   // polls (waiting or not) that returned events
    uint64_t next_id = 0;
};

void poll_take(PollTally &p, const kvreg_event *ev, size_t n) {
    if (n == 0) return;
    p.nonempty++;
    p.c.callbacks++;
    if (n > p.c.max_per_callback) p.c.max_per_callback = n;
    for (size_t i = 0; i < n; i++) {
        const kvreg_event &e = ev[i];
        p.c.id_gaps += e.event_id != p.next_id;
        p.next_id = e.event_id + 1;
        if (e.kind == KVREG_EVENT_REGISTER) {
            p.c.registers++;
            p.c.register_hash_sum += e.sequence_hash;
            p.c.register_without_tokens += e.n_tokens == 0 || e.tokens == nullptr;
        } else {
            p.c.removes++;
            p.c.remove_hash_sum += e.sequence_hash;
        }
    }
}

// Sleeps in kvreg_registry_poll_wait until events come; once `stop` is set (after the workers
// are joined and kvreg_registry_flush returned, so every event is queued) it takes what is left
// without waiting. The wake-up from kvreg_registry_wakeup is not lost if it comes before the wait.
void poll_consumer(kvreg_registry *reg, const std::atomic<bool> &stop, PollTally &out) {
    std::vector<kvreg_event> buf(KVREG_EVENTS_PER_CALL);
    PollTally p;
    while (!stop.load(std::memory_order_acquire)) {
        size_t n = 0;
        check_rc(kvreg_registry_poll_wait(reg, buf.data(), buf.size(), &n, -1), "kvreg_registry_poll_wait");
        p.waits++;
        poll_take(p, buf.data(), n);
    }
    for (;;) {
        size_t n = 0;
        check_rc(kvreg_registry_poll(reg, buf.data(), buf.size(), &n), "kvreg_registry_poll");
        if (n == 0) break;
        poll_take(p, buf.data(), n);
    }
    out = p;
}

struct DRun {
    Tally total;
    EventCounts c;
    double work_s = 0, drain_s = 0;
    // Process CPU time over work and drain: every thread's (workers, the POLL consumer; the
    // main thread sleeps in join meanwhile). See cpus_busy in wl_disjoint.
    double cpu_s = 0;
    bool empty = false;
    uint64_t dropped = 0, waits = 0;
    uint64_t ops() const { return total.attempts + total.registered; }
    double secs() const { return work_s + drain_s; }
    double ops_per_s() const { return secs() > 0 ? static_cast<double>(ops()) / secs() : 0.0; }
};

DRun disjoint_run(const Opts &o, const SeqSet &set, size_t u, size_t t_count, size_t rounds, size_t k,
                  Mode mode) {
    DRun res;
    std::vector<Tally> tallies(t_count);
    double cpu0 = 0;
    double t0 = 0;
    StartBarrier start(static_cast<std::ptrdiff_t>(t_count + 1), StartClock{&t0});
    auto run_workers = [&](const std::vector<kvreg_pool *> &pools) {
        cpu0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        std::vector<std::thread> joins;
        for (size_t t = 0; t < t_count; t++)
            joins.emplace_back(seq_worker, pools[t], std::cref(set), t * u, u, rounds, k,
                               std::ref(start), std::ref(tallies[t]));
        start.arrive_and_wait(); // sets t0 (StartClock)
        for (std::thread &th : joins) th.join();
        res.work_s = now_s() - t0;
    };
    if (mode == Mode::kIsolated) {
        // One registry per thread (each with its counting callback), combined afterwards:
        // per-registry ids are checked (id_gaps), hash sums and counts add up.
        std::vector<std::unique_ptr<Harness>> hs;
        std::vector<kvreg_pool *> pools;
        for (size_t t = 0; t < t_count; t++) {
            hs.push_back(std::make_unique<Harness>(o, false));
            pools.push_back(hs.back()->new_pool("worker"));
        }
        run_workers(pools);
        res.empty = true;
        for (size_t t = 0; t < t_count; t++) {
            double secs = 0;
            res.empty &= drained(*hs[t], {pools[t]}, true, secs);
            res.drain_s += secs;
            res.c.add(hs[t]->counts());
            res.dropped += hs[t]->stat(KVREG_STAT_EVENTS_DROPPED);
        }
        res.cpu_s = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    } else if (mode == Mode::kShared) {
        Harness h(o, false);
        std::vector<kvreg_pool *> pools;
        for (size_t t = 0; t < t_count; t++) pools.push_back(h.new_pool("worker"));
        run_workers(pools);
        res.empty = drained(h, pools, true, res.drain_s); // flushes first
        res.cpu_s = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        res.c = h.counts();
        res.dropped = h.stat(KVREG_STAT_EVENTS_DROPPED);
    } else {
        // Room for every event of the run: the queue never drops, however far the consumer lags.
        const uint64_t events = 2ull * t_count * u * set.per_seq * rounds;
        kvreg_config *cfg = nullptr;
        kvreg_registry *reg = nullptr;
        check_rc(kvreg_config_new(&cfg), "kvreg_config_new");
        check_rc(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), "config DELIVERY");
        check_rc(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY,
                                  std::clamp<uint64_t>(events, 1, UINT64_C(1) << 32)),
                 "config POLL_CAPACITY");
        if (o.shards) check_rc(kvreg_config_set(cfg, KVREG_OPT_SHARDS, o.shards), "config SHARDS");
        check_rc(kvreg_registry_new(&reg, cfg), "kvreg_registry_new");
        kvreg_config_free(cfg);
        std::vector<kvreg_pool *> pools(t_count);
        for (kvreg_pool *&p : pools) check_rc(kvreg_pool_new(&p, reg, "worker"), "kvreg_pool_new");
        std::atomic<bool> stop{false};
        PollTally pt;
        std::thread consumer(poll_consumer, reg, std::cref(stop), std::ref(pt));
        run_workers(pools);
        // Drain: every event queued (flush), then taken by the consumer.
        const double t1 = now_s();
        check_rc(kvreg_registry_flush(reg), "kvreg_registry_flush");
        stop.store(true, std::memory_order_release);
        check_rc(kvreg_registry_wakeup(reg), "kvreg_registry_wakeup");
        consumer.join();
        res.drain_s = now_s() - t1;
        res.cpu_s = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        bool empty = true;
        for (const kvreg_pool *p : pools) empty &= kvreg_pool_size(p) == 0;
        uint64_t v = 0;
        check_rc(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &v), "kvreg_registry_stat");
        empty &= v == 0;
        check_rc(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_QUEUED, &v), "kvreg_registry_stat");
        empty &= v == 0;
        check_rc(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_DROPPED, &res.dropped), "kvreg_registry_stat");
        res.empty = empty;
        res.c = pt.c;
        res.waits = pt.waits;
        kvreg_registry_free(reg);
    }
    for (const Tally &t : tallies) res.total.add(t);
    return res;
}

} // namespace

namespace {

// Both disjoint runs (T threads, then thread 0's part alone) and their checks.
struct DisjointRuns {
    SeqSet set;
    size_t threads = 1, u = 0, l = 0, k = 1, rounds = 1;
    DRun r, one;
    DRun iso; // INLINE only: the T threads, each its own registry
    double transfer_ns = 0;
};

DisjointRuns disjoint_runs(const Opts &o, bool poll, bool &ok) {
    DisjointRuns d;
    d.transfer_ns = core_transfer_ns(); // the minute's cost of one shared line (transfer.cpp)
    d.threads = o.threads ? o.threads : 1;
    d.u = o.seqs_or(2048); // sequences per thread
    d.l = o.len_or(512);
    d.k = o.batch ? o.batch : 1;
    d.rounds = o.rounds ? o.rounds : 1;
    // One stream of T*U random sequences (as register_release draws them); thread t takes
    // sequences [t*U, (t+1)*U). Distinct tokens, so no block hash is shared between threads,
    // and the 1-thread run (thread 0's part) is the same input as --threads 1.
    d.set = gen_random(o, d.threads * d.u, d.l);
    const SeqSet &set = d.set;
    const uint64_t nd = distinct_hashes(set).first;
    uint64_t sum0 = 0; // thread 0's part
    for (size_t i = 0; i < d.u * set.per_seq; i++) sum0 += set.descs[i].sequence_hash;

    const Mode mode = poll ? Mode::kPoll : Mode::kShared;
    // One untimed round first, so that every timed run meets a warm heap: run last on pages
    // the others had faulted in, the isolated run read up to 0.3 higher than run first.
    (void)disjoint_run(o, set, d.u, d.threads, 1, d.k, poll ? mode : Mode::kIsolated);
    d.r = disjoint_run(o, set, d.u, d.threads, d.rounds, d.k, mode);
    d.one = disjoint_run(o, set, d.u, 1, d.rounds, d.k, mode);
    if (!poll) d.iso = disjoint_run(o, set, d.u, d.threads, d.rounds, d.k, Mode::kIsolated);

    auto run_ok = [&](const DRun &x, size_t threads, uint64_t sum) {
        const uint64_t n = static_cast<uint64_t>(threads) * d.u * set.per_seq * d.rounds;
        return x.empty && x.dropped == 0 && x.total.other == 0 && x.total.dups == 0 && x.total.attempts == n &&
               x.total.registered == n && x.total.released == n && events_match(x.c, n, sum * d.rounds);
    };
    ok = set.ref_ok && nd == set.descs.size() && run_ok(d.r, d.threads, set.checksum) && run_ok(d.one, 1, sum0) &&
         (poll || run_ok(d.iso, d.threads, set.checksum)) && checksum_expected(o, "disjoint", set.checksum);
    return d;
}

} // namespace

DisjointResult disjoint_measure(const Opts &o, bool &ok) {
    const DisjointRuns d = disjoint_runs(o, o.delivery == "poll", ok);
    return DisjointResult{d.r.ops_per_s(), d.one.ops_per_s(), d.iso.ops_per_s(), d.set.checksum, d.transfer_ns};
}

std::string wl_disjoint(const Opts &o, bool &ok) {
    bool poll = false;
    if (o.delivery == "poll") poll = true;
    else if (o.delivery != "inline") {
        std::fprintf(stderr, "kvreg-bench: --delivery must be inline or poll, not %s\n", o.delivery.c_str());
        std::exit(2);
    }
    const DisjointRuns d = disjoint_runs(o, poll, ok);
    const DRun &r = d.r, &one = d.one;
    const SeqSet &set = d.set;
    const size_t t_count = d.threads, u = d.u, l = d.l, k = d.k, rounds = d.rounds;

    JsonLine j;
    head(j, "disjoint", r.ops(), r.secs(), r.c);
    j.b("kvreg_only", true)
        .str("delivery", poll ? "poll" : "inline")
        .u("threads", t_count)
        .u("consumer_threads", poll ? 1 : 0)
        .f("ops_per_s", r.ops_per_s())
        .u("seqs_per_thread", u)
        .u("len", l)
        .u("block", o.block)
        .u("batch", k)
        .u("rounds", rounds)
        .u("attempts", r.total.attempts)
        .u("new_regs", r.c.registers)
        .f("work_s", r.work_s)
        .f("drain_s", r.drain_s);
    const double calls = static_cast<double>(r.total.calls ? r.total.calls : 1);
    if (poll) {
        j.u("poll_waits", r.waits)
            .f("events_per_poll", r.c.callbacks ? static_cast<double>(r.c.registers + r.c.removes) /
                                                      static_cast<double>(r.c.callbacks)
                                                : 0.0)
            .u("events_dropped", r.dropped);
    } else {
        j.f("callbacks_per_call", static_cast<double>(r.c.callbacks) / calls);
    }
    j.f("ops_per_s_1thread", one.ops_per_s())
        .f("scaling_ratio", one.ops_per_s() > 0 ? r.ops_per_s() / one.ops_per_s() : 0.0);
    if (!poll)
        j.f("isolated_ops_per_s", d.iso.ops_per_s())
            .f("isolated_ratio", one.ops_per_s() > 0 ? d.iso.ops_per_s() / one.ops_per_s() : 0.0);
    // CPUs busy on average (process CPU time over wall time) in the 1-thread and T-thread runs,
    // and what that leaves: T workers (and, in POLL mode, the consumer) cannot do more than C
    // CPUs allow if each operation costs as much CPU as it did alone, so scaling_ratio is at
    // most min(T, C / cpus busy in the 1-thread run). INLINE keeps one CPU busy with one
    // thread (ceiling T on T <= C CPUs); POLL's consumer takes CPU beside its one worker.
    const double busy1 = one.secs() > 0 ? one.cpu_s / one.secs() : 0.0;
    const unsigned cpus = usable_cpus();
    j.f("cpus_busy_1thread", busy1)
        .f("cpus_busy", r.secs() > 0 ? r.cpu_s / r.secs() : 0.0)
        .u("cpus", cpus)
        .f("cpu_ceiling_ratio", busy1 > 0 ? std::min(static_cast<double>(t_count), cpus / busy1) : 0.0);
    // What sharing costs each operation, in CPU time and in cache-line transfers of this
    // minute: (CPU ns per op with T threads - with 1) / core_transfer_ns. The ratio itself
    // swings with the hypervisor's placement of the vCPUs (the same binary ran 0.26-0.93 in
    // one hour, at transfers of 60-370 ns); the transfers each operation waits for are the
    // library's, and stayed near 1 across those states.
    const double ns1 = one.ops() ? one.cpu_s * 1e9 / static_cast<double>(one.ops()) : 0.0;
    const double nsT = r.ops() ? r.cpu_s * 1e9 / static_cast<double>(r.ops()) : 0.0;
    j.f("cpu_ns_per_op_1thread", ns1)
        .f("cpu_ns_per_op", nsT)
        .f("transfers_per_op", d.transfer_ns > 0 ? (nsT - ns1) / d.transfer_ns : 0.0);
    j.f("core_transfer_ns", d.transfer_ns)
        // = register_release's checksum at --seqs T*U: the T*U sequences' hashes, each once.
        .hex("hash_checksum", set.checksum)
        .b("verified", ok)
        .u("rt_threads", 0);
    return j.finish();
}

// ------------------------------------------------------------------------------------ hol

namespace {

constexpr int kSlowMs = 50;

// The hol registry's callback: counts like events.cpp, and sleeps kSlowMs inside the call that
// delivers the Register of slow_hash (thread A's registration; A is the deliverer then).
struct HolCb {
    uint64_t slow_hash = 0;
    std::atomic<uint64_t> registers{0}, removes{0}, next_id{0}, id_gaps{0};
    std::atomic<int> entered{0}; // 1 while (and after) the slow callback sleeps
    std::atomic<int64_t> sleep_begin_ns{0}, sleep_end_ns{0};
};

void hol_events(const kvreg_event *ev, size_t n, void *user_data) {
    HolCb *c = static_cast<HolCb *>(user_data);
    uint64_t id = c->next_id.load(std::memory_order_relaxed), gaps = 0, regs = 0, rems = 0;
    bool slow = false;
    for (size_t i = 0; i < n; i++) {
        gaps += ev[i].event_id != id;
        id = ev[i].event_id + 1;
        if (ev[i].kind == KVREG_EVENT_REGISTER) {
            regs++;
            slow |= ev[i].sequence_hash == c->slow_hash;
        } else {
            rems++;
        }
    }
    c->next_id.store(id, std::memory_order_relaxed);
    c->registers.store(c->registers.load(std::memory_order_relaxed) + regs, std::memory_order_relaxed);
    c->removes.store(c->removes.load(std::memory_order_relaxed) + rems, std::memory_order_relaxed);
    c->id_gaps.store(c->id_gaps.load(std::memory_order_relaxed) + gaps, std::memory_order_relaxed);
    if (slow && c->entered.load(std::memory_order_relaxed) == 0) {
        c->sleep_begin_ns.store(now_ns(), std::memory_order_relaxed);
        c->entered.store(1, std::memory_order_release);
        c->entered.notify_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(kSlowMs)); // the workload itself
        c->sleep_end_ns.store(now_ns(), std::memory_order_release);
    }
}

struct BCalls {
    int64_t begin_ns = 0;       // when B's first call started
    std::vector<double> lat_us; // per call
    std::vector<int64_t> end_ns;
    uint64_t bad = 0;           // a call that did not return what it must
};

// Thread B: `calls` calls that emit no event, cycling acquire(X) / release(that handle) /
// kvreg_pool_contains(X) / kvreg_register(Y) == KVREG_EEXIST. X is held twice, so the release
// is never its last reference; Y is live in pb. With `gate`, waits (atomic wait, no sleep) until
// the slow callback has started.
void hol_b(kvreg_pool *pb, uint64_t hx, kvreg_block hx_handle, const kvreg_block_desc *dy, size_t calls,
           const std::atomic<int> *gate, BCalls &out) {
    if (gate != nullptr)
        while (gate->load(std::memory_order_acquire) == 0) gate->wait(0, std::memory_order_acquire);
    out.lat_us.resize(calls);
    out.end_ns.resize(calls);
    kvreg_block h2 = KVREG_BLOCK_NONE, y = KVREG_BLOCK_NONE;
    int present = 0;
    bool acquired = false;
    out.begin_ns = now_ns();
    for (size_t i = 0; i < calls; i++) {
        bool good = false;
        const int64_t t0 = now_ns();
        switch (i % 4) {
        case 0:
            good = kvreg_acquire(pb, hx, &h2) == KVREG_OK;
            break;
        case 1:
            good = kvreg_release(pb, h2) == KVREG_OK;
            break;
        case 2:
            good = kvreg_pool_contains(pb, hx, &present) == KVREG_OK;
            break;
        default:
            good = kvreg_register(pb, dy, &y) == KVREG_EEXIST;
            break;
        }
        const int64_t t1 = now_ns();
        if (i % 4 == 0) {
            good &= h2 == hx_handle;
            acquired = good;
        } else if (i % 4 == 1) {
            acquired = false;
        } else if (i % 4 == 2) {
            good &= present == 1;
        }
        out.bad += !good;
        out.lat_us[i] = static_cast<double>(t1 - t0) / 1e3;
        out.end_ns[i] = t1;
    }
    if (acquired) check_rc(kvreg_release(pb, h2), "kvreg_release"); // calls % 4 == 1: untimed
}

} // namespace

std::string wl_hol(const Opts &o, bool &ok) {
    const size_t calls = o.calls ? o.calls : 1;
    // Three one-block sequences: X (B holds it twice), Y (live in B's pool), S (A's slow one).
    const SeqSet set = gen_random(o, 3, o.block);
    const kvreg_block_desc *dx = set.seq(0), *dy = set.seq(1), *ds = set.seq(2);

    HolCb *cb = new HolCb;
    cb->slow_hash = ds->sequence_hash;
    kvreg_config *cfg = nullptr;
    kvreg_registry *reg = nullptr;
    check_rc(kvreg_config_new(&cfg), "kvreg_config_new");
    check_rc(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_INLINE), "config DELIVERY");
    check_rc(kvreg_config_set_event_fn(cfg, hol_events, cb, nullptr), "config event fn");
    check_rc(kvreg_registry_new(&reg, cfg), "kvreg_registry_new");
    kvreg_config_free(cfg);
    kvreg_pool *pa = nullptr, *pb = nullptr;
    check_rc(kvreg_pool_new(&pa, reg, "A"), "kvreg_pool_new");
    check_rc(kvreg_pool_new(&pb, reg, "B"), "kvreg_pool_new");
    kvreg_block hx = KVREG_BLOCK_NONE, hx2 = KVREG_BLOCK_NONE, hy = KVREG_BLOCK_NONE, hs = KVREG_BLOCK_NONE;
    check_rc(kvreg_register(pb, dx, &hx), "kvreg_register X");
    check_rc(kvreg_acquire(pb, dx->sequence_hash, &hx2), "kvreg_acquire X");
    check_rc(kvreg_register(pb, dy, &hy), "kvreg_register Y");
    check_rc(kvreg_registry_flush(reg), "kvreg_registry_flush");

    // Baseline: the same calls with no callback running.
    BCalls idle;
    hol_b(pb, dx->sequence_hash, hx, dy, calls, nullptr, idle);

    // A registers S (its callback sleeps); B starts once the sleep has begun.
    BCalls busy;
    int64_t a_begin = 0, a_end = 0;
    int a_rc = -1;
    std::thread b(hol_b, pb, dx->sequence_hash, hx, dy, calls, &cb->entered, std::ref(busy));
    std::thread a([&] {
        a_begin = now_ns();
        a_rc = kvreg_register(pa, ds, &hs);
        a_end = now_ns();
    });
    a.join();
    b.join();
    check_rc(kvreg_registry_flush(reg), "kvreg_registry_flush");
    const int64_t sleep_end = cb->sleep_end_ns.load(std::memory_order_acquire);
    const int64_t sleep_begin = cb->sleep_begin_ns.load(std::memory_order_relaxed);
    size_t during = 0;
    for (int64_t e : busy.end_ns) during += e <= sleep_end;

    // Clean up: the registry ends empty, 3 Register and 3 Remove events in all.
    bool clean = a_rc == KVREG_OK;
    if (a_rc == KVREG_OK) check_rc(kvreg_release(pa, hs), "kvreg_release S");
    check_rc(kvreg_release(pb, hx2), "kvreg_release X");
    check_rc(kvreg_release(pb, hx), "kvreg_release X");
    check_rc(kvreg_release(pb, hy), "kvreg_release Y");
    check_rc(kvreg_registry_flush(reg), "kvreg_registry_flush");
    uint64_t hashes = 0;
    check_rc(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes), "kvreg_registry_stat");
    clean &= hashes == 0 && cb->registers.load() == 3 && cb->removes.load() == 3 && cb->id_gaps.load() == 0 &&
             cb->entered.load() == 1;
    kvreg_registry_free(reg);
    delete cb;

    ok = set.ref_ok && clean && idle.bad == 0 && busy.bad == 0 && checksum_expected(o, "hol", set.checksum);

    std::vector<double> s_busy = busy.lat_us, s_idle = idle.lat_us;
    std::sort(s_busy.begin(), s_busy.end());
    std::sort(s_idle.begin(), s_idle.end());
    double total_us = 0;
    for (double v : busy.lat_us) total_us += v;
    const double p99 = pct(s_busy, 99.0);
    EventCounts c;
    c.registers = 3;
    c.removes = 3;
    JsonLine j;
    head(j, "hol", calls, total_us / 1e6, c);
    j.b("kvreg_only", true)
        .u("calls", calls)
        .u("callback_sleep_ms", kSlowMs)
        .f("p50_us", pct(s_busy, 50.0))
        .f("p99_us", p99)
        .f("max_us", s_busy.empty() ? 0.0 : s_busy.back())
        .b("p99_under_1ms", p99 < 1000.0)
        // How many of B's calls finished before the callback woke up: all of them unless B was
        // held up (or descheduled for the rest of the 50 ms).
        .u("calls_during_sleep", during)
        .f("b_start_after_sleep_begin_us", static_cast<double>(busy.begin_ns - sleep_begin) / 1e3)
        .f("b_total_us", static_cast<double>((busy.end_ns.empty() ? busy.begin_ns : busy.end_ns.back()) - busy.begin_ns) / 1e3)
        .f("slow_call_ms", static_cast<double>(a_end - a_begin) / 1e6)
        .f("idle_p50_us", pct(s_idle, 50.0))
        .f("idle_p99_us", pct(s_idle, 99.0))
        .f("idle_max_us", s_idle.empty() ? 0.0 : s_idle.back())
        .hex("hash_checksum", set.checksum)
        .b("verified", ok)
        .u("rt_threads", 0);
    return j.finish();
}

// ------------------------------------------------------------------------------ pool_free

std::string wl_pool_free(const Opts &o, bool &ok) {
    const size_t n_big = o.big_pool ? o.big_pool : 1;
    constexpr size_t kReps = 101; // timed frees per side; medians reported
    const SeqSet small = gen_random(o, 1, o.block);
    const kvreg_block_desc *ds = small.seq(0);
    Harness h(o, false); // counting callback, INLINE: the free's Remove event is in its time
    uint64_t bad = 0;
    // kReps times: a new pool, one block registered in it, kvreg_pool_free timed.
    auto time_frees = [&](std::vector<double> &us) {
        for (size_t r = 0; r < kReps; r++) {
            kvreg_pool *p = h.new_pool("small");
            kvreg_block b = KVREG_BLOCK_NONE;
            bad += kvreg_register(p, ds, &b) != KVREG_OK;
            const int64_t t0 = now_ns();
            kvreg_pool_free(p);
            us.push_back(static_cast<double>(now_ns() - t0) / 1e3);
        }
    };
    std::vector<double> alone, beside;
    time_frees(alone);

    // The big pool: N hash-only blocks (no tokens; the registry does not re-hash) with
    // splitmix64 hashes, registered 4096 per call.
    kvreg_pool *big = h.new_pool("big");
    SplitMix64 rng(o.seed ^ UINT64_C(0xB16B16B16B16B16B));
    constexpr size_t kChunk = 4096;
    std::vector<kvreg_block_desc> d(kChunk);
    std::vector<kvreg_block> hb(kChunk);
    uint64_t ck = ds->sequence_hash, reg_big = 0;
    double reg_s = 0;
    for (size_t i = 0; i < n_big; i += kChunk) {
        const size_t n = std::min(kChunk, n_big - i);
        for (size_t x = 0; x < n; x++) {
            d[x] = kvreg_block_desc{};
            d[x].sequence_hash = rng.next_u64();
            d[x].block_hash = d[x].sequence_hash; // a first block: sequence hash = block hash
            ck += d[x].sequence_hash;
        }
        size_t got = 0;
        const double t = now_s();
        check_rc(kvreg_register_batch(big, d.data(), n, hb.data(), nullptr, &got), "kvreg_register_batch");
        reg_s += now_s() - t;
        reg_big += got;
    }
    const size_t big_size = kvreg_pool_size(big);
    const uint64_t rss_held = rss_kb();
    time_frees(beside);
    const double t = now_s();
    kvreg_pool_free(big);
    const double big_free_s = now_s() - t;

    const EventCounts c = h.counts(); // flushes first
    const uint64_t n_ev = n_big + 2 * kReps;
    ok = small.ref_ok && bad == 0 && reg_big == n_big && big_size == n_big &&
         h.stat(KVREG_STAT_HASHES) == 0 && c.registers == n_ev && c.removes == n_ev && c.id_gaps == 0 &&
         c.register_hash_sum == c.remove_hash_sum && c.max_per_callback <= KVREG_EVENTS_PER_CALL &&
         checksum_expected(o, "pool_free", ck);

    const double a = median(alone), b = median(beside);
    double secs = 0;
    for (double v : alone) secs += v / 1e6;
    for (double v : beside) secs += v / 1e6;
    JsonLine j;
    head(j, "pool_free", 2 * kReps, secs, c);
    j.b("kvreg_only", true)
        .u("big_pool", n_big)
        .u("reps", kReps)
        .f("pool_free_alone_us", a)
        .f("pool_free_beside_us", b)
        .f("alone_min_us", *std::min_element(alone.begin(), alone.end()))
        .f("beside_min_us", *std::min_element(beside.begin(), beside.end()))
        .f("beside_over_alone", a > 0 ? b / a : 0.0)
        .f("big_register_ns_per_block", per_block_ns(reg_s, n_big))
        .f("big_pool_free_s", big_free_s)
        .u("rss_held_kb", rss_held)
        .hex("hash_checksum", ck)
        .b("verified", ok);
    h.finish(j);
    return j.finish();
}

} // namespace bench
