// Workload `hash`: name every block of S sequences of L tokens, timed against the raw limit of
// the hash rule (two XXH3 calls per block, libxxhash called directly over the same bytes).
// Each timed phase is its own non-inlined function, so a profiler can be pointed at one of them
// (valgrind --tool=callgrind --toggle-collect='bench::*phase_*').
#include "bench.hpp"

#include <xxhash.h>

#include <bit>

namespace bench {

namespace {

// Keeps the compiler from hoisting or merging work across repetitions.
inline void opaque(const void *p) { asm volatile("" : : "r"(p) : "memory"); }

struct Input {
    std::vector<uint32_t> flat;
    size_t s, l, b, per_seq;
    uint64_t salt;
    const uint32_t *seq(size_t i) const { return flat.data() + i * l; }
};

// 1. Primary number: kvreg_hash_blocks per sequence into a reused array (how an engine names a
//    request's blocks), summing the sequence hashes.
[[gnu::noinline]] uint64_t phase_hash_blocks(const Input &in) {
    std::vector<kvreg_block_info> info(in.per_seq ? in.per_seq : 1);
    uint64_t acc = 0;
    for (size_t i = 0; i < in.s; i++) {
        size_t nb = 0;
        opaque(in.seq(i));
        check_rc(kvreg_hash_blocks(in.seq(i), in.l, static_cast<uint32_t>(in.b), in.salt, info.data(),
                                   info.size(), &nb),
                 "kvreg_hash_blocks");
        for (size_t k = 0; k < nb; k++) acc += info[k].sequence_hash;
    }
    return acc;
}

// 2. The sequence object (kvreg_sequence owns a copy of its tokens: the counterpart of the
//    peer's TokenBlockSequence), reset and refilled per sequence.
[[gnu::noinline]] uint64_t phase_sequence(const Input &in) {
    kvreg_sequence *sq = nullptr;
    check_rc(kvreg_sequence_new(&sq, static_cast<uint32_t>(in.b), in.salt), "kvreg_sequence_new");
    uint64_t acc = 0;
    for (size_t i = 0; i < in.s; i++) {
        kvreg_sequence_reset(sq);
        size_t done = 0;
        check_rc(kvreg_sequence_extend(sq, in.seq(i), in.l, &done), "kvreg_sequence_extend");
        kvreg_block_info bi;
        for (size_t k = 0; k < done; k++) {
            kvreg_sequence_block(sq, k, &bi);
            acc += bi.sequence_hash;
        }
    }
    kvreg_sequence_free(sq);
    return acc;
}

// 3. The raw limit: the rule's two XXH3 calls per block and nothing else. Token bytes are the
//    in-memory u32s, so this equals the rule on little-endian hosts only (checked by the caller).
[[gnu::noinline]] uint64_t phase_chain_limit(const Input &in) {
    uint64_t acc = 0;
    for (size_t i = 0; i < in.s; i++) {
        const uint32_t *p = in.seq(i);
        opaque(p);
        uint64_t parent = 0;
        for (size_t k = 0; k < in.per_seq; k++) {
            const uint64_t bh = XXH3_64bits_withSeed(p + k * in.b, in.b * 4, in.salt);
            uint64_t sh = bh;
            if (k > 0) {
                const uint64_t buf[2] = {parent, bh}; // u64le || u64le on little-endian hosts
                sh = XXH3_64bits_withSeed(buf, sizeof buf, in.salt);
            }
            parent = sh;
            acc += sh;
        }
    }
    return acc;
}

// 4. One XXH3 call per block over the same bytes (the peer's raw_xxh3).
[[gnu::noinline]] uint64_t phase_raw_xxh3(const Input &in) {
    uint64_t acc = 0;
    for (size_t i = 0; i < in.s; i++) {
        const uint32_t *p = in.seq(i);
        opaque(p);
        for (size_t k = 0; k < in.per_seq; k++) acc ^= XXH3_64bits_withSeed(p + k * in.b, in.b * 4, in.salt);
    }
    return acc;
}

// Adds one pass's time to secs and its result to acc.
template <typename F> void timed(F f, double &secs, uint64_t &acc) {
    const double t = now_s();
    acc += f();
    secs += now_s() - t;
}

} // namespace

std::string wl_hash(const Opts &o, bool &ok) {
    Input in;
    in.s = o.seqs_or(2000);
    in.l = o.len_or(4096);
    in.b = o.block;
    in.per_seq = in.l / in.b;
    const size_t reps = o.reps ? o.reps : 1;
    in.salt = o.salt;
    in.flat.resize(in.s * in.l);
    SplitMix64 rng(o.seed);
    rng.fill(in.flat.data(), in.flat.size());

    // The four phases take turns, one pass each per repetition, so a burst of noise from
    // other processes lands on all of them alike and the ratios stay meaningful.
    uint64_t acc = 0, acc_obj = 0, acc_c = 0, acc_x = 0;
    double seq_s = 0, obj_s = 0, chain_s = 0, raw_s = 0;
    for (size_t r = 0; r < reps; r++) {
        timed([&] { return phase_hash_blocks(in); }, seq_s, acc);
        timed([&] { return phase_sequence(in); }, obj_s, acc_obj);
        timed([&] { return phase_chain_limit(in); }, chain_s, acc_c);
        timed([&] { return phase_raw_xxh3(in); }, raw_s, acc_x);
    }
    opaque(&acc_x);

    // Checksum of one repetition from the independent reference (any endianness).
    uint64_t sum_one_rep = 0;
    for (size_t i = 0; i < in.s; i++) {
        uint64_t parent = 0;
        for (size_t k = 0; k < in.per_seq; k++) {
            const uint64_t bh = ref_block_hash(in.seq(i) + k * in.b, in.b, o.salt);
            parent = k == 0 ? bh : ref_chain_hash(parent, bh, o.salt);
            sum_one_rep += parent;
        }
    }
    const uint64_t want = sum_one_rep * reps;
    const bool limit_valid = std::endian::native == std::endian::little;
    ok = acc == want && acc_obj == want && (!limit_valid || acc_c == want) &&
         checksum_expected(o, "hash", sum_one_rep);

    const uint64_t ops = in.s * in.per_seq * reps;
    const double tokens = static_cast<double>(ops * in.b);
    const double bytes = tokens * 4;
    auto gbps = [&](double secs) { return bytes / secs / 1e9; };
    JsonLine j;
    head(j, "hash", ops, seq_s, EventCounts{});
    j.u("seqs", in.s)
        .u("len", in.l)
        .u("block", in.b)
        .u("reps", reps)
        .f("tokens_per_s", tokens / seq_s)
        .f("gb_per_s", gbps(seq_s))
        .f("sequence_seconds", obj_s)
        .f("sequence_tokens_per_s", tokens / obj_s)
        .f("sequence_gb_per_s", gbps(obj_s))
        .f("chain_only_seconds", chain_s)
        .f("chain_only_gb_per_s", gbps(chain_s))
        .f("raw_xxh3_seconds", raw_s)
        .f("raw_xxh3_gb_per_s", gbps(raw_s))
        .f("raw_over_split_ratio", seq_s / raw_s)
        // Our speed as a fraction of the limit (target >= 0.9); the peer's is chain_only/seconds.
        .f("limit_ratio", chain_s / seq_s)
        .f("sequence_limit_ratio", chain_s / obj_s)
        .hex("hash_checksum", sum_one_rep)
        .b("verified", ok);
    j.u("rt_threads", 0);
    return j.finish();
}

} // namespace bench
