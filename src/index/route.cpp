// kvreg_router (kvreg_index.h): the cost of sending a request to each worker, and the choice.
// The formulas are documented once, in the header; this file follows them term by term.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../api_guard.hpp"
#include "kvreg_index.h"

namespace {

using WorkerKey = std::pair<uint64_t, uint32_t>; // (worker_id, dp_rank): ordered as ties break

struct WorkerLoad {
    uint64_t tracked = 0;  // blocks of the requests in flight the router records
    uint64_t external = 0; // kvreg_router_set_active
};

struct Request {
    WorkerKey worker;
    uint64_t blocks;
};

// splitmix64: small, seedable, and the same sequence on every platform, so a seeded run is
// reproducible (std::mt19937's distributions are not specified bit for bit).
uint64_t splitmix64(uint64_t &state) {
    uint64_t z = (state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 53 bits.
double uniform01(uint64_t &state) {
    return static_cast<double>(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

bool valid_weight(double w) { return std::isfinite(w) && w >= 0.0; }

} // namespace

struct kvreg_router {
    kvreg_router_config cfg;
    std::mutex mu;
    // Sorted by key: found by binary search, and costs come out in key order. Workers come
    // and go rarely; the vector keeps lookups cheap for thousands of them.
    std::vector<std::pair<WorkerKey, WorkerLoad>> workers;
    std::unordered_map<uint64_t, Request> requests;
    uint64_t rng;
    std::vector<kvreg_router_cost> scratch;

    // Every known worker's terms into scratch, in key order. Caller holds mu.
    void compute(const kvreg_index_match *matches, size_t n_matches, double prompt_blocks);
    // Index into scratch of the choice. Caller holds mu; scratch is not empty.
    size_t choose();
    // Position of key in workers, or workers.size() when it is not there.
    size_t find(const WorkerKey &key) const {
        auto it = std::lower_bound(workers.begin(), workers.end(), key,
                                   [](const auto &e, const WorkerKey &k) { return e.first < k; });
        return it != workers.end() && it->first == key ? static_cast<size_t>(it - workers.begin())
                                                       : workers.size();
    }
};

void kvreg_router::compute(const kvreg_index_match *matches, size_t n_matches, double prompt_blocks) {
    scratch.clear();
    scratch.reserve(workers.size());
    for (const auto &[key, load] : workers) {
        kvreg_router_cost c{};
        c.worker_id = key.first;
        c.dp_rank = key.second;
        c.active_blocks = static_cast<double>(load.tracked) + static_cast<double>(load.external) +
                          prompt_blocks;
        scratch.push_back(c);
    }
    // A worker's overlap comes from its first entry in matches; later duplicates are ignored.
    std::vector<bool> seen(scratch.size(), false);
    for (size_t i = 0; i < n_matches; i++) {
        size_t pos = find({matches[i].worker_id, matches[i].dp_rank});
        if (pos == workers.size() || seen[pos]) continue;
        seen[pos] = true;
        double overlap = 0.0;
        for (unsigned t = 0; t < KVREG_MEDIUM_COUNT; t++)
            overlap += cfg.tier_weight[t] * static_cast<double>(matches[i].blocks[t]);
        scratch[pos].overlap_blocks = overlap;
    }
    double min_active = 0.0, max_active = 0.0;
    for (size_t i = 0; i < scratch.size(); i++) {
        min_active = i ? std::min(min_active, scratch[i].active_blocks) : scratch[i].active_blocks;
        max_active = i ? std::max(max_active, scratch[i].active_blocks) : scratch[i].active_blocks;
    }
    for (auto &c : scratch) {
        c.prefill_blocks = prompt_blocks - c.overlap_blocks;
        if (cfg.policy == KVREG_ROUTER_POLICY_COST) {
            c.logit = cfg.overlap_weight * c.prefill_blocks + c.active_blocks;
        } else {
            double prefix = prompt_blocks > 0.0 ? c.overlap_blocks / prompt_blocks : 0.0;
            double load = max_active > min_active
                              ? (max_active - c.active_blocks) / (max_active - min_active)
                              : 1.0;
            c.logit = -(cfg.prefix_weight * prefix + cfg.load_weight * load);
        }
    }
}

size_t kvreg_router::choose() {
    const size_t n = scratch.size();
    if (cfg.temperature == 0.0 || n == 1) {
        // Lowest logit, then lowest active blocks; key order settles the rest (strict <).
        size_t best = 0;
        for (size_t i = 1; i < n; i++) {
            const kvreg_router_cost &a = scratch[i], &b = scratch[best];
            if (a.logit < b.logit || (a.logit == b.logit && a.active_blocks < b.active_blocks))
                best = i;
        }
        return best;
    }
    double lo = scratch[0].logit, hi = scratch[0].logit;
    for (const auto &c : scratch) {
        lo = std::min(lo, c.logit);
        hi = std::max(hi, c.logit);
    }
    std::vector<double> weight(n, 1.0);
    double sum = static_cast<double>(n);
    if (hi > lo) {
        sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            weight[i] = std::exp(-(scratch[i].logit - lo) / ((hi - lo) * cfg.temperature));
            sum += weight[i];
        }
    }
    const double u = uniform01(rng) * sum;
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        acc += weight[i];
        if (u < acc) return i;
    }
    return n - 1; // rounding left u at the very top
}

extern "C" {

KVREG_API int kvreg_router_config_init(kvreg_router_config *cfg) noexcept {
    if (!cfg) return KVREG_EINVAL;
    std::memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    cfg->policy = KVREG_ROUTER_POLICY_COST;
    cfg->overlap_weight = 1.0;
    cfg->temperature = 0.0;
    cfg->tier_weight[KVREG_MEDIUM_GPU] = 1.0;
    cfg->tier_weight[KVREG_MEDIUM_CPU] = 0.8;
    cfg->tier_weight[KVREG_MEDIUM_STORAGE] = 0.5;
    cfg->tier_weight[KVREG_MEDIUM_EXTERNAL] = 0.3;
    cfg->prefix_weight = 1.0;
    cfg->load_weight = 1.0;
    cfg->seed = 0;
    return KVREG_OK;
}

KVREG_API int kvreg_router_new(kvreg_router **out, const kvreg_router_config *cfg) noexcept {
    if (!out) return KVREG_EINVAL;
    kvreg_router_config c;
    kvreg_router_config_init(&c);
    if (cfg) {
        // A caller built against a later header may pass a larger struct: read what we know.
        if (cfg->size < offsetof(kvreg_router_config, reserved)) return KVREG_EINVAL;
        std::memcpy(&c, cfg, std::min<size_t>(cfg->size, sizeof c));
        c.size = sizeof c;
    }
    if (c.policy != KVREG_ROUTER_POLICY_COST && c.policy != KVREG_ROUTER_POLICY_WEIGHTED)
        return KVREG_EINVAL;
    if (!valid_weight(c.overlap_weight) || !valid_weight(c.temperature) ||
        !valid_weight(c.prefix_weight) || !valid_weight(c.load_weight))
        return KVREG_EINVAL;
    for (double w : c.tier_weight)
        if (!valid_weight(w) || w > 1.0) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    auto *r = new kvreg_router();
    r->cfg = c;
    r->rng = c.seed;
    *out = r;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_router_free(kvreg_router *r) noexcept { delete r; }

KVREG_API int kvreg_router_add_worker(kvreg_router *r, uint64_t worker_id, uint32_t dp_rank) noexcept {
    if (!r) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::lock_guard<std::mutex> lock(r->mu);
    const WorkerKey key{worker_id, dp_rank};
    if (r->find(key) != r->workers.size()) return KVREG_EEXIST;
    auto at = std::lower_bound(r->workers.begin(), r->workers.end(), key,
                               [](const auto &e, const WorkerKey &k) { return e.first < k; });
    r->workers.insert(at, {key, WorkerLoad{}});
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_router_remove_worker(kvreg_router *r, uint64_t worker_id, uint32_t dp_rank) noexcept {
    if (!r) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lock(r->mu);
    const WorkerKey key{worker_id, dp_rank};
    const size_t pos = r->find(key);
    if (pos == r->workers.size()) return KVREG_ENOENT;
    r->workers.erase(r->workers.begin() + static_cast<std::ptrdiff_t>(pos));
    for (auto it = r->requests.begin(); it != r->requests.end();)
        it = it->second.worker == key ? r->requests.erase(it) : std::next(it);
    return KVREG_OK;
}

KVREG_API int kvreg_router_set_active(kvreg_router *r, uint64_t worker_id, uint32_t dp_rank,
                                      uint64_t active_blocks) noexcept {
    if (!r) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lock(r->mu);
    const size_t pos = r->find({worker_id, dp_rank});
    if (pos == r->workers.size()) return KVREG_ENOENT;
    r->workers[pos].second.external = active_blocks;
    return KVREG_OK;
}

KVREG_API int kvreg_router_request_add(kvreg_router *r, uint64_t request_id, uint64_t worker_id,
                                       uint32_t dp_rank, uint64_t blocks) noexcept {
    if (!r) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::lock_guard<std::mutex> lock(r->mu);
    const size_t pos = r->find({worker_id, dp_rank});
    if (pos == r->workers.size()) return KVREG_ENOENT;
    if (!r->requests.emplace(request_id, Request{r->workers[pos].first, blocks}).second)
        return KVREG_EEXIST;
    r->workers[pos].second.tracked += blocks;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_router_request_update(kvreg_router *r, uint64_t request_id, uint64_t blocks) noexcept {
    if (!r) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lock(r->mu);
    auto q = r->requests.find(request_id);
    if (q == r->requests.end()) return KVREG_ENOENT;
    // a request's worker is always known: remove_worker drops its requests
    WorkerLoad &load = r->workers[r->find(q->second.worker)].second;
    load.tracked = load.tracked - q->second.blocks + blocks;
    q->second.blocks = blocks;
    return KVREG_OK;
}

KVREG_API int kvreg_router_request_finish(kvreg_router *r, uint64_t request_id) noexcept {
    if (!r) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lock(r->mu);
    auto q = r->requests.find(request_id);
    if (q == r->requests.end()) return KVREG_ENOENT;
    r->workers[r->find(q->second.worker)].second.tracked -= q->second.blocks;
    r->requests.erase(q);
    return KVREG_OK;
}

KVREG_API int kvreg_router_costs(kvreg_router *r, const kvreg_index_match *matches, size_t n_matches,
                                 double prompt_blocks, kvreg_router_cost *out, size_t cap,
                                 size_t *n_out) noexcept {
    if (!r || !n_out || (!matches && n_matches > 0) || (!out && cap > 0) ||
        !valid_weight(prompt_blocks))
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::lock_guard<std::mutex> lock(r->mu);
    if (cap < r->workers.size()) {
        *n_out = r->workers.size();
        return KVREG_ERANGE;
    }
    r->compute(matches, n_matches, prompt_blocks);
    if (!r->scratch.empty()) std::memcpy(out, r->scratch.data(), r->scratch.size() * sizeof *out);
    *n_out = r->scratch.size();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_router_select(kvreg_router *r, const kvreg_index_match *matches, size_t n_matches,
                                  double prompt_blocks, kvreg_router_cost *chosen) noexcept {
    if (!r || !chosen || (!matches && n_matches > 0) || !valid_weight(prompt_blocks))
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::lock_guard<std::mutex> lock(r->mu);
    if (r->workers.empty()) return KVREG_ENOENT;
    r->compute(matches, n_matches, prompt_blocks);
    *chosen = r->scratch[r->choose()];
    return KVREG_OK;
    KVREG_GUARD_END
}

} // extern "C"
