#include "registry.hpp"

#include <chrono>
#include <cstring>
#include <new>

using kvreg::Record;
using kvreg::Shard;

namespace {

constexpr uint32_t kNotFound = UINT32_MAX;

// Handle layout before the per-pool XOR: gen:16 | pool:8 | marker:4 | shard:12 | idx:24.
constexpr uint64_t kMarker = 0xA;

uint32_t log2_exact(uint32_t v) {
    uint32_t b = 0;
    while ((1u << b) < v) b++;
    return b;
}

} // namespace

kvreg_registry::kvreg_registry(const kvreg::Options &opt)
    : log(opt.poll_mode, opt.poll_capacity), keep_tokens_(opt.keep_tokens) {
    shard_bits_ = log2_exact(opt.shards);
    nshards_ = 1u << shard_bits_;
    shards_.reset(new Shard[nshards_]);
    if (keep_tokens_)
        for (uint32_t i = 0; i < nshards_; i++) shards_[i].slab.enable_token_refs();
    for (uint32_t i = 0; i < KVREG_MAX_POOLS; i++) free_ids_[i] = static_cast<uint8_t>(i + 1);
    free_count_ = KVREG_MAX_POOLS;
    // Distinguishes this registry's handles from another's; not a secret, just a spread.
    const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    nonce_ = kvreg::mix(reinterpret_cast<uintptr_t>(this) ^ kvreg::mix(now)) | 1;
    log.set_initial_fn(opt.fn, opt.ud, opt.destroy); // last: from here on we own user_data
}

kvreg_registry::~kvreg_registry() = default;

// ---------------------------------------------------------------------------------- pools

int kvreg_registry::pool_new(const char *name, kvreg_pool **out) {
    std::lock_guard<std::mutex> lk(pools_mu_);
    if (free_count_ == 0) return KVREG_EOVERFLOW;
    const uint8_t id = free_ids_[free_head_];
    std::unique_ptr<kvreg_pool> &slot = pools_[id];
    // Both may throw: nothing visible has changed yet (an interned name is harmless).
    const std::string *nm = &*names_.emplace(name ? name : "").first;
    if (!slot) {
        slot.reset(new kvreg_pool());
        slot->reg = this;
        slot->id = id;
    }
    kvreg_pool *p = slot.get();
    free_head_ = (free_head_ + 1) % KVREG_MAX_POOLS;
    free_count_--;
    p->name.store(nm, std::memory_order_relaxed);
    p->incarnation++;
    p->key.store(kvreg::mix(nonce_ ^ (uint64_t{id} << 32) ^ kvreg::mix(p->incarnation)),
                 std::memory_order_relaxed);
    p->size.store(0, std::memory_order_relaxed);
    p->live.store(true, std::memory_order_release);
    live_pools_++;
    *out = p;
    return KVREG_OK;
}

void kvreg_registry::pool_free(kvreg_pool *p) noexcept {
    if (!p->live.exchange(false, std::memory_order_acq_rel)) return; // already retired
    // Every registration that checked `live` under a shard lock before we cleared it finished
    // before we take that shard lock below, so the sweep sees all of the pool's records.
    // The sweep takes as many records per lock hold as the batch has room for events, and
    // delivers in between (never while holding a lock).
    kvreg::EventBatch batch(log);
    for (uint32_t sn = 0; sn < nshards_; sn++) {
        Shard &s = shards_[sn];
        uint32_t idx = 0;
        for (;;) {
            const bool has_room = batch.make_room();
            std::lock_guard<std::mutex> lk(s.mu);
            const uint32_t n = s.slab.capacity();
            for (; idx < n; idx++) {
                Record &r = s.slab.at(idx);
                if (r.refcount == 0 || r.pool != p->id) continue;
                if (has_room && batch.room() == 0) break;
                r.refcount = 0;
                unlink(s, idx, p->id, true, has_room ? &batch : nullptr);
            }
            if (idx >= n) break;
        }
    }
    batch.flush();
    p->size.store(0, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lk(pools_mu_);
    free_ids_[(free_head_ + free_count_) % KVREG_MAX_POOLS] = p->id;
    free_count_++;
    live_pools_--;
}

uint64_t kvreg_registry::live_pools() const noexcept {
    std::lock_guard<std::mutex> lk(pools_mu_);
    return live_pools_;
}

// -------------------------------------------------------------------------------- handles

kvreg_block kvreg_registry::encode(const kvreg_pool *p, uint32_t shard, uint32_t idx, uint16_t gen) const noexcept {
    const uint64_t raw = (uint64_t{gen} << 48) | (uint64_t{p->id} << 40) | (kMarker << 36) |
                         (uint64_t{shard} << 24) | idx;
    return raw ^ p->key.load(std::memory_order_relaxed);
}

bool kvreg_registry::decode(const kvreg_pool *p, kvreg_block b, Decoded *d) const noexcept {
    const uint64_t raw = b ^ p->key.load(std::memory_order_relaxed);
    if (((raw >> 36) & 0xF) != kMarker || ((raw >> 40) & 0xFF) != p->id) return false;
    d->shard = static_cast<uint32_t>((raw >> 24) & 0xFFF);
    d->idx = static_cast<uint32_t>(raw & 0xFFFFFF);
    d->gen = static_cast<uint16_t>(raw >> 48);
    return d->shard < nshards_;
}

Record *kvreg_registry::live_record(const kvreg_pool *p, Shard &s, const Decoded &d) noexcept {
    if (!p->live.load(std::memory_order_acquire) || d.idx >= s.slab.capacity()) return nullptr;
    Record &r = s.slab.at(d.idx);
    if (r.refcount == 0 || r.gen != d.gen || r.pool != p->id) return nullptr;
    return &r;
}

uint32_t kvreg_registry::find_member(Shard &s, uint64_t seq, uint64_t mixed, uint8_t pool) noexcept {
    for (uint32_t i = s.index.find(seq, mixed, s.slab); i != kNotFound;) {
        const Record &r = s.slab.at(i);
        if (r.pool == pool) return i;
        i = r.next == kvreg::kNil ? kNotFound : r.next - 1;
    }
    return kNotFound;
}

// --------------------------------------------------------------------------- registration

int kvreg_registry::register_block(kvreg_pool *p, const kvreg_block_desc &d, kvreg_block *out,
                                   kvreg::EventBatch &batch) {
    if (d.n_tokens > 0 && !d.tokens) return KVREG_EINVAL;
    if (d.n_tokens > UINT32_MAX) return KVREG_EINVAL;
    if (d.block_size != 0 && d.n_tokens != 0) {
        if (d.n_tokens < d.block_size) return KVREG_ESTATE; // a partial block never registers
        if (d.n_tokens > d.block_size) return KVREG_EINVAL;
    }
    batch.prepare(1); // before the lock: it may deliver earlier events of this call
    const uint64_t m = kvreg::mix(d.sequence_hash);
    const uint32_t sn = shard_of(m);
    Shard &s = shards_[sn];
    std::lock_guard<std::mutex> lk(s.mu);
    if (!p->live.load(std::memory_order_acquire)) return KVREG_ESTALE;
    uint32_t free_pos = kNotFound;
    const uint32_t head = s.index.find(d.sequence_hash, m, s.slab, nullptr, &free_pos);
    uint32_t last = kNotFound;
    for (uint32_t i = head; i != kNotFound;) {
        const Record &r = s.slab.at(i);
        if (r.pool == p->id) return KVREG_EEXIST;
        last = i;
        i = r.next == kvreg::kNil ? kNotFound : r.next - 1;
    }

    // Everything that can throw happens before the first visible change.
    if (head == kNotFound && s.index.reserve_one(s.slab, kvreg::mix)) free_pos = kNotFound;
    const uint32_t idx = s.slab.allocate();
    Record &r = s.slab.at(idx);
    r.seq = d.sequence_hash;
    r.block = d.block_hash;
    r.parent = d.has_parent ? d.parent_sequence_hash : 0;
    r.flags = d.has_parent ? Record::kHasParent : 0;
    r.refcount = 1;
    r.next = kvreg::kNil;
    r.pool = p->id;

    if (head == kNotFound) {
        const uint32_t nt = static_cast<uint32_t>(d.n_tokens);
        try {
            if (keep_tokens_ && nt) s.slab.set_token_ref(idx, s.tokens.store(d.tokens, nt));
            // The caller's tokens outlive the call's delivery: no copy (except when nested).
            batch.add(KVREG_EVENT_REGISTER, p->id, r.seq, r.block, r.parent, d.has_parent != 0,
                      d.tokens, nt, false);
        } catch (...) {
            if (s.slab.token_ref(idx) != kvreg::RecordSlab::kNoTokens) s.tokens.release(s.slab.token_ref(idx));
            s.slab.release(idx);
            throw;
        }
        r.flags |= Record::kHead;
        if (free_pos != kNotFound)
            s.index.insert_at(free_pos, m, idx);
        else
            s.index.insert(m, idx); // the table was (re)built since the lookup
    } else {
        s.slab.at(last).next = idx + 1; // another pool holds it: shared, no event
    }
    p->size.fetch_add(1, std::memory_order_relaxed);
    *out = encode(p, sn, idx, r.gen);
    return KVREG_OK;
}

int kvreg_registry::acquire(kvreg_pool *p, uint64_t seq, kvreg_block *out) noexcept {
    const uint64_t m = kvreg::mix(seq);
    const uint32_t sn = shard_of(m);
    Shard &s = shards_[sn];
    std::lock_guard<std::mutex> lk(s.mu);
    if (!p->live.load(std::memory_order_acquire)) return KVREG_ESTALE;
    const uint32_t i = find_member(s, seq, m, p->id);
    if (i == kNotFound) return KVREG_ENOENT;
    Record &r = s.slab.at(i);
    if (r.refcount == UINT32_MAX) return KVREG_EOVERFLOW;
    r.refcount++;
    *out = encode(p, sn, i, r.gen);
    return KVREG_OK;
}

int kvreg_registry::release(kvreg_pool *p, kvreg_block b, kvreg::EventBatch &batch) {
    Decoded d;
    if (!decode(p, b, &d)) return KVREG_ESTALE;
    batch.prepare(1);
    Shard &s = shards_[d.shard];
    std::lock_guard<std::mutex> lk(s.mu);
    Record *r = live_record(p, s, d);
    if (!r) return KVREG_ESTALE;
    if (r->refcount > 1) {
        r->refcount--;
        return KVREG_OK;
    }
    r->refcount = 0;
    try {
        unlink(s, d.idx, p->id, false, &batch);
    } catch (...) {
        r->refcount = 1; // the Remove could not be queued: nothing changed
        throw;
    }
    return KVREG_OK;
}

void kvreg_registry::unlink(Shard &s, uint32_t idx, uint8_t pool_id, bool must_succeed,
                            kvreg::EventBatch *batch) {
    Record &r = s.slab.at(idx);
    if (r.flags & Record::kHead) {
        uint32_t pos = 0;
        s.index.find(r.seq, kvreg::mix(r.seq), s.slab, &pos); // the head is in the index
        const uint32_t tref = s.slab.token_ref(idx);
        if (r.next == kvreg::kNil) {
            // The hash leaves its last pool: Remove. The event is recorded before the state
            // changes, so a failure to record it leaves everything as it was.
            const bool has_tok = tref != kvreg::RecordSlab::kNoTokens;
            const uint32_t *tok = has_tok ? s.tokens.tokens(tref) : nullptr;
            const uint32_t nt = has_tok ? s.tokens.size(tref) : 0;
            const bool hp = (r.flags & Record::kHasParent) != 0;
            if (!batch) {
                log.count_lost(); // see unlink's contract
            } else if (!must_succeed) {
                // stored tokens are freed below: the event gets a copy
                batch->add(KVREG_EVENT_REMOVE, pool_id, r.seq, r.block, r.parent, hp, tok, nt, true);
            } else {
                try {
                    batch->add(KVREG_EVENT_REMOVE, pool_id, r.seq, r.block, r.parent, hp, tok, nt, true);
                } catch (...) {
                    batch->add(KVREG_EVENT_REMOVE, pool_id, r.seq, r.block, r.parent, hp, nullptr, 0, false);
                }
            }
            if (has_tok) s.tokens.release(tref);
            s.index.erase_at(pos);
        } else {
            // Another pool still holds it: the next membership becomes the head and inherits
            // the stored tokens.
            const uint32_t nh = r.next - 1;
            s.slab.at(nh).flags |= Record::kHead;
            if (keep_tokens_) s.slab.set_token_ref(nh, tref);
            s.index.replace_at(pos, nh);
        }
    } else {
        uint32_t prev = s.index.find(r.seq, kvreg::mix(r.seq), s.slab);
        while (s.slab.at(prev).next != idx + 1) prev = s.slab.at(prev).next - 1;
        s.slab.at(prev).next = r.next;
    }
    s.slab.release(idx);
    pools_[pool_id]->size.fetch_sub(1, std::memory_order_relaxed);
}

// -------------------------------------------------------------------------------- queries

int kvreg_registry::pool_contains(const kvreg_pool *p, uint64_t seq) noexcept {
    const uint64_t m = kvreg::mix(seq);
    Shard &s = shards_[shard_of(m)];
    std::lock_guard<std::mutex> lk(s.mu);
    if (!p->live.load(std::memory_order_acquire)) return KVREG_ESTALE;
    return find_member(s, seq, m, p->id) != kNotFound ? 1 : 0;
}

bool kvreg_registry::contains(uint64_t seq) noexcept {
    const uint64_t m = kvreg::mix(seq);
    Shard &s = shards_[shard_of(m)];
    std::lock_guard<std::mutex> lk(s.mu);
    return s.index.find(seq, m, s.slab) != kNotFound;
}

// Run fn(shard, record) on the live record behind handle b, under its shard lock.
template <typename F>
int kvreg_registry::with_live(const kvreg_pool *p, kvreg_block b, F fn) noexcept {
    Decoded d;
    if (!decode(p, b, &d)) return KVREG_ESTALE;
    Shard &s = shards_[d.shard];
    std::lock_guard<std::mutex> lk(s.mu);
    const Record *r = live_record(p, s, d);
    return r ? fn(s, *r) : KVREG_ESTALE;
}

int kvreg_registry::block_info(const kvreg_pool *p, kvreg_block b, kvreg_block_info *out) noexcept {
    return with_live(p, b, [out](Shard &, const Record &r) {
        out->block_hash = r.block;
        out->sequence_hash = r.seq;
        out->has_parent = (r.flags & Record::kHasParent) ? 1 : 0;
        out->parent_sequence_hash = out->has_parent ? r.parent : 0;
        out->position = KVREG_POSITION_UNKNOWN;
        return KVREG_OK;
    });
}

int kvreg_registry::block_refcount(const kvreg_pool *p, kvreg_block b, uint32_t *out) noexcept {
    return with_live(p, b, [out](Shard &, const Record &r) {
        *out = r.refcount;
        return KVREG_OK;
    });
}

int kvreg_registry::block_tokens(const kvreg_pool *p, kvreg_block b, uint32_t *out, size_t cap,
                                 size_t *n) noexcept {
    return with_live(p, b, [out, cap, n](Shard &s, const Record &r) {
        // Tokens belong to the hash: the chain's head holds them for every pool.
        const uint32_t ref = s.slab.token_ref(s.index.find(r.seq, kvreg::mix(r.seq), s.slab));
        if (ref == kvreg::RecordSlab::kNoTokens) return KVREG_ENOENT;
        const uint32_t nt = s.tokens.size(ref);
        *n = nt;
        if (cap < nt) return KVREG_ERANGE;
        if (nt) std::memcpy(out, s.tokens.tokens(ref), size_t{nt} * sizeof(uint32_t));
        return KVREG_OK;
    });
}

// Sum a per-shard quantity, each shard read under its lock (a consistent value per shard).
template <typename F> static uint64_t sum_shards(Shard *shards, uint32_t n, F per_shard) noexcept {
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        std::lock_guard<std::mutex> lk(shards[i].mu);
        total += per_shard(shards[i]);
    }
    return total;
}

uint64_t kvreg_registry::hash_count() noexcept {
    return sum_shards(shards_.get(), nshards_, [](const Shard &s) { return uint64_t{s.index.size()}; });
}

uint64_t kvreg_registry::token_bytes() noexcept {
    return sum_shards(shards_.get(), nshards_, [](const Shard &s) { return s.tokens.bytes(); });
}
