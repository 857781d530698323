// Stale handles at the generation wrap boundary (internal: needs kvreg::Options::first_gen).
//
// kvreg.h promises that a released handle "is never taken for a later block in the same slot
// (a slot is retired before its generation could repeat)". Handles carry 27 bits of a record's
// generation; reaching 2^27 with 1-per-cycle churn takes 134M cycles, so this test starts every
// record's generation 3 below the limit (Record::kGenLimit) and walks one slot past it:
//
//   * each slot serves exactly the generations kGenLimit-3, -2, -1 and is then retired: the
//     next registration lands in the next slot (decoded from the handle below);
//   * every handle ever issued, once released, stays KVREG_ESTALE for kvreg_release,
//     kvreg_block_get_info and kvreg_block_refcount, whatever now lives in its old slot;
//   * the current handle works and is different from every earlier one.
//
// The handle layout is restated here, not taken from the library, so a change to it shows up
// as a failure: raw = handle ^ pool key, raw = gen:27 | parity:1 | shard:12 | idx:24
// (src/core/registry.cpp). One shard and one pool, so the free list is the only source of slots.
#include <kvreg.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/record.hpp"
#include "internal_check.hpp"
#include "core/registry.hpp"

namespace {


struct Raw {
    uint32_t idx, shard, parity, gen;
};

Raw unpack(const kvreg_pool *p, kvreg_block h)
{
    const uint64_t raw = h ^ p->key.load();
    return Raw{static_cast<uint32_t>(raw & 0xFFFFFF), static_cast<uint32_t>((raw >> 24) & 0xFFF),
               static_cast<uint32_t>((raw >> 36) & 1), static_cast<uint32_t>(raw >> 37)};
}

kvreg_block_desc desc(uint64_t h)
{
    kvreg_block_desc d{};
    d.sequence_hash = h;
    d.block_hash = ~h;
    return d;
}

struct Issued {
    kvreg_block h;
    uint64_t hash;
};

void expect_all_stale(kvreg_pool *p, const std::vector<Issued> &old)
{
    for (const Issued &o : old) {
        kvreg_block_info info{};
        uint32_t rc = 0;
        CHECK(kvreg_release(p, o.h) == KVREG_ESTALE);
        CHECK(kvreg_block_get_info(p, o.h, &info) == KVREG_ESTALE);
        CHECK(kvreg_block_refcount(p, o.h, &rc) == KVREG_ESTALE);
    }
}

void expect_live(kvreg_pool *p, kvreg_block h, uint64_t hash, uint32_t refs)
{
    kvreg_block_info info{};
    uint32_t rc = 0;
    CHECK(kvreg_block_get_info(p, h, &info) == KVREG_OK);
    CHECK(info.sequence_hash == hash);
    CHECK(info.block_hash == ~hash);
    CHECK(kvreg_block_refcount(p, h, &rc) == KVREG_OK);
    CHECK(rc == refs);
}

constexpr uint32_t kLimit = kvreg::Record::kGenLimit;

// One hash, registered and released 4 slots' worth of times: slot k serves registrations
// 3k, 3k+1, 3k+2 with generations kLimit-3, kLimit-2, kLimit-1.
void same_hash_past_the_limit()
{
    kvreg::Options opt;
    opt.first_gen = kLimit - 3;
    opt.shards = 1;
    auto *reg = new kvreg_registry(opt);
    kvreg_pool *p = nullptr;
    CHECK(kvreg_pool_new(&p, reg, "p") == KVREG_OK);
    std::vector<Issued> old;
    const uint64_t hash = 0x1111;
    const int kCycles = 12;
    for (int i = 0; i < kCycles; i++) {
        kvreg_block h = KVREG_BLOCK_NONE;
        kvreg_block_desc d = desc(hash);
        CHECK(kvreg_register(p, &d, &h) == KVREG_OK);
        const Raw r = unpack(p, h);
        CHECK(r.shard == 0);
        CHECK(r.idx == static_cast<uint32_t>(i / 3));               // a retired slot is not reused
        CHECK(r.gen == kLimit - 3 + static_cast<uint32_t>(i % 3)); // generations below the limit
        CHECK((__builtin_popcountll(h ^ p->key.load()) & 1) == 0);  // parity: even raw value
        for (const Issued &o : old) CHECK(o.h != h);
        expect_all_stale(p, old);
        expect_live(p, h, hash, 1);
        // a second reference is the same handle and does not disturb the old ones
        kvreg_block again = KVREG_BLOCK_NONE;
        CHECK(kvreg_acquire(p, hash, &again) == KVREG_OK);
        CHECK(again == h);
        expect_all_stale(p, old);
        expect_live(p, h, hash, 2);
        CHECK(kvreg_release(p, again) == KVREG_OK);
        CHECK(kvreg_release(p, h) == KVREG_OK);
        CHECK(kvreg_release(p, h) == KVREG_ESTALE); // double release
        old.push_back({h, hash});
        expect_all_stale(p, old);
        uint64_t hashes = 99;
        CHECK(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes) == KVREG_OK);
        CHECK(hashes == 0);
    }
    // The retired slots' handles stay stale while a different hash lives in a fresh slot.
    kvreg_block h = KVREG_BLOCK_NONE;
    kvreg_block_desc d = desc(0x2222);
    CHECK(kvreg_register(p, &d, &h) == KVREG_OK);
    CHECK(unpack(p, h).idx == kCycles / 3);
    expect_all_stale(p, old);
    expect_live(p, h, 0x2222, 1);
    kvreg_registry_free(reg);
}

// Two hashes alive at once in the same shard, churned out of order, so the free list hands
// slots back in a different order than they were taken; every slot still serves exactly its
// three generations, and nothing released ever comes back.
void two_hashes_interleaved()
{
    kvreg::Options opt;
    opt.first_gen = kLimit - 3;
    opt.shards = 1;
    auto *reg = new kvreg_registry(opt);
    kvreg_pool *p = nullptr;
    CHECK(kvreg_pool_new(&p, reg, "p") == KVREG_OK);
    std::vector<Issued> old;
    std::vector<uint32_t> uses; // per slot: generations handed out
    kvreg_block live[2] = {KVREG_BLOCK_NONE, KVREG_BLOCK_NONE};
    const uint64_t hashes[2] = {0x1111, 0x2222};
    for (int i = 0; i < 60; i++) {
        const int k = (i * 7 / 3) % 2; // an irregular choice of which hash to cycle
        if (live[k] != KVREG_BLOCK_NONE) {
            CHECK(kvreg_release(p, live[k]) == KVREG_OK);
            old.push_back({live[k], hashes[k]});
        }
        kvreg_block_desc d = desc(hashes[k]);
        CHECK(kvreg_register(p, &d, &live[k]) == KVREG_OK);
        const Raw r = unpack(p, live[k]);
        if (r.idx >= uses.size()) uses.resize(r.idx + 1, 0);
        CHECK(r.gen == kLimit - 3 + uses[r.idx]); // the slot's next generation, never a repeat
        CHECK(uses[r.idx] < 3);
        uses[r.idx]++;
        for (const Issued &o : old) CHECK(o.h != live[k]);
        expect_all_stale(p, old);
        for (int j = 0; j < 2; j++)
            if (live[j] != KVREG_BLOCK_NONE) expect_live(p, live[j], hashes[j], 1);
    }
    kvreg_registry_free(reg);
}

// kvreg_pool_free hands a pool's spare records (registry.hpp) back to the slab: the freed pool
// holds nothing, and a pool that later gets its slot starts without spares.
void pool_free_hands_spares_back()
{
    kvreg::Options opt;
    opt.shards = 1;
    auto *reg = new kvreg_registry(opt);
    kvreg_pool *p = nullptr;
    CHECK(kvreg_pool_new(&p, reg, "p") == KVREG_OK);
    std::vector<kvreg_block> hs(8);
    for (uint64_t i = 0; i < hs.size(); i++) {
        kvreg_block_desc d = desc(0x100 + i);
        CHECK(kvreg_register(p, &d, &hs[i]) == KVREG_OK);
    }
    for (kvreg_block h : hs) CHECK(kvreg_release(p, h) == KVREG_OK);
    CHECK(p->shard[0].n_spare == kvreg_pool::kSpares); // kept, up to the limit
    CHECK(p->shard[0].spare != kvreg::kNil);
    // A spare serves the pool's next registration, under a new generation.
    kvreg_block again = KVREG_BLOCK_NONE;
    kvreg_block_desc d = desc(0x100);
    CHECK(kvreg_register(p, &d, &again) == KVREG_OK);
    CHECK(p->shard[0].n_spare == kvreg_pool::kSpares - 1);
    CHECK(again != hs[0]);
    expect_live(p, again, 0x100, 1);
    kvreg_pool_free(p); // `again` is still held: freed with the pool
    CHECK(p->shard[0].n_spare == 0);
    CHECK(p->shard[0].spare == kvreg::kNil);
    kvreg_registry_free(reg);
}

} // namespace

int main()
{
    same_hash_past_the_limit();
    two_hashes_interleaved();
    pool_free_hands_spares_back();
    if (check_failures()) {
        std::fprintf(stderr, "handle_generations: %d failure(s)\n", check_failures());
        return 1;
    }
    std::printf("handle_generations: ok\n");
    return 0;
}
