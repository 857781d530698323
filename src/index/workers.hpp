// The index's workers: (worker_id, dp_rank) -> a small slot number the shared table stores,
// and per slot the worker's state (its lock, expected sequence number, engine-hash mapping).
//
// Slots live in fixed chunks that are never moved or freed before the index, so a query can
// read a slot's identity without a lock while workers are added. Freed slots are reused
// oldest first, so a query still holding a just-freed slot number almost never sees it reused.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "index/engine_map.hpp"
#include "kvreg.h"

namespace kvreg::index {

// What the holder table stores to name a worker: its slot, and above it the low bits of how
// many times the slot was handed out (its generation). A freed slot is handed out again, so a
// query holding an entry of a worker that left could otherwise name whoever has the slot now:
// the same worker twice in one answer when that is another holder, or a worker credited with
// blocks it never held. The query compares the generation in the entry with the slot's
// generation when it names the holder, and drops the holder when they differ. 12 bits: a
// query mistakes a slot only if it was handed out 4,096 times while the query ran (slots are
// reused oldest first, after 64 others are freed).
constexpr unsigned kSlotBits = 20; // Workers::kChunk * Workers::kMaxChunks slots
constexpr uint32_t kSlotMask = (uint32_t{1} << kSlotBits) - 1;
constexpr uint32_t kGenMask = (uint32_t{1} << (32 - kSlotBits)) - 1;
inline uint32_t slot_of(uint32_t tag) noexcept { return tag & kSlotMask; }
inline uint32_t gen_of(uint32_t tag) noexcept { return tag >> kSlotBits; }

// Who holds a slot, as queries read it without a lock: apart from the worker's state, 16 bytes
// a slot side by side, because an answer of thousands of workers reads thousands of these
// (beside the state, whose lock and mapping spread them over a line or two each, writing the
// identities was a large share of such a query: kvreg-bench --workload index_k1).
struct WorkerIdent {
    std::atomic<uint64_t> id{0};
    std::atomic<uint32_t> dp{0};
    std::atomic<uint32_t> gen{0}; // times handed out; stored before id and dp (see name())
};

// ENGINE mode: the LoRA partitions of one worker's mapping entries, each at a place 1, 2, ...
// (an entry's `part`; 0 is the worker's model). A place counts the entries in it and is free
// again once the last goes: an engine storing and removing a block under a new adapter name
// each time kept every name, and every stored event scanned them all (the 80,000th such batch
// took 14x the first). Not thread-safe: the worker's lock guards it.
class LoraParts {
public:
    uint64_t id(uint32_t part) const noexcept { return ids_[part - 1]; }
    // The place of partition p, made with no entries if p has none. Throws std::bad_alloc
    // (nothing changed).
    uint32_t place(uint64_t p) {
        if (const auto it = by_id_.find(p); it != by_id_.end()) return it->second;
        if (!free_.empty()) {
            const uint32_t part = free_.back();
            by_id_.emplace(p, part); // may throw: nothing changed
            free_.pop_back();
            ids_[part - 1] = p;
            refs_[part - 1] = 0;
            return part;
        }
        ids_.reserve(ids_.size() + 1);  // the three may throw: nothing changed (only room)
        refs_.reserve(ids_.size() + 1);
        free_.reserve(ids_.size() + 1); // so that freeing a place never allocates
        const uint32_t part = static_cast<uint32_t>(ids_.size() + 1);
        by_id_.emplace(p, part); // may throw: nothing changed
        ids_.push_back(p);
        refs_.push_back(0);
        return part;
    }
    void ref(uint32_t part, uint64_t n = 1) noexcept {
        if (part) refs_[part - 1] += n;
    }
    void unref(uint32_t part) noexcept {
        if (part && --refs_[part - 1] == 0) release(part);
    }
    void clear() noexcept {
        std::vector<uint64_t>().swap(ids_);
        std::vector<uint64_t>().swap(refs_);
        std::vector<uint32_t>().swap(free_);
        std::unordered_map<uint64_t, uint32_t>().swap(by_id_);
    }
    // Heap bytes, about (a hash-map node taken as 32 bytes).
    uint64_t bytes() const noexcept {
        return ids_.capacity() * 8 + refs_.capacity() * 8 + free_.capacity() * 4 + by_id_.size() * 32 +
               by_id_.bucket_count() * sizeof(void *);
    }

private:
    void release(uint32_t part) noexcept {
        by_id_.erase(ids_[part - 1]);
        free_.push_back(part); // within the room place() reserved
    }
    std::vector<uint64_t> ids_;  // partition of each place
    std::vector<uint64_t> refs_; // entries in each place
    std::vector<uint32_t> free_; // places with no entries, for the next new partition
    std::unordered_map<uint64_t, uint32_t> by_id_; // partition -> place, places in use
};

struct Worker {
    std::mutex lock; // one writer at a time: apply, clear, remove
    bool live = false;         // under lock
    // Under lock: added by a load (index/load.cpp) whose records are not all in the table yet.
    // A dump leaves it out: a worker's seq without its entries would restore as a replica that
    // believes it has applied batches it has not.
    bool loading = false;
    bool seq_known = false;    // next_seq is meaningful (false: accept any as the start)
    uint64_t next_seq = 0;
    EngineMap map;             // ENGINE mode only
    uint64_t model = 0;        // the worker's partition (kvreg_index_set_worker_partition)
    // ENGINE mode: the LoRA partitions its entries are in; a mapping entry's `part` is 0 for
    // `model`, else its place here.
    LoraParts loras;
    // ENGINE mode: the holder table counts a worker's engine hashes naming one router hash in
    // a byte per tier. Past 255 the byte stays at 255 and the rest are counted here, per
    // router hash and tier, so a count never saturates (almost always empty: it takes 256
    // engine hashes of one worker naming the same content).
    std::unordered_map<uint64_t, std::array<uint64_t, KVREG_MEDIUM_COUNT>> overflow;
};

// Keeps an index's total of engine-map bytes (mappings and their LoRA partitions) current
// across one locked operation on a worker (apply.cpp, load.cpp).
struct MapBytes {
    Worker &w;
    std::atomic<uint64_t> &total;
    uint64_t before = w.map.bytes() + w.loras.bytes();
    ~MapBytes() { total.fetch_add(w.map.bytes() + w.loras.bytes() - before, std::memory_order_relaxed); } // wraps down
};

class Workers {
public:
    static constexpr uint32_t kChunk = 256;
    static constexpr uint32_t kMaxChunks = 4096; // a million workers (kSlotBits)

    Workers() = default;
    ~Workers();
    Workers(const Workers &) = delete;
    Workers &operator=(const Workers &) = delete;

    // The slot of (id, dp), or UINT32_MAX when unknown.
    uint32_t find(uint64_t id, uint32_t dp) const;
    // The slot of (id, dp), adding it when unknown (*added = true; `loading` as given, set
    // under the worker's lock with the rest, so no dump sees a loaded worker before it is
    // marked). Throws std::bad_alloc; returns UINT32_MAX when the slot space is exhausted.
    uint32_t find_or_add(uint64_t id, uint32_t dp, bool *added, bool loading = false);
    // Forget (id, dp) if its slot is `slot`; the slot becomes reusable (unless memory for
    // the free list runs out: then it is simply never reused). Call with the worker's lock
    // held and its entries already gone.
    void release(uint64_t id, uint32_t dp, uint32_t slot) noexcept;

    Worker &at(uint32_t slot) const noexcept {
        return chunks_[slot / kChunk].load(std::memory_order_acquire)->state[slot % kChunk];
    }
    // Set under the worker's lock when the slot is handed out.
    WorkerIdent &ident(uint32_t slot) const noexcept { return idents(slot / kChunk)[slot % kChunk]; }
    // The table's name for the worker in slot (call with the worker's lock held).
    uint32_t tag(uint32_t slot) const noexcept {
        return slot | (ident(slot).gen.load(std::memory_order_relaxed) & kGenMask) << kSlotBits;
    }
    // The worker a table entry's tag names, into id and dp; false when the slot was handed out
    // again since the entry was read (the worker it named has left: skip it). A hand-out
    // stores the generation, then the id and dp with release: reading the id and dp with
    // acquire and the generation after them, a reader that saw either new value also sees the
    // new generation, so it never pairs an old generation with a new identity.
    static bool name(const WorkerIdent &who, uint32_t tag, uint64_t &id, uint32_t &dp) noexcept {
        id = who.id.load(std::memory_order_acquire);
        dp = who.dp.load(std::memory_order_acquire);
        return (who.gen.load(std::memory_order_relaxed) & kGenMask) == gen_of(tag);
    }
    // The identities of slots c * kChunk .. (c + 1) * kChunk - 1 (chunk c must exist: some
    // slot in it was handed out).
    WorkerIdent *idents(uint32_t c) const noexcept { return chunks_[c].load(std::memory_order_acquire)->ident; }
    uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
    // Slots handed out so far (0 .. used() - 1 exist; some may be free now).
    uint32_t used() const noexcept { return used_.load(std::memory_order_acquire); }
    uint64_t bytes() const noexcept;
    // Calls f(Worker&) for every slot ever used (the caller locks each as needed).
    template <class F> void for_each_slot(F f) const {
        const uint32_t n = used_.load(std::memory_order_acquire);
        for (uint32_t s = 0; s < n; s++) f(at(s));
    }

private:
    struct Key {
        uint64_t id;
        uint32_t dp;
        bool operator==(const Key &o) const noexcept { return id == o.id && dp == o.dp; }
    };
    struct KeyHash {
        size_t operator()(const Key &k) const noexcept {
            return static_cast<size_t>((k.id ^ (uint64_t{k.dp} << 40 | k.dp)) * UINT64_C(0x9E3779B97F4A7C15) >> 16);
        }
    };

    mutable std::shared_mutex dir_lock_;
    std::unordered_map<Key, uint32_t, KeyHash> dir_;
    std::deque<uint32_t> free_;
    std::atomic<uint32_t> used_{0}; // slots handed out so far (under dir_lock_ for writers)
    std::atomic<uint64_t> count_{0};
    struct Chunk {
        WorkerIdent ident[kChunk];
        Worker state[kChunk];
    };
    std::unique_ptr<std::atomic<Chunk *>[]> chunks_{new std::atomic<Chunk *>[kMaxChunks]()};
};

static_assert(uint64_t{Workers::kChunk} * Workers::kMaxChunks == uint64_t{1} << kSlotBits, "a slot fits its tag");

} // namespace kvreg::index
