// Event modes under threads: worker threads register, acquire and release a few hashes in
// pools on two media (two GPU pools, two CPU pools) at once, and the INLINE callback keeps the
// view a consumer keyed by (hash, medium) keeps. Checked on every event: a Register makes an
// entry that is not there (global mode: the hash has no entry on any medium), a Remove names an
// entry that is there (global mode: under its Register's medium). At quiescence: per-tier, the
// entries of each medium are the hashes the pools of that medium hold; global, one entry per
// hash the registry holds. After everything is released, no entry is left.
//
// Usage: kvreg-tier-race global|per-tier [seed]. Env KVREG_STRESS_SECONDS (default 1).
#include <kvreg.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kHashes = 32;
constexpr int kPools = 4; // GPU, GPU, CPU, CPU
constexpr int kThreads = 4;
constexpr uint32_t kMediumOf[kPools] = {KVREG_MEDIUM_GPU, KVREG_MEDIUM_GPU, KVREG_MEDIUM_CPU, KVREG_MEDIUM_CPU};

struct View {
    bool per_tier = false;
    uint8_t media[kHashes + 1] = {}; // bit m: an entry (hash, m); global mode: at most one bit
    std::atomic<uint64_t> errors{0}, events{0};
    std::atomic<int> first_error{-1};
};

void note_error(View &v, int what) {
    int none = -1;
    v.first_error.compare_exchange_strong(none, what);
    v.errors.fetch_add(1, std::memory_order_relaxed);
}

// Callbacks are never concurrent for one registry (kvreg.h): the view needs no lock.
void on_events(const kvreg_event *ev, size_t n, void *ud) {
    View &v = *static_cast<View *>(ud);
    v.events.fetch_add(n, std::memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        const uint64_t h = ev[i].sequence_hash;
        if (h < 1 || h > kHashes || ev[i].medium >= KVREG_MEDIUM_COUNT) {
            note_error(v, 1);
            continue;
        }
        const uint8_t bit = static_cast<uint8_t>(1u << ev[i].medium);
        uint8_t &m = v.media[h];
        if (ev[i].kind == KVREG_EVENT_REGISTER) {
            if (v.per_tier ? (m & bit) != 0 : m != 0) note_error(v, 2);
            m |= bit;
        } else if (ev[i].kind == KVREG_EVENT_REMOVE) {
            if (!(m & bit)) note_error(v, 3);
            m &= static_cast<uint8_t>(~bit);
        } else {
            note_error(v, 4);
        }
    }
}

int run(bool per_tier, unsigned long seed, double seconds) {
    View view;
    view.per_tier = per_tier;
    kvreg_config *cfg = nullptr;
    kvreg_registry *reg = nullptr;
    if (kvreg_config_new(&cfg) != KVREG_OK ||
        kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, per_tier ? KVREG_EVENTS_PER_TIER : KVREG_EVENTS_GLOBAL) != KVREG_OK ||
        kvreg_config_set(cfg, KVREG_OPT_SHARDS, 4) != KVREG_OK || // hashes share shards: more contention
        kvreg_config_set_event_fn(cfg, on_events, &view, nullptr) != KVREG_OK || kvreg_registry_new(&reg, cfg) != KVREG_OK) {
        std::fprintf(stderr, "tier_race: setup failed\n");
        return 1;
    }
    kvreg_config_free(cfg);
    kvreg_pool *pools[kPools];
    for (int p = 0; p < kPools; p++)
        if (kvreg_pool_new_medium(&pools[p], reg, "p", kMediumOf[p]) != KVREG_OK) return 1;

    std::atomic<uint64_t> call_errors{0}, ops{0};
    // Each thread's reference per (pool, hash), if any: refs[t][p][h] 1 and its handle held[t][p][h].
    std::vector<std::vector<std::vector<kvreg_block>>> held(
        kThreads, std::vector<std::vector<kvreg_block>>(kPools, std::vector<kvreg_block>(kHashes + 1)));
    std::vector<std::vector<std::vector<uint32_t>>> refs(
        kThreads, std::vector<std::vector<uint32_t>>(kPools, std::vector<uint32_t>(kHashes + 1)));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(seed * 1000003u + static_cast<unsigned long>(t));
            uint64_t n = 0;
            while ((n & 255) != 0 || std::chrono::steady_clock::now() < deadline) {
                const int p = static_cast<int>(rng() % kPools);
                const uint64_t h = 1 + rng() % kHashes;
                uint32_t &r = refs[t][p][h];
                if (r && rng() % 2) {
                    if (kvreg_release(pools[p], held[t][p][h]) != KVREG_OK) call_errors++;
                    r = 0;
                } else if (!r && rng() % 16 == 0) { // rarer than releases: hashes often leave every pool
                    kvreg_block_desc d;
                    std::memset(&d, 0, sizeof d);
                    d.sequence_hash = h;
                    d.block_hash = h * 7;
                    d.has_parent = h > 1;
                    d.parent_sequence_hash = h - 1;
                    kvreg_block b = 0;
                    int rc = kvreg_register(pools[p], &d, &b);
                    if (rc == KVREG_EEXIST) rc = kvreg_acquire(pools[p], h, &b); // another thread's
                    if (rc == KVREG_ENOENT) continue; // released by its owner meanwhile
                    if (rc != KVREG_OK) {
                        call_errors++;
                        continue;
                    }
                    held[t][p][h] = b;
                    r = 1;
                }
                n++;
            }
            ops.fetch_add(n);
        });
    }
    for (auto &th : threads) th.join();
    if (kvreg_registry_flush(reg) != KVREG_OK) call_errors++;

    // Quiescent: compare with the pools.
    uint64_t mismatches = 0;
    for (uint64_t h = 1; h <= kHashes; h++) {
        uint8_t want = 0;
        for (int p = 0; p < kPools; p++) {
            int present = 0;
            if (kvreg_pool_contains(pools[p], h, &present) != KVREG_OK) call_errors++;
            if (present) want |= static_cast<uint8_t>(1u << kMediumOf[p]);
        }
        if (per_tier ? view.media[h] != want : (view.media[h] != 0) != (want != 0)) mismatches++;
    }
    // Release everything: no entry may be left.
    for (int t = 0; t < kThreads; t++)
        for (int p = 0; p < kPools; p++)
            for (uint64_t h = 1; h <= kHashes; h++)
                if (refs[t][p][h] && kvreg_release(pools[p], held[t][p][h]) != KVREG_OK) call_errors++;
    if (kvreg_registry_flush(reg) != KVREG_OK) call_errors++;
    uint64_t left = 0;
    for (uint64_t h = 1; h <= kHashes; h++) left += view.media[h] != 0;
    kvreg_registry_free(reg);

    std::printf("tier_race %s seed %lu: %" PRIu64 " ops, %" PRIu64 " events, %" PRIu64 " event errors (first kind %d), %" PRIu64
                " mismatches at quiescence, %" PRIu64 " entries left, %" PRIu64 " failed calls\n",
                per_tier ? "per-tier" : "global", seed, ops.load(), view.events.load(), view.errors.load(),
                view.first_error.load(), mismatches, left, call_errors.load());
    return view.errors || mismatches || left || call_errors || ops.load() == 0 ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2 || (std::strcmp(argv[1], "global") != 0 && std::strcmp(argv[1], "per-tier") != 0)) {
        std::fprintf(stderr, "usage: kvreg-tier-race global|per-tier [seed]\n");
        return 2;
    }
    const unsigned long seed = argc > 2 ? std::strtoul(argv[2], nullptr, 10)
                                        : static_cast<unsigned long>(std::random_device{}());
    const char *env = std::getenv("KVREG_STRESS_SECONDS");
    const double seconds = env ? std::atof(env) : 1.0;
    return run(std::strcmp(argv[1], "per-tier") == 0, seed, seconds);
}
