// kvreg_router's computations: the cost terms of every worker and the choice among them,
// following include/kvreg_index.h term by term.
#include "index/route.hpp"

#include <cmath>
#include <cstddef>

namespace {

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

} // namespace

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
        // Normalised first, then divided: (hi - lo) * T can be 0 for a tiny T (or the spread
        // infinite), and the best's weight was exp(0 / 0), NaN, which made every draw the
        // last worker's. This way a tiny T gives exp(-inf) = 0 to all but the best.
        sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double x = std::isfinite(hi - lo) ? (scratch[i].logit - lo) / (hi - lo)
                                                    : (scratch[i].logit == lo ? 0.0 : 1.0);
            weight[i] = std::exp(-x / cfg.temperature);
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
