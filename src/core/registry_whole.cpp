// Operations on the whole registry at one point of the event stream: kvreg_registry_clear and
// kvreg_registry_snapshot. Both take every shard lock, in index order, so nobody is between
// taking an event id and publishing it (ids are only taken under a shard lock, see
// event_log.hpp): the Cleared event's id, or the snapshot's position, is a clean cut.
#include "core/registry.hpp"

using kvreg::Record;
using kvreg::Shard;

void kvreg_registry::lock_all() noexcept {
    for (uint32_t i = 0; i < nshards_; i++) shards_[i].mu.lock();
}

void kvreg_registry::unlock_all() noexcept {
    for (uint32_t i = nshards_; i-- > 0;) shards_[i].mu.unlock();
}

void kvreg_registry::lock_all_with_pools(std::vector<kvreg_pool *> &slots) {
    for (;;) {
        {
            std::lock_guard<std::mutex> lk(pools_mu_);
            slots.clear();
            for (const auto &p : pools_) slots.push_back(p.get()); // may throw: no shard lock yet
        }
        lock_all();
        // A pool made after the copy and before the locks may own records already: copy again.
        // One made after this check has none until we let go (registering takes a shard lock).
        if (n_slots_.load(std::memory_order_acquire) == slots.size()) return;
        unlock_all();
    }
}

void kvreg_registry::wipe(Shard &s) noexcept {
    // Releasing a record bumps its generation (or retires the slot), so every handle to it is
    // stale for good, exactly as after kvreg_release. Chunks left empty are given back.
    const uint32_t cap = s.slab.capacity();
    for (uint32_t idx = 0; idx < cap; idx++) {
        const Record *r = s.slab.find(idx);
        if (r && r->refcount != 0) s.slab.release(idx);
    }
    s.index.clear();
    s.tokens = kvreg::TokenStore(); // every stored token, with its chunks
}

int kvreg_registry::clear() noexcept {
    kvreg::EventBatch batch(log);
    std::vector<kvreg_pool *> slots;
    for (;;) {
        try {
            lock_all_with_pools(slots);
        } catch (...) {
            return KVREG_ENOMEM; // nothing changed
        }
        if (!batch.take_credit()) {
            // The ring is full: wait (or, inside a callback, spill) with no lock held.
            unlock_all();
            if (!batch.wait_credit()) return KVREG_ENOMEM;
            continue;
        }
        batch.add(KVREG_EVENT_CLEARED, 0, 0, 0, 0, 0, false, nullptr, 0);
        for (kvreg_pool *p : slots) {
            for (uint32_t sn = 0; sn < nshards_; sn++) {
                p->shard[sn].first = kvreg::kNil;
                p->shard[sn].count.store(0, std::memory_order_relaxed);
            }
        }
        for (uint32_t sn = 0; sn < nshards_; sn++) wipe(shards_[sn]);
        unlock_all();
        return KVREG_OK; // the batch delivers the Cleared event on the way out
    }
}

void kvreg_registry::snapshot(kvreg::EventCopies &out, uint64_t *position) {
    out.clear();
    std::vector<kvreg_pool *> slots;
    lock_all_with_pools(slots);
    try {
        copy_heads(out, position);
    } catch (...) {
        unlock_all();
        throw;
    }
    unlock_all();
}

void kvreg_registry::copy_heads(kvreg::EventCopies &out, uint64_t *position) {
    // Every id below this was taken (and its state change made) under a shard lock we now
    // hold after its owner let go; every later id will be taken after we let go.
    *position = log.stat_next_id();
    uint64_t n = 0;
    for (uint32_t sn = 0; sn < nshards_; sn++) n += shards_[sn].index.size();
    out.reserve(static_cast<size_t>(n));
    for (uint32_t sn = 0; sn < nshards_; sn++) {
        Shard &s = shards_[sn];
        const uint32_t cap = s.slab.capacity();
        for (uint32_t idx = 0; idx < cap; idx++) {
            const Record *r = s.slab.find(idx);
            if (!r || r->refcount == 0 || !(r->flags & Record::kHead)) continue;
            kvreg_event e{};
            e.kind = KVREG_EVENT_REGISTER;
            e.pool_id = r->pool; // the chain's head: a pool holding it
            // Global mode: the medium of the hash's Register, which its Remove will carry.
            e.medium = r->event_tier;
            e.event_id = KVREG_EVENT_ID_SNAPSHOT;
            e.sequence_hash = r->seq;
            e.block_hash = r->block;
            e.has_parent = (r->flags & Record::kHasParent) ? 1 : 0;
            e.parent_sequence_hash = e.has_parent ? r->parent : 0;
            const uint32_t tref = s.slab.token_ref(idx);
            if (tref != kvreg::RecordSlab::kNoTokens && s.tokens.size(tref) != 0) {
                e.n_tokens = s.tokens.size(tref);
                e.tokens = s.tokens.tokens(tref);
            }
            if (!per_tier_) {
                out.push(e); // copies the tokens
                continue;
            }
            // Per-tier mode: one Register per medium the hash is held on, from its first
            // member there, as the live stream would have sent it.
            uint32_t seen = 0;
            for (uint32_t link = idx + 1; link != kvreg::kNil;) {
                const Record &m = s.slab.at(link - 1);
                if (!(seen & (1u << m.tier))) {
                    seen |= 1u << m.tier;
                    e.pool_id = m.pool;
                    e.medium = m.tier;
                    out.push(e);
                }
                link = m.next;
            }
        }
    }
}
