// Workload `index_k2` (kvreg-only): the shape of Dynamo's gen-3 / CKF indexer benchmark ("K2";
// bench/README.md): few workers, deep chains, evictions. Beside index_k1's thousands of
// workers on shallow prefixes, this one measures the index when events (and their Removed
// hashes) are most of the work.
//
// Corpus (built before any clock starts): the trace's requests copied --trace-dup (20) times
// with disjoint hash ids (Dynamo's --trace-duplication-factor; the copies keep the timestamps,
// so they interleave), each hash id turned into --length-factor (4) consecutive blocks
// (--trace-length-factor), the requests split at random (splitmix64, seed 42) over --workers
// (16) workers of --capacity (16,384) blocks each. Per request: the router's query (router
// hashes: the ids chained with kvreg_sequence_hash, OWN mode); the worker's cached prefix is
// touched (deepest first, so a chain's root is the most recently used and leaves go first,
// as an engine frees a request's blocks from the tail); the blocks it lacks are stored (one
// Stored event, parent the deepest cached block), each decode block (output_length / 128) in
// a Stored event of its own; whenever the cache is full, the least recently used blocks go
// first, in one Removed event before the Stored event that needs the room. No ballast.
//
// Timing: index_replay.cpp's open loop over Dynamo's windows (24,000 ... 750 ms), one event
// thread and one query thread. Block ops are Dynamo's corrected count: query hashes, Stored and
// Removed hashes. Every 100th answer is checked against a reference model (0 mismatches).
#include "index_replay.hpp"

#include <kvreg_index.h>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace bench {

namespace {

constexpr uint64_t kDecodeBlockTokens = 128;
constexpr uint64_t kSeed = 42;

// One worker's cache: least recently used out first. A list threaded through a node array,
// and a map from hash to node.
class Lru {
public:
    explicit Lru(size_t cap) : cap_(cap) {}
    bool holds(uint64_t h) const { return at_.count(h) != 0; }
    size_t size() const { return at_.size(); }
    bool full() const { return at_.size() >= cap_; }
    void touch(uint64_t h) { // h must be held
        const uint32_t n = at_.at(h);
        unlink(n);
        push_front(n);
    }
    void insert(uint64_t h) { // h must not be held, the cache must not be full
        uint32_t n;
        if (!free_.empty()) {
            n = free_.back();
            free_.pop_back();
        } else {
            n = static_cast<uint32_t>(nodes_.size());
            nodes_.push_back({});
        }
        nodes_[n].hash = h;
        at_.emplace(h, n);
        push_front(n);
    }
    uint64_t evict() { // the least recently used; the cache must not be empty
        const uint32_t n = tail_;
        unlink(n);
        at_.erase(nodes_[n].hash);
        free_.push_back(n);
        return nodes_[n].hash;
    }

private:
    static constexpr uint32_t kNone = UINT32_MAX;
    struct Node {
        uint64_t hash = 0;
        uint32_t prev = kNone, next = kNone;
    };
    void unlink(uint32_t n) {
        Node &x = nodes_[n];
        (x.prev == kNone ? head_ : nodes_[x.prev].next) = x.next;
        (x.next == kNone ? tail_ : nodes_[x.next].prev) = x.prev;
    }
    void push_front(uint32_t n) {
        nodes_[n].prev = kNone;
        nodes_[n].next = head_;
        (head_ == kNone ? tail_ : nodes_[head_].prev) = n;
        head_ = n;
    }
    size_t cap_;
    std::vector<Node> nodes_;
    std::vector<uint32_t> free_;
    std::unordered_map<uint64_t, uint32_t> at_;
    uint32_t head_ = kNone, tail_ = kNone;
};

struct K2Params {
    size_t workers, trace_dup, length, capacity;
    uint64_t seed, salt;
};

ReplayCorpus build_k2(const std::vector<TraceRequest> &reqs, const K2Params &p) {
    ReplayCorpus c;
    SplitMix64 rng(p.seed);
    std::vector<Lru> cache(p.workers, Lru(p.capacity));
    uint64_t max_id = 0;
    for (const TraceRequest &q : reqs)
        for (uint64_t id : q.ids) max_id = std::max(max_id, id);
    const double span = static_cast<double>(std::max<uint64_t>(1, reqs.back().timestamp_ms - reqs.front().timestamp_ms));
    uint64_t fresh = UINT64_C(1) << 62; // decode blocks: hashes no prompt has
    uint64_t resident = 0;
    std::vector<uint64_t> evicted;
    // Make room for n blocks in worker w's cache: one Removed event when anything goes.
    auto make_room = [&](uint32_t w, size_t n, double due, uint32_t req) {
        evicted.clear();
        while (cache[w].size() + n > p.capacity) evicted.push_back(cache[w].evict());
        if (evicted.empty()) return;
        c.events.push_back({due, req, w, static_cast<uint32_t>(c.hashes.size()), static_cast<uint32_t>(evicted.size()), 1,
                            0, 0});
        c.hashes.insert(c.hashes.end(), evicted.begin(), evicted.end());
        c.removed_blocks += evicted.size();
        resident -= evicted.size();
    };
    for (size_t r = 0; r < reqs.size(); r++) {
        const TraceRequest &q = reqs[r];
        const double due = static_cast<double>(q.timestamp_ms - reqs.front().timestamp_ms) / span;
        for (size_t copy = 0; copy < p.trace_dup; copy++) {
            const uint32_t req = static_cast<uint32_t>(c.prompts.size());
            const uint32_t w = static_cast<uint32_t>(rng.next_u64() % p.workers);
            std::vector<uint64_t> h;
            h.reserve(q.ids.size() * p.length);
            for (uint64_t id : q.ids)
                for (size_t j = 0; j < p.length; j++) {
                    const uint64_t block = (copy * (max_id + 1) + id) * p.length + j;
                    h.push_back(kvreg_sequence_hash(h.empty() ? 0 : h.back(), block + 1, p.salt));
                }
            c.query_blocks += h.size();
            c.queries.push_back({due, req});
            Lru &lru = cache[w];
            size_t cached = 0;
            while (cached < h.size() && lru.holds(h[cached])) cached++;
            for (size_t i = cached; i-- > 0;) lru.touch(h[i]);
            const size_t n_new = std::min(h.size() - cached, p.capacity - cached);
            if (n_new) {
                make_room(w, n_new, due, req);
                c.events.push_back({due, req, w, static_cast<uint32_t>(c.hashes.size()), static_cast<uint32_t>(n_new), 0,
                                    cached > 0, cached ? h[cached - 1] : 0});
                for (size_t i = cached; i < cached + n_new; i++) c.hashes.push_back(h[i]);
                for (size_t i = cached + n_new; i-- > cached;) lru.insert(h[i]); // deepest first: the root most recent
                c.stored_blocks += n_new;
                resident += n_new;
            }
            uint64_t parent = n_new ? h[cached + n_new - 1] : cached ? h[cached - 1] : 0;
            for (uint64_t d = 0; d < q.output_length / kDecodeBlockTokens; d++) {
                const uint64_t b = fresh++;
                make_room(w, 1, due, req);
                c.events.push_back({due, req, w, static_cast<uint32_t>(c.hashes.size()), 1, 0, parent != 0, parent});
                c.hashes.push_back(b);
                lru.insert(b);
                c.stored_blocks++;
                resident++;
                parent = b;
            }
            c.prompts.push_back(std::move(h));
            c.resident = std::max(c.resident, resident); // the peak: what the index is sized for
        }
    }
    return c;
}

} // namespace

std::string wl_index_k2(const Opts &o, bool &ok) {
    const K2Params p{o.index_workers ? o.index_workers : 16, std::max<size_t>(1, o.trace_dup),
                     std::max<size_t>(1, o.length_factor), std::max<size_t>(1, o.capacity),
                     o.seed_given ? o.seed : kSeed, o.salt};
    const ReplaySetup s{"index_k2", p.workers, 1, o.cores, o.k1_matches};
    const std::vector<TraceRequest> reqs = read_trace(o.trace, "index_k2");
    const ReplayCorpus c = build_k2(reqs, p);
    const std::vector<double> windows =
        parse_windows(o.windows_given ? o.windows : "24000,12000,6000,3000,1500,750", "index_k2");
    uint64_t checked = 0;
    const uint64_t mismatches = replay_check(c, s, checked);
    ok = mismatches == 0;
    std::string out;
    for (double w : windows) {
        WindowResult r = replay_window(c, s, w);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        JsonLine j;
        head(j, "index_k2", c.queries.size() + c.events.size(), r.elapsed, EventCounts{});
        j.str("trace", o.trace)
            .u("trace_dup", p.trace_dup)
            .u("length_factor", p.length)
            .u("capacity_blocks", p.capacity);
        replay_fields(j, c, s, w, r, checked, mismatches);
        // The process's peak so far: the corpus (held in memory for the replay) included.
        j.u("peak_rss_bytes", static_cast<uint64_t>(ru.ru_maxrss) * 1024);
        if (!out.empty()) out += "\n";
        out += j.finish();
        std::fprintf(stderr, "index_k2: window %.3f s done\n", w);
    }
    return out;
}

} // namespace bench
