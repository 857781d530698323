// One worker's engine-to-router hash mapping: for each engine hash the worker holds, the
// router hash libkvreg computed for it and the tiers it is stored in. Removes carry engine
// hashes only, and a stored event's parent is an engine hash: both are resolved here.
// Open addressing, linear probing, backward-shift deletion, 24 bytes an entry. An engine
// hash's home slot is the top bits of its mixed form (mix_hash()), so entries inserted in ascending
// mixed order, as a dump (version 2) lists them, land one after another, in the lines the
// insert before them wrote. Not thread-safe: the worker's lock guards it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include <sys/mman.h>

#include "index/mix.hpp"
#include "util/huge_pages.hpp"

namespace kvreg::index {

class MapArena;

class EngineMap {
public:
    struct Entry {
        uint64_t engine;
        uint64_t router;
        uint32_t tiers; // bit t: stored in tier t; 0 marks an unused slot
        uint32_t part;  // the partition: 0 the worker's model, k its LoRA k - 1 (workers.hpp)
    };

    uint64_t size() const noexcept { return size_; }
    // What it allocated itself (slots taken from a MapArena are the arena's).
    uint64_t bytes() const noexcept { return slots_.get_deleter().owned ? (mask_ ? mask_ + 1 : 0) * sizeof(Entry) : 0; }

    Entry *find(uint64_t engine) noexcept {
        if (!slots_) return nullptr;
        for (uint64_t i = home(engine);; i = (i + 1) & mask_) {
            Entry &e = slots_[i];
            if (e.tiers == 0) return nullptr;
            if (e.engine == engine) return &e;
        }
    }

    // Room for n more entries, so that insert() cannot fail. Throws std::bad_alloc (unchanged).
    // arena: where an empty mapping may take its slots (a load's, index/load.cpp).
    void reserve(uint64_t n, MapArena *arena = nullptr);

    // Insert a new engine hash (absent; reserve() first). Returns its entry.
    Entry *insert(uint64_t engine, uint64_t router, uint32_t tiers, uint32_t part = 0) noexcept {
        uint64_t i = home(engine);
        while (slots_[i].tiers != 0) i = (i + 1) & mask_;
        slots_[i] = Entry{engine, router, tiers, part};
        size_++;
        return &slots_[i];
    }

    // insert() unless the engine hash is there already (then nullptr, nothing changed): one
    // probe instead of find() and insert() (loading a dump). reserve() first.
    Entry *insert_new(uint64_t engine, uint64_t router, uint32_t tiers, uint32_t part) noexcept {
        uint64_t i = home(engine);
        for (; slots_[i].tiers != 0; i = (i + 1) & mask_)
            if (slots_[i].engine == engine) return nullptr;
        slots_[i] = Entry{engine, router, tiers, part};
        size_++;
        return &slots_[i];
    }

    // Start loading the slot a lookup of engine reads first (reserve() first).
    void prefetch(uint64_t engine) const noexcept { __builtin_prefetch(&slots_[home(engine)]); }

    void erase(Entry *e) noexcept {
        uint64_t i = static_cast<uint64_t>(e - slots_.get());
        for (uint64_t j = i;;) {
            j = (j + 1) & mask_;
            if (slots_[j].tiers == 0) break;
            const uint64_t k = home(slots_[j].engine);
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            slots_[i] = slots_[j];
            i = j;
        }
        slots_[i].tiers = 0;
        size_--;
    }

    template <class F> void for_each(F f) const {
        for (uint64_t i = 0; slots_ && i <= mask_; i++)
            if (slots_[i].tiers) f(slots_[i]);
    }

    void clear() noexcept {
        slots_.reset();
        set_capacity(0);
        size_ = 0;
    }

private:
    uint64_t home(uint64_t engine) const noexcept { return mix_hash(engine) >> shift_; }
    // cap: a power of two >= 2, or 0 (no slots).
    void set_capacity(uint64_t cap) noexcept {
        mask_ = cap ? cap - 1 : 0;
        shift_ = cap ? static_cast<unsigned>(__builtin_clzll(cap - 1)) : 63;
    }
    void rehash(uint64_t cap) {
        Slots fresh(allocate(cap), Free{true});
        Slots old = std::move(slots_);
        const uint64_t old_cap = old ? mask_ + 1 : 0;
        slots_ = std::move(fresh);
        set_capacity(cap);
        for (uint64_t i = 0; i < old_cap; i++) {
            if (old[i].tiers == 0) continue;
            uint64_t j = home(old[i].engine);
            while (slots_[j].tiers != 0) j = (j + 1) & mask_;
            slots_[j] = old[i];
        }
    }

    // A big mapping (a worker with tens of thousands of blocks, restored or rebuilt) is
    // aligned and advised for huge pages: filling it in 4 KB pages costs a page fault each
    // 4 KB, which in a VM was most of a restore's load (docs/design/index.md, "How it
    // applies"). Freed with free().
    struct Free {
        bool owned; // false: the slots are a MapArena's
        void operator()(Entry *p) const noexcept {
            if (owned) std::free(p);
        }
    };
    using Slots = std::unique_ptr<Entry[], Free>;
    static Entry *allocate(uint64_t cap) {
        const size_t bytes = cap * sizeof(Entry);
        void *p = alloc_huge_advised(bytes, alignof(Entry));
        std::memset(p, 0, bytes); // tiers 0: every slot unused
        return static_cast<Entry *>(p);
    }

    Slots slots_{nullptr, Free{true}};
    uint64_t mask_ = 0;   // capacity - 1
    unsigned shift_ = 63; // 64 - log2(capacity): home() keeps the top bits
    uint64_t size_ = 0;
};

// Zeroed room for many small mappings (a load's: the index/load.cpp walk reserves each
// worker's mapping here), in regions aligned and advised for huge pages. Allocated one by one,
// the 64 mappings of a 64-worker dump (about 200 KB each) were zeroed and faulted in 4 KB pages:
// a third of the load (kvreg-bench --workload index_load --workers 64). Regions come fresh from
// mmap, so they are zero already. A mapping never gives its slots back: they return when the
// arena is reset (at the start of the next load, when no worker is known and every mapping is
// empty) or destroyed with the index. Used by one thread at a time (a load).
class MapArena {
  public:
    MapArena() = default;
    MapArena(const MapArena &) = delete;
    MapArena &operator=(const MapArena &) = delete;
    ~MapArena() { reset(); }

    // Zeroed room for cap entries, or nullptr: a mapping below 64 KB (a few pages: not worth
    // a region's 4 MB), of 2 MB or more (it gets huge pages of its own), or no memory.
    EngineMap::Entry *take(uint64_t cap) noexcept {
        const size_t bytes = cap * sizeof(EngineMap::Entry);
        if (bytes < (size_t{64} << 10) || bytes >= kHuge) return nullptr;
        if (regions_.empty() || kRegion - used_ < bytes) {
            if (!add_region()) return nullptr;
        }
        auto *p = reinterpret_cast<EngineMap::Entry *>(static_cast<char *>(regions_.back()) + used_);
        used_ += (bytes + 63) & ~size_t{63};
        return p;
    }
    void reset() noexcept {
        for (void *r : regions_) munmap(r, kRegion);
        regions_.clear();
        used_ = 0;
        bytes_.store(0, std::memory_order_relaxed);
    }
    uint64_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

  private:
    static constexpr size_t kHuge = kHugePage;
    static constexpr size_t kRegion = 2 * kHuge;
    bool add_region() noexcept {
        try {
            regions_.reserve(regions_.size() + 1);
        } catch (...) {
            return false;
        }
        // Mapped with a huge page's worth to spare, then trimmed to an aligned region.
        void *raw = mmap(nullptr, kRegion + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) return false;
        const uintptr_t at = reinterpret_cast<uintptr_t>(raw);
        const uintptr_t aligned = (at + kHuge - 1) & ~uintptr_t{kHuge - 1};
        if (aligned > at) munmap(raw, aligned - at);
        if (aligned + kRegion < at + kRegion + kHuge)
            munmap(reinterpret_cast<void *>(aligned + kRegion), at + kRegion + kHuge - (aligned + kRegion));
        void *region = reinterpret_cast<void *>(aligned);
        madvise(region, kRegion, MADV_HUGEPAGE);
        regions_.push_back(region);
        used_ = 0;
        bytes_.fetch_add(kRegion, std::memory_order_relaxed);
        return true;
    }
    std::vector<void *> regions_;
    size_t used_ = 0; // bytes handed out of the last region
    std::atomic<uint64_t> bytes_{0};
};

inline void EngineMap::reserve(uint64_t n, MapArena *arena) {
    // No mapping near 2^56 entries can exist; past that the sizes below would wrap.
    if (n > (uint64_t{1} << 56) - size_) throw std::bad_alloc();
    uint64_t cap = mask_ ? mask_ + 1 : 0;
    if ((size_ + n) * 4 <= cap * 3) return;
    uint64_t want = cap ? cap : 16;
    while ((size_ + n) * 4 > want * 3) want *= 2;
    if (!slots_ && arena) {
        if (Entry *p = arena->take(want)) {
            slots_ = Slots(p, Free{false});
            set_capacity(want);
            return;
        }
    }
    rehash(want);
}

} // namespace kvreg::index
