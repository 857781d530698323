// kvreg_router's state and its two computations (the cost of each worker, the choice); the
// formulas are documented once, in include/kvreg_index.h. The C entry points that lock and
// check arguments are in src/api/route.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvreg_index.h"

namespace kvreg::route {

using WorkerKey = std::pair<uint64_t, uint32_t>; // (worker_id, dp_rank): ordered as ties break

struct WorkerLoad {
    uint64_t tracked = 0;  // blocks of the requests in flight the router records
    uint64_t external = 0; // kvreg_router_set_active
};

struct Request {
    WorkerKey worker;
    uint64_t blocks;
};

inline bool valid_weight(double w) { return std::isfinite(w) && w >= 0.0; }

} // namespace kvreg::route

struct kvreg_router {
    kvreg_router_config cfg;
    std::mutex mu;
    // Sorted by key: found by binary search, and costs come out in key order. Workers come
    // and go rarely; the vector keeps lookups cheap for thousands of them.
    std::vector<std::pair<kvreg::route::WorkerKey, kvreg::route::WorkerLoad>> workers;
    std::unordered_map<uint64_t, kvreg::route::Request> requests;
    uint64_t rng;
    std::vector<kvreg_router_cost> scratch;

    // Every known worker's terms into scratch, in key order. Caller holds mu.
    void compute(const kvreg_index_match *matches, size_t n_matches, double prompt_blocks);
    // Index into scratch of the choice. Caller holds mu; scratch is not empty.
    size_t choose();
    // Position of key in workers, or workers.size() when it is not there.
    size_t find(const kvreg::route::WorkerKey &key) const {
        auto it = std::lower_bound(workers.begin(), workers.end(), key,
                                   [](const auto &e, const kvreg::route::WorkerKey &k) { return e.first < k; });
        return it != workers.end() && it->first == key ? static_cast<size_t>(it - workers.begin())
                                                       : workers.size();
    }
};
