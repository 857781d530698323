// Workload `index_k1` (kvreg-only): Dynamo's gen-2 indexer benchmark (INDEXER_BENCH on the
// conversation trace) rebuilt from Dynamo's published description of it ("K1"; bench/README.md), so that the router-side index stands beside Dynamo's published numbers on the same
// trace and the same corpus.
//
// Corpus (built before any clock starts): the trace's requests split at random (splitmix64,
// seed 42 unless --seed) over --workers (1000) workers. A worker keeps every block it stores
// (Dynamo's 16,384-block capacity is never reached here, so nothing is evicted). Per request:
// the router's query (the request's router hashes: trace ids chained with kvreg_sequence_hash,
// OWN mode), then one Stored event with the blocks the worker did not hold (parent = the
// deepest it held), then one single-block Stored event per decode block (output_length / 128,
// fresh hashes). Each worker's timeline is replayed --dup (7) times under distinct worker ids
// with the same hashes (Dynamo's -d 7): 7,000 workers. Every request of this trace starts with
// the same block, so every query's answer lists every worker that has served a request (all of
// them, soon): the read cost is dominated by the answer, as in Dynamo's runs.
//
// Timing, for each window of the sweep (--windows, ms; Dynamo's eight by default), on a fresh
// index: the trace's timestamps are scaled into the window, and each operation is due at its
// scaled time (open loop: nothing waits for the previous operation to finish). One event thread
// applies the events (kvreg_index_apply, one call per event, each worker's seq counting up); one
// query thread runs the queries: every worker's depth into a caller buffer, Dynamo's answer
// (kvreg_index_query_depths; --answer matches: kvreg_index_query_hashes, ranked with tiers). Each starts an operation at its due time, or at once when it is behind. The clock
// starts at the first due time and stops when both threads are done (drain included):
// kept_up = done within 1.10 x the window. Reported per window: offered and achieved logical
// ops/s (queries + events) and block ops/s (query hashes + stored hashes), query service time
// p50 / p99 / p999 and scheduled-to-completion p99, the events' scheduled-to-applied p99, the
// mean answer size. The threads are pinned to CPUs 0 and 1 (--cores 1: both to CPU 0).
//
// Check: before the sweep, one untimed replay in due order (each query before its request's
// events) compares every 100th answer of both query functions with a reference model (each worker's set of blocks, the
// depth walked by hand); `mismatches` must be 0. The corpus counts are reported beside
// Dynamo's (355,830 logical ops, 2,128,077 resident pairs).
#include "bench.hpp"

#include <kvreg_index.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace bench {

namespace {

constexpr uint64_t kDecodeBlockTokens = 128; // Dynamo's block size in these runs
constexpr uint64_t kSeed = 42;               // Dynamo's split seed

struct K1Event {
    double due;      // fraction of the trace's span
    uint32_t req;    // the request it follows
    uint32_t worker; // unique worker (before duplication)
    uint32_t first, count;
    int has_parent;
    uint64_t parent;
};

struct K1Query {
    double due;
    uint32_t req;
};

struct K1Corpus {
    std::vector<std::vector<uint64_t>> prompts; // router hashes per request
    std::vector<uint64_t> hashes;               // every event's hashes, back to back
    std::vector<K1Event> events;                // in due order (one replica)
    std::vector<K1Query> queries;               // in due order (one replica)
    std::vector<std::unordered_set<uint64_t>> held; // per unique worker, at the end
    uint64_t query_blocks = 0, event_blocks = 0, resident = 0;
};

K1Corpus build_k1(const std::vector<TraceRequest> &reqs, size_t workers, uint64_t seed, uint64_t salt) {
    K1Corpus c;
    SplitMix64 rng(seed);
    c.held.resize(workers);
    const double span = static_cast<double>(std::max<uint64_t>(1, reqs.back().timestamp_ms - reqs.front().timestamp_ms));
    uint64_t fresh = UINT64_C(1) << 62; // decode blocks: hashes no prompt has
    for (size_t r = 0; r < reqs.size(); r++) {
        const TraceRequest &q = reqs[r];
        const uint32_t w = static_cast<uint32_t>(rng.next_u64() % workers);
        const double due = static_cast<double>(q.timestamp_ms - reqs.front().timestamp_ms) / span;
        std::vector<uint64_t> h(q.ids.size());
        for (size_t i = 0; i < h.size(); i++) h[i] = kvreg_sequence_hash(i ? h[i - 1] : 0, q.ids[i] + 1, salt);
        c.query_blocks += h.size();
        c.queries.push_back({due, static_cast<uint32_t>(r)});
        std::unordered_set<uint64_t> &held = c.held[w];
        size_t cached = 0;
        while (cached < h.size() && held.count(h[cached])) cached++;
        if (cached < h.size()) {
            c.events.push_back({due, static_cast<uint32_t>(r), w, static_cast<uint32_t>(c.hashes.size()),
                                static_cast<uint32_t>(h.size() - cached), cached > 0, cached ? h[cached - 1] : 0});
            for (size_t i = cached; i < h.size(); i++) {
                c.hashes.push_back(h[i]);
                held.insert(h[i]);
            }
        }
        uint64_t parent = h.empty() ? 0 : h.back();
        for (uint64_t d = 0; d < q.output_length / kDecodeBlockTokens; d++) {
            const uint64_t b = fresh++;
            c.events.push_back({due, static_cast<uint32_t>(r), w, static_cast<uint32_t>(c.hashes.size()), 1, parent != 0,
                                parent});
            c.hashes.push_back(b);
            held.insert(b);
            parent = b;
        }
        c.prompts.push_back(std::move(h));
    }
    for (const K1Event &e : c.events) c.event_blocks += e.count;
    for (const auto &s : c.held) c.resident += s.size();
    return c;
}

void pin(size_t cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<int>(cpu), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); // best effort: a smaller machine runs unpinned
}

// Until `at` (seconds, steady clock). Sleeping until the very moment made the harness, not the
// index, decide the lateness (a wake-up after a sleep is late by up to milliseconds on this
// shared VM), so a thread with a CPU of its own sleeps only while the due time is over 2 ms
// away and spins after; a 1-CPU run sleeps closer to it and yields the core.
void wait_until(double at, bool own_cpu) {
    const double near = own_cpu ? 2e-3 : 200e-6;
    for (double now = now_s(); now < at; now = now_s()) {
        if (at - now > near)
            std::this_thread::sleep_for(std::chrono::duration<double>(at - now - near / 2));
        else if (!own_cpu)
            std::this_thread::yield();
    }
}

kvreg_index *new_index(uint64_t expected) {
    kvreg_index_config *cfg = nullptr;
    check_rc(kvreg_index_config_new(&cfg), "kvreg_index_config_new");
    check_rc(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), "config");
    check_rc(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, expected), "config");
    kvreg_index *idx = nullptr;
    check_rc(kvreg_index_new(&idx, cfg), "kvreg_index_new");
    kvreg_index_config_free(cfg);
    return idx;
}

// Apply event e for worker replica `id` (seq: that replica's next).
void apply_one(kvreg_index *idx, const K1Corpus &c, const K1Event &e, uint64_t id, uint64_t seq) {
    kvreg_wire_event we;
    std::memset(&we, 0, sizeof we);
    we.type = KVREG_WIRE_STORED;
    we.medium = KVREG_MEDIUM_GPU;
    we.block_hashes = c.hashes.data() + e.first;
    we.n_block_hashes = e.count;
    we.has_parent = static_cast<uint32_t>(e.has_parent);
    we.parent_block_hash = e.parent;
    kvreg_index_apply_info info;
    check_rc(kvreg_index_apply(idx, id, 0, seq, &we, 1, &info), "kvreg_index_apply");
}

// The untimed check: every op in due order, every 100th answer against the reference model.
uint64_t check_answers(const K1Corpus &c, size_t workers, size_t dup, uint64_t &checked) {
    kvreg_index *idx = new_index(c.resident * dup);
    std::vector<std::unordered_set<uint64_t>> model(workers);
    std::vector<uint64_t> seq(workers * dup, 0);
    std::vector<kvreg_index_match> m(workers * dup);
    std::vector<kvreg_index_depth> d(workers * dup);
    uint64_t mismatches = 0;
    size_t ei = 0;
    for (size_t qi = 0; qi < c.queries.size(); qi++) {
        const K1Query &q = c.queries[qi];
        const std::vector<uint64_t> &h = c.prompts[q.req];
        if (qi % 100 == 0) {
            std::unordered_map<uint64_t, uint32_t> want; // worker id -> depth, depth >= 1
            for (size_t w = 0; w < workers; w++) {
                uint32_t depth = 0;
                while (depth < h.size() && model[w].count(h[depth])) depth++;
                if (depth)
                    for (size_t r = 0; r < dup; r++) want[w * dup + r] = depth;
            }
            auto check = [&](size_t n, auto worker_at, auto depth_at) {
                if (n != want.size()) mismatches++;
                std::unordered_set<uint64_t> seen;
                for (size_t k = 0; k < n; k++) {
                    auto it = want.find(worker_at(k));
                    if (it == want.end() || it->second != depth_at(k) || !seen.insert(it->first).second)
                        mismatches++;
                }
            };
            // both answers, whichever the timed runs use
            size_t n = 0;
            check_rc(kvreg_index_query_hashes(idx, h.data(), h.size(), 0, m.data(), m.size(), &n), "query");
            check(n, [&](size_t k) { return m[k].worker_id; }, [&](size_t k) { return m[k].depth; });
            check_rc(kvreg_index_query_depths(idx, h.data(), h.size(), d.data(), d.size(), &n), "depths");
            check(n, [&](size_t k) { return d[k].worker_id; }, [&](size_t k) { return d[k].depth; });
            checked++;
        }
        // this request's events: built right after its query
        for (; ei < c.events.size() && c.events[ei].req == q.req; ei++) {
            const K1Event &e = c.events[ei];
            for (uint32_t i = 0; i < e.count; i++) model[e.worker].insert(c.hashes[e.first + i]);
            for (size_t r = 0; r < dup; r++) {
                const uint64_t id = e.worker * dup + r;
                apply_one(idx, c, e, id, seq[id]++);
            }
        }
    }
    kvreg_index_free(idx);
    return mismatches;
}

double quantile(std::vector<double> &v, double p) { // p in 0 .. 1; sorts v
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct WindowResult {
    double elapsed = 0;
    std::vector<double> service, q_late, e_late; // seconds
    uint64_t answer_sum = 0;
};

WindowResult run_window(const K1Corpus &c, size_t workers, size_t dup, double window_s, size_t cores, bool matches) {
    kvreg_index *idx = new_index(c.resident * dup);
    WindowResult r;
    r.service.reserve(c.queries.size() * dup);
    r.q_late.reserve(c.queries.size() * dup);
    r.e_late.reserve(c.events.size() * dup);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    double start = 0;
    double q_done = 0, e_done = 0;
    std::thread events([&] {
        pin(0);
        std::vector<uint64_t> seq(workers * dup, 0);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        for (const K1Event &e : c.events) {
            const double due = start + e.due * window_s;
            wait_until(due, cores > 1);
            for (size_t k = 0; k < dup; k++) {
                const uint64_t id = e.worker * dup + k;
                apply_one(idx, c, e, id, seq[id]++);
            }
            r.e_late.push_back(now_s() - due);
        }
        e_done = now_s();
    });
    std::thread queries([&] {
        pin(cores > 1 ? 1 : 0);
        std::vector<kvreg_index_match> m(matches ? workers * dup : 0);
        std::vector<kvreg_index_depth> d(matches ? 0 : workers * dup);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        for (const K1Query &q : c.queries) {
            const double due = start + q.due * window_s;
            const std::vector<uint64_t> &h = c.prompts[q.req];
            for (size_t k = 0; k < dup; k++) {
                wait_until(due, cores > 1);
                const double t0 = now_s();
                size_t n = 0;
                if (matches)
                    check_rc(kvreg_index_query_hashes(idx, h.data(), h.size(), 0, m.data(), m.size(), &n), "query");
                else
                    check_rc(kvreg_index_query_depths(idx, h.data(), h.size(), d.data(), d.size(), &n), "depths");
                const double t1 = now_s();
                r.service.push_back(t1 - t0);
                r.q_late.push_back(t1 - due);
                r.answer_sum += n;
            }
        }
        q_done = now_s();
    });
    while (ready.load() < 2) std::this_thread::yield();
    start = now_s() + 0.05; // both threads are spinning: the first due time is 50 ms away
    go.store(true, std::memory_order_release);
    events.join();
    queries.join();
    r.elapsed = std::max(q_done, e_done) - start;
    kvreg_index_free(idx);
    return r;
}

} // namespace

std::string wl_index_k1(const Opts &o, bool &ok) {
    const size_t workers = o.index_workers ? o.index_workers : 1000;
    const size_t dup = std::max<size_t>(1, o.dup);
    const std::vector<TraceRequest> reqs = read_trace(o.trace, "index_k1");
    const K1Corpus c = build_k1(reqs, workers, o.seed_given ? o.seed : kSeed, o.salt);
    const uint64_t queries = c.queries.size() * dup, events = c.events.size() * dup;
    const uint64_t logical = queries + events;
    const uint64_t blocks = (c.query_blocks + c.event_blocks) * dup;
    uint64_t checked = 0;
    const uint64_t mismatches = check_answers(c, workers, dup, checked);
    ok = mismatches == 0;

    std::vector<double> windows;
    for (size_t at = 0; at < o.windows.size();) {
        const size_t end = std::min(o.windows.find(',', at), o.windows.size());
        windows.push_back(std::strtod(o.windows.substr(at, end - at).c_str(), nullptr) / 1000.0);
        at = end + 1;
    }
    std::string out;
    for (double w : windows) {
        if (!(w > 0)) continue;
        WindowResult r = run_window(c, workers, dup, w, o.cores, o.k1_matches);
        JsonLine j;
        head(j, "index_k1", logical, r.elapsed, EventCounts{});
        const double mean_answer = queries ? static_cast<double>(r.answer_sum) / static_cast<double>(queries) : 0;
        j.b("kvreg_only", true)
            .str("trace", o.trace)
            .u("unique_workers", workers)
            .u("dup", dup)
            .u("workers", workers * dup)
            .u("cores", o.cores)
            .str("answer", o.k1_matches ? "matches" : "depths")
            .u("queries", queries)
            .u("events", events)
            .u("logical_ops", logical)
            .u("block_ops", blocks)
            .u("resident_pairs", c.resident * dup)
            .f("window_s", w)
            .f("elapsed_s", r.elapsed)
            .b("kept_up", r.elapsed <= 1.10 * w)
            .f("offered_logical_ops_per_s", static_cast<double>(logical) / w)
            .f("achieved_logical_ops_per_s", static_cast<double>(logical) / r.elapsed)
            .f("offered_block_ops_per_s", static_cast<double>(blocks) / w)
            .f("achieved_block_ops_per_s", static_cast<double>(blocks) / r.elapsed)
            .f("query_service_p50_us", quantile(r.service, 0.50) * 1e6)
            .f("query_service_p99_us", quantile(r.service, 0.99) * 1e6)
            .f("query_service_p999_us", quantile(r.service, 0.999) * 1e6)
            .f("query_scheduled_to_completion_p99_us", quantile(r.q_late, 0.99) * 1e6)
            .f("event_scheduled_to_applied_p99_us", quantile(r.e_late, 0.99) * 1e6)
            .f("mean_answer_workers", mean_answer)
            .u("answers_checked", checked)
            .u("mismatches", mismatches)
            .b("verified", ok);
        if (!out.empty()) out += "\n";
        out += j.finish();
        std::fprintf(stderr, "index_k1: window %.3f s done\n", w);
    }
    if (out.empty()) {
        std::fprintf(stderr, "kvreg-bench: index_k1: --windows needs positive milliseconds\n");
        std::exit(2);
    }
    return out;
}

} // namespace bench
