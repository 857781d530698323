// Workload `threads`: T threads, each with its own pool, all sharing one registry. Thread t does
// R rounds over all U sequences from offset t*U/T, K sequences at a time: register them (one
// kvreg_register_batch per sequence), then release the whole batch (one kvreg_release_batch).
// With --threads-scaling the same workload also runs with 1 thread, for the T:1 ratio.
#include "bench.hpp"

#include <barrier>
#include <functional>
#include <thread>

namespace bench {

namespace {

struct Run {
    size_t threads = 0;
    Tally total;
    EventCounts c;
    double work_s = 0, drain_s = 0;
    // Process CPU time over the work phase (the workers'; the main thread sleeps in join):
    // near T (up to the CPUs) when the threads ran at once, near 1 when they took turns on one
    // CPU (another process held the other, e.g. a
    // `python3` shim started beside the benchmark), where they share no line between cores and T/1 says
    // little about parallel scaling.
    double cpu_s = 0;
    bool empty = false;
    uint64_t ops() const { return total.attempts + total.registered; }
    double secs() const { return work_s + drain_s; }
    double ops_per_s() const { return static_cast<double>(ops()) / secs(); }
};

Run run(const Opts &o, const SeqSet &set, size_t t_count, size_t rounds, size_t k) {
    Run res;
    res.threads = t_count;
    Harness h(o, false);
    std::vector<kvreg_pool *> pools;
    for (size_t t = 0; t < t_count; t++) pools.push_back(h.new_pool("worker"));
    std::vector<Tally> tallies(t_count);
    double t0 = 0;
    StartBarrier start(static_cast<std::ptrdiff_t>(t_count + 1), StartClock{&t0});
    const double cpu0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    std::vector<std::thread> joins;
    for (size_t t = 0; t < t_count; t++)
        joins.emplace_back(seq_worker, pools[t], std::cref(set), t * set.n_seqs / t_count, set.n_seqs, rounds, k,
                           std::ref(start), std::ref(tallies[t]));
    start.arrive_and_wait(); // sets t0 (StartClock)
    for (std::thread &th : joins) th.join();
    res.work_s = now_s() - t0;
    res.cpu_s = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    // A worker's last calls may have returned before their events were delivered (the other
    // worker was delivering): drained() flushes first, so counts() below sees every event.
    res.empty = drained(h, pools, true, res.drain_s);
    for (const Tally &t : tallies) res.total.add(t);
    res.c = h.counts();
    return res;
}

} // namespace

std::string wl_threads(const Opts &o, bool &ok) {
    const size_t t_count = o.threads ? o.threads : 1;
    const size_t u = o.seqs_or(2048), l = o.len_or(512);
    const size_t p = o.prefix < l ? o.prefix : l;
    const size_t g = o.groups ? o.groups : 1, k = o.batch ? o.batch : 1;
    const size_t rounds = o.rounds ? o.rounds : 1;
    const SeqSet set = gen_prefixed(o, u, l, p, g);
    const uint64_t nd = distinct_hashes(set).first;

    // The T-thread run goes first, on a cold heap like the peer's single run; the 1-thread run
    // after it reuses warm memory, so scaling_ratio errs on the low side.
    const double transfer_ns = core_transfer_ns(); // the minute's cost of one shared line
    const Run r = run(o, set, t_count, rounds, k);
    Run one;
    if (o.threads_scaling) one = run(o, set, 1, rounds, k);

    // Which registrations were first anywhere (Register event) and which were shared with the
    // other pool is decided by timing; the totals must still balance.
    auto run_ok = [&](const Run &x) {
        return x.empty && x.total.other == 0 && x.total.released == x.total.registered &&
               x.c.registers == x.c.removes && x.c.registers >= nd && x.c.registers <= x.total.registered &&
               x.c.register_hash_sum == x.c.remove_hash_sum && x.c.register_without_tokens == 0 &&
               x.c.id_gaps == 0 && x.c.max_per_callback <= KVREG_EVENTS_PER_CALL;
    };
    ok = set.ref_ok && run_ok(r) && (!o.threads_scaling || run_ok(one)) &&
         checksum_expected(o, "threads", set.checksum);

    JsonLine j;
    head(j, "threads", r.ops(), r.secs(), r.c);
    j.u("threads", t_count)
        .f("ops_per_s", r.ops_per_s())
        .u("seqs", u)
        .u("len", l)
        .u("prefix", p)
        .u("groups", g)
        .u("batch", k)
        .u("rounds", rounds)
        .u("block", o.block)
        .u("distinct", nd)
        .u("attempts", r.total.attempts)
        .u("new_regs", r.c.registers)
        .u("shared_hits", r.total.registered - r.c.registers)
        .u("pool_dups", r.total.dups)
        // Callback invocations per API call: 1 or less when a call's events are delivered
        // together; more when other threads' events interleave with them.
        .f("callbacks_per_call", static_cast<double>(r.c.callbacks) / static_cast<double>(r.total.calls ? r.total.calls : 1))
        .f("work_s", r.work_s)
        .f("drain_s", r.drain_s)
        .f("cpus_busy", r.work_s > 0 ? r.cpu_s / r.work_s : 0.0)
        .f("core_transfer_ns", transfer_ns);
    if (o.threads_scaling) {
        // ops/s of T threads over 1 thread, same workload per thread (issue 8: at least 1.0 at
        // T = 2, 0.8 at T = 4 and 8).
        j.f("ops_per_s_1thread", one.ops_per_s())
            .f("scaling_ratio", r.ops_per_s() / one.ops_per_s())
            .f("cpus_busy_1thread", one.work_s > 0 ? one.cpu_s / one.work_s : 0.0);
    }
    j.hex("hash_checksum", set.checksum).b("verified", ok);
    // Trailer as Harness::finish writes it; --check-order describes the T-thread run.
    j.u("rt_threads", 0);
    if (o.check_order) j.u("order_dup_register", r.c.order_dup_register).u("order_orphan_remove", r.c.order_orphan_remove);
    return j.finish();
}

} // namespace bench
