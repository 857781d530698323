// Workload `wire` (kvreg-only): the vLLM wire encoder and decoder over a realistic event stream,
// and in the same run the limit for the same data with the same msgpack library.
//
// Stream: --seqs sequences of --len tokens in blocks of --block (defaults 2000, 512, 16), hashed
// with kvreg_hash_blocks; each sequence's blocks are Registered as one chain, and once 8
// sequences are live the oldest one's blocks are Removed (a run of Removes), as an engine's
// prefix cache publishes them. Encode: kvreg_wire_encode (KVREG_WIRE_VLLM, 1024 events per
// payload) over the whole stream. Decode: kvreg_wire_decode of those payloads.
// Limit: the stream's integers (every Register's sequence hash and tokens, every Remove's hash;
// `values`) written with msgpack_pack_uint64 into an sbuffer (cleared at each payload's worth,
// as the encoder reuses its buffer) and read back with msgpack_unpack_next. Ratios are
// limit_seconds / our_seconds: encode_over_limit target >= 0.5, decode_over_limit >= 0.3.
// Fastest of --reps runs for each phase.
#include "bench.hpp"

#include <kvreg_wire.h>
#include <msgpack.h>

#include <algorithm>

namespace bench {

namespace {

struct Stream {
    std::vector<kvreg_event> events;
    std::vector<uint32_t> tokens;      // every sequence's tokens (events point into it)
    std::vector<uint64_t> values;      // the integers a payload carries, in order
    std::vector<size_t> payload_ends;  // event index where each payload ends (for the limit)
    uint64_t hash_sum = 0, token_sum = 0;
    size_t n_hashes = 0;
};

Stream make_stream(const Opts &o) {
    Stream s;
    const size_t seqs = o.seqs_or(2000), len = o.len_or(512), B = o.block, blocks = len / B;
    s.tokens.resize(seqs * len);
    SplitMix64 rng(o.seed);
    rng.fill(s.tokens.data(), s.tokens.size());
    std::vector<kvreg_block_info> info(blocks);
    std::vector<std::vector<uint64_t>> live; // live sequences' hashes, oldest first
    uint64_t id = 0;
    auto remove_oldest = [&] {
        for (uint64_t h : live.front()) {
            kvreg_event e{};
            e.kind = KVREG_EVENT_REMOVE, e.event_id = id++, e.sequence_hash = h;
            s.events.push_back(e);
        }
        live.erase(live.begin());
    };
    for (size_t q = 0; q < seqs; q++) {
        const uint32_t *t = s.tokens.data() + q * len;
        size_t n = 0;
        check_rc(kvreg_hash_blocks(t, len, static_cast<uint32_t>(B), o.salt, info.data(), blocks, &n),
                 "kvreg_hash_blocks");
        std::vector<uint64_t> hashes;
        for (size_t b = 0; b < n; b++) {
            kvreg_event e{};
            e.kind = KVREG_EVENT_REGISTER, e.event_id = id++;
            e.sequence_hash = info[b].sequence_hash, e.block_hash = info[b].block_hash;
            e.parent_sequence_hash = info[b].parent_sequence_hash, e.has_parent = info[b].has_parent;
            e.tokens = t + b * B, e.n_tokens = static_cast<uint32_t>(B);
            s.events.push_back(e);
            hashes.push_back(e.sequence_hash);
        }
        live.push_back(std::move(hashes));
        if (live.size() > 8) remove_oldest();
    }
    while (!live.empty()) remove_oldest();
    for (const kvreg_event &e : s.events) {
        s.values.push_back(e.sequence_hash);
        s.hash_sum += e.sequence_hash;
        s.n_hashes++;
        for (uint32_t k = 0; k < e.n_tokens; k++) {
            s.values.push_back(e.tokens[k]);
            s.token_sum += e.tokens[k];
        }
    }
    return s;
}

[[gnu::noinline]] double phase_encode(kvreg_wire_encoder *enc, const Stream &s, size_t &bytes,
                                      std::vector<std::vector<uint8_t>> *keep) {
    int first_error = KVREG_OK;
    bytes = 0;
    const double t0 = now_s();
    size_t done = 0;
    while (done < s.events.size()) {
        const uint8_t *p = nullptr;
        size_t len = 0, used = 0;
        const int rc = kvreg_wire_encode(enc, s.events.data() + done, s.events.size() - done, 1.0,
                                         &used, &p, &len);
        if (rc != KVREG_OK) [[unlikely]] {
            first_error = rc;
            break;
        }
        bytes += len;
        if (keep) keep->emplace_back(p, p + len); // only in the untimed pass
        done += used;
    }
    const double secs = now_s() - t0;
    check_rc(first_error, "kvreg_wire_encode");
    return secs;
}

[[gnu::noinline]] double phase_decode(kvreg_wire_decoder *dec,
                                      const std::vector<std::vector<uint8_t>> &payloads,
                                      uint64_t &hash_sum, uint64_t &token_sum, size_t &hashes) {
    int first_error = KVREG_OK;
    hash_sum = token_sum = 0;
    hashes = 0;
    const double t0 = now_s();
    for (const std::vector<uint8_t> &p : payloads) {
        const kvreg_wire_event *ev = nullptr;
        size_t n = 0;
        const int rc = kvreg_wire_decode(dec, p.data(), p.size(), &ev, &n, nullptr);
        if (rc != KVREG_OK) [[unlikely]] {
            first_error = rc;
            break;
        }
        for (size_t k = 0; k < n; k++) {
            for (size_t i = 0; i < ev[k].n_block_hashes; i++) hash_sum += ev[k].block_hashes[i];
            for (size_t i = 0; i < ev[k].n_token_ids; i++) token_sum += ev[k].token_ids[i];
            hashes += ev[k].n_block_hashes;
        }
    }
    const double secs = now_s() - t0;
    check_rc(first_error, "kvreg_wire_decode");
    return secs;
}

// The limit: the stream's values with msgpack-c alone, in chunks of one payload's values.
[[gnu::noinline]] double phase_limit_write(const Stream &s, size_t chunk, msgpack_sbuffer &all) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int failed = 0;
    const double t0 = now_s();
    for (size_t i = 0; i < s.values.size(); i++) {
        failed |= msgpack_pack_uint64(&pk, s.values[i]);
        if ((i + 1) % chunk == 0) msgpack_sbuffer_clear(&sb);
    }
    const double secs = now_s() - t0;
    msgpack_sbuffer_destroy(&sb);
    check_rc(failed ? KVREG_ENOMEM : KVREG_OK, "msgpack_pack_uint64");
    // the buffer the read limit reads (untimed)
    msgpack_packer_init(&pk, &all, msgpack_sbuffer_write);
    for (uint64_t v : s.values) msgpack_pack_uint64(&pk, v);
    return secs;
}

[[gnu::noinline]] double phase_limit_read(const msgpack_sbuffer &all, size_t &count, uint64_t &sum) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    count = 0;
    sum = 0;
    const double t0 = now_s();
    while (msgpack_unpack_next(&u, all.data, all.size, &off) == MSGPACK_UNPACK_SUCCESS) {
        sum += u.data.via.u64;
        count++;
    }
    const double secs = now_s() - t0;
    msgpack_unpacked_destroy(&u);
    return secs;
}

} // namespace

std::string wl_wire(const Opts &o, bool &ok) {
    const Stream s = make_stream(o);
    const size_t reps = o.reps ? o.reps : 1;
    kvreg_wire_encoder *enc = nullptr;
    kvreg_wire_decoder *dec = nullptr;
    check_rc(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), "kvreg_wire_encoder_new");
    check_rc(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), "kvreg_wire_decoder_new");

    std::vector<std::vector<uint8_t>> payloads;
    size_t bytes = 0;
    phase_encode(enc, s, bytes, &payloads); // untimed: keeps the payloads for decoding
    const size_t chunk = std::max<size_t>(1, s.values.size() / std::max<size_t>(1, payloads.size()));
    msgpack_sbuffer all;
    msgpack_sbuffer_init(&all);

    double enc_s = 0, dec_s = 0, wlim_s = 0, rlim_s = 0;
    uint64_t hsum = 0, tsum = 0, lim_sum = 0;
    size_t hashes = 0, lim_count = 0;
    ok = true;
    for (size_t r = 0; r < reps; r++) {
        size_t b = 0;
        const double e = phase_encode(enc, s, b, nullptr);
        const double d = phase_decode(dec, payloads, hsum, tsum, hashes);
        msgpack_sbuffer_clear(&all);
        const double w = phase_limit_write(s, chunk, all);
        const double l = phase_limit_read(all, lim_count, lim_sum);
        enc_s = r == 0 || e < enc_s ? e : enc_s;
        dec_s = r == 0 || d < dec_s ? d : dec_s;
        wlim_s = r == 0 || w < wlim_s ? w : wlim_s;
        rlim_s = r == 0 || l < rlim_s ? l : rlim_s;
        ok = ok && b == bytes && hsum == s.hash_sum && tsum == s.token_sum && hashes == s.n_hashes &&
             lim_count == s.values.size() && lim_sum == s.hash_sum + s.token_sum;
    }
    msgpack_sbuffer_destroy(&all);
    kvreg_wire_encoder_free(enc);
    kvreg_wire_decoder_free(dec);

    const double n = static_cast<double>(s.events.size());
    JsonLine j;
    head(j, "wire", s.events.size(), enc_s, EventCounts{});
    j.u("events", s.events.size())
        .u("values", s.values.size())
        .u("payloads", payloads.size())
        .u("payload_bytes", bytes)
        .u("block", o.block)
        .u("reps", reps)
        .f("encode_events_per_s", enc_s > 0 ? n / enc_s : 0.0)
        .f("decode_events_per_s", dec_s > 0 ? n / dec_s : 0.0)
        .f("limit_write_values_per_s", wlim_s > 0 ? static_cast<double>(s.values.size()) / wlim_s : 0.0)
        .f("limit_read_values_per_s", rlim_s > 0 ? static_cast<double>(s.values.size()) / rlim_s : 0.0)
        .f("encode_over_limit", enc_s > 0 ? wlim_s / enc_s : 0.0)
        .f("decode_over_limit", dec_s > 0 ? rlim_s / dec_s : 0.0)
        .hex("hash_checksum", s.hash_sum)
        .b("verified", ok);
    j.u("rt_threads", 0);
    return j.finish();
}

} // namespace bench
