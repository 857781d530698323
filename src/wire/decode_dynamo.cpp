// Dynamo RouterEvent payloads, JSON or msgpack with field names, read lazily (doc.hpp):
//   payload: an array of RouterEvents, or one RouterEvent;
//   RouterEvent {worker_id, storage_tier = "device", residency_domain?, event {event_id,
//                data, dp_rank = 0}, state_source?};
//   data: {"stored": {parent_hash, start_position?, blocks [{block_hash, tokens_hash,
//         mm_extra_info? {mm_objects [{mm_hash, offsets [[start, end], ...]}]}}]}},
//         {"removed": {block_hashes}}, "cleared" (or {"cleared": null}); other variants are
//         skipped and counted. Unknown keys are ignored everywhere; a key we read that appears
//         twice in one map is an error (as serde's derived decoders say "duplicate field").
// block_hash (Dynamo's sequence hash) goes to block_hashes, tokens_hash to tokens_hashes;
// the rest to kvreg_wire_event_ext (state_source, a nested owner id, as its raw bytes). Which
// keys were present is kept for re-encoding; a key we do not read makes the event lossy (its
// re-encoding would drop it).
#include "wire/decode.hpp"
#include "wire/doc.hpp"
#include "wire/media.hpp"

#include <cstring>
#include <vector>

namespace kvreg::wire {
namespace {

// The smallest RouterEvent: msgpack {"event": {"data": "cleared"}} (21 bytes).
constexpr size_t kMinEventBytes = 21;

template <class Doc> class DynamoReader {
public:
    DynamoReader(const Doc &d, const uint8_t *base, size_t len, DecodedBatch &out,
                 DecodeError &err, const DecodeLimits &lim)
        : d_(d), base_(base), len_(len), out_(out), err_(err), lim_(lim) {}

    bool payload(const Val &root) {
        out_.shape.single = root.kind == Val::Map;
        if (root.kind == Val::Map)
            return router_event(root);
        if (root.kind != Val::Array)
            return fail(root, "a Dynamo payload is an array of RouterEvents or one RouterEvent");
        // Room for the events the array holds (at most what the payload can hold), so the
        // buffers do not grow while decoding: growing holds the old and the new buffer at
        // once, up to 3x the bytes needed. msgpack says the count; JSON is counted (one
        // more pass over the array, no allocation).
        size_t count = root.count;
        if (count == 0) {
            Iter it = d_.begin(root);
            Val v;
            while (d_.next(it, v))
                count++;
        }
        size_t most = len_ / kMinEventBytes;
        most = most < count ? most : count;
        most = most < lim_.max_events ? most : lim_.max_events;
        out_.events.reserve(most); // the parts come with the events read (PartsList)
        Iter it = d_.begin(root);
        Val re;
        while (d_.next(it, re))
            if (!router_event(re))
                return false;
        return true;
    }

private:
    bool fail(const Val &v, const char *why) {
        err_.offset = v.off, err_.why = why;
        return false;
    }

    // One pass over a map: the values of the keys in names[0..N) into vals (kind Other when
    // absent, have[k] false). A named key seen twice fails at its second occurrence.
    template <size_t N>
    bool fields(const Val &map, const char *const (&names)[N], Val (&vals)[N], bool (&have)[N]) {
        for (size_t k = 0; k < N; k++)
            have[k] = false, vals[k] = Val{}, vals[k].kind = Val::Other;
        Iter it = d_.begin(map);
        Val key, val;
        while (d_.next(it, key)) {
            d_.next(it, val);
            size_t k = 0;
            for (; k < N; k++) {
                if (!d_.is(key, names[k]))
                    continue;
                if (have[k])
                    return fail(key, "a repeated key in a map");
                have[k] = true, vals[k] = val;
                break;
            }
            lossy_ |= k == N; // ignored, as Dynamo does; re-encoding would drop it
        }
        return true;
    }
    static uint8_t form_of(bool have, const Val &v) {
        return !have ? KVREG_WIRE_FIELD_ABSENT
               : v.kind == Val::Nil ? KVREG_WIRE_FIELD_NIL
                                    : KVREG_WIRE_FIELD_SET;
    }

    bool u64(const Val &n, uint64_t &v, const char *why) {
        if (n.kind == Val::Uint)
            v = n.u;
        else if (n.kind == Val::Int) // tolerated: bit-cast, as for vLLM hashes; Dynamo writes
            v = static_cast<uint64_t>(n.i), lossy_ = true; // no negative: it would come back unsigned
        else
            return fail(n, why);
        return true;
    }
    // Optional unsigned field: absent or null leaves v. Dynamo writes no null here (the key
    // would come back as 0), so a null makes the event lossy.
    bool opt_u64(const Val &n, bool have, uint64_t &v, const char *why) {
        if (!have)
            return true;
        if (n.kind == Val::Nil) {
            lossy_ = true;
            return true;
        }
        return u64(n, v, why);
    }

    // Elements of an array (msgpack says; JSON is counted, without allocating).
    size_t count_of(const Val &a) {
        if (a.count)
            return a.count;
        size_t n = 0;
        Iter it = d_.begin(a);
        Val v;
        while (d_.next(it, v))
            n++;
        return n;
    }
    // Room for n more hashes at once (reserve_more: a large array exactly, small ones by
    // half).
    void reserve_hashes(size_t n, bool tokens_too) {
        reserve_more(out_.hashes, n, len_);
        if (tokens_too)
            reserve_more(out_.tokens_hashes, n, len_);
    }

    // at: the RouterEvent, whose offset a limit failure reports (the event past the limit).
    bool begin_event(uint32_t type, const Val &at, size_t &idx) {
        if (out_.events.size() >= lim_.max_events)
            return fail(at, "more events than the decoder's max_events");
        idx = out_.begin(type);
        return true;
    }

    bool router_event(const Val &re) {
        if (re.kind != Val::Map)
            return fail(re, "a RouterEvent must be an object");
        lossy_ = false;
        static constexpr const char *kRe[] = {"worker_id", "storage_tier", "event",
                                              "residency_domain", "state_source"};
        Val f[5];
        bool have[5];
        if (!fields(re, kRe, f, have))
            return false;
        uint64_t worker = 0;
        if (!opt_u64(f[0], have[0], worker, "worker_id must be an unsigned integer"))
            return false;
        const Val &tier = f[1];
        if (have[1] && tier.kind != Val::Str && tier.kind != Val::Nil)
            return fail(tier, "storage_tier must be a string");
        if (!have[2])
            return fail(re, "a RouterEvent without \"event\"");
        const Val &ev = f[2];
        if (ev.kind != Val::Map)
            return fail(ev, "RouterEvent.event must be an object");

        static constexpr const char *kEv[] = {"event_id", "dp_rank", "data"};
        Val g[3];
        bool hg[3];
        if (!fields(ev, kEv, g, hg))
            return false;
        uint64_t event_id = 0, dp = 0;
        if (!opt_u64(g[0], hg[0], event_id, "event_id must be an unsigned integer") ||
            !opt_u64(g[1], hg[1], dp, "dp_rank must be an unsigned integer"))
            return false;
        if (dp > INT64_MAX)
            return fail(g[1], "dp_rank out of range");
        if (!hg[2])
            return fail(ev, "a KvCacheEvent without \"data\"");
        const Val &data = g[2];

        size_t idx;
        if (d_.is(data, "cleared")) {
            if (!begin_event(KVREG_WIRE_CLEARED, re, idx))
                return false;
        } else if (data.kind == Val::Map) {
            Iter it = d_.begin(data);
            Val variant, body, extra;
            if (!d_.next(it, variant) || (d_.next(it, body), d_.next(it, extra)))
                return fail(data, "KvCacheEvent.data must be a one-key object or \"cleared\"");
            if (d_.is(variant, "stored")) {
                if (!begin_event(KVREG_WIRE_STORED, re, idx) || !stored(body, idx))
                    return false;
            } else if (d_.is(variant, "removed")) {
                if (!begin_event(KVREG_WIRE_REMOVED, re, idx) || !removed(body))
                    return false;
            } else if (d_.is(variant, "cleared")) {
                if (!begin_event(KVREG_WIRE_CLEARED, re, idx))
                    return false;
                lossy_ |= body.kind != Val::Nil; // a unit variant: a body would be dropped
            } else {
                out_.skipped++;
                return true;
            }
        } else if (data.kind == Val::Str) {
            out_.skipped++; // another unit variant
            return true;
        } else {
            return fail(data, "KvCacheEvent.data must be a one-key object or \"cleared\"");
        }

        static const char *const kTags[] = {"", "stored", "removed", "cleared"};
        EventParts &tp = out_.parts[idx];
        tp.tag = kTags[out_.events[idx].type];
        tp.shape = KVREG_WIRE_SHAPE_DYNAMO;
        kvreg_wire_event &e = out_.events[idx];
        e.worker_id = worker, e.event_id = event_id;
        e.has_dp_rank = 1, e.dp_rank = static_cast<int64_t>(dp);
        EventParts &p = out_.parts[idx];
        p.dyn_keys = static_cast<uint8_t>((have[0] ? DYN_WORKER : 0) | (hg[0] ? DYN_EVENT_ID : 0) |
                                          (hg[1] ? DYN_DP_RANK : 0));
        p.medium_form = form_of(have[1], tier);
        if (!residency(f[3], have[3], idx) || !state_source(f[4], have[4], idx))
            return false;
        if (tier.kind == Val::Str && have[1]) {
            const size_t at = keep_text(tier);
            out_.parts[idx].medium_name = at;
            e.medium = medium_from_name(&out_.strings[at], out_.strings.size() - 1 - at);
        }
        out_.parts[idx].lossy = lossy_;
        return true;
    }

    // A string's text, NUL-terminated, into strings; returns its offset. Its users read it
    // as a C string, so a NUL inside would cut it short: the event is lossy then (as in the
    // vLLM decoder).
    size_t keep_text(const Val &v) {
        const size_t at = out_.strings.size();
        d_.text(v, out_.strings);
        lossy_ |= std::memchr(out_.strings.data() + at, '\0', out_.strings.size() - at) != nullptr;
        out_.strings.push_back('\0');
        return at;
    }

    // residency_domain: a string kept as it is; null, or any other value, is what Dynamo
    // reads as invalid (and writes back as null).
    bool residency(const Val &v, bool have, size_t idx) {
        EventParts &p = out_.parts[idx];
        p.residency_form = form_of(have, v);
        if (have && v.kind == Val::Str) {
            out_.parts[idx].residency = keep_text(v);
        } else if (have && v.kind != Val::Nil) {
            p.residency_form = KVREG_WIRE_FIELD_NIL;
            lossy_ = true;
        }
        return true;
    }

    // state_source: a CacheOwnerId (nested); kept as the bytes of its value.
    bool state_source(const Val &v, bool have, size_t idx) {
        out_.parts[idx].state_form = form_of(have, v);
        if (!have || v.kind == Val::Nil)
            return true;
        const size_t end = d_.value_end(v);
        const size_t at = out_.strings.size();
        out_.strings.insert(out_.strings.end(), reinterpret_cast<const char *>(base_) + v.off,
                            reinterpret_cast<const char *>(base_) + end);
        out_.parts[idx].state_source = at;
        out_.parts[idx].state_source_len = end - v.off;
        return true;
    }

    bool stored(const Val &body, size_t idx) {
        if (body.kind != Val::Map)
            return fail(body, "stored must be an object");
        static constexpr const char *kSt[] = {"parent_hash", "blocks", "start_position"};
        Val f[3];
        bool have[3];
        if (!fields(body, kSt, f, have))
            return false;
        out_.parts[idx].parent_form = form_of(have[0], f[0]);
        if (have[0] && f[0].kind != Val::Nil) {
            kvreg_wire_event &e = out_.events[idx];
            if (!u64(f[0], e.parent_block_hash, "parent_hash must be an integer or null"))
                return false;
            e.has_parent = 1;
        }
        out_.parts[idx].start_form = form_of(have[2], f[2]);
        if (have[2] && f[2].kind != Val::Nil) {
            uint64_t sp = 0;
            if (!u64(f[2], sp, "start_position must be an unsigned integer or null"))
                return false;
            if (sp > UINT32_MAX || f[2].kind != Val::Uint)
                return fail(f[2], "start_position out of range (u32)");
            out_.parts[idx].start_position = static_cast<uint32_t>(sp);
        }
        if (!have[1])
            return fail(body, "stored without \"blocks\"");
        const Val &blocks = f[1];
        if (blocks.kind != Val::Array)
            return fail(blocks, "stored.blocks must be an array");
        out_.parts[idx].tokens_hashes = out_.tokens_hashes.size();
        out_.parts[idx].mm_forms = out_.mm_forms.size();
        const size_t n_blocks = count_of(blocks);
        reserve_hashes(n_blocks, true);
        out_.mm_forms.reserve(out_.mm_forms.size() + n_blocks);
        Iter it = d_.begin(blocks);
        Val b;
        while (d_.next(it, b)) {
            if (b.kind != Val::Map)
                return fail(b, "a stored block must be an object");
            static constexpr const char *kBl[] = {"block_hash", "tokens_hash", "mm_extra_info"};
            Val g[3];
            bool hg[3];
            if (!fields(b, kBl, g, hg))
                return false;
            if (!hg[0] || !hg[1])
                return fail(b, "a stored block needs block_hash and tokens_hash");
            uint64_t h, th;
            if (!u64(g[0], h, "block_hash must be an integer") ||
                !u64(g[1], th, "tokens_hash must be an integer"))
                return false;
            out_.hashes.push_back(h);
            out_.tokens_hashes.push_back(th);
            out_.mm_forms.push_back(form_of(hg[2], g[2]));
            if (hg[2] && g[2].kind != Val::Nil &&
                !mm_extra_info(g[2], out_.hashes.size() - 1 - out_.parts[idx].hashes, idx))
                return false;
        }
        return true;
    }

    // BlockExtraInfo {mm_objects: [BlockMmObjectInfo {mm_hash, offsets: [(start, end)]}]}.
    bool mm_extra_info(const Val &info, size_t block, size_t idx) {
        if (info.kind != Val::Map)
            return fail(info, "mm_extra_info must be an object or null");
        static constexpr const char *kInfo[] = {"mm_objects"};
        Val f[1];
        bool have[1];
        if (!fields(info, kInfo, f, have))
            return false;
        if (!have[0] || f[0].kind != Val::Array)
            return fail(info, "mm_extra_info needs an array mm_objects");
        Iter it = d_.begin(f[0]);
        Val obj;
        while (d_.next(it, obj)) {
            if (obj.kind != Val::Map)
                return fail(obj, "an mm object must be an object");
            static constexpr const char *kObj[] = {"mm_hash", "offsets"};
            Val g[2];
            bool hg[2];
            if (!fields(obj, kObj, g, hg))
                return false;
            if (!hg[0] || !hg[1] || g[0].kind != Val::Uint || g[1].kind != Val::Array)
                return fail(obj, "an mm object needs an unsigned mm_hash and an array offsets");
            kvreg_wire_mm_object m{};
            m.mm_hash = g[0].u;
            m.block = static_cast<uint32_t>(block);
            m.first_offset = (out_.mm_offsets.size() - out_.parts[idx].mm_offsets) / 2;
            Iter jt = d_.begin(g[1]);
            Val pair;
            while (d_.next(jt, pair)) {
                Iter kt = d_.begin(pair);
                Val a, b, extra;
                if (pair.kind != Val::Array || !d_.next(kt, a) || !d_.next(kt, b) ||
                    d_.next(kt, extra) || a.kind != Val::Uint || b.kind != Val::Uint)
                    return fail(pair, "an mm offset must be [start, end] (unsigned)");
                out_.mm_offsets.push_back(a.u);
                out_.mm_offsets.push_back(b.u);
                m.n_offsets++;
            }
            out_.mm_objects.push_back(m);
        }
        return true;
    }

    bool removed(const Val &body) {
        if (body.kind != Val::Map)
            return fail(body, "removed must be an object with block_hashes");
        static constexpr const char *kRm[] = {"block_hashes"};
        Val f[1];
        bool have[1];
        if (!fields(body, kRm, f, have))
            return false;
        if (!have[0])
            return fail(body, "removed must be an object with block_hashes");
        if (f[0].kind != Val::Array)
            return fail(f[0], "removed.block_hashes must be an array");
        reserve_hashes(count_of(f[0]), false);
        Iter it = d_.begin(f[0]);
        Val h;
        while (d_.next(it, h)) {
            uint64_t v;
            if (!u64(h, v, "a block hash must be an integer"))
                return false;
            out_.hashes.push_back(v);
        }
        return true;
    }

    const Doc &d_;
    const uint8_t *base_ = nullptr; // the payload (for values kept as bytes)
    bool lossy_ = false;            // the current RouterEvent had a key we do not read
    size_t len_;
    DecodedBatch &out_;
    DecodeError &err_;
    const DecodeLimits &lim_;
};

template <class Doc>
bool run(const Doc &d, const uint8_t *p, size_t len, DecodedBatch &out, DecodeError &err,
         const DecodeLimits &lim) {
    if (!d.validate(err.offset, err.why))
        return false;
    DynamoReader<Doc> r(d, p, len, out, err, lim);
    return r.payload(d.read(0));
}

} // namespace

bool decode_dynamo(const uint8_t *p, size_t len, bool json, DecodedBatch &out, DecodeError &err,
                   const DecodeLimits &lim) {
    out.clear();
    bool ok = json ? run(JsonDoc(p, len, lim.max_depth), p, len, out, err, lim)
                   : run(MpDoc(p, len, lim.max_depth), p, len, out, err, lim);
    if (!ok) {
        out.clear();
        return false;
    }
    out.shape.dynamo = true;
    out.finish();
    return true;
}

} // namespace kvreg::wire
