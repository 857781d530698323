#include "index/holder_table.hpp"

#include <cstdlib>
#include <memory>
#include <new>
#include <thread>

#include "util/huge_pages.hpp"

namespace kvreg::index {


HolderTable::HolderTable(uint32_t shards, uint64_t expected) {
    n_shards_ = 1;
    while (n_shards_ < shards && n_shards_ < kMaxShards) n_shards_ *= 2;
    shard_mask_ = n_shards_ - 1;
    shards_ = std::make_unique<Shard[]>(n_shards_);
    if (!expected) return;
    // A little over the mean per shard: hashes spread evenly, not exactly evenly.
    const uint64_t per_shard = expected / n_shards_ + expected / n_shards_ / 8 + 16;
    const uint64_t at_least = per_shard * 4 / 3 + 1;
    const uint64_t slots = capacity_for(at_least, 16) + 1;
    // One region for all first tables (new_region).
    arenas_.reserve(1);
    void *region = new_region(slots * sizeof(Slot) * n_shards_);
    arenas_.emplace_back(region);
    Slot *at = static_cast<Slot *>(region);
    for (uint32_t i = 0; i < n_shards_; i++, at += slots) grow(shards_[i], at_least, at);
}

// Aligned for huge pages when the region spans one: a query's lookups land on random lines of
// the whole table, and with 4 KB pages nearly every one also missed the TLB (the prefetch of
// the next block's line stalled on the page walk): huge pages lift kvreg-bench --workload
// index's query_vs_limit. They also make filling a fresh table cheap where a page fault is
// dear, as in VMs (docs/design/index.md, "How it applies", has the figures).
void *HolderTable::new_region(size_t bytes) { return alloc_huge_advised(bytes, alignof(Slot)); }

void HolderTable::reserve(const uint64_t *more) {
    // The capacity each shard that must grow gets: what growth one entry at a time would
    // reach (doubling from the current size), at once.
    std::vector<uint64_t> cap(n_shards_, 0);
    uint64_t total = 0;
    for (uint32_t si = 0; si < n_shards_; si++) {
        if (more[si] > (uint64_t{1} << 40)) throw std::bad_alloc(); // no table that big
        Shard &s = shards_[si];
        lock_writer(s);
        const Slot *t = s.table.load(std::memory_order_relaxed);
        const uint64_t want = uint64_t{s.count.load(std::memory_order_relaxed)} + more[si];
        const uint64_t have = t ? mask_of(t) + 1 : 0;
        const Slot *spare = s.spare;
        const uint64_t spare_cap = s.spare_cap;
        unlock_writer(s);
        if (!more[si] || want * 4 <= have * 3) continue;
        const uint64_t c = capacity_for(want * 4 / 3 + 1, have ? have * 2 : 16);
        // A place given before and never grown into (its load failed first) is used again:
        // each failed load's reservation stayed allocated, and the next one took another.
        if (spare && spare_cap >= c) continue;
        cap[si] = c;
        total += cap[si] + 1;
    }
    if (!total) return;
    arenas_.reserve(arenas_.size() + 1); // before the region: nothing to leak on a throw
    void *region = new_region(total * sizeof(Slot));
    arenas_.emplace_back(region);
    idle_bytes_.fetch_add(total * sizeof(Slot), std::memory_order_relaxed);
    Slot *at = static_cast<Slot *>(region);
    for (uint32_t si = 0; si < n_shards_; si++) {
        if (!cap[si]) continue;
        Shard &s = shards_[si];
        lock_writer(s);
        // Written only when update_many() grows into it (see Shard::spare); replaces a smaller
        // place given before and not used (its region stays allocated with the table, and
        // counted in bytes()).
        s.spare = at;
        s.spare_cap = cap[si];
        unlock_writer(s);
        at += cap[si] + 1;
    }
}

HolderTable::~HolderTable() = default;

void HolderTable::FreeArena::operator()(void *p) const noexcept { std::free(p); }

uint64_t HolderTable::capacity_for(uint64_t at_least, uint64_t from) noexcept {
    uint64_t cap = from;
    while (cap < at_least) cap *= 2;
    return cap;
}

void HolderTable::lock_writer(Shard &s) noexcept {
    unsigned spins = 0;
    for (;;) {
        uint32_t expected = 0;
        if (s.writer.load(std::memory_order_relaxed) == 0 &&
            s.writer.compare_exchange_weak(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
            return;
        backoff(spins);
    }
}

void HolderTable::begin_change(Shard &s) noexcept {
    // Relaxed: the release stores of the slot words that follow order it before them.
    s.seq.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void HolderTable::end_change(Shard &s) noexcept {
    s.seq.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void HolderTable::grow(Shard &s, uint64_t at_least, Slot *place) {
    Slot *old = s.table.load(std::memory_order_relaxed);
    const uint64_t old_mask = old ? mask_of(old) : 0;
    const uint64_t cap = capacity_for(at_least, old ? (old_mask + 1) * 2 : 16);
    std::unique_ptr<Slot[]> owned;
    Slot *fresh = new_table(cap, place, owned);
    if (old) {
        for (uint64_t i = 1; i <= old_mask + 1; i++) {
            const uint64_t v = old[i].val.load(std::memory_order_relaxed);
            if (v == kEmpty) continue;
            const uint64_t key = old[i].key.load(std::memory_order_relaxed);
            uint64_t ins = 0;
            find(fresh, cap - 1, key, static_cast<uint32_t>(v >> 32), &ins);
            insert_at(fresh, cap - 1, ins, key, v); // in order: not published yet
        }
    }
    publish(s, fresh, std::move(owned));
}

HolderTable::Slot *HolderTable::new_table(uint64_t cap, Slot *place, std::unique_ptr<Slot[]> &owned) {
    Slot *fresh = place;
    if (place)
        std::uninitialized_default_construct_n(place, cap + 1);
    else
        fresh = (owned = std::unique_ptr<Slot[]>(new Slot[cap + 1])).get();
    fresh[0].key.store(cap - 1, std::memory_order_relaxed);
    fresh[0].val.store(0, std::memory_order_relaxed);
    for (uint64_t i = 1; i <= cap; i++) {
        fresh[i].key.store(0, std::memory_order_relaxed);
        fresh[i].val.store(kEmpty, std::memory_order_relaxed);
    }
    return fresh;
}

void HolderTable::publish(Shard &s, Slot *fresh, std::unique_ptr<Slot[]> owned) {
    const uint64_t cap = mask_of(fresh) + 1;
    s.tables.reserve(s.tables.size() + 1); // the only other allocation: before publishing
    begin_change(s);
    s.table.store(fresh, std::memory_order_release);
    s.mask.store(cap - 1, std::memory_order_release); // after the table: see holders_if()
    end_change(s);
    if (owned) s.tables.push_back(std::move(owned));
    s.bytes.store(s.bytes.load(std::memory_order_relaxed) + (cap + 1) * sizeof(Slot), std::memory_order_relaxed);
}

uint64_t HolderTable::find(const Slot *t, uint64_t mask, uint64_t mixed, uint32_t slot, uint64_t *ins) noexcept {
    uint64_t i = home(mixed, mask);
    for (uint64_t d = 0; d <= mask; i = next(i, mask), d++) {
        const uint64_t v = t[i].val.load(std::memory_order_relaxed);
        if (v == kEmpty) break;
        const uint64_t key = t[i].key.load(std::memory_order_relaxed);
        if (key == mixed) {
            if ((v >> 32) == slot) return i;
        } else if (past(key, i, d, mixed, mask)) {
            break;
        }
    }
    *ins = i; // an empty slot, or the first entry past the hash's holders: the new one goes before it
    return 0;
}

void HolderTable::insert_at(Slot *t, uint64_t mask, uint64_t ins, uint64_t key, uint64_t val) noexcept {
    uint64_t e = ins;
    while (t[e].val.load(std::memory_order_relaxed) != kEmpty) e = next(e, mask);
    for (; e != ins; e = prev(e, mask)) {
        const uint64_t p = prev(e, mask);
        t[e].key.store(t[p].key.load(std::memory_order_relaxed), std::memory_order_release);
        t[e].val.store(t[p].val.load(std::memory_order_relaxed), std::memory_order_release);
    }
    t[ins].key.store(key, std::memory_order_release);
    t[ins].val.store(val, std::memory_order_release);
}

void HolderTable::erase_at(Slot *t, uint64_t i) noexcept {
    const uint64_t mask = mask_of(t);
    uint64_t j = i;
    for (;;) {
        j = next(j, mask);
        const uint64_t v = t[j].val.load(std::memory_order_relaxed);
        if (v == kEmpty) break;
        const uint64_t key = t[j].key.load(std::memory_order_relaxed);
        const uint64_t k = home(key, mask);
        // Entry j may move back to i only if its home is not cyclically within (i, j]. In an
        // ordered cluster that moves each entry back one slot up to the first one at its home,
        // which keeps the order.
        const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        t[i].key.store(key, std::memory_order_release);
        t[i].val.store(v, std::memory_order_release);
        i = j;
    }
    t[i].val.store(kEmpty, std::memory_order_release);
    t[i].key.store(0, std::memory_order_release);
}

uint64_t HolderTable::entries() const noexcept {
    uint64_t n = 0;
    for (uint32_t i = 0; i < n_shards_; i++) n += shards_[i].count.load(std::memory_order_relaxed);
    return n;
}

uint64_t HolderTable::bytes() const noexcept {
    uint64_t b = sizeof(Shard) * n_shards_ + idle_bytes_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n_shards_; i++) b += shards_[i].bytes.load(std::memory_order_relaxed);
    return b;
}

} // namespace kvreg::index
