// KVREG_OPT_RESERVE_BLOCKS: while the registry holds at most the reserved number of blocks,
// registering allocates nothing (kvreg.h). Global operator new (every variant) is replaced
// (replace_new.hpp) and counts calls; the library is linked statically so its own allocations are counted.
//
//   * config: the option's range; kvreg_registry_new refuses a reservation its shards cannot
//     hold (KVREG_EINVAL) and accepts one they can;
//   * reserved (64 shards, two pools holding the same hashes, INLINE with a counting
//     callback): filling up to the reservation, releasing everything and filling again, and
//     filling again after kvreg_registry_clear, make no allocation at all;
//   * past the reservation the registry grows as without it, and after everything is released
//     the reserved memory is still there (filling to the reservation again allocates nothing);
//   * control: the same fill without the option allocates (so the count above can fail).
#include <kvreg.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "internal_check.hpp"

#include "replace_new.hpp"

namespace {
long g_news = 0; // operator new calls while counting
bool g_counting = false;
// False under valgrind, which substitutes its own operator new for the library's calls: the
// allocation counts are then not checked (the rest of the test still runs under memcheck).
bool g_can_count = true;
} // namespace

bool replaced_new_fails(std::size_t)
{
    if (g_counting) g_news++;
    return false;
}

namespace {

// Allocations made while f runs.
template <typename F> long allocations_in(F f)
{
    g_news = 0;
    g_counting = true;
    f();
    g_counting = false;
    return g_news;
}

// True when f makes no allocation (or allocations cannot be counted here); reports a count.
template <typename F> bool no_allocations(const char *what, F f)
{
    const long n = allocations_in(f);
    if (n) std::fprintf(stderr, "%s: %ld allocations\n", what, n);
    return !g_can_count || n == 0;
}

constexpr uint32_t kBlockTokens = 16;
constexpr size_t kBatch = 32;

struct Counts {
    uint64_t registers = 0, removes = 0;
};

void count_events(const kvreg_event *ev, size_t n, void *user)
{
    Counts *c = static_cast<Counts *>(user);
    for (size_t i = 0; i < n; i++) {
        c->registers += ev[i].kind == KVREG_EVENT_REGISTER;
        c->removes += ev[i].kind == KVREG_EVENT_REMOVE;
    }
}

// Hashes and tokens for `n` distinct blocks, made before counting starts.
struct Blocks {
    std::vector<kvreg_block_desc> descs;
    std::vector<uint32_t> tokens;
    explicit Blocks(size_t n, uint64_t seed = 1) : descs(n), tokens(n * kBlockTokens)
    {
        uint64_t x = 0x243F6A8885A308D3ull * seed; // splitmix64: fixed, so every run is the same
        for (size_t i = 0; i < n; i++) {
            x += 0x9E3779B97F4A7C15ull;
            uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            for (uint32_t t = 0; t < kBlockTokens; t++) tokens[i * kBlockTokens + t] = static_cast<uint32_t>(i + t);
            kvreg_block_desc &d = descs[i];
            d = kvreg_block_desc{};
            d.sequence_hash = z;
            d.block_hash = z ^ 1;
            d.tokens = &tokens[i * kBlockTokens];
            d.n_tokens = kBlockTokens;
        }
    }
};

// Register every block of `b` into `pool`, kBatch at a time; handles into `out` (sized by the
// caller, so that the test itself allocates nothing while counting).
bool fill(kvreg_pool *pool, const Blocks &b, std::vector<kvreg_block> &out)
{
    if (out.size() < b.descs.size()) return false;
    for (size_t i = 0; i < b.descs.size(); i += kBatch) {
        const size_t n = b.descs.size() - i < kBatch ? b.descs.size() - i : kBatch;
        if (kvreg_register_batch(pool, &b.descs[i], n, &out[i], nullptr, nullptr) != KVREG_OK) return false;
    }
    return true;
}

bool release(kvreg_pool *pool, std::vector<kvreg_block> &h)
{
    for (size_t i = 0; i < h.size(); i += kBatch) {
        const size_t n = h.size() - i < kBatch ? h.size() - i : kBatch;
        if (kvreg_release_batch(pool, &h[i], n, nullptr, nullptr) != KVREG_OK) return false;
    }
    return true;
}

kvreg_registry *make(uint64_t reserve, uint64_t shards, Counts *counts)
{
    kvreg_config *cfg = nullptr;
    kvreg_registry *reg = nullptr;
    CHECK(kvreg_config_new(&cfg) == KVREG_OK);
    if (reserve) CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, reserve) == KVREG_OK);
    if (shards) CHECK(kvreg_config_set(cfg, KVREG_OPT_SHARDS, shards) == KVREG_OK);
    CHECK(kvreg_config_set_event_fn(cfg, count_events, counts, nullptr) == KVREG_OK);
    const int rc = kvreg_registry_new(&reg, cfg);
    kvreg_config_free(cfg);
    CHECK(rc == KVREG_OK);
    return rc == KVREG_OK ? reg : nullptr;
}

void test_config()
{
    kvreg_config *cfg = nullptr;
    CHECK(kvreg_config_new(&cfg) == KVREG_OK);
    const uint64_t most = uint64_t{4096} * 16776960; // 4096 shards, each full
    CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, most + 1) == KVREG_EINVAL);
    CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, UINT64_MAX) == KVREG_EINVAL);
    CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, most) == KVREG_OK);
    CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, 0) == KVREG_OK);
    // One shard holds 16,776,960 blocks (kvreg.h, kvreg_register): one more cannot be
    // reserved, and is refused before the records are made (the check used to allow up to
    // 2^24 - 2, so this made all 65,535 chunks, about 800 MB, before it failed).
    CHECK(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1) == KVREG_OK);
    kvreg_registry *reg = nullptr;
    for (const uint64_t blocks : {uint64_t{16776961}, uint64_t{(1u << 24) - 2}}) {
        CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, blocks) == KVREG_OK);
        int rc = KVREG_OK;
        const long n = allocations_in([&] { rc = kvreg_registry_new(&reg, cfg); });
        CHECK(rc == KVREG_EINVAL);
        CHECK(reg == nullptr);
        if (n > 100) std::fprintf(stderr, "refused reservation of %llu: %ld allocations\n", static_cast<unsigned long long>(blocks), n);
        CHECK(!g_can_count || n <= 100);
    }
    kvreg_registry_free(reg);
    // A small reservation on one shard works, and holds exactly that many without allocating.
    CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, 1000) == KVREG_OK);
    CHECK(kvreg_registry_new(&reg, cfg) == KVREG_OK);
    kvreg_config_free(cfg);
    if (!reg) return;
    kvreg_pool *pool = nullptr;
    CHECK(kvreg_pool_new(&pool, reg, "one") == KVREG_OK);
    const Blocks b(1000);
    std::vector<kvreg_block> h(1000);
    CHECK(no_allocations("one shard, 1000 reserved", [&] { CHECK(fill(pool, b, h)); }));
    kvreg_registry_free(reg);
}

// Fill both pools with `blocks`, counting allocations; false (reported) if any.
bool fill_both_counted(kvreg_pool *a, kvreg_pool *b, const Blocks &blocks, std::vector<kvreg_block> &ha,
                       std::vector<kvreg_block> &hb, const char *what)
{
    bool ok = false;
    const bool none = no_allocations(what, [&] { ok = fill(a, blocks, ha) && fill(b, blocks, hb); });
    CHECK(ok);
    return ok && none;
}

void test_reserved()
{
    // Five rounds, each filling both pools with hashes of its own and releasing them: the
    // index's tombstones pile up (new hashes cannot reuse them) until it purges them. Then a
    // fill, kvreg_registry_clear, and the same fill again.
    constexpr size_t kHashes = 10000; // two pools: 20,000 blocks
    constexpr int kRounds = 5;
    Counts counts;
    kvreg_registry *reg = make(2 * kHashes, 0, &counts);
    if (!reg) return;
    kvreg_pool *a = nullptr, *b = nullptr;
    CHECK(kvreg_pool_new(&a, reg, "gpu") == KVREG_OK);
    CHECK(kvreg_pool_new(&b, reg, "host") == KVREG_OK);
    std::vector<Blocks> sets;
    for (int r = 0; r < kRounds; r++) sets.emplace_back(kHashes, 10 + r);
    std::vector<kvreg_block> ha(kHashes), hb(kHashes);
    for (int r = 0; r < kRounds; r++) {
        CHECK(fill_both_counted(a, b, sets[r], ha, hb, "round"));
        uint64_t hashes = 0;
        CHECK(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes) == KVREG_OK);
        CHECK(hashes == kHashes);
        // releasing gives nothing back, so nothing is made again
        CHECK(no_allocations("releasing", [&] { CHECK(release(a, ha) && release(b, hb)); }));
    }
    CHECK(counts.registers == kRounds * kHashes && counts.removes == kRounds * kHashes);
    CHECK(fill_both_counted(a, b, sets[0], ha, hb, "before clear"));
    CHECK(kvreg_registry_clear(reg) == KVREG_OK);
    CHECK(fill_both_counted(a, b, sets[0], ha, hb, "after clear"));
    CHECK(counts.registers == (kRounds + 2) * kHashes);
    CHECK(kvreg_pool_size(a) == kHashes && kvreg_pool_size(b) == kHashes);
    kvreg_registry_free(reg);
}

void test_past_reservation()
{
    // Four shards, so that a shard's share (about 1,250 blocks) is well above the two chunks
    // of records (512) a shard keeps anyway.
    constexpr size_t kReserved = 5000;
    Counts counts;
    kvreg_registry *reg = make(kReserved, 4, &counts);
    if (!reg) return;
    kvreg_pool *pool = nullptr;
    CHECK(kvreg_pool_new(&pool, reg, "gpu") == KVREG_OK);
    const Blocks many(8 * kReserved, 3);
    std::vector<kvreg_block> h(8 * kReserved);
    CHECK(fill(pool, many, h)); // grows past the reservation
    CHECK(kvreg_pool_size(pool) == 8 * kReserved);
    CHECK(release(pool, h)); // gives the growth back, not the reservation
    CHECK(counts.registers == 8 * kReserved && counts.removes == 8 * kReserved);
    const Blocks few(kReserved, 4);
    h.resize(kReserved);
    CHECK(no_allocations("after growing and shrinking", [&] { CHECK(fill(pool, few, h)); }));
    kvreg_registry_free(reg);
}

void test_control()
{
    Counts counts;
    kvreg_registry *reg = make(0, 0, &counts);
    if (!reg) return;
    kvreg_pool *pool = nullptr;
    CHECK(kvreg_pool_new(&pool, reg, "gpu") == KVREG_OK);
    const Blocks blocks(10000);
    std::vector<kvreg_block> h(10000);
    // without the option the records and the index grow as blocks come
    const long n = allocations_in([&] { CHECK(fill(pool, blocks, h)); });
    CHECK(!g_can_count || n > 0);
    kvreg_registry_free(reg);
}

} // namespace

int main()
{
    g_can_count = !under_valgrind(); // then only the counts go unchecked
    std::printf("allocations counted: %s\n", g_can_count ? "yes" : "no (valgrind replaces operator new)");
    test_config();
    test_reserved();
    test_past_reservation();
    test_control();
    if (check_failures()) std::fprintf(stderr, "reserve_blocks: %d checks failed\n", check_failures());
    return check_failures() != 0;
}
