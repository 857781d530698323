// The open-loop index replay of index_k1 and index_k2 (index_replay.hpp).
//
// Per window, on a fresh index: the trace's timestamps are scaled into the window, and each
// operation is due at its scaled time (open loop: nothing waits for the previous operation to
// finish). One event thread applies the events (kvreg_index_apply, one call per event, each
// worker's seq counting up); one query thread runs the queries (kvreg_index_query_depths, or
// kvreg_index_query_hashes with --answer matches). Each starts an operation at its due time,
// or at once when it is behind. The clock starts at the first due time and stops when both
// threads are done (drain included).
#include "index_replay.hpp"

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
void apply_one(kvreg_index *idx, const ReplayCorpus &c, const ReplayEvent &e, uint64_t id, uint64_t seq) {
    kvreg_wire_event we;
    std::memset(&we, 0, sizeof we);
    we.type = e.removed ? KVREG_WIRE_REMOVED : KVREG_WIRE_STORED;
    we.medium = KVREG_MEDIUM_GPU;
    we.block_hashes = c.hashes.data() + e.first;
    we.n_block_hashes = e.count;
    we.has_parent = static_cast<uint32_t>(e.has_parent);
    we.parent_block_hash = e.parent;
    kvreg_index_apply_info info;
    check_rc(kvreg_index_apply(idx, id, 0, seq, &we, 1, &info), "kvreg_index_apply");
}

} // namespace

uint64_t replay_check(const ReplayCorpus &c, const ReplaySetup &s, uint64_t &checked) {
    const size_t workers = s.workers, dup = s.dup;
    kvreg_index *idx = new_index(c.resident * dup);
    std::vector<std::unordered_set<uint64_t>> model(workers);
    std::vector<uint64_t> seq(workers * dup, 0);
    std::vector<kvreg_index_match> m(workers * dup);
    std::vector<kvreg_index_depth> d(workers * dup);
    uint64_t mismatches = 0;
    size_t ei = 0;
    for (size_t qi = 0; qi < c.queries.size(); qi++) {
        const ReplayQuery &q = c.queries[qi];
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
            const ReplayEvent &e = c.events[ei];
            for (uint32_t i = 0; i < e.count; i++) {
                if (e.removed)
                    model[e.worker].erase(c.hashes[e.first + i]);
                else
                    model[e.worker].insert(c.hashes[e.first + i]);
            }
            for (size_t r = 0; r < dup; r++) {
                const uint64_t id = e.worker * dup + r;
                apply_one(idx, c, e, id, seq[id]++);
            }
        }
    }
    kvreg_index_free(idx);
    return mismatches;
}

double quantile(std::vector<double> &v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

WindowResult replay_window(const ReplayCorpus &c, const ReplaySetup &s, double window_s) {
    const size_t workers = s.workers, dup = s.dup, cores = s.cores;
    const bool matches = s.matches;
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
        for (const ReplayEvent &e : c.events) {
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
        for (const ReplayQuery &q : c.queries) {
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

std::vector<double> parse_windows(const std::string &ms, const char *workload) {
    std::vector<double> windows;
    for (size_t at = 0; at < ms.size();) {
        const size_t end = std::min(ms.find(',', at), ms.size());
        const double w = std::strtod(ms.substr(at, end - at).c_str(), nullptr) / 1000.0;
        if (w > 0) windows.push_back(w);
        at = end + 1;
    }
    if (windows.empty()) {
        std::fprintf(stderr, "kvreg-bench: %s: --windows needs positive milliseconds\n", workload);
        std::exit(2);
    }
    return windows;
}

void replay_fields(JsonLine &j, const ReplayCorpus &c, const ReplaySetup &s, double w, WindowResult &r,
                   uint64_t checked, uint64_t mismatches) {
    const uint64_t queries = c.queries.size() * s.dup, events = c.events.size() * s.dup;
    const uint64_t logical = queries + events;
    // Block ops as Dynamo's corrected (gen-3) count has them: query hashes and the hashes of
    // Stored and Removed events.
    const uint64_t blocks = (c.query_blocks + c.stored_blocks + c.removed_blocks) * s.dup;
    const double mean_answer = queries ? static_cast<double>(r.answer_sum) / static_cast<double>(queries) : 0;
    j.b("kvreg_only", true)
        .u("unique_workers", s.workers)
        .u("dup", s.dup)
        .u("workers", s.workers * s.dup)
        .u("cores", s.cores)
        .str("answer", s.matches ? "matches" : "depths")
        .u("queries", queries)
        .u("events", events)
        .u("logical_ops", logical)
        .u("block_ops", blocks)
        .u("query_blocks", c.query_blocks * s.dup)
        .u("stored_blocks", c.stored_blocks * s.dup)
        .u("removed_blocks", c.removed_blocks * s.dup)
        .u("resident_pairs", c.resident * s.dup)
        .f("window_s", w)
        .f("elapsed_s", r.elapsed)
        .f("drain_s", std::max(0.0, r.elapsed - w))
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
        .b("verified", mismatches == 0);
}

} // namespace bench
