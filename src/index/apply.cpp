// Applying a worker's event batches: sequence checks, engine -> router hashes, tiers.
#include <algorithm>
#include <climits>

#include "core/hash.hpp"
#include "index/counts.hpp"
#include "index/index.hpp"
#include "index/partition.hpp"

namespace kvreg::index {

namespace {

// Blocks of an event whose table lines are requested ahead of their update.
constexpr size_t kAhead = 4;

bool arrays_ok(const kvreg_wire_event &ev) noexcept {
    return (ev.block_hashes || ev.n_block_hashes == 0) && (ev.token_ids || ev.n_token_ids == 0);
}

} // namespace

uint64_t Index::chain(bool has_parent, uint64_t parent, const uint32_t *tokens) const noexcept {
    const uint64_t bh = block_hash(tokens, opt_.block_size, opt_.salt);
    if (!has_parent) return bh;
    return chain_hash(parent, bh, opt_.kv_router_profile ? KVREG_ROUTER_SALT : opt_.salt);
}

void Index::hash_tokens(const uint32_t *tokens, size_t n_tokens, std::vector<uint64_t> &out) const {
    const size_t n = n_tokens / opt_.block_size;
    out.resize(n);
    for (size_t i = 0; i < n; i++) out[i] = chain(i > 0, i ? out[i - 1] : 0, tokens + i * opt_.block_size);
}

Worker *Index::lock_worker(uint64_t id, uint32_t dp, bool add, bool *added, uint32_t *slot, bool loading) {
    for (;;) {
        bool fresh = false;
        const uint32_t s = add ? workers_.find_or_add(id, dp, &fresh, loading) : workers_.find(id, dp);
        if (s == UINT32_MAX) return nullptr;
        Worker &w = workers_.at(s);
        w.lock.lock();
        // A concurrent remove may have freed (and someone reused) the slot since the lookup.
        const WorkerIdent &who = workers_.ident(s);
        if (w.live && who.id.load(std::memory_order_relaxed) == id && who.dp.load(std::memory_order_relaxed) == dp) {
            *slot = workers_.tag(s);
            if (added) *added = fresh;
            return &w;
        }
        w.lock.unlock();
    }
}

uint32_t Index::part_index(Worker &w, uint64_t p) { return p == w.model ? 0 : w.loras.place(p); }

void Index::drop_entries(Worker &w, uint32_t slot, bool table_done) noexcept {
    if (opt_.own_hashes) {
        if (!table_done) table_.erase_slot(slot);
        return;
    }
    // Visit only this worker's entries (its mapping names them all), not the whole table.
    w.map.for_each([&](const EngineMap::Entry &e) {
        table_.update(key_of(e.router, part_of(w, e.part)), slot, [](uint32_t) { return 0u; });
    });
    mapped_.fetch_sub(w.map.size(), std::memory_order_relaxed);
    w.map.clear();
    w.overflow.clear();
    w.loras.clear();
}

void Index::apply_stored(Worker &w, uint32_t slot, const kvreg_wire_event &ev, kvreg_index_apply_info &info) {
    const unsigned tier = ev.medium;
    const size_t n = ev.n_block_hashes;
    if (opt_.own_hashes) {
        // OWN mode: the worker's partition only (an engine on libkvreg puts its adapter into
        // its own hashes).
        const uint64_t p = w.model;
        for (size_t j = 0; j < n && j < kAhead; j++) table_.prefetch(key_of(ev.block_hashes[j], p));
        for (size_t j = 0; j < n; j++) {
            if (j + kAhead < n) table_.prefetch(key_of(ev.block_hashes[j + kAhead], p));
            bool added = false;
            table_.update(key_of(ev.block_hashes[j], p), slot, [&](uint32_t c) {
                added = tier_byte(c, tier) == 0;
                return c | one(tier); // one copy per (hash, tier): the hash is the content
            });
            info.blocks_stored += added;
        }
        info.events_applied++;
        return;
    }
    const uint32_t bs = opt_.block_size;
    if ((ev.block_size != 0 && ev.block_size != bs) || n > SIZE_MAX / bs || ev.n_token_ids != n * bs) {
        info.events_skipped++;
        return;
    }
    bool has_parent = ev.has_parent != 0;
    uint64_t parent = 0;
    if (has_parent) {
        const EngineMap::Entry *p = w.map.find(ev.parent_block_hash);
        if (!p) { // the parent was never stored here (or is gone): the chain cannot be computed
            info.events_skipped++;
            return;
        }
        parent = p->router;
    }
    // The event's partition: the worker's model, and its LoRA adapter when it names one.
    const uint64_t p = lora_partition(w.model, ev.lora_name);
    const uint32_t pi = part_index(w, p); // may throw: nothing of this event applied yet
    // Held for the event: an entry of this partition erased below (its hash reused) must not
    // free the place the next insert puts its entry in; freed at the end if nothing is in it.
    struct Pin {
        LoraParts &l;
        uint32_t part;
        ~Pin() { l.unref(part); }
    } pin{w.loras, pi};
    w.loras.ref(pi);
    w.map.reserve(n); // may throw: nothing of this event applied yet
    // A block's router hash depends only on its parent's and its tokens, never on the index:
    // they are computed a window ahead, so that the mapping slot and the table line each block
    // reads (two cache misses in a big index) are requested kAhead blocks before they are used.
    uint64_t ahead[kAhead];
    const auto look_ahead = [&](size_t k) {
        const uint64_t h = chain(has_parent, parent, ev.token_ids + k * bs);
        ahead[k % kAhead] = h;
        has_parent = true;
        parent = h;
        w.map.prefetch(ev.block_hashes[k]);
        table_.prefetch(key_of(h, p));
    };
    for (size_t k = 0; k < n && k < kAhead; k++) look_ahead(k);
    for (size_t j = 0; j < n; j++) {
        const uint64_t rh = ahead[j % kAhead];
        if (j + kAhead < n) look_ahead(j + kAhead);
        EngineMap::Entry *e = w.map.find(ev.block_hashes[j]);
        if (e && (e->router != rh || e->part != pi)) {
            // The engine reuses the hash for other content: forget what it named before.
            const uint64_t old = key_of(e->router, part_of(w, e->part));
            for (unsigned t = 0; t < kTiers; t++)
                if (e->tiers & tier_bit(t)) count_down(table_, w, old, slot, t);
            w.loras.unref(e->part);
            w.map.erase(e);
            mapped_.fetch_sub(1, std::memory_order_relaxed);
            e = nullptr;
        }
        if (!e || !(e->tiers & tier_bit(tier))) {
            count_up(table_, w, key_of(rh, p), slot, tier); // may throw (nothing of this block changed)
            if (e) {
                e->tiers |= tier_bit(tier);
            } else {
                w.map.insert(ev.block_hashes[j], rh, tier_bit(tier), pi);
                w.loras.ref(pi);
                mapped_.fetch_add(1, std::memory_order_relaxed);
            }
            info.blocks_stored++;
        }
    }
    info.events_applied++;
}

void Index::apply_removed(Worker &w, uint32_t slot, const kvreg_wire_event &ev, kvreg_index_apply_info &info) {
    const unsigned tier = ev.medium;
    const size_t n = ev.n_block_hashes;
    const uint64_t p = w.model; // OWN mode
    for (size_t j = 0; opt_.own_hashes && j < n && j < kAhead; j++) table_.prefetch(key_of(ev.block_hashes[j], p));
    for (size_t j = 0; j < n; j++) {
        bool removed = false;
        if (opt_.own_hashes && j + kAhead < n) table_.prefetch(key_of(ev.block_hashes[j + kAhead], p));
        if (opt_.own_hashes) {
            table_.update(key_of(ev.block_hashes[j], p), slot, [&](uint32_t c) {
                removed = tier_byte(c, tier) != 0;
                return c & ~(0xffu << (8 * tier));
            });
        } else if (EngineMap::Entry *e = w.map.find(ev.block_hashes[j]); e && (e->tiers & tier_bit(tier))) {
            count_down(table_, w, key_of(e->router, part_of(w, e->part)), slot, tier);
            e->tiers &= ~tier_bit(tier);
            if (e->tiers == 0) {
                w.loras.unref(e->part);
                w.map.erase(e);
                mapped_.fetch_sub(1, std::memory_order_relaxed);
            }
            removed = true;
        }
        if (removed)
            info.blocks_removed++;
        else
            info.removes_unknown++;
    }
    info.events_applied++;
}

int Index::apply(uint64_t worker_id, uint32_t dp, uint64_t seq, const kvreg_wire_event *events, size_t n,
                 kvreg_index_apply_info &info) {
    info = kvreg_index_apply_info{};
    for (size_t i = 0; i < n; i++)
        if (!arrays_ok(events[i])) return KVREG_EINVAL;
    bool added = false;
    uint32_t slot = 0;
    Worker *w = lock_worker(worker_id, dp, true, &added, &slot);
    if (!w) return KVREG_EOVERFLOW;
    std::lock_guard<std::mutex> g(w->lock, std::adopt_lock);
    MapBytes track{*w, map_bytes_};
    if (added) info.flags |= KVREG_INDEX_F_NEW_WORKER;

    info.expected_seq = w->seq_known ? w->next_seq : KVREG_INDEX_SEQ_NONE;
    if (seq != KVREG_INDEX_SEQ_NONE && w->seq_known && seq != w->next_seq) {
        if (seq > w->next_seq) {
            info.flags |= KVREG_INDEX_F_GAP;
        } else if (seq == 0) {
            info.flags |= KVREG_INDEX_F_RESET;
            drop_entries(*w, slot);
        } else {
            info.flags |= KVREG_INDEX_F_STALE | KVREG_INDEX_F_SKIPPED;
            info.events_skipped = n;
            skipped_.fetch_add(n, std::memory_order_relaxed);
            gaps_.fetch_add(1, std::memory_order_relaxed);
            return KVREG_OK;
        }
        gaps_.fetch_add(1, std::memory_order_relaxed);
    }

    int rc = KVREG_OK;
    try {
        for (size_t i = 0; i < n; i++) {
            const kvreg_wire_event &ev = events[i];
            const bool known_tier = ev.medium < kTiers;
            if (ev.type == KVREG_WIRE_STORED && known_tier) {
                if (i + 1 < n && !opt_.own_hashes && w->map.size()) // the next event's first mapping slots
                    for (size_t j = 0; j < events[i + 1].n_block_hashes && j < kAhead; j++)
                        w->map.prefetch(events[i + 1].block_hashes[j]);
                apply_stored(*w, slot, ev, info);
            } else if (ev.type == KVREG_WIRE_REMOVED && known_tier) {
                apply_removed(*w, slot, ev, info);
            } else if (ev.type == KVREG_WIRE_CLEARED) {
                drop_entries(*w, slot);
                info.flags |= KVREG_INDEX_F_CLEARED;
                info.events_applied++;
            } else {
                info.events_skipped++;
            }
        }
    } catch (const std::bad_alloc &) {
        rc = KVREG_ENOMEM;
    }
    if (info.events_skipped) info.flags |= KVREG_INDEX_F_SKIPPED;
    applied_.fetch_add(info.events_applied, std::memory_order_relaxed);
    skipped_.fetch_add(info.events_skipped, std::memory_order_relaxed);
    if (rc == KVREG_OK && seq != KVREG_INDEX_SEQ_NONE) {
        // After the highest seq a batch can carry (SEQ_NONE - 1) the next one cannot be named:
        // any seq is the start again, as after clear_worker(SEQ_NONE).
        w->seq_known = seq + 1 != KVREG_INDEX_SEQ_NONE;
        w->next_seq = w->seq_known ? seq + 1 : 0;
    }
    return rc;
}

int Index::clear_worker(uint64_t worker_id, uint32_t dp, uint64_t next_seq) {
    uint32_t slot = 0;
    Worker *w = lock_worker(worker_id, dp, true, nullptr, &slot);
    if (!w) return KVREG_EOVERFLOW;
    std::lock_guard<std::mutex> g(w->lock, std::adopt_lock);
    MapBytes track{*w, map_bytes_};
    drop_entries(*w, slot);
    w->seq_known = next_seq != KVREG_INDEX_SEQ_NONE;
    w->next_seq = w->seq_known ? next_seq : 0;
    return KVREG_OK;
}

int Index::set_partition(uint64_t worker_id, uint32_t dp, uint64_t partition) {
    uint32_t slot = 0;
    Worker *w = lock_worker(worker_id, dp, true, nullptr, &slot);
    if (!w) return KVREG_EOVERFLOW;
    std::lock_guard<std::mutex> g(w->lock, std::adopt_lock);
    if (w->model == partition) return KVREG_OK;
    MapBytes track{*w, map_bytes_};
    drop_entries(*w, slot); // keyed under the old partition
    w->model = partition;
    return KVREG_OK;
}

int Index::remove_worker(uint64_t worker_id, uint32_t dp) { return remove_worker(worker_id, dp, false); }

int Index::remove_worker(uint64_t worker_id, uint32_t dp, bool table_done) {
    uint32_t slot = 0;
    Worker *w = lock_worker(worker_id, dp, false, nullptr, &slot);
    if (!w) return KVREG_ENOENT;
    std::lock_guard<std::mutex> g(w->lock, std::adopt_lock);
    MapBytes track{*w, map_bytes_};
    drop_entries(*w, slot, table_done);
    w->live = false;
    workers_.release(worker_id, dp, slot_of(slot));
    return KVREG_OK;
}

void Index::remove_workers(const std::vector<std::pair<uint64_t, uint32_t>> &ws) noexcept {
    if (opt_.own_hashes && ws.size() > 1) {
        try {
            std::vector<uint32_t> slots;
            slots.reserve(ws.size());
            for (const auto &[id, dp] : ws) {
                uint32_t slot = 0;
                if (Worker *w = lock_worker(id, dp, false, nullptr, &slot)) {
                    // Out of dumps from now on (as while it loaded): its entries go below
                    // without its lock, and a dump meanwhile showed it with part of them.
                    w->loading = true;
                    w->lock.unlock();
                    slots.push_back(slot);
                }
            }
            std::sort(slots.begin(), slots.end());
            // The entries first, then the workers: a slot is never free while entries name it.
            table_.erase_slots([&](uint32_t s) { return std::binary_search(slots.begin(), slots.end(), s); });
            for (const auto &[id, dp] : ws) remove_worker(id, dp, true);
            return;
        } catch (...) { // no memory for the list: one at a time, which needs none
        }
    }
    for (const auto &[id, dp] : ws) remove_worker(id, dp, false);
}

uint64_t Index::stat(uint32_t which, bool *known) const noexcept {
    *known = true;
    switch (which) {
    case KVREG_INDEX_STAT_ENTRIES: return table_.entries();
    case KVREG_INDEX_STAT_WORKERS: return workers_.count();
    case KVREG_INDEX_STAT_MEMORY_BYTES:
    case KVREG_INDEX_STAT_BYTES_PER_ENTRY: {
        const uint64_t maps = map_bytes_.load(std::memory_order_relaxed);
        const uint64_t mem = table_.bytes() + workers_.bytes() + maps + map_arena_.bytes() + sizeof(*this);
        if (which == KVREG_INDEX_STAT_MEMORY_BYTES) return mem;
        const uint64_t n = table_.entries();
        return n ? (mem + n / 2) / n : 0;
    }
    case KVREG_INDEX_STAT_MAPPED_HASHES: return mapped_.load(std::memory_order_relaxed);
    case KVREG_INDEX_STAT_EVENTS_APPLIED: return applied_.load(std::memory_order_relaxed);
    case KVREG_INDEX_STAT_EVENTS_SKIPPED: return skipped_.load(std::memory_order_relaxed);
    case KVREG_INDEX_STAT_GAPS: return gaps_.load(std::memory_order_relaxed);
    case KVREG_INDEX_STAT_BLOCKS: return blocks();
    default: *known = false; return 0;
    }
}

} // namespace kvreg::index
