// Workloads register_release, two_pools and shared_prefix: one thread, one kvreg_register_batch
// per sequence (where the seed uses one Publisher per sequence) and one kvreg_release_batch per
// sequence (where the seed drops the sequence's block states).
#include "bench.hpp"

namespace bench {

namespace {

struct Pass {
    double reg_s = 0, rel_s = 0, drain_s = 0;
    uint64_t registered = 0, released = 0, live_pool = 0;
    EventCounts after_register;
    bool drained = false;
};

Pass register_release_pass(const Harness &h, kvreg_pool *pool, const SeqSet &set, std::vector<kvreg_block> &handles) {
    Pass p;
    double t = now_s();
    for (size_t s = 0; s < set.n_seqs; s++)
        p.registered += register_seq(pool, set, s, handles.data() + s * set.per_seq, nullptr);
    p.reg_s = now_s() - t;
    p.live_pool = kvreg_pool_size(pool);
    p.after_register = h.counts();
    t = now_s();
    for (size_t s = 0; s < set.n_seqs; s++)
        p.released += release_all(pool, handles.data() + s * set.per_seq, set.per_seq);
    p.rel_s = now_s() - t;
    p.drained = drained(h, {pool}, true, p.drain_s);
    return p;
}

} // namespace

std::string wl_register_release(const Opts &o, bool &ok) {
    const size_t s = o.seqs_or(20000), l = o.len_or(512);
    const SeqSet set = gen_random(o, s, l);
    const uint64_t nblocks = set.descs.size();
    const auto [nd, dsum] = distinct_hashes(set);
    std::vector<kvreg_block> handles(nblocks, KVREG_BLOCK_NONE);

    Harness h(o, false, nblocks);
    kvreg_pool *pool = h.new_pool("G1");

    // Pass 1 (cold: fresh heap, table growing from empty) is the reported result.
    const Pass p1 = register_release_pass(h, pool, set, handles);
    const EventCounts c1 = h.counts();
    // Single-threaded, a kvreg_register_batch call is one callback when it has at most
    // KVREG_EVENTS_PER_CALL events, else chunks of at most that many (kvreg.h).
    const uint64_t chunks = (set.per_seq + KVREG_EVENTS_PER_CALL - 1) / KVREG_EVENTS_PER_CALL;
    const bool batches_ok = chunks <= 1 ? p1.after_register.register_batches == (nblocks ? s : 0)
                                        : p1.after_register.register_batches >= s * chunks;
    ok = set.ref_ok && nd == nblocks && p1.registered == nblocks && p1.released == nblocks &&
         p1.after_register.registers == nblocks && p1.after_register.removes == 0 &&
         batches_ok && p1.live_pool == nblocks &&
         events_match(c1, nblocks, dsum) && p1.drained;

    // Pass 2 (warm: same pool and inputs, the registry's memory is reused).
    Pass p2;
    if (o.warm) {
        p2 = register_release_pass(h, pool, set, handles);
        const EventCounts c2 = h.counts();
        ok &= p2.registered == nblocks && p2.released == nblocks && c2.registers == 2 * nblocks &&
              c2.removes == 2 * nblocks && p2.drained;
    }
    ok &= checksum_expected(o, "register_release", set.checksum);

    const uint64_t ops = 2 * p1.registered;
    const double secs = p1.reg_s + p1.rel_s + p1.drain_s;
    JsonLine j;
    head(j, "register_release", ops, secs, c1);
    j.u("seqs", s)
        .u("len", l)
        .u("block", o.block)
        .u("blocks", nblocks)
        .f("register_s", p1.reg_s)
        .f("release_s", p1.rel_s)
        .f("drain_s", p1.drain_s)
        .f("register_ns_per_block", per_block_ns(p1.reg_s, nblocks))
        .f("release_ns_per_block", per_block_ns(p1.rel_s + p1.drain_s, nblocks))
        .u("register_batches", c1.register_batches);
    if (o.warm) {
        const double secs2 = p2.reg_s + p2.rel_s + p2.drain_s;
        j.f("warm_seconds", secs2)
            .f("warm_ns_per_op", per_block_ns(secs2, 2 * p2.registered))
            .f("warm_register_ns_per_block", per_block_ns(p2.reg_s, nblocks))
            .f("warm_release_ns_per_block", per_block_ns(p2.rel_s + p2.drain_s, nblocks))
            .f("warm_drain_s", p2.drain_s);
    }
    j.hex("hash_checksum", set.checksum).b("verified", ok);
    h.finish(j);
    return j.finish();
}

std::string wl_two_pools(const Opts &o, bool &ok) {
    const size_t s = o.seqs_or(20000), l = o.len_or(512);
    const SeqSet set = gen_random(o, s, l);
    const uint64_t nblocks = set.descs.size();
    const auto [nd, dsum] = distinct_hashes(set);
    const size_t per = set.per_seq;
    std::vector<kvreg_block> ha(nblocks, KVREG_BLOCK_NONE), hb(nblocks, KVREG_BLOCK_NONE);

    Harness h(o, false, 2 * nblocks);
    kvreg_pool *pa = h.new_pool("G1");
    kvreg_pool *pb = h.new_pool("G2");
    uint64_t reg_a = 0, reg_b = 0, rel_a = 0, rel_b = 0;

    double t = now_s();
    for (size_t i = 0; i < s; i++) reg_a += register_seq(pa, set, i, ha.data() + i * per, nullptr);
    const double reg_a_s = now_s() - t;
    const uint64_t new_a = h.counts().registers;
    t = now_s();
    for (size_t i = 0; i < s; i++) reg_b += register_seq(pb, set, i, hb.data() + i * per, nullptr);
    const double reg_b_s = now_s() - t;
    // B's registrations are shared through the global registry: no Register event for them.
    const uint64_t shared_b = reg_b - (h.counts().registers - new_a);

    t = now_s();
    for (size_t i = 0; i < s; i++) rel_a += release_all(pa, ha.data() + i * per, per);
    const double rel_a_s = now_s() - t;
    double drain_a_s = 0, drain_b_s = 0;
    const bool a_empty = drained(h, {pa}, false, drain_a_s);
    const uint64_t removes_after_a = h.counts().removes;
    const uint64_t global_after_a = h.stat(KVREG_STAT_HASHES);

    t = now_s();
    for (size_t i = 0; i < s; i++) rel_b += release_all(pb, hb.data() + i * per, per);
    const double rel_b_s = now_s() - t;
    const bool all_empty = drained(h, {pa, pb}, true, drain_b_s);

    const EventCounts c = h.counts();
    ok = set.ref_ok && reg_a == nd && new_a == nd && reg_b == nd && shared_b == nd && rel_a == nd &&
         rel_b == nd && removes_after_a == 0 && global_after_a == nd && a_empty && all_empty &&
         events_match(c, nd, dsum) && checksum_expected(o, "two_pools", set.checksum);

    const uint64_t ops = 2 * (reg_a + reg_b);
    const double secs = reg_a_s + reg_b_s + rel_a_s + drain_a_s + rel_b_s + drain_b_s;
    JsonLine j;
    head(j, "two_pools", ops, secs, c);
    j.u("seqs", s)
        .u("len", l)
        .u("block", o.block)
        .u("blocks", nblocks)
        .u("distinct", nd)
        .f("register_a_s", reg_a_s)
        .f("register_b_s", reg_b_s)
        .f("release_a_s", rel_a_s)
        .f("drain_a_s", drain_a_s)
        .f("release_b_s", rel_b_s)
        .f("drain_b_s", drain_b_s)
        .u("shared_hits_b", shared_b)
        .u("removes_after_a", removes_after_a)
        .hex("hash_checksum", set.checksum)
        .b("verified", ok);
    h.finish(j);
    return j.finish();
}

std::string wl_shared_prefix(const Opts &o, bool &ok) {
    const size_t s = o.seqs_or(20000), l = o.len_or(512);
    const size_t p = o.prefix < l ? o.prefix : l;
    const SeqSet set = gen_prefixed(o, s, l, p, 1);
    const uint64_t nblocks = set.descs.size();
    const auto [nd, dsum] = distinct_hashes(set);
    const size_t per = set.per_seq;

    // Handles of the blocks each sequence actually registered, packed, with per-sequence ends.
    std::vector<kvreg_block> held(nblocks), tmp(per);
    std::vector<int> status(per);
    std::vector<size_t> ends(s);

    Harness h(o, false, nblocks);
    kvreg_pool *pool = h.new_pool("G1");
    uint64_t attempts = 0, registered = 0, dups = 0, other = 0, released = 0;

    double t = now_s();
    size_t n_held = 0;
    for (size_t i = 0; i < s; i++) {
        registered += register_seq(pool, set, i, tmp.data(), status.data());
        attempts += per;
        for (size_t k = 0; k < per; k++) {
            if (status[k] == KVREG_OK)
                held[n_held++] = tmp[k];
            else if (status[k] == KVREG_EEXIST) // prefix block already live in this pool
                dups++;
            else
                other++;
        }
        ends[i] = n_held;
    }
    const double reg_s = now_s() - t;

    t = now_s();
    for (size_t i = 0, begin = 0; i < s; begin = ends[i], i++)
        released += release_all(pool, held.data() + begin, ends[i] - begin);
    const double rel_s = now_s() - t;
    double drain_s = 0;
    const bool empty = drained(h, {pool}, true, drain_s);

    const EventCounts c = h.counts();
    ok = set.ref_ok && attempts == nblocks && registered == nd && n_held == nd && dups == nblocks - nd &&
         other == 0 && released == nd && empty && events_match(c, nd, dsum) &&
         checksum_expected(o, "shared_prefix", set.checksum);

    const uint64_t ops = attempts + registered;
    const double secs = reg_s + rel_s + drain_s;
    JsonLine j;
    head(j, "shared_prefix", ops, secs, c);
    j.u("seqs", s)
        .u("len", l)
        .u("prefix", p)
        .u("block", o.block)
        .u("attempts", attempts)
        .u("registered", registered)
        .u("dedup_hits", dups)
        .f("dedup_ratio", static_cast<double>(dups) / static_cast<double>(attempts ? attempts : 1))
        .f("register_s", reg_s)
        .f("release_s", rel_s)
        .f("drain_s", drain_s)
        .f("register_ns_per_attempt", per_block_ns(reg_s, attempts))
        .hex("hash_checksum", set.checksum)
        .b("verified", ok);
    h.finish(j);
    return j.finish();
}

} // namespace bench
