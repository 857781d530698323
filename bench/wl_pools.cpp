// Workload `many_pools` (kvreg-only): what a hash held by many pools costs one thread. P pools
// (--pools, default 16) each register the same S sequences (one kvreg_register_batch per
// sequence), try one more registration of every block (all KVREG_EEXIST), then release them
// pool by pool in an order that takes chain heads, middles and ends (one kvreg_release_batch
// per sequence). The same run is done with 2 pools first; pools_ratio is the cost per
// operation at P pools over the cost at 2. A membership chain that is walked makes the cost
// grow with P (each registration and release visits the other pools' records); with links to
// both neighbours and a member filter in the head (src/core/record.hpp) registration and release
// stay flat up to 14 pools (their filter bits all differ); re-registering a held block
// (EEXIST) walks to the pool's record at any P.
#include "bench.hpp"

#include <algorithm>

namespace bench {

namespace {

struct PoolsRun {
    size_t pools = 0;
    uint64_t registered = 0, exists = 0, released = 0;
    double reg_s = 0, exists_s = 0, rel_s = 0;
    EventCounts c;
    bool empty = false;
    uint64_t ops() const { return registered + exists + released; }
    double secs() const { return reg_s + exists_s + rel_s; }
    double ns_per_op() const { return per_block_ns(secs(), ops()); }
};

PoolsRun run(const Opts &o, const SeqSet &set, size_t n_pools) {
    PoolsRun r;
    r.pools = n_pools;
    const size_t per = set.per_seq, n = set.descs.size();
    Harness h(o, false);
    std::vector<kvreg_pool *> pools;
    for (size_t i = 0; i < n_pools; i++) pools.push_back(h.new_pool("P"));
    std::vector<std::vector<kvreg_block>> handles(n_pools, std::vector<kvreg_block>(n, KVREG_BLOCK_NONE));
    std::vector<kvreg_block> scratch(per);
    std::vector<int> status(per);

    double t = now_s();
    for (size_t p = 0; p < n_pools; p++)
        for (size_t s = 0; s < set.n_seqs; s++)
            r.registered += register_seq(pools[p], set, s, handles[p].data() + s * per, nullptr);
    r.reg_s = now_s() - t;

    t = now_s();
    for (size_t p = 0; p < n_pools; p++)
        for (size_t s = 0; s < set.n_seqs; s++) {
            register_seq(pools[p], set, s, scratch.data(), status.data());
            r.exists += static_cast<uint64_t>(std::count(status.begin(), status.end(), KVREG_EEXIST));
        }
    r.exists_s = now_s() - t;

    // Pools leave in the order 1, 0, 3, 2, 5, 4 ...: members join right after the head, so
    // every chain reads 0, P-1, ..., 2, 1; the first to go holds the ends of every chain, the
    // second the heads (the first registrant), the rest members in the middle.
    t = now_s();
    for (size_t k = 0; k < n_pools; k++) {
        const size_t p = (k ^ 1) < n_pools ? (k ^ 1) : k;
        for (size_t s = 0; s < set.n_seqs; s++) r.released += release_all(pools[p], handles[p].data() + s * per, per);
    }
    r.rel_s = now_s() - t;
    double drain_s = 0;
    r.empty = drained(h, pools, true, drain_s);
    r.c = h.counts();
    return r;
}

} // namespace

std::string wl_many_pools(const Opts &o, bool &ok) {
    const size_t s = o.seqs_or(2000), l = o.len_or(512);
    const size_t n_pools = std::max<size_t>(o.pools, 2);
    const SeqSet set = gen_random(o, s, l);
    const auto [nd, dsum] = distinct_hashes(set);

    const PoolsRun two = run(o, set, 2);
    const PoolsRun many = run(o, set, n_pools);
    // Same input as register_release at the same flags, so the peer's checksum applies.
    ok = set.ref_ok && nd == set.descs.size() && checksum_expected(o, "many_pools", set.checksum);
    for (const PoolsRun *r : {&two, &many})
        ok &= r->registered == r->pools * nd && r->exists == r->pools * nd && r->released == r->pools * nd &&
              r->empty && events_match(r->c, nd, dsum);

    JsonLine j;
    head(j, "many_pools", many.ops(), many.secs(), many.c);
    j.u("seqs", s)
        .u("len", l)
        .u("block", o.block)
        .u("blocks", nd)
        .u("pools", n_pools)
        .f("register_ns_per_block", per_block_ns(many.reg_s, many.registered))
        .f("exists_ns_per_block", per_block_ns(many.exists_s, many.exists))
        .f("release_ns_per_block", per_block_ns(many.rel_s, many.released))
        .f("two_pools_ns_per_op", two.ns_per_op())
        .f("two_register_ns_per_block", per_block_ns(two.reg_s, two.registered))
        .f("two_exists_ns_per_block", per_block_ns(two.exists_s, two.exists))
        .f("two_release_ns_per_block", per_block_ns(two.rel_s, two.released))
        .f("pools_ratio", many.ns_per_op() / two.ns_per_op())
        .hex("hash_checksum", set.checksum)
        .b("verified", ok);
    return j.finish();
}

} // namespace bench
