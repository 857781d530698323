// Workload `index` (kvreg-only): the router-side index (kvreg_index.h) on a Mooncake trace, the
// shape of Dynamo's INDEXER_BENCH corpus with few workers.
//
// Corpus (built before any clock starts): the trace's requests are split at random (splitmix64,
// --seed) over --workers workers. Each worker is a prefix cache of 16,384 blocks with LRU
// eviction, as Dynamo's mocker defaults. Per request, in trace order: the router's query (the
// request's router hashes), then the worker's events: one Stored event with the blocks it did
// not hold (parent = the deepest it held), one Stored event per decode block (output_length /
// 512, fresh hashes), and one Removed event per eviction. Router hashes are the trace ids
// chained with kvreg_sequence_hash, and the index runs in OWN mode (libkvreg engines).
//
// Timed, in one process:
//  1. replay: queries and event batches interleaved in trace order on one thread; each call
//     timed on its own, so query time and event time are apart;
//  2. the limit for each: the same operations as probes into a plain single-threaded open-
//     addressing table (u64 key -> u64, linear probing, sized for the index's peak entries)
//     holding the same (hash, worker) pairs: one insert or erase per event block, one lookup
//     per block matched (per (hash, worker) pair in the answer: "blocks matched per second");
//  3. queries alone on the final index, 1 thread, then the same queries split over 2 threads.
#include "bench.hpp"

#include <kvreg_index.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <list>
#include <atomic>
#include <thread>
#include <unordered_map>

namespace bench {

namespace {

constexpr size_t kCapacity = 16384; // blocks per worker (Dynamo's mocker default)
constexpr size_t kTraceBlockTokens = 512;

struct Batch {
    uint32_t worker;
    std::vector<uint64_t> hashes; // every event's hashes, back to back
    std::vector<kvreg_wire_event> events;
    uint64_t stored = 0, removed = 0;
};

struct Corpus {
    std::vector<std::vector<uint64_t>> queries;
    std::vector<Batch> batches; // batch i follows query i
    uint64_t event_blocks = 0, query_blocks = 0, events = 0;
    size_t peak_entries = 0;
};

// One worker's cache: LRU over router hashes.
struct WorkerCache {
    std::list<uint64_t> order; // front = most recent
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
    bool holds(uint64_t h) const { return where.count(h) != 0; }
    void touch(uint64_t h) { order.splice(order.begin(), order, where[h]); }
    void add(uint64_t h) {
        order.push_front(h);
        where[h] = order.begin();
    }
    uint64_t evict() {
        const uint64_t h = order.back();
        order.pop_back();
        where.erase(h);
        return h;
    }
};

Corpus build(const Opts &o, const std::vector<TraceRequest> &reqs, size_t workers) {
    Corpus c;
    SplitMix64 rng(o.seed);
    std::vector<WorkerCache> caches(workers);
    uint64_t fresh = UINT64_C(1) << 62; // decode blocks: hashes no prompt has
    size_t live = 0;
    for (const TraceRequest &r : reqs) {
        const uint32_t w = static_cast<uint32_t>(rng.next_u64() % workers);
        std::vector<uint64_t> hashes(r.ids.size());
        for (size_t i = 0; i < r.ids.size(); i++)
            hashes[i] = kvreg_sequence_hash(i ? hashes[i - 1] : 0, r.ids[i] + 1, o.salt);
        c.queries.push_back(hashes);
        c.query_blocks += hashes.size();
        WorkerCache &wc = caches[w];
        Batch b;
        b.worker = w;
        // [kind, first, count, parent?] per event, resolved into kvreg_wire_event at the end
        struct Ev { uint32_t type; size_t first, count; int has_parent; uint64_t parent; };
        std::vector<Ev> evs;
        size_t held = 0;
        while (held < hashes.size() && wc.holds(hashes[held])) wc.touch(hashes[held++]);
        std::vector<uint64_t> to_store(hashes.begin() + static_cast<ptrdiff_t>(held), hashes.end());
        const uint64_t decode = r.output_length / kTraceBlockTokens;
        for (uint64_t d = 0; d < decode; d++) to_store.push_back(fresh++);
        std::vector<uint64_t> evicted;
        for (uint64_t h : to_store) {
            if (wc.where.size() >= kCapacity) {
                evicted.push_back(wc.evict());
                live--;
            }
            wc.add(h);
            live++;
        }
        c.peak_entries = std::max(c.peak_entries, live);
        if (!evicted.empty()) {
            evs.push_back({KVREG_WIRE_REMOVED, b.hashes.size(), evicted.size(), 0, 0});
            b.hashes.insert(b.hashes.end(), evicted.begin(), evicted.end());
            b.removed += evicted.size();
        }
        const size_t prompt_new = hashes.size() - held;
        if (prompt_new) {
            evs.push_back({KVREG_WIRE_STORED, b.hashes.size(), prompt_new, held > 0, held ? hashes[held - 1] : 0});
            b.hashes.insert(b.hashes.end(), hashes.begin() + static_cast<ptrdiff_t>(held), hashes.end());
        }
        for (uint64_t d = 0; d < decode; d++) {
            evs.push_back({KVREG_WIRE_STORED, b.hashes.size(), 1, 1, b.hashes.empty() ? 0 : b.hashes.back()});
            b.hashes.push_back(to_store[prompt_new + d]);
        }
        b.stored = prompt_new + decode;
        for (const Ev &e : evs) {
            kvreg_wire_event we;
            std::memset(&we, 0, sizeof we);
            we.type = e.type;
            we.medium = KVREG_MEDIUM_GPU;
            we.n_block_hashes = e.count;
            we.has_parent = static_cast<uint32_t>(e.has_parent);
            we.parent_block_hash = e.parent;
            we.block_hashes = reinterpret_cast<const uint64_t *>(e.first); // offset, fixed below
            b.events.push_back(we);
        }
        for (kvreg_wire_event &we : b.events)
            we.block_hashes = b.hashes.data() + reinterpret_cast<size_t>(we.block_hashes);
        c.event_blocks += b.stored + b.removed;
        c.events += b.events.size();
        c.batches.push_back(std::move(b));
    }
    return c;
}

// The limit: a plain open-addressing table (linear probing, backward-shift erase), no locks.
class PlainTable {
public:
    explicit PlainTable(size_t entries) {
        size_t cap = 16;
        while (cap * 3 < entries * 4) cap *= 2;
        keys_.assign(cap, 0);
        vals_.assign(cap, 0);
        mask_ = cap - 1;
    }
    void insert(uint64_t k, uint64_t v) {
        size_t i = home(k);
        while (keys_[i] != 0 && keys_[i] != k) i = (i + 1) & mask_;
        keys_[i] = k;
        vals_[i] = v;
    }
    uint64_t find(uint64_t k) const {
        for (size_t i = home(k);; i = (i + 1) & mask_) {
            if (keys_[i] == k) return vals_[i];
            if (keys_[i] == 0) return 0;
        }
    }
    void erase(uint64_t k) {
        size_t i = home(k);
        while (keys_[i] != k) {
            if (keys_[i] == 0) return;
            i = (i + 1) & mask_;
        }
        for (size_t j = i;;) {
            j = (j + 1) & mask_;
            if (keys_[j] == 0) break;
            const size_t h = home(keys_[j]);
            if (i <= j ? (i < h && h <= j) : (i < h || h <= j)) continue;
            keys_[i] = keys_[j];
            vals_[i] = vals_[j];
            i = j;
        }
        keys_[i] = 0;
    }

private:
    size_t home(uint64_t k) const { return static_cast<size_t>((k * UINT64_C(0x9E3779B97F4A7C15)) >> 16) & mask_; }
    std::vector<uint64_t> keys_, vals_;
    size_t mask_;
};

// A (hash, worker) pair as one nonzero plain-table key.
uint64_t pair_key(uint64_t h, uint32_t w) { return (h ^ (uint64_t{w} + 1) * UINT64_C(0xD6E8FEB86659FD93)) | 1; }

// Walked blocks of one query: the holder lookups the index made (best depth + 1, at most n).
uint64_t walked(const kvreg_index_match *m, size_t n_m, size_t n) {
    uint32_t best = 0;
    for (size_t i = 0; i < n_m; i++) best = std::max(best, m[i].depth);
    return std::min<uint64_t>(n, uint64_t{best} + 1);
}

struct Times {
    std::vector<double> q, lq, e, le; // per request: index query, plain probes, index apply, plain ops
    void keep_min(const Times &t) {
        if (q.empty()) {
            *this = t;
            return;
        }
        for (size_t i = 0; i < q.size(); i++) {
            q[i] = std::min(q[i], t.q[i]);
            lq[i] = std::min(lq[i], t.lq[i]);
            e[i] = std::min(e[i], t.e[i]);
            le[i] = std::min(le[i], t.le[i]);
        }
    }
    static double sum(const std::vector<double> &v) {
        double s = 0;
        for (double x : v) s += x;
        return s;
    }
};

struct Outcome {
    uint64_t walked_blocks = 0, matched_blocks = 0, flagged = 0, sink = 0, touched = 0;
};

// One replay into a new index (left in idx for the caller).
Outcome replay(const Corpus &c, size_t workers, kvreg_index *&idx, Times &t) {
    kvreg_index_config *cfg = nullptr;
    check_rc(kvreg_index_config_new(&cfg), "kvreg_index_config_new");
    check_rc(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), "config");
    // sized like the plain table: for the peak number of (hash, worker) entries
    check_rc(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, c.peak_entries), "config");
    check_rc(kvreg_index_new(&idx, cfg), "kvreg_index_new");
    kvreg_index_config_free(cfg);
    const size_t nq = c.queries.size();
    t.q.assign(nq, 0);
    t.lq.assign(nq, 0);
    t.e.assign(nq, 0);
    t.le.assign(nq, 0);
    Outcome out;
    std::vector<kvreg_index_match> m(workers);
    std::vector<uint64_t> seq(workers, 0);
    PlainTable plain(c.peak_entries);
    for (size_t i = 0; i < nq; i++) {
        size_t n = 0;
        const Batch &b = c.batches[i];
        const std::vector<uint64_t> &q = c.queries[i];
        // A router queries hashes it has just computed, so they are in cache; the plain probes
        // below read them right after the query. Touch them first so that the query is not the
        // one that pays for loading the bench's own array.
        for (uint64_t h : q) out.touched += h;
        asm volatile("" : : "r"(out.touched)); // the sum is the point: keep the loads
        double t0 = now_s();
        check_rc(kvreg_index_query_hashes(idx, q.data(), q.size(), 0, m.data(), m.size(), &n),
                 "kvreg_index_query_hashes");
        t.q[i] = now_s() - t0;
        out.walked_blocks += walked(m.data(), n, q.size());
        for (size_t k = 0; k < n; k++) out.matched_blocks += m[k].depth;
        // The limit: one probe per block matched, i.e. per (hash, worker) pair in the answer.
        t0 = now_s();
        for (size_t k = 0; k < n; k++)
            for (uint32_t d = 0; d < m[k].depth; d++)
                out.sink += plain.find(pair_key(q[d], static_cast<uint32_t>(m[k].worker_id)));
        t.lq[i] = now_s() - t0;

        kvreg_index_apply_info info;
        for (uint64_t h : b.hashes) out.touched += h; // as above: a decoder has just written the batch
        for (const kvreg_wire_event &e : b.events) out.touched += e.n_block_hashes;
        asm volatile("" : : "r"(out.touched));
        t0 = now_s();
        check_rc(kvreg_index_apply(idx, b.worker, 0, seq[b.worker]++, b.events.data(), b.events.size(), &info),
                 "kvreg_index_apply");
        t.e[i] = now_s() - t0;
        out.flagged += (info.flags & ~uint32_t{KVREG_INDEX_F_NEW_WORKER}) != 0;
        t0 = now_s();
        for (const kvreg_wire_event &e : b.events)
            for (size_t k = 0; k < e.n_block_hashes; k++) {
                if (e.type == KVREG_WIRE_STORED)
                    plain.insert(pair_key(e.block_hashes[k], b.worker), 1);
                else
                    plain.erase(pair_key(e.block_hashes[k], b.worker));
            }
        t.le[i] = now_s() - t0;
    }
    return out;
}

uint64_t run_queries(const kvreg_index *idx, const Corpus &c, size_t first, size_t step, size_t workers) {
    std::vector<kvreg_index_match> m(workers);
    uint64_t acc = 0;
    for (size_t q = first; q < c.queries.size(); q += step) {
        size_t n = 0;
        check_rc(kvreg_index_query_hashes(idx, c.queries[q].data(), c.queries[q].size(), 0, m.data(), m.size(), &n),
                 "kvreg_index_query_hashes");
        for (size_t i = 0; i < n; i++) acc += m[i].depth;
    }
    return acc;
}

} // namespace

std::string wl_index(const Opts &o, bool &ok) {
    const size_t workers = o.index_workers ? o.index_workers : 8;
    const std::vector<TraceRequest> reqs = read_trace(o.trace, "index");
    const Corpus c = build(o, reqs, workers);

    // 1 and 2, --reps times from an empty index: the replay with each index call timed, and
    // right after each call the same operations on the plain table, timed the same way. Each
    // operation keeps its fastest time over the repetitions: the machine is shared (2 cores,
    // other jobs), and a preemption inside one timed call would otherwise decide the ratio.
    const size_t reps = std::max<size_t>(1, o.reps);
    Times best;
    Outcome out;
    kvreg_index *idx = nullptr;
    for (size_t r = 0; r < reps; r++) {
        kvreg_index_free(idx);
        idx = nullptr;
        Times t;
        out = replay(c, workers, idx, t);
        best.keep_min(t);
    }
    uint64_t entries = 0, mem = 0, per_entry = 0;
    kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &entries);
    kvreg_index_stat(idx, KVREG_INDEX_STAT_MEMORY_BYTES, &mem);
    kvreg_index_stat(idx, KVREG_INDEX_STAT_BYTES_PER_ENTRY, &per_entry);
    const double q_s = best.sum(best.q), lq_s = best.sum(best.lq), e_s = best.sum(best.e), le_s = best.sum(best.le);
    const std::vector<double> &q_lat = best.q;
    const uint64_t walked_blocks = out.walked_blocks, matched_blocks = out.matched_blocks,
                   flagged = out.flagged, sink = out.sink;

    // 3. queries alone on the final index: 1 thread, then 2 threads splitting the same queries.
    // Wall time gives the scaling when two cores are free; each thread's CPU time shows
    // whether the readers slow each other down (shared cache lines) even when they are not.
    // Each phase keeps its fastest of at least 15 runs (each is a few milliseconds). The second
    // thread is made once, as a router's pool would be, and both start together: a thread made
    // inside the timed interval, or one still waking up, charged its start-up to the queries.
    const size_t scaling_reps = std::max<size_t>(reps, 15);
    double one_s = 1e300, two_s = 1e300, one_cpu = 1e300, two_cpu = 1e300;
    uint64_t acc1 = 0, acc2[2] = {0, 0};
    double cpu2[2] = {0, 0};
    auto half = [&](int k) {
        const double c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        acc2[k] = run_queries(idx, c, static_cast<size_t>(k), 2, workers);
        cpu2[k] = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    };
    // The helper sleeps between rounds; in a round it says it is ready, spins until go, runs
    // its half and says done. A round number in each flag, so no flag needs resetting.
    std::atomic<uint64_t> round{0}, ready{0}, go{0}, done{0};
    std::thread helper([&] {
        for (uint64_t r = 1;; r++) {
            round.wait(r - 1, std::memory_order_acquire);
            if (round.load(std::memory_order_acquire) == UINT64_MAX) return;
            ready.store(r, std::memory_order_release);
            while (go.load(std::memory_order_acquire) != r) {
            }
            half(0);
            done.store(r, std::memory_order_release);
            done.notify_one();
        }
    });
    for (uint64_t r = 1; r <= scaling_reps; r++) {
        double t0 = now_s(), cpu0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        acc1 = run_queries(idx, c, 0, 1, workers);
        one_s = std::min(one_s, now_s() - t0);
        one_cpu = std::min(one_cpu, cpu_s(CLOCK_THREAD_CPUTIME_ID) - cpu0);
        round.store(r, std::memory_order_release);
        round.notify_one();
        while (ready.load(std::memory_order_acquire) != r) {
        }
        t0 = now_s();
        go.store(r, std::memory_order_release);
        half(1);
        for (uint64_t d = done.load(std::memory_order_acquire); d != r; d = done.load(std::memory_order_acquire))
            done.wait(d, std::memory_order_acquire);
        two_s = std::min(two_s, now_s() - t0);
        two_cpu = std::min(two_cpu, cpu2[0] + cpu2[1]);
    }
    round.store(UINT64_MAX, std::memory_order_release);
    round.notify_one();
    helper.join();
    kvreg_index_free(idx);

    std::vector<double> sorted = q_lat;
    std::sort(sorted.begin(), sorted.end());
    auto pct = [&](double p) { return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())))] * 1e6; };
    const double qbps = static_cast<double>(matched_blocks) / q_s, lqbps = static_cast<double>(matched_blocks) / lq_s;
    const double ebps = static_cast<double>(c.event_blocks) / e_s, lebps = static_cast<double>(c.event_blocks) / le_s;
    // the two threads did the same queries as one: same answers, summed
    ok = flagged == 0 && acc1 == acc2[0] + acc2[1] && sink > 0;

    JsonLine j;
    head(j, "index", c.queries.size() + c.events, q_s + e_s, EventCounts{});
    j.b("kvreg_only", true)
        .str("trace", o.trace)
        .u("workers", workers)
        .u("requests", c.queries.size())
        .u("query_blocks", c.query_blocks)
        .u("walked_blocks", walked_blocks)
        .u("matched_blocks", matched_blocks)
        .u("events", c.events)
        .u("event_blocks", c.event_blocks)
        .u("index_entries", entries)
        .u("peak_entries", c.peak_entries)
        .u("index_bytes", mem)
        .u("index_bytes_per_entry", per_entry)
        .f("query_blocks_per_s", qbps)
        .f("query_walked_blocks_per_s", static_cast<double>(walked_blocks) / q_s)
        .f("query_limit_blocks_per_s", lqbps)
        .f("query_vs_limit", qbps / lqbps)
        .f("event_blocks_per_s", ebps)
        .f("event_limit_blocks_per_s", lebps)
        .f("event_vs_limit", ebps / lebps)
        .f("queries_per_s", static_cast<double>(c.queries.size()) / q_s)
        .f("query_p50_us", pct(0.50))
        .f("query_p99_us", pct(0.99))
        .f("logical_ops_per_s", static_cast<double>(c.queries.size() + c.events) / (q_s + e_s))
        .f("block_ops_per_s", static_cast<double>(walked_blocks + c.event_blocks) / (q_s + e_s))
        .f("queries_1thread_s", one_s)
        .f("queries_2threads_s", two_s)
        .f("query_scaling_2_vs_1", one_s / two_s)
        .f("query_cpu_1thread_s", one_cpu)
        .f("query_cpu_2threads_s", two_cpu)
        .f("query_cpu_efficiency_2_vs_1", one_cpu / two_cpu)
        .u("flagged_batches", flagged)
        .b("verified", ok);
    return j.finish();
}

} // namespace bench
