// kvreg_release_batch reads a record's hash without the shard lock, to prefetch its index slot
// a few handles ahead (registry.hpp, prefetch_release), in registries with reserved (pinned)
// record chunks. Run under ThreadSanitizer in CI: a writer thread keeps registering and
// releasing blocks in the very record slots that a reader's stale handles name, while the
// reader releases those stale handles in batches. Every stale release must be KVREG_ESTALE and
// every registration OK; under TSan, a plain (non-atomic) store of the hash would be reported.
// One shard, so the writer's records and the stale handles share the same chunks. Bounded by
// rounds, not time. Env KVREG_STRESS_SECONDS is not used.
#include <kvreg.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBlocks = 512;  // per round, and the stale handles
constexpr int kRounds = 300;
int g_failures = 0;

void fail(const char *what, int rc)
{
    std::fprintf(stderr, "prefetch_race: %s: status %d\n", what, rc);
    g_failures++;
}

std::vector<kvreg_block_desc> descs(uint64_t base)
{
    std::vector<kvreg_block_desc> d(kBlocks);
    for (size_t i = 0; i < kBlocks; i++) {
        d[i] = kvreg_block_desc{};
        d[i].sequence_hash = (base + i) * UINT64_C(0x9E3779B97F4A7C15) + 1;
        d[i].block_hash = d[i].sequence_hash ^ 7;
    }
    return d;
}

} // namespace

int main()
{
    kvreg_config *cfg = nullptr;
    kvreg_registry *reg = nullptr;
    kvreg_pool *pool = nullptr;
    if (kvreg_config_new(&cfg) != KVREG_OK) return 1;
    kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL);
    kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 1024);
    kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1);
    kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, 2 * kBlocks);
    int rc = kvreg_registry_new(&reg, cfg);
    kvreg_config_free(cfg);
    if (rc != KVREG_OK) return fail("kvreg_registry_new", rc), 1;
    if ((rc = kvreg_pool_new(&pool, reg, "gpu")) != KVREG_OK) return fail("kvreg_pool_new", rc), 1;

    // Handles made stale: registered, then released (their slots go back to the free lists).
    std::vector<kvreg_block> stale(kBlocks);
    const std::vector<kvreg_block_desc> first = descs(0);
    if ((rc = kvreg_register_batch(pool, first.data(), kBlocks, stale.data(), nullptr, nullptr)) != KVREG_OK)
        return fail("register", rc), 1;
    if ((rc = kvreg_release_batch(pool, stale.data(), kBlocks, nullptr, nullptr)) != KVREG_OK)
        return fail("release", rc), 1;

    std::atomic<bool> writer_done{false};
    int writer_failures = 0;
    std::thread writer([&] {
        std::vector<kvreg_block> h(kBlocks);
        std::vector<int> st(kBlocks);
        for (int r = 1; r <= kRounds; r++) {
            const std::vector<kvreg_block_desc> d = descs(uint64_t(r) * kBlocks);
            size_t n = 0;
            if (kvreg_register_batch(pool, d.data(), kBlocks, h.data(), st.data(), &n) != KVREG_OK || n != kBlocks)
                writer_failures++;
            if (kvreg_release_batch(pool, h.data(), kBlocks, st.data(), &n) != KVREG_OK || n != kBlocks)
                writer_failures++;
        }
        writer_done.store(true, std::memory_order_release);
    });
    std::vector<int> st(kBlocks);
    long batches = 0;
    while (!writer_done.load(std::memory_order_acquire) || batches == 0) {
        size_t n = 99;
        rc = kvreg_release_batch(pool, stale.data(), kBlocks, st.data(), &n);
        if (rc != KVREG_OK || n != 0) fail("stale batch", rc);
        for (size_t i = 0; i < kBlocks; i++)
            if (st[i] != KVREG_ESTALE) fail("stale release", st[i]);
        batches++;
        // Drain the writer's events now and then, so the poll queue never fills.
        kvreg_event ev[256];
        size_t got = 0;
        kvreg_registry_poll(reg, ev, 256, &got);
    }
    writer.join();
    if (writer_failures) fail("writer", writer_failures);
    uint64_t hashes = 1;
    kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes);
    if (hashes != 0) fail("hashes left", static_cast<int>(hashes));
    kvreg_registry_free(reg);
    std::printf("prefetch_race: %ld stale batches of %zu beside %d writer rounds\n", batches, kBlocks, kRounds);
    return g_failures != 0;
}
