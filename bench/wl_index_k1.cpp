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
// Timing, for each window of the sweep (--windows, ms; Dynamo's eight by default): the open-loop
// replay of index_replay.cpp (one event thread, one query thread; every worker's depth into a
// caller buffer, Dynamo's answer, kvreg_index_query_depths; --answer matches:
// kvreg_index_query_hashes, ranked with tiers); kept_up = done within 1.10 x the window. Reported per window: offered and achieved logical
// ops/s (queries + events) and block ops/s (query hashes + stored hashes), query service time
// p50 / p99 / p999 and scheduled-to-completion p99, the events' scheduled-to-applied p99, the
// mean answer size. The threads are pinned to CPUs 0 and 1 (--cores 1: both to CPU 0).
//
// Check: before the sweep, one untimed replay in due order (each query before its request's
// events) compares every 100th answer of both query functions with a reference model (each worker's set of blocks, the
// depth walked by hand); `mismatches` must be 0. The corpus counts are reported beside
// Dynamo's (355,830 logical ops, 2,128,077 resident pairs).
#include "index_replay.hpp"

#include <kvreg_index.h>

#include <algorithm>
#include <cstdio>
#include <unordered_set>

namespace bench {

namespace {

constexpr uint64_t kDecodeBlockTokens = 128; // Dynamo's block size in these runs
constexpr uint64_t kSeed = 42;               // Dynamo's split seed

ReplayCorpus build_k1(const std::vector<TraceRequest> &reqs, size_t workers, uint64_t seed, uint64_t salt) {
    ReplayCorpus c;
    SplitMix64 rng(seed);
    std::vector<std::unordered_set<uint64_t>> held(workers);
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
        std::unordered_set<uint64_t> &mine = held[w];
        size_t cached = 0;
        while (cached < h.size() && mine.count(h[cached])) cached++;
        if (cached < h.size()) {
            c.events.push_back({due, static_cast<uint32_t>(r), w, static_cast<uint32_t>(c.hashes.size()),
                                static_cast<uint32_t>(h.size() - cached), 0, cached > 0, cached ? h[cached - 1] : 0});
            for (size_t i = cached; i < h.size(); i++) {
                c.hashes.push_back(h[i]);
                mine.insert(h[i]);
            }
        }
        uint64_t parent = h.empty() ? 0 : h.back();
        for (uint64_t d = 0; d < q.output_length / kDecodeBlockTokens; d++) {
            const uint64_t b = fresh++;
            c.events.push_back({due, static_cast<uint32_t>(r), w, static_cast<uint32_t>(c.hashes.size()), 1, 0,
                                parent != 0, parent});
            c.hashes.push_back(b);
            mine.insert(b);
            parent = b;
        }
        c.prompts.push_back(std::move(h));
    }
    for (const ReplayEvent &e : c.events) c.stored_blocks += e.count;
    for (const auto &set : held) c.resident += set.size();
    return c;
}

} // namespace

std::string wl_index_k1(const Opts &o, bool &ok) {
    const size_t workers = o.index_workers ? o.index_workers : 1000;
    const ReplaySetup s{"index_k1", workers, std::max<size_t>(1, o.dup), o.cores, o.k1_matches};
    const std::vector<TraceRequest> reqs = read_trace(o.trace, "index_k1");
    const ReplayCorpus c = build_k1(reqs, workers, o.seed_given ? o.seed : kSeed, o.salt);
    const std::vector<double> windows = parse_windows(o.windows, "index_k1");
    uint64_t checked = 0;
    const uint64_t mismatches = replay_check(c, s, checked);
    ok = mismatches == 0;
    std::string out;
    for (double w : windows) {
        WindowResult r = replay_window(c, s, w);
        JsonLine j;
        head(j, "index_k1", (c.queries.size() + c.events.size()) * s.dup, r.elapsed, EventCounts{});
        j.str("trace", o.trace);
        replay_fields(j, c, s, w, r, checked, mismatches);
        if (!out.empty()) out += "\n";
        out += j.finish();
        std::fprintf(stderr, "index_k1: window %.3f s done\n", w);
    }
    return out;
}

} // namespace bench
