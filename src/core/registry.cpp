#include "core/registry.hpp"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

using kvreg::Record;
using kvreg::Shard;

namespace {

constexpr uint32_t kNotFound = UINT32_MAX;

// Handle layout before the per-pool XOR: gen:27 | parity:1 | shard:12 | idx:24. The parity bit
// makes every raw value's popcount even and every pool key's popcount is odd, so a handle is
// never 0 and any single flipped bit is rejected outright. The generation (with retired slots,
// see record.hpp) makes a stale handle never match a later block of the same slot; a random
// value passes the parity, shard, index, pool and 27-bit generation checks with odds far
// below 2^-24.
constexpr unsigned kShardShift = 24, kParityShift = 36, kGenShift = 37;
constexpr uint64_t kIdxMask = (uint64_t{1} << 24) - 1, kShardMask = 0xFFF;

uint32_t log2_exact(uint32_t v) {
    uint32_t b = 0;
    while ((1u << b) < v) b++;
    return b;
}

} // namespace

kvreg_registry::kvreg_registry(const kvreg::Options &opt)
    : log(opt.poll_mode, opt.poll_capacity, opt.callback), keep_tokens_(opt.keep_tokens),
      per_tier_(opt.per_tier_events) {
    settings = opt;
    settings.callback = kvreg::CallbackRef(); // the log holds the callback's one reference
    shard_bits_ = log2_exact(opt.shards);
    nshards_ = 1u << shard_bits_;
    shards_.reset(new Shard[nshards_]);
    for (uint32_t i = 0; i < nshards_; i++) {
        if (keep_tokens_) shards_[i].slab.enable_token_refs();
        shards_[i].slab.set_first_gen(opt.first_gen < Record::kGenLimit ? opt.first_gen : 0);
    }
    if (opt.reserve_blocks) reserve(opt.reserve_blocks);
    // Distinguishes this registry's handles from another's; not a secret, just a spread.
    const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    nonce_ = kvreg::mix(reinterpret_cast<uintptr_t>(this) ^ kvreg::mix(now));
}

kvreg_registry::~kvreg_registry() = default;

void kvreg_registry::reserve(uint64_t blocks) {
    // Hashes fall into shards at random: a shard's share of `blocks` is binomial, so each gets
    // its mean plus six standard deviations (and a little), enough that no shard of any
    // registry should run out before the total does (one shard in about 10^9 would).
    const double mean = static_cast<double>(blocks) / nshards_;
    const uint64_t per = nshards_ == 1 ? blocks : static_cast<uint64_t>(mean + 6.0 * std::sqrt(mean) + 16.0);
    if (per > kvreg::RecordSlab::kCapacity) throw std::length_error("reserve_blocks"); // more than a shard holds
    for (uint32_t i = 0; i < nshards_; i++) {
        Shard &s = shards_[i];
        if (!s.slab.reserve(per)) throw std::length_error("reserve_blocks"); // pins: see prefetch_release()
        s.index.reserve(static_cast<uint32_t>(per), s.slab, kvreg::mix);
    }
    pinned_ = true;
}

// ---------------------------------------------------------------------------------- pools

int kvreg_registry::pool_new(const char *name, uint32_t medium, kvreg_pool **out) {
    std::lock_guard<std::mutex> lk(pools_mu_);
    // A freed slot is reused only once kFreshPools slots exist (or all ids are taken), least
    // recently freed first, so a stale pointer to a freed pool stays ESTALE for a long time
    // while an engine that churns pools does not grow without bound.
    constexpr size_t kFreshPools = 1024;
    kvreg_pool *p = pools_.size() >= kFreshPools || pools_.size() >= KVREG_MAX_POOLS ? free_head_ : nullptr;
    // Everything that may throw comes first: nothing visible has changed yet (an interned
    // name is harmless).
    const std::string *nm = &*names_.emplace(name ? name : "").first;
    if (!p) {
        if (pools_.size() >= KVREG_MAX_POOLS) return KVREG_EOVERFLOW;
        if (pools_.size() == pools_.capacity()) pools_.reserve(2 * pools_.size() + 16); // amortised
        std::unique_ptr<kvreg_pool> fresh(new kvreg_pool());
        fresh->shard.reset(new kvreg_pool::PerShard[nshards_]());
        fresh->reg = this;
        fresh->id = static_cast<uint16_t>(pools_.size() + 1);
        p = fresh.get();
        pools_.push_back(std::move(fresh));
        n_slots_.store(pools_.size(), std::memory_order_release);
    } else {
        free_head_ = p->next_free;
        if (!free_head_) free_tail_ = nullptr;
        p->next_free = nullptr;
    }
    p->name.store(nm, std::memory_order_relaxed);
    p->medium.store(medium, std::memory_order_relaxed);
    p->incarnation++;
    uint64_t key = kvreg::mix(nonce_ ^ (uint64_t{p->id} << 32) ^ kvreg::mix(p->incarnation));
    if ((std::popcount(key) & 1) == 0) key ^= 1; // odd: see the handle layout
    p->key.store(key, std::memory_order_relaxed);
    p->live.store(true, std::memory_order_release);
    live_pools_++;
    *out = p;
    return KVREG_OK;
}

void kvreg_registry::pool_free(kvreg_pool *p) noexcept {
    if (!p->live.exchange(false, std::memory_order_acq_rel)) return; // already retired
    // Every registration that checked `live` under a shard lock before we cleared it finished
    // before we take that shard lock below, so the walk sees all of the pool's records. It
    // visits only this pool's records (its per-shard lists), and like any call it takes a
    // ring credit per Remove, waiting for one with no lock held when the ring is full.
    kvreg::EventBatch batch(log, 64);
    bool lose_events = false; // a nested call out of memory: Removes are only counted
    for (uint32_t sn = 0; sn < nshards_; sn++) {
        Shard &s = shards_[sn];
        for (;;) {
            std::unique_lock<kvreg::ShardLock> lk(s.mu);
            bool need_credit = false;
            while (p->shard[sn].first != kvreg::kNil) {
                const uint32_t idx = p->shard[sn].first - 1;
                Record &r = s.slab.at(idx);
                uint32_t head = idx;
                const bool emits = emits_remove(s, idx, &head);
                if (emits) (void)batch.reserve_tokens(token_count(s, head)); // else: no tokens
                if (emits && !lose_events && !batch.take_credit()) {
                    need_credit = true;
                    break;
                }
                r.refcount = 0;
                unlink(s, sn, idx, p, emits, head, lose_events ? nullptr : &batch);
            }
            if (!need_credit) {
                // The pool's spares go back to the slab: a freed pool holds no memory, and
                // its slot starts empty when a new pool gets it.
                for (uint32_t idx; (idx = pop_spare(s, p->shard[sn])) != kNotFound;) s.slab.release(idx);
                break;
            }
            lk.unlock();
            if (!batch.wait_credit()) lose_events = true;
        }
    }
    batch.flush();
    std::lock_guard<std::mutex> lk(pools_mu_);
    if (free_tail_)
        free_tail_->next_free = p;
    else
        free_head_ = p;
    free_tail_ = p;
    live_pools_--;
}

uint64_t kvreg_registry::pool_size(const kvreg_pool *p) const noexcept {
    uint64_t n = 0;
    for (uint32_t i = 0; i < nshards_; i++) n += p->shard[i].count.load(std::memory_order_relaxed);
    return n;
}

uint64_t kvreg_registry::live_pools() const noexcept {
    std::lock_guard<std::mutex> lk(pools_mu_);
    return live_pools_;
}

// -------------------------------------------------------------------------------- handles

kvreg_block kvreg_registry::encode(const kvreg_pool *p, uint32_t shard, uint32_t idx, uint32_t gen) const noexcept {
    uint64_t raw = (uint64_t{gen} << kGenShift) | (uint64_t{shard} << kShardShift) | idx;
    if (std::popcount(raw) & 1) raw |= uint64_t{1} << kParityShift;
    return raw ^ p->key.load(std::memory_order_relaxed);
}

bool kvreg_registry::decode(const kvreg_pool *p, kvreg_block b, Decoded *d) const noexcept {
    const uint64_t raw = b ^ p->key.load(std::memory_order_relaxed);
    if (std::popcount(raw) & 1) return false; // a flipped bit, or not ours
    d->shard = static_cast<uint32_t>((raw >> kShardShift) & kShardMask);
    d->idx = static_cast<uint32_t>(raw & kIdxMask);
    d->gen = static_cast<uint32_t>(raw >> kGenShift);
    return d->shard < nshards_;
}

Record *kvreg_registry::live_record(const kvreg_pool *p, Shard &s, const Decoded &d) noexcept {
    if (!p->live.load(std::memory_order_acquire)) return nullptr;
    Record *r = s.slab.find(d.idx);
    if (!r || r->refcount == 0 || r->gen != d.gen || r->pool != p->id) return nullptr;
    return r;
}

// Always inlined: register_block's EEXIST check is its hottest caller, and GCC put it out of
// line once the walk grew.
[[gnu::always_inline]] inline uint32_t kvreg_registry::chain_find(Shard &s, uint32_t head, uint16_t pool) noexcept {
    Record &h = s.slab.at(head);
    if (!(h.flags & Record::member_bit(pool))) return kNotFound;
    if (h.pool == pool) return head;
    // Maybe a member: walk until found. A walk that finds nothing has read the whole chain, so
    // it rebuilds the filter: a stale bit costs one walk. A member that is not the head keeps
    // its own bit in its flags (record.hpp), so the walk only ORs them up.
    uint16_t seen = Record::member_bit(h.pool);
    for (uint32_t link = h.next; link != kvreg::kNil;) {
        const Record &r = s.slab.at(link - 1);
        if (r.pool == pool) return link - 1;
        seen |= r.flags;
        link = r.next;
    }
    h.flags = static_cast<uint16_t>((h.flags & ~Record::kMembers) | seen); // the bit that sent us here was stale
    return kNotFound;
}

uint32_t kvreg_registry::find_member(Shard &s, uint64_t seq, uint64_t mixed, uint16_t pool) noexcept {
    const uint32_t head = s.index.find(seq, mixed, s.slab);
    return head == kNotFound ? kNotFound : chain_find(s, head, pool);
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
    const uint64_t m = kvreg::mix(d.sequence_hash);
    const uint32_t sn = shard_of(m);
    Shard &s = shards_[sn];
    const uint32_t medium = p->medium.load(std::memory_order_relaxed); // fixed while p is live
    for (;;) {
        std::unique_lock<kvreg::ShardLock> lk(s.mu);
        if (!p->live.load(std::memory_order_acquire)) return KVREG_ESTALE;
        uint32_t free_pos = kNotFound;
        const uint32_t head = s.index.find(d.sequence_hash, m, s.slab, nullptr, &free_pos);
        const bool first_anywhere = head == kNotFound;
        if (!first_anywhere && chain_find(s, head, p->id) != kNotFound) return KVREG_EEXIST;
        // A Register: the hash is new, or (per-tier mode) new on this pool's medium.
        const bool emits = first_anywhere || (per_tier_ && !chain_has_tier(s, head, medium));
        // A new tier's Register carries the caller's tokens, else the stored ones.
        const uint32_t *ev_tokens = d.tokens;
        uint32_t ev_nt = static_cast<uint32_t>(d.n_tokens);
        if (!first_anywhere && emits && ev_nt == 0) {
            const uint32_t tref = s.slab.token_ref(head);
            if (tref != kvreg::RecordSlab::kNoTokens) {
                ev_tokens = s.tokens.tokens(tref);
                ev_nt = s.tokens.size(tref);
            }
        }
        if (emits && !batch.reserve_tokens(ev_nt)) return KVREG_ENOMEM;
        if (emits && !batch.take_credit()) {
            // A Register must go out and the ring is full: wait with no lock held, then redo
            // the lookup (the hash may have changed meanwhile).
            lk.unlock();
            if (!batch.wait_credit()) return KVREG_ENOMEM;
            continue;
        }

        // Everything that can throw or fail happens before the first visible change.
        if (first_anywhere && s.index.reserve_one(s.slab, kvreg::mix)) free_pos = kNotFound;
        const uint32_t idx = take_record(s, sn, p);
        if (idx == kvreg::RecordSlab::kFull) return KVREG_EOVERFLOW;
        const uint32_t nt = static_cast<uint32_t>(d.n_tokens);
        if (first_anywhere && keep_tokens_ && nt) {
            try {
                s.slab.set_token_ref(idx, s.tokens.store(d.tokens, nt));
            } catch (...) {
                free_record(s, sn, p, idx);
                throw;
            }
        }
        // Nothing fails from here on: take the event id before our stores (see take_id()).
        const uint64_t event_id = emits ? batch.take_id() : 0;
        Record &r = s.slab.at(idx);
        // Atomic (relaxed, a plain store on x86): prefetch_release() reads it without the lock.
        __atomic_store_n(&r.seq, d.sequence_hash, __ATOMIC_RELAXED);
        r.refcount = 1;
        r.pool = p->id;
        // Read in the per-tier mode only: the global mode's registrations skip the store (a
        // read-modify-write of the word gen shares). kvreg_pool_new_medium checked medium < 4.
        if (per_tier_) r.tier = medium & 3u;
        // Onto the front of the pool's list in this shard.
        set_pool_prev(r, kvreg::kNil);
        r.pool_next = p->shard[sn].first;
        if (r.pool_next != kvreg::kNil) set_pool_prev(s.slab.at(r.pool_next - 1), idx + 1);
        p->shard[sn].first = idx + 1;
        // The handle is out before the Register can reach a callback on another thread.
        *out = encode(p, sn, idx, r.gen);

        if (first_anywhere) {
            r.block = d.block_hash;
            r.next = kvreg::kNil;
            r.parent = d.has_parent ? d.parent_sequence_hash : 0;
            r.flags = static_cast<uint16_t>(Record::kHead | (d.has_parent ? Record::kHasParent : 0) |
                                            Record::member_bit(p->id));
            r.event_tier = medium & 3u; // the global mode's Remove carries it (record.hpp)
            batch.add_as(event_id, KVREG_EVENT_REGISTER, p->id, medium, r.seq, r.block, r.parent, d.has_parent != 0,
                         d.tokens, nt);
            if (free_pos != kNotFound)
                s.index.insert_at(free_pos, m, idx);
            else
                s.index.insert(m, idx); // the table was (re)built since the lookup
        } else {
            // Another pool holds it: shared, no event. In right after the head (record.hpp).
            Record &h = s.slab.at(head);
            r.flags = Record::member_bit(p->id); // its own bit: a walk rebuilding the filter reads it
            r.block = h.block; // the hash's, as its Register said: every member keeps it
            r.chain_prev = head + 1;
            r.next = h.next;
            if (h.next != kvreg::kNil) s.slab.at(h.next - 1).chain_prev = idx + 1;
            h.next = idx + 1;
            h.flags |= Record::member_bit(p->id);
            if (emits) { // per-tier mode: the hash's first pool on this medium
                const bool hp = (h.flags & Record::kHasParent) != 0;
                batch.add_as(event_id, KVREG_EVENT_REGISTER, p->id, medium, r.seq, h.block, hp ? h.parent : 0, hp,
                             ev_tokens, ev_nt);
            }
        }
        std::atomic<uint32_t> &count = p->shard[sn].count;
        count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return KVREG_OK;
    }
}

int kvreg_registry::acquire(kvreg_pool *p, uint64_t seq, kvreg_block *out) noexcept {
    const uint64_t m = kvreg::mix(seq);
    const uint32_t sn = shard_of(m);
    Shard &s = shards_[sn];
    std::lock_guard<kvreg::ShardLock> lk(s.mu);
    if (!p->live.load(std::memory_order_acquire)) return KVREG_ESTALE;
    const uint32_t i = find_member(s, seq, m, p->id);
    if (i == kNotFound) return KVREG_ENOENT;
    Record &r = s.slab.at(i);
    if (r.refcount == UINT32_MAX) return KVREG_EOVERFLOW;
    r.refcount++;
    *out = encode(p, sn, i, r.gen);
    return KVREG_OK;
}

int kvreg_registry::release(kvreg_pool *p, kvreg_block b, kvreg::EventBatch &batch) noexcept {
    Decoded d;
    if (!decode(p, b, &d)) return KVREG_ESTALE;
    Shard &s = shards_[d.shard];
    for (;;) {
        std::unique_lock<kvreg::ShardLock> lk(s.mu);
        Record *r = live_record(p, s, d);
        if (!r) return KVREG_ESTALE;
        if (r->refcount > 1) {
            r->refcount--;
            return KVREG_OK;
        }
        uint32_t head = d.idx;
        const bool emits = emits_remove(s, d.idx, &head);
        if (emits && !batch.reserve_tokens(token_count(s, head))) return KVREG_ENOMEM;
        if (emits && !batch.take_credit()) {
            lk.unlock();
            if (!batch.wait_credit()) return KVREG_ENOMEM; // nothing changed
            continue;
        }
        r->refcount = 0;
        unlink(s, d.shard, d.idx, p, emits, head, &batch);
        return KVREG_OK;
    }
}

bool kvreg_registry::chain_has_tier(Shard &s, uint32_t head, uint32_t tier) noexcept {
    for (uint32_t link = head + 1; link != kvreg::kNil;) {
        const Record &m = s.slab.at(link - 1);
        if (m.tier == tier) return true;
        link = m.next;
    }
    return false;
}

bool kvreg_registry::tier_shared(Shard &s, uint32_t idx, uint32_t *head) noexcept {
    const Record &r = s.slab.at(idx);
    bool shared = false;
    uint32_t h = idx;
    while (!(s.slab.at(h).flags & Record::kHead)) { // back to the head (it has no chain_prev)
        h = s.slab.at(h).chain_prev - 1;
        shared |= s.slab.at(h).tier == r.tier;
    }
    *head = h;
    for (uint32_t link = r.next; link != kvreg::kNil && !shared;) {
        const Record &m = s.slab.at(link - 1);
        shared = m.tier == r.tier;
        link = m.next;
    }
    return shared;
}

void kvreg_registry::unlink(Shard &s, uint32_t sn, uint32_t idx, kvreg_pool *p, bool emits, uint32_t head,
                            kvreg::EventBatch *batch) noexcept {
    Record &r = s.slab.at(idx);
    if (emits) {
        // Global mode: the hash leaves its last pool (head == idx), and the Remove carries the
        // medium its Register carried. Per-tier mode: it leaves its last pool on r's medium.
        const Record &h = s.slab.at(head);
        const uint32_t tref = s.slab.token_ref(head);
        const bool has_tok = tref != kvreg::RecordSlab::kNoTokens;
        if (batch)
            batch->add(KVREG_EVENT_REMOVE, p->id, per_tier_ ? r.tier : h.event_tier, r.seq, r.block, h.parent,
                       (h.flags & Record::kHasParent) != 0, has_tok ? s.tokens.tokens(tref) : nullptr,
                       has_tok ? s.tokens.size(tref) : 0);
        else
            log.count_lost();
    }
    // Off the pool's list.
    if (r.pool_prev != kvreg::kNil)
        s.slab.at(r.pool_prev - 1).pool_next = r.pool_next;
    else
        p->shard[sn].first = r.pool_next;
    if (r.pool_next != kvreg::kNil) set_pool_prev(s.slab.at(r.pool_next - 1), r.pool_prev);
    // Off the hash's chain: a member other than the head is unlinked between its neighbours;
    // the head hands the hash's fields to the next member, or the hash goes (a Remove).
    if (r.flags & Record::kHead) {
        uint32_t pos = 0;
        s.index.find(r.seq, kvreg::mix(r.seq), s.slab, &pos); // the head is in the index
        const uint32_t tref = s.slab.token_ref(idx);
        if (r.next == kvreg::kNil) {
            // The hash leaves its last pool (its Remove went out above).
            if (tref != kvreg::RecordSlab::kNoTokens) s.tokens.release(tref);
            s.index.erase_at(pos);
            s.index.maybe_shrink(s.slab, kvreg::mix); // give memory back after a large drop
        } else {
            // Another pool still holds it: the next membership becomes the head and inherits
            // the stored tokens.
            const uint32_t nh = r.next - 1;
            Record &n = s.slab.at(nh);
            n.flags = r.flags;   // head, parent and the filter, which has n's own bit
            n.parent = r.parent; // was its chain_prev (this record): a head has none
            n.event_tier = r.event_tier; // the medium of the hash's Register (global mode)
            if (keep_tokens_) s.slab.set_token_ref(nh, tref);
            s.index.replace_at(pos, nh);
        }
    } else {
        s.slab.at(r.chain_prev - 1).next = r.next;
        if (r.next != kvreg::kNil) s.slab.at(r.next - 1).chain_prev = r.chain_prev;
    }
    free_record(s, sn, p, idx);
    std::atomic<uint32_t> &count = p->shard[sn].count;
    count.store(count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

uint32_t kvreg_registry::pop_spare(Shard &s, kvreg_pool::PerShard &ps) noexcept {
    if (ps.spare == kvreg::kNil) return kNotFound;
    const uint32_t idx = ps.spare - 1;
    ps.spare = s.slab.at(idx).next;
    ps.n_spare--;
    return idx;
}

uint32_t kvreg_registry::take_record(Shard &s, uint32_t sn, kvreg_pool *p) {
    const uint32_t idx = pop_spare(s, p->shard[sn]);
    return idx != kNotFound ? idx : s.slab.allocate();
}

void kvreg_registry::free_record(Shard &s, uint32_t sn, kvreg_pool *p, uint32_t idx) noexcept {
    kvreg_pool::PerShard &ps = p->shard[sn];
    if (ps.n_spare < kvreg_pool::kSpares && s.slab.renew(idx)) {
        s.slab.at(idx).next = ps.spare;
        ps.spare = idx + 1;
        ps.n_spare++;
    } else {
        s.slab.release(idx);
    }
}

// -------------------------------------------------------------------------------- queries

int kvreg_registry::pool_contains(const kvreg_pool *p, uint64_t seq) noexcept {
    const uint64_t m = kvreg::mix(seq);
    Shard &s = shards_[shard_of(m)];
    std::lock_guard<kvreg::ShardLock> lk(s.mu);
    if (!p->live.load(std::memory_order_acquire)) return KVREG_ESTALE;
    return find_member(s, seq, m, p->id) != kNotFound ? 1 : 0;
}

bool kvreg_registry::contains(uint64_t seq) noexcept {
    const uint64_t m = kvreg::mix(seq);
    Shard &s = shards_[shard_of(m)];
    std::lock_guard<kvreg::ShardLock> lk(s.mu);
    return s.index.find(seq, m, s.slab) != kNotFound;
}

// Run fn(shard, record) on the live record behind handle b, under its shard lock.
template <typename F>
int kvreg_registry::with_live(const kvreg_pool *p, kvreg_block b, F fn) noexcept {
    Decoded d;
    if (!decode(p, b, &d)) return KVREG_ESTALE;
    Shard &s = shards_[d.shard];
    std::lock_guard<kvreg::ShardLock> lk(s.mu);
    const Record *r = live_record(p, s, d);
    return r ? fn(s, *r) : KVREG_ESTALE;
}

int kvreg_registry::block_info(const kvreg_pool *p, kvreg_block b, kvreg_block_info *out) noexcept {
    return with_live(p, b, [out](Shard &s, const Record &r) {
        // The hash's parent is kept in its head only (record.hpp); every member has its block.
        const Record &h = s.slab.at(head_of(s, r));
        out->block_hash = r.block;
        out->sequence_hash = r.seq;
        out->has_parent = (h.flags & Record::kHasParent) ? 1 : 0;
        out->parent_sequence_hash = out->has_parent ? h.parent : 0;
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
        const uint32_t ref = s.slab.token_ref(head_of(s, r));
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
        std::lock_guard<kvreg::ShardLock> lk(shards[i].mu);
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
