// index::HolderTable (src/index/holder_table.hpp): update_many() against update() one entry at
// a time, the reference. The same items (hashes that share homes, clusters that wrap past the
// table's end, one entry named many times with other entries in between, results that remove
// an entry and later ones that bring it back) go into one table through update_many() and into
// another through update(); afterwards both hold the same entries, and every entry is found by
// a lookup (a lookup stops at the first entry past a hash's place, so an entry out of order
// would be missed). Into empty shards (a load's: the new table is filled before readers see
// it), into shards reserve() made room in, and into shards that already hold entries. Internal:
// links the static library.
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cstdarg>
#include <map>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "index/holder_table.hpp"

extern "C" {
#include <cmocka.h> // last: its fail() macro; C linkage (cmocka 1.1's header does not say)
}

namespace {

using kvreg::index::HolderTable;

constexpr uint64_t kMul = UINT64_C(0x9E3779B97F4A7C15); // the table's mix (holder_table.hpp)

// The hash whose mixed key is `mixed`: mix is a multiplication by an odd constant, so its
// inverse modulo 2^64 undoes it. Computed here, not taken from the table under test.
uint64_t unmix(uint64_t mixed) {
    uint64_t inv = kMul;
    for (int i = 0; i < 6; i++) inv *= 2 - kMul * inv;
    return mixed * inv;
}

// A mixed key in shard `shard` (of 2^shard_bits) whose home in a table of `cap` slots is
// `home` (1-based), its other bits from r: where holder_table.hpp takes each from.
uint64_t mixed_at(unsigned shard_bits, uint64_t shard, uint64_t cap, uint64_t home, std::mt19937_64 &r) {
    uint64_t m = r();
    m &= ~(((UINT64_C(1) << shard_bits) - 1) << 52);
    m |= shard << 52;
    m &= ~((cap - 1) << 16);
    m |= (home - 1) << 16;
    return m;
}

// An item's payload says what the update does: 1..100 adds it; kErase removes the entry.
constexpr uint8_t kErase = 255;
uint32_t apply(uint8_t payload, uint32_t old) { return payload == kErase ? 0 : old + payload; }

struct Items {
    std::vector<uint64_t> hashes;
    std::vector<uint8_t> payload;
    std::vector<HolderTable::SlotRun> runs;
    std::vector<uint32_t> slot_of; // per item, for the reference
};

using Entries = std::map<std::pair<uint64_t, uint32_t>, uint32_t>;

// Every entry of t, read through for_each_entry.
Entries entries_of(const HolderTable &t) {
    Entries e;
    t.for_each_entry([&](uint64_t hash, uint32_t slot, uint32_t counts) {
        assert_true(e.emplace(std::make_pair(hash, slot), counts).second); // one entry per (hash, slot)
    });
    return e;
}

// Every entry found by a lookup of its hash with its counts, and no other holder.
void check_lookups(const HolderTable &t, const Entries &want) {
    std::map<uint64_t, std::map<uint32_t, uint32_t>> by_hash;
    for (const auto &[k, c] : want) by_hash[k.first][k.second] = c;
    for (const auto &[hash, holders] : by_hash) {
        kvreg::index::Holder out[64];
        const size_t n = t.holders(hash, out, 64);
        assert_int_equal(n, holders.size());
        for (size_t i = 0; i < n; i++) {
            const auto it = holders.find(out[i].slot);
            assert_true(it != holders.end());
            assert_int_equal(out[i].counts, it->second);
        }
    }
}

// Items into `many` with update_many and into `one` with update, then both compared.
void load_both(HolderTable &many, HolderTable &one, const Items &it) {
    many.update_many(it.hashes.data(), it.payload.data(), it.hashes.size(), it.runs.data(),
                     [](uint64_t, uint32_t, uint8_t p, uint32_t old) { return apply(p, old); });
    for (size_t i = 0; i < it.hashes.size(); i++)
        one.update(it.hashes[i], it.slot_of[i], [&](uint32_t old) { return apply(it.payload[i], old); });
    const Entries want = entries_of(one);
    const Entries got = entries_of(many);
    assert_true(got == want);
    assert_int_equal(many.entries(), want.size());
    check_lookups(many, want);
}

// Items for a table of `shards` shards whose shards end up with about `per_shard` entries:
// hashes crowded on a few homes, half of them at the table's end (the cluster wraps), each
// named by up to three slots (workers), some several times with other items between (the
// first slot has two runs), some removed and added again.
Items make_items(unsigned shard_bits, size_t per_shard, uint64_t seed) {
    std::mt19937_64 r(seed);
    Items it;
    const uint64_t shards = UINT64_C(1) << shard_bits;
    // The capacity update_many gives an empty shard of per_shard entries (at most 3/4 full).
    uint64_t cap = 16;
    while (cap < per_shard * 4 / 3 + 1) cap *= 2;
    std::vector<uint64_t> distinct;
    for (uint64_t s = 0; s < shards; s++)
        for (size_t k = 0; k < per_shard / 3; k++) {
            const uint64_t home = k % 2 ? cap - r() % 3 : 1 + r() % cap; // the end, or anywhere
            distinct.push_back(unmix(mixed_at(shard_bits, s, cap, home, r)));
        }
    // Three workers, one run each and the first one again (a slot in two runs: its items
    // for one hash with another slot's between); each run names the hashes in its own random
    // order, some twice or three times, and removes some of them between.
    for (const uint32_t slot : {7u, 8u, 9u, 7u}) {
        for (uint64_t h : distinct) {
            if (r() % 4 == 0) continue;
            const unsigned times = 1 + r() % 3;
            for (unsigned t = 0; t < times; t++) {
                it.hashes.push_back(h);
                it.payload.push_back(r() % 8 == 0 ? kErase : static_cast<uint8_t>(1 + r() % 100));
                it.slot_of.push_back(slot);
            }
        }
        it.runs.push_back(HolderTable::SlotRun{it.hashes.size(), slot});
    }
    // Shuffled within each run (a worker's items keep their slot).
    size_t b = 0;
    for (const auto &run : it.runs) {
        for (size_t i = run.end; i > b + 1; i--) {
            const size_t j = b + r() % (i - b);
            std::swap(it.hashes[i - 1], it.hashes[j]);
            std::swap(it.payload[i - 1], it.payload[j]);
        }
        b = run.end;
    }
    return it;
}

void test_into_empty_shards(void **) {
    for (unsigned bits : {0u, 2u})
        for (size_t per : {3u, 12u, 40u, 700u})
            for (uint64_t seed = 1; seed <= 8; seed++) {
                HolderTable many(1u << bits, 0), one(1u << bits, 0);
                load_both(many, one, make_items(bits, per, seed));
            }
}

void test_into_reserved_shards(void **) {
    for (uint64_t seed = 1; seed <= 8; seed++) {
        const unsigned bits = 2;
        const Items it = make_items(bits, 100, seed);
        HolderTable many(1u << bits, 0), one(1u << bits, 0);
        std::vector<uint64_t> more(1u << bits, 0);
        for (uint64_t h : it.hashes) more[many.shard_index(h)]++;
        many.reserve(more.data());
        load_both(many, one, it);
    }
}

void test_into_sized_and_nonempty_shards(void **) {
    for (uint64_t seed = 1; seed <= 8; seed++) {
        // A table sized up front (its first tables already big enough: no growth) ...
        HolderTable many(4, 4000), one(4, 4000);
        load_both(many, one, make_items(2, 60, seed));
        // ... and more items into shards that hold entries already (growing, or not).
        load_both(many, one, make_items(2, 60, seed + 100));
        load_both(many, one, make_items(2, 900, seed + 200));
    }
}

// f throws half-way: what went in is a consistent table (every entry found), nothing leaks
// (the ASan pass), and the table takes updates afterwards.
void test_throw_half_way(void **) {
    for (size_t stop_at : {0u, 1u, 50u, 400u}) {
        HolderTable t(4, 0);
        const Items it = make_items(2, 200, stop_at + 1);
        size_t calls = 0;
        bool threw = false;
        try {
            t.update_many(it.hashes.data(), it.payload.data(), it.hashes.size(), it.runs.data(),
                          [&](uint64_t, uint32_t, uint8_t p, uint32_t old) {
                              if (calls++ == stop_at) throw std::runtime_error("stop");
                              return apply(p, old);
                          });
        } catch (const std::runtime_error &) {
            threw = true;
        }
        assert_true(threw);
        const Entries in = entries_of(t);
        assert_int_equal(t.entries(), in.size());
        check_lookups(t, in);
        Items again = it;
        // Whatever went in, the same items once more reach at least every (hash, slot) they name.
        t.update_many(again.hashes.data(), again.payload.data(), again.hashes.size(), again.runs.data(),
                      [](uint64_t, uint32_t, uint8_t, uint32_t old) { return old | 1u; });
        const Entries after = entries_of(t);
        for (size_t i = 0; i < again.hashes.size(); i++)
            assert_true(after.count(std::make_pair(again.hashes[i], again.slot_of[i])) == 1);
        check_lookups(t, after);
    }
}

// Growth by doubling (HolderTable::grow) keeps every entry findable. One shard, about 3,600
// entries added one at a time through update(), so that the table doubles from 16 slots to
// 8192 (past 3/4 of 4096). Their keys crowd on the last homes of every table size (low bits of
// (mixed >> 16) all ones but the last three: each doubling finds a cluster wrapping past the
// table's end), half of them on the last homes of the 2048-slot table instead (at 4096 they
// move to the middle: a doubling splits each home in two, the old one and the old one plus
// the old capacity), some hashes held by several slots (entries of one home ordered by key and
// slot), the rest anywhere. The model is a map kept here; after every 37 updates every entry
// so far is looked up. A rehash that took the wrapped entries first, or both halves of a split
// home in one pass, fails it.
void test_grow_by_doubling(void **) {
    HolderTable t(1, 0);
    std::mt19937_64 r(11);
    Entries want;
    for (uint32_t n = 0; n < 3000; n++) {
        uint64_t m = r() & ~(UINT64_C(0xfff) << 52); // shard 0 of 1: any top bits do
        switch (n % 4) {
        case 0: m = (m & ~(UINT64_C(0xfff) << 16)) | ((UINT64_C(4095) - (n / 4) % 8) << 16); break;
        case 1: m = (m & ~(UINT64_C(0xfff) << 16)) | ((UINT64_C(2047) - (n / 4) % 8) << 16); break;
        default: break;
        }
        const uint64_t hash = unmix(m);
        const uint32_t holders = n % 10 == 0 ? 3 : 1; // a hash several workers hold
        for (uint32_t k = 0; k < holders; k++) {
            const uint32_t slot = (n * 7 + k * 131) % 997 + 1;
            t.update(hash, slot, [](uint32_t old) { return old + 1; });
            want[std::make_pair(hash, slot)] += 1;
        }
        if (n % 37 == 0 || n == 2999) check_lookups(t, want);
    }
    assert_int_equal(t.entries(), want.size());
    assert_true(entries_of(t) == want);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_into_empty_shards),
        cmocka_unit_test(test_into_reserved_shards),
        cmocka_unit_test(test_into_sized_and_nonempty_shards),
        cmocka_unit_test(test_throw_half_way),
        cmocka_unit_test(test_grow_by_doubling),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
