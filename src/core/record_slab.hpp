// Fixed-address storage for Records, in chunks of 256. Records never move, so indices (and
// handles) stay valid while a record lives.
//
// Each chunk keeps its own free list (threaded through `next`) and live count; chunks with a
// free record are on a stack, so allocation reuses the most recently freed chunk first and live
// records gather in few chunks. When the live set has shrunk to a quarter of the records held,
// a chunk whose last record is freed is given back to the allocator: a registry that once held
// millions of blocks does not keep their memory after they are released. A given-back chunk
// remembers the next generation its records must start at, so a handle into it stays stale
// when the chunk is made again. A record whose generation reaches Record::kGenLimit is retired
// instead of freed (see record.hpp); a chunk holding one is never given back.
//
// With tokens kept, a parallel array holds each record's TokenStore ref (so registries that do
// not keep tokens do not pay for the field). Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "core/record.hpp"
#include "core/token_store.hpp"

namespace kvreg {

class RecordSlab {
public:
    // Indices fit the index's 24 bits, minus the values it reserves.
    static constexpr uint32_t kMaxRecords = (1u << 24) - 2;
    // What a slab holds: the whole chunks of 256 records below kMaxRecords (make_chunk()).
    static constexpr uint32_t kCapacity = (kMaxRecords + 1) / 256 * 256;
    static constexpr uint32_t kFull = UINT32_MAX; // allocate(): kCapacity in use
    static constexpr uint32_t kNoTokens = TokenStore::kNone; // one sentinel, not two

    explicit RecordSlab(bool with_token_refs = false) : with_tokens_(with_token_refs) {}

    // A live record (the caller knows idx names one).
    Record &at(uint32_t idx) noexcept { return chunks_[idx >> kBits][idx & kMask]; }
    const Record &at(uint32_t idx) const noexcept { return chunks_[idx >> kBits][idx & kMask]; }
    // Any index (from an untrusted handle, or a scan): nullptr if no record is there now.
    Record *find(uint32_t idx) noexcept {
        const uint32_t c = idx >> kBits;
        return c < chunks_.size() && chunks_[c] ? &chunks_[c][idx & kMask] : nullptr;
    }
    const Record *find(uint32_t idx) const noexcept { return const_cast<RecordSlab *>(this)->find(idx); }
    // One past the highest index ever handed out.
    uint32_t capacity() const noexcept { return static_cast<uint32_t>(chunks_.size()) << kBits; }
    // Records in chunks currently allocated, and live records (for tests and statistics).
    uint64_t held() const noexcept { return uint64_t{held_chunks_} << kBits; }
    uint64_t live() const noexcept { return live_; }

    void enable_token_refs() noexcept { with_tokens_ = true; } // before the first allocate()
    void set_first_gen(uint32_t g) noexcept { first_gen_ = g; } // before the first allocate()
    uint32_t retired() const noexcept { return retired_; }
    void set_token_ref(uint32_t idx, uint32_t ref) noexcept { tok_chunks_[idx >> kBits][idx & kMask] = ref; }
    uint32_t token_ref(uint32_t idx) const noexcept {
        return with_tokens_ ? tok_chunks_[idx >> kBits][idx & kMask] : kNoTokens;
    }

    // Index of a free record (contents unspecified except gen), or kFull. Throws std::bad_alloc
    // (nothing changed).
    uint32_t allocate() {
        while (!avail_.empty()) {
            const uint32_t c = avail_.back();
            Info &in = info_[c];
            if (chunks_[c] && in.free != kNil) {
                const uint32_t idx = in.free - 1;
                in.free = at(idx).next;
                // The shard's next registration takes that record: start loading it now (a
                // miss otherwise, and the first thing that registration waits for).
                if (in.free != kNil) __builtin_prefetch(&at(in.free - 1), 1);
                in.live++;
                live_++;
                if (with_tokens_) set_token_ref(idx, kNoTokens);
                return idx;
            }
            in.on_avail = false;
            avail_.pop_back();
        }
        if (!make_chunk()) return kFull;
        return allocate();
    }

    // KVREG_OPT_RESERVE_BLOCKS: make chunks for `records` records and pin them: never given
    // back while the slab lives (registrations up to that many then neither allocate nor touch
    // a page for the first time), and findable without the shard lock (pinned_record). Once,
    // on an empty slab, before other threads can see it (kvreg_registry's constructor).
    // Throws std::bad_alloc; false when the slab cannot hold that many.
    bool reserve(uint64_t records) {
        if (records > kCapacity || !chunks_.empty()) return false; // before any chunk is made
        const uint32_t chunks = static_cast<uint32_t>((records + kChunk - 1) >> kBits);
        std::unique_ptr<Record *[]> dir(new Record *[chunks]);
        while (held_chunks_ < chunks)
            if (!make_chunk()) return false;
        for (uint32_t c = 0; c < chunks; c++) dir[c] = chunks_[c].get();
        // allocate() takes the chunk listed last first: list them lowest address last, so
        // records are handed out in the order (and the address order) they were made.
        std::reverse(avail_.begin(), avail_.end());
        pinned_ = std::move(dir);
        n_pinned_ = chunks;
        return true;
    }
    // Record idx if it lies in a pinned chunk, else nullptr. Callable without the shard lock:
    // a pinned chunk's memory stays for the slab's life, though the record in it may be freed
    // or reused meanwhile (read its fields only as hints, and atomically).
    const Record *pinned_record(uint32_t idx) const noexcept {
        const uint32_t c = idx >> kBits;
        return c < n_pinned_ ? &pinned_[c][idx & kMask] : nullptr;
    }

    // Blank record idx for reuse by its caller without returning it to a free list (a pool
    // keeps a few as spares, registry.hpp): every handle to it goes stale, as with release().
    // False when its generation would reach the limit: the caller must release() it instead
    // (which retires it).
    bool renew(uint32_t idx) noexcept {
        Record &r = at(idx);
        if (r.gen + 1u >= Record::kGenLimit) return false; // gen is a bit-field: 1u keeps it unsigned
        blank(idx);
        r.gen++;
        return true;
    }

    void release(uint32_t idx) noexcept {
        const uint32_t c = idx >> kBits;
        Info &in = info_[c];
        Record &r = at(idx);
        blank(idx);
        live_--;
        if (static_cast<uint32_t>(++r.gen) >= Record::kGenLimit) {
            retired_++; // never reused: see record.hpp; it keeps its chunk (live stays counted)
            in.has_retired = true;
            return;
        }
        r.next = in.free;
        in.free = idx + 1;
        in.live--;
        if (!in.on_avail) {
            in.on_avail = true;
            avail_.push_back(c); // capacity reserved when the chunk was first made
        }
        if (in.live == 0 && !in.has_retired && !in.on_empty) {
            in.on_empty = true;
            empty_.push_back(c); // reserved too
        }
        // Chunks that emptied before the live set got small are given back now, a couple per
        // release (amortised O(1)); a stale entry (the chunk was used again) is dropped.
        for (int k = 0; k < 2 && !empty_.empty() && shrink_wanted(); k++) {
            const uint32_t e = empty_.back();
            empty_.pop_back();
            info_[e].on_empty = false;
            if (chunks_[e] && info_[e].live == 0 && !info_[e].has_retired && e >= n_pinned_) give_back(e);
        }
    }

private:
    static constexpr uint32_t kBits = 8;
    static constexpr uint32_t kChunk = 1u << kBits;
    static constexpr uint32_t kMask = kChunk - 1;
    static_assert(kCapacity == (kMaxRecords + 1) / kChunk * kChunk, "kCapacity: whole chunks");
    static constexpr uint32_t kKeepChunks = 2; // never shrink below this many

    struct Info {
        uint32_t free = kNil;   // the chunk's free list (index + 1)
        uint32_t live = 0;      // records in use (retired ones included)
        uint32_t gen_base = 0;  // generation its records start at when (re)made
        bool on_avail = false;  // on avail_
        bool on_empty = false;  // on empty_
        bool has_retired = false;
    };

    // A freed record's fields (its generation is the caller's): no pool, no links, no tokens.
    void blank(uint32_t idx) noexcept {
        Record &r = at(idx);
        r.refcount = 0;
        r.pool = 0;
        r.flags = 0;
        r.next = kNil;
        if (with_tokens_) set_token_ref(idx, kNoTokens);
    }

    // v.reserve(n), growing geometrically: reserve(size + 1) would reallocate (and copy) the
    // vector on every new chunk, quadratic in a shard's chunks.
    template <typename V> static void room_for(V &v, size_t n) {
        if (v.capacity() < n) v.reserve(std::max(n, 2 * v.capacity()));
    }

    // Make one chunk of free records (a given-back one again, else a new one) and list it on
    // avail_. False when kCapacity are held; throws std::bad_alloc (nothing changed).
    bool make_chunk() {
        uint32_t c;
        if (!given_back_.empty()) {
            c = given_back_.back(); // made again below; popped once that cannot fail
        } else {
            if (capacity() + kChunk > kCapacity) return false;
            c = static_cast<uint32_t>(chunks_.size());
            // Room first, so that no push below can throw once memory is committed.
            room_for(chunks_, c + 1);
            room_for(info_, c + 1);
            if (with_tokens_) room_for(tok_chunks_, c + 1);
            room_for(avail_, c + 1);
            room_for(given_back_, c + 1);
            room_for(empty_, c + 1);
        }
        std::unique_ptr<Record[]> mem(new Record[kChunk]());
        std::unique_ptr<uint32_t[]> tok(with_tokens_ ? new uint32_t[kChunk] : nullptr);
        const uint32_t gen = c < info_.size() ? info_[c].gen_base : first_gen_;
        for (uint32_t i = 0; i < kChunk; i++) {
            mem[i].gen = gen;
            mem[i].next = i + 1 < kChunk ? (c << kBits) + i + 2 : kNil; // the chunk's free list
        }
        bool listed = false; // already on avail_ (a stale entry from before it was given back)
        if (c < info_.size()) {
            given_back_.pop_back();
            chunks_[c] = std::move(mem);
            if (with_tokens_) tok_chunks_[c] = std::move(tok);
            listed = info_[c].on_avail;
            const bool on_empty = info_[c].on_empty;
            info_[c] = Info{};
            info_[c].on_empty = on_empty; // its stale entry is still there
            info_[c].gen_base = gen;
        } else {
            chunks_.push_back(std::move(mem));
            if (with_tokens_) tok_chunks_.push_back(std::move(tok));
            info_.push_back(Info{});
            info_[c].gen_base = gen;
        }
        held_chunks_++;
        info_[c].free = (c << kBits) + 1;
        info_[c].on_avail = true;
        if (!listed) avail_.push_back(c); // reserved: each chunk is listed at most once
        return true;
    }

    bool shrink_wanted() const noexcept {
        return held_chunks_ > std::max(kKeepChunks, n_pinned_) && live_ * 4 < held();
    }

    void give_back(uint32_t c) noexcept {
        uint32_t next_gen = 0;
        for (uint32_t i = 0; i < kChunk; i++)
            if (static_cast<uint32_t>(chunks_[c][i].gen) > next_gen) next_gen = chunks_[c][i].gen;
        // Every record's gen was bumped when it was freed, so next_gen is above every handle
        // ever given out for this chunk. A chunk near the limit is never made again.
        chunks_[c].reset();
        if (with_tokens_) tok_chunks_[c].reset();
        info_[c].gen_base = next_gen;
        info_[c].free = kNil;
        held_chunks_--;
        if (next_gen < Record::kGenLimit - 1) given_back_.push_back(c); // reserved
        // (avail_ may still name c: allocate() skips chunks that are gone.)
    }

    bool with_tokens_;
    std::vector<std::unique_ptr<Record[]>> chunks_; // null: given back
    std::vector<std::unique_ptr<uint32_t[]>> tok_chunks_;
    std::vector<Info> info_;
    std::vector<uint32_t> avail_;      // chunks that may have a free record (most recent last)
    std::vector<uint32_t> given_back_; // chunks to make again before growing
    std::vector<uint32_t> empty_;      // chunks that may have no live record
    uint32_t held_chunks_ = 0;
    // reserve(): chunks [0, n_pinned_), never given back, and their addresses, constant once
    // other threads see the slab.
    std::unique_ptr<Record *[]> pinned_;
    uint32_t n_pinned_ = 0;
    uint64_t live_ = 0;
    uint32_t retired_ = 0;
    uint32_t first_gen_ = 0; // tests start generations near the limit
};

} // namespace kvreg
