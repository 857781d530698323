// Workload `hold` (and `hold_tokens`): register N blocks and keep them, to measure what the
// registry costs per held block in resident memory. Snapshots (VmRSS): base (registry created)
// -> built (every input array allocated and touched) -> held (all registered), so
// registry_bytes_per_block = (held - built) / N counts only the registry's own memory.
// hold_tokens runs with KVREG_OPT_KEEP_TOKENS = 1 and then registers the same blocks in a second
// pool, to show the tokens are stored once per hash, not once per pool.
#include "bench.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace bench {

namespace {

double kb_per_block(uint64_t hi_kb, uint64_t lo_kb, uint64_t n) {
    return hi_kb > lo_kb ? static_cast<double>(hi_kb - lo_kb) * 1024.0 / static_cast<double>(n) : 0.0;
}

// Register descs[0..n) in chunks of `per` (one batch per sequence); returns how many registered.
uint64_t register_chunks(kvreg_pool *pool, const kvreg_block_desc *d, kvreg_block *h, size_t n, size_t per) {
    uint64_t reg = 0;
    for (size_t i = 0; i < n; i += per) {
        size_t got = 0;
        check_rc(kvreg_register_batch(pool, d + i, std::min(per, n - i), h + i, nullptr, &got), "kvreg_register_batch");
        reg += got;
    }
    return reg;
}

uint64_t release_chunks(kvreg_pool *pool, const kvreg_block *h, size_t n, size_t per) {
    uint64_t rel = 0;
    for (size_t i = 0; i < n; i += per) rel += release_all(pool, h + i, std::min(per, n - i));
    return rel;
}

// Every hash is held: kvreg_pool_match over each sequence's hashes matches all of them.
bool all_held(const kvreg_pool *pool, const std::vector<uint64_t> &hashes, size_t per) {
    for (size_t i = 0; i < hashes.size(); i += per) {
        const size_t want = std::min(per, hashes.size() - i);
        size_t got = 0;
        if (kvreg_pool_match(pool, hashes.data() + i, want, &got) != KVREG_OK || got != want) return false;
    }
    return true;
}

} // namespace

std::string wl_hold(const Opts &o, bool keep_tokens, bool &ok) {
    const char *name = keep_tokens ? "hold_tokens" : "hold";
    const size_t n = o.blocks ? o.blocks : 1;
    const size_t l = o.len_or(512), b = o.block;
    if (l < b) {
        std::fprintf(stderr, "kvreg-bench: %s needs --len >= --block\n", name);
        std::exit(2);
    }
    const size_t per = l / b;
    const size_t s = (n + per - 1) / per;

    const uint64_t rss_start = rss_kb();
    Harness h(o, keep_tokens);
    kvreg_pool *pool = h.new_pool("G1");
    kvreg_pool *pool_b = keep_tokens ? h.new_pool("G2") : nullptr;
    const uint64_t rss_base = rss_kb();

    // Inputs: tokens and descs (the first N blocks of S sequences), the sequence hashes an engine
    // would keep, and the handle arrays, all written before the "built" snapshot.
    SeqSet set = gen_random(o, s, l);
    set.descs.resize(n);
    std::vector<uint64_t> hashes(n);
    uint64_t ck = 0;
    for (size_t i = 0; i < n; i++) {
        hashes[i] = set.descs[i].sequence_hash;
        ck += hashes[i];
    }
    std::vector<kvreg_block> handles(n, KVREG_BLOCK_NONE);
    std::vector<kvreg_block> handles_b(keep_tokens ? n : 0, KVREG_BLOCK_NONE);
    const uint64_t rss_built = rss_kb();

    double t = now_s();
    const uint64_t reg = register_chunks(pool, set.descs.data(), handles.data(), n, per);
    const double reg_s = now_s() - t;
    const uint64_t rss_held = rss_kb();
    const uint64_t peak_held = peak_rss_kb();
    const uint64_t live_pool = kvreg_pool_size(pool);
    const uint64_t live_global = h.stat(KVREG_STAT_HASHES);
    bool held_ok = all_held(pool, hashes, per);

    // hold_tokens: the same blocks in a second pool must not store their tokens again.
    uint64_t token_bytes = 0, token_bytes_b = 0, reg_b = 0, rss_held_b = rss_held;
    bool tokens_ok = true;
    if (keep_tokens) {
        token_bytes = h.stat(KVREG_STAT_TOKEN_BYTES);
        reg_b = register_chunks(pool_b, set.descs.data(), handles_b.data(), n, per);
        rss_held_b = rss_kb();
        token_bytes_b = h.stat(KVREG_STAT_TOKEN_BYTES);
        held_ok &= all_held(pool_b, hashes, per);
        // The stored copy reads back as the input (first and last block).
        std::vector<uint32_t> back(b);
        for (size_t i : {size_t{0}, n - 1}) {
            size_t got = 0;
            tokens_ok &= kvreg_block_tokens(pool_b, handles_b[i], back.data(), b, &got) == KVREG_OK && got == b &&
                         std::equal(back.begin(), back.end(), set.descs[i].tokens);
        }
        tokens_ok &= token_bytes == static_cast<uint64_t>(n) * b * 4 && token_bytes_b == token_bytes && reg_b == n;
    }

    t = now_s();
    uint64_t rel = keep_tokens ? release_chunks(pool_b, handles_b.data(), n, per) : 0;
    rel += release_chunks(pool, handles.data(), n, per);
    const double rel_s = now_s() - t;
    double drain_s = 0;
    const bool empty = drained(h, {pool, pool_b}, true, drain_s); // pool_b may be NULL: size 0

    const EventCounts c = h.counts();
    ok = set.ref_ok && reg == n && live_pool == n && live_global == n && held_ok && tokens_ok &&
         rel == (keep_tokens ? 2 * n : n) && empty && events_match(c, n, ck) &&
         (keep_tokens ? h.stat(KVREG_STAT_TOKEN_BYTES) == 0 : true) &&
         checksum_expected(o, keep_tokens ? "hold_tokens" : "hold", ck) &&
         (keep_tokens ? checksum_expected(o, "hold", ck) : true);

    JsonLine j;
    head(j, name, n, reg_s, c);
    j.u("blocks", n)
        .u("len", l)
        .u("block", b)
        .b("keep_tokens", keep_tokens)
        .u("rss_base_kb", rss_base)
        .u("rss_built_kb", rss_built)
        .u("rss_held_kb", rss_held)
        .u("peak_rss_held_kb", peak_held)
        .f("bytes_per_block", kb_per_block(rss_held, rss_base, n))
        .f("registry_bytes_per_block", kb_per_block(rss_held, rss_built, n))
        .f("input_bytes_per_block", kb_per_block(rss_built, rss_base, n))
        // Resident memory of the empty registry and its pools (not in the per-block figures).
        .u("registry_empty_kb", rss_base > rss_start ? rss_base - rss_start : 0)
        .u("sizeof_block_desc", sizeof(kvreg_block_desc))
        .u("sizeof_block_handle", sizeof(kvreg_block));
    if (keep_tokens) {
        j.u("token_bytes", token_bytes)
            .u("token_bytes_two_pools", token_bytes_b)
            .f("second_pool_bytes_per_block", kb_per_block(rss_held_b, rss_held, n));
    }
    j.f("register_s", reg_s)
        .f("release_s", rel_s)
        .f("drain_s", drain_s)
        .hex("hash_checksum", ck)
        .b("verified", ok);
    h.finish(j);
    return j.finish();
}

} // namespace bench
