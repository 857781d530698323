// Workload `index_load` (kvreg-only): what a restoring router replica waits for, in one
// process, with no network: a fresh index rebuilt from a worker's Stored events against the
// same index loaded from its dump (kvreg_index_load), as the NATS restore does with a
// snapshot (there the load runs while the chunks arrive; kvreg-net-bench --workload nats
// times that whole path).
//
// Corpus (built before any clock starts): the conversation --trace's every block, stored by
// --workers engines (1 by default: the NATS restore bench's shape) in ENGINE mode. Each
// request goes to one worker (splitmix64 of --seed); the worker stores the request's blocks it
// does not hold, each run of them one Stored event whose parent is the block before it. A
// block is 16 tokens made from its trace id (id * 16 + k), its engine hash id + 1: the NATS
// bench's engine.
//
// Timed, --reps times each (default 5), every time into a fresh index:
//   apply   kvreg_index_apply of every batch, in trace order (the index hashes each block's
//           tokens: the rebuild's work without the network or decoding)
//   load    kvreg_index_load of the dump of the applied index (made once, untimed)
// Reported: best and median of each, load_over_apply (best over best), ns per record of the
// load. verified: every index, applied or loaded, has the first one's content digest, and the
// entries are the corpus's blocks.
#include "bench.hpp"

#include <kvreg_index.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <vector>

namespace bench {

namespace {

constexpr size_t kTokens = 16; // per block

struct Batch {
    uint32_t worker;
    std::vector<uint64_t> hashes;
    std::vector<uint32_t> tokens;
    std::vector<kvreg_wire_event> events;
};

struct LoadCorpus {
    std::vector<Batch> batches;
    uint64_t blocks = 0;
};

LoadCorpus build(const Opts &o, const std::vector<TraceRequest> &reqs, size_t workers) {
    LoadCorpus c;
    SplitMix64 rng(o.seed);
    std::vector<std::unordered_set<uint64_t>> held(workers);
    for (const TraceRequest &r : reqs) {
        const uint32_t w = workers > 1 ? static_cast<uint32_t>(rng.next_u64() % workers) : 0;
        Batch b;
        b.worker = w;
        struct Run {
            size_t first, count;
            int has_parent;
            uint64_t parent;
        };
        std::vector<Run> runs;
        for (size_t i = 0; i < r.ids.size(); i++) {
            if (!held[w].insert(r.ids[i]).second) continue;
            const bool extends = !runs.empty() && i > 0 && b.hashes.back() == r.ids[i - 1] + 1;
            if (extends) {
                runs.back().count++;
            } else {
                runs.push_back(Run{b.hashes.size(), 1, i > 0, i > 0 ? r.ids[i - 1] + 1 : 0});
            }
            b.hashes.push_back(r.ids[i] + 1);
            for (size_t k = 0; k < kTokens; k++) b.tokens.push_back(static_cast<uint32_t>(r.ids[i] * kTokens + k));
        }
        if (runs.empty()) continue;
        for (const Run &run : runs) {
            kvreg_wire_event e;
            std::memset(&e, 0, sizeof e);
            e.type = KVREG_WIRE_STORED;
            e.medium = KVREG_MEDIUM_GPU;
            e.block_hashes = b.hashes.data() + run.first;
            e.n_block_hashes = run.count;
            e.has_parent = static_cast<uint32_t>(run.has_parent);
            e.parent_block_hash = run.parent;
            e.block_size = kTokens;
            e.token_ids = b.tokens.data() + run.first * kTokens;
            e.n_token_ids = run.count * kTokens;
            b.events.push_back(e);
        }
        c.blocks += b.hashes.size();
        c.batches.push_back(std::move(b));
    }
    return c;
}

kvreg_index *fresh_index() {
    kvreg_index_config *cfg = nullptr;
    check_rc(kvreg_index_config_new(&cfg), "kvreg_index_config_new");
    check_rc(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, kTokens), "kvreg_index_config_set");
    kvreg_index *idx = nullptr;
    check_rc(kvreg_index_new(&idx, cfg), "kvreg_index_new");
    kvreg_index_config_free(cfg);
    return idx;
}

} // namespace

std::string wl_index_load(const Opts &o, bool &ok) {
    const size_t workers = o.index_workers ? o.index_workers : 1;
    const size_t reps = std::max<size_t>(1, o.reps);
    const std::vector<TraceRequest> reqs = read_trace(o.trace, "index_load");
    const LoadCorpus c = build(o, reqs, workers);

    bool same = true;
    uint64_t digest0 = 0, entries = 0;
    const auto check = [&](kvreg_index *idx, bool first) {
        uint64_t d = 0, n = 0;
        check_rc(kvreg_index_digest(idx, &d), "kvreg_index_digest");
        check_rc(kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &n), "kvreg_index_stat");
        if (first) {
            digest0 = d;
            entries = n;
        }
        same = same && d == digest0 && n == entries;
    };

    std::vector<double> apply_s, load_s;
    void *dump = nullptr;
    size_t dump_len = 0;
    for (size_t rep = 0; rep < reps; rep++) {
        kvreg_index *idx = fresh_index();
        const double t0 = now_s();
        for (const Batch &b : c.batches)
            check_rc(kvreg_index_apply(idx, b.worker, 0, KVREG_INDEX_SEQ_NONE, b.events.data(), b.events.size(), nullptr),
                     "kvreg_index_apply");
        apply_s.push_back(now_s() - t0);
        check(idx, rep == 0);
        if (rep == 0) check_rc(kvreg_index_dump_alloc(idx, &dump, &dump_len), "kvreg_index_dump_alloc");
        kvreg_index_free(idx);
    }
    for (size_t rep = 0; rep < reps; rep++) {
        kvreg_index *idx = fresh_index();
        const double t0 = now_s();
        check_rc(kvreg_index_load(idx, dump, dump_len), "kvreg_index_load");
        load_s.push_back(now_s() - t0);
        check(idx, false);
        kvreg_index_free(idx);
    }
    std::free(dump);

    const double apply_best = *std::min_element(apply_s.begin(), apply_s.end());
    const double load_best = *std::min_element(load_s.begin(), load_s.end());
    ok = same && entries == c.blocks;
    JsonLine j;
    j.str("workload", "index_load")
        .u("workers", workers)
        .u("blocks", c.blocks)
        .u("batches", c.batches.size())
        .u("dump_bytes", dump_len)
        .u("reps", reps)
        .f("apply_s", apply_best)
        .f("apply_median_s", median(apply_s))
        .f("load_s", load_best)
        .f("load_median_s", median(load_s))
        .f("load_ns_per_record", load_best * 1e9 / static_cast<double>(std::max<uint64_t>(1, c.blocks)))
        .f("load_over_apply", load_best / apply_best)
        .hex("digest", digest0)
        .b("verified", ok);
    return j.finish();
}

} // namespace bench
