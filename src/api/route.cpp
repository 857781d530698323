// The C entry points of kvreg_router (kvreg_index.h): argument checks, the router's lock, and
// the exception firewall; the computations are in src/index/route.cpp.
#include <cstring>
#include <mutex>

#include "api/guard.hpp"
#include "index/route.hpp"

using kvreg::route::Request;
using kvreg::route::WorkerKey;
using kvreg::route::WorkerLoad;
using kvreg::route::valid_weight;

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

// The option family over the init-struct form: each option is one member, checked as
// kvreg_router_new checks it, so a config set through options is one kvreg_router_new takes.
namespace {
double *double_member(kvreg_router_config *c, uint32_t option) noexcept {
    switch (option) {
    case KVREG_ROUTER_OPT_OVERLAP_WEIGHT: return &c->overlap_weight;
    case KVREG_ROUTER_OPT_TEMPERATURE: return &c->temperature;
    case KVREG_ROUTER_OPT_PREFIX_WEIGHT: return &c->prefix_weight;
    case KVREG_ROUTER_OPT_LOAD_WEIGHT: return &c->load_weight;
    default:
        if (option >= KVREG_ROUTER_OPT_TIER_WEIGHT && option < KVREG_ROUTER_OPT_TIER_WEIGHT + KVREG_MEDIUM_COUNT)
            return &c->tier_weight[option - KVREG_ROUTER_OPT_TIER_WEIGHT];
        return nullptr;
    }
}
bool known_size(const kvreg_router_config *c) noexcept { return c->size >= offsetof(kvreg_router_config, reserved); }
} // namespace

KVREG_API int kvreg_router_config_set(kvreg_router_config *cfg, uint32_t option, uint64_t value) noexcept {
    if (!cfg || !known_size(cfg)) return KVREG_EINVAL;
    switch (option) {
    case KVREG_ROUTER_OPT_POLICY:
        if (value != KVREG_ROUTER_POLICY_COST && value != KVREG_ROUTER_POLICY_WEIGHTED) return KVREG_EINVAL;
        cfg->policy = static_cast<uint32_t>(value);
        return KVREG_OK;
    case KVREG_ROUTER_OPT_SEED: cfg->seed = value; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_router_config_get(const kvreg_router_config *cfg, uint32_t option, uint64_t *value) noexcept {
    if (!cfg || !value || !known_size(cfg)) return KVREG_EINVAL;
    switch (option) {
    case KVREG_ROUTER_OPT_POLICY: *value = cfg->policy; return KVREG_OK;
    case KVREG_ROUTER_OPT_SEED: *value = cfg->seed; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_router_config_set_double(kvreg_router_config *cfg, uint32_t option, double value) noexcept {
    if (!cfg || !known_size(cfg)) return KVREG_EINVAL;
    double *m = double_member(cfg, option);
    if (!m || !valid_weight(value)) return KVREG_EINVAL;
    const bool tier = option >= KVREG_ROUTER_OPT_TIER_WEIGHT;
    if (tier && value > 1.0) return KVREG_EINVAL;
    *m = value;
    return KVREG_OK;
}

KVREG_API int kvreg_router_config_get_double(const kvreg_router_config *cfg, uint32_t option, double *value) noexcept {
    if (!cfg || !value || !known_size(cfg)) return KVREG_EINVAL;
    const double *m = double_member(const_cast<kvreg_router_config *>(cfg), option);
    if (!m) return KVREG_EINVAL;
    *value = *m;
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
    uint64_t &tracked = r->workers[pos].second.tracked;
    if (r->requests.count(request_id)) return KVREG_EEXIST;
    if (blocks > UINT64_MAX - tracked) return KVREG_EOVERFLOW; // wrapped, the worker would look idle
    r->requests.emplace(request_id, Request{r->workers[pos].first, blocks});
    tracked += blocks;
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
    const uint64_t others = load.tracked - q->second.blocks; // the worker's other requests
    if (blocks > UINT64_MAX - others) return KVREG_EOVERFLOW;
    load.tracked = others + blocks;
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
