// Tolerant decoder for the payloads vLLM and SGLang publish (every generation):
//   outer: array [ts, events, dp_rank?, ...] with 2 or more elements (extra ones ignored), or a
//          map {"ts", "events", "data_parallel_rank" | "dp_rank" | "attn_dp_rank"};
//   event: tagged map {"type": ..., fields in any order, unknown keys ignored}, or positional
//          ["Tag", field1, ...] with any number of trailing fields: vLLM's 5..11-field
//          BlockStored, SGLang's 7-element form and its metadata map at position 7;
//   types: BlockStored, BlockRemoved, AllBlocksCleared; any other tag is skipped and counted;
//   hashes: unsigned or signed ints (bit-cast to u64) or bytes (the last 8, big-endian, left
//          padded when shorter: vLLM's own integer form of a digest).
// Values of a known field with the wrong type reject the payload (as every real decoder does):
// the caller gets the offset of that value. So does a key we read appearing twice in one map.
// Nesting levels (for the depth limit): the batch is level 1, its events array 2, an event 3,
// an event's field values 4.
#include "wire/decode.hpp"
#include "wire/media.hpp"

#include <cstring>

namespace kvreg::wire {
namespace {

bool is(const MpHead &h, const char *lit) noexcept {
    size_t n = std::strlen(lit);
    return h.kind == MpKind::Str && h.len == n && std::memcmp(h.data, lit, n) == 0;
}

uint32_t type_of(const MpHead &h) noexcept {
    if (is(h, "BlockStored") || is(h, "BlockStoredWithMetadata"))
        return KVREG_WIRE_STORED;
    if (is(h, "BlockRemoved"))
        return KVREG_WIRE_REMOVED;
    if (is(h, "AllBlocksCleared") || is(h, "TierBlocksCleared"))
        return KVREG_WIRE_CLEARED;
    return 0;
}

// The static spelling of a tag type_of() knows.
const char *tag_name(const MpHead &h) noexcept {
    static const char *const kTags[] = {"BlockStored", "BlockStoredWithMetadata", "BlockRemoved",
                                        "AllBlocksCleared", "TierBlocksCleared"};
    for (const char *t : kTags)
        if (is(h, t))
            return t;
    return nullptr;
}

// The smallest event that decodes to a kvreg_wire_event: ["BlockStored", []] (14 bytes).
constexpr size_t kMinEventBytes = 14;


class VllmDecoder {
public:
    VllmDecoder(MpReader &r, DecodedBatch &out, const DecodeLimits &lim)
        : r_(r), out_(out), lim_(lim) {}

    bool batch() {
        MpHead h;
        if (!r_.head(h))
            return false;
        double ts = 0;
        bool has_dp = false;
        int64_t dp = 0;
        if ((h.kind == MpKind::Array || h.kind == MpKind::Map) && !r_.check_depth(h, 1))
            return false;
        BatchShape &shape = out_.shape;
        shape.count = static_cast<uint32_t>(h.count);
        if (h.kind == MpKind::Array) {
            if (h.count < 2)
                return r_.fail(h.off, "the batch array needs at least 2 elements [ts, events]");
            if (!number(ts) || !events())
                return false;
            if (h.count >= 3 && !dp_rank(has_dp, dp))
                return false;
            if (h.count >= 3)
                shape.dp_form = has_dp ? KVREG_WIRE_FIELD_SET : KVREG_WIRE_FIELD_NIL;
            shape.lossy |= h.count > 3;
            for (size_t k = 3; k < h.count; k++)
                if (!r_.skip(2))
                    return false;
        } else if (h.kind == MpKind::Map) {
            bool has_ts = false, has_events = false, seen_dp = false;
            shape.map = true;
            for (size_t k = 0; k < h.count; k++) {
                MpHead key;
                if (!map_key(key, 2))
                    return false;
                if (is(key, "ts")) {
                    if (has_ts)
                        return r_.fail(key.off, "a repeated key in a map");
                    if (!number(ts))
                        return false;
                    has_ts = true;
                    record_key(0);
                } else if (is(key, "events")) {
                    if (has_events)
                        return r_.fail(key.off, "a repeated key in a map");
                    if (!events())
                        return false;
                    has_events = true;
                    record_key(1);
                } else if (is(key, "data_parallel_rank") || is(key, "dp_rank") ||
                           is(key, "attn_dp_rank")) {
                    if (seen_dp) // the three names are one field
                        return r_.fail(key.off, "a repeated key in a map");
                    if (!dp_rank(has_dp, dp))
                        return false;
                    seen_dp = true;
                    shape.dp_form = has_dp ? KVREG_WIRE_FIELD_SET : KVREG_WIRE_FIELD_NIL;
                    record_key(is(key, "data_parallel_rank") ? 2 : is(key, "dp_rank") ? 3 : 4);
                } else {
                    shape.lossy = true;
                    if (!r_.skip(2))
                        return false;
                }
            }
            if (!has_ts || !has_events)
                return r_.fail(h.off, "the batch map needs the keys \"ts\" and \"events\"");
        } else {
            return r_.fail(h.off, "the batch must be an array [ts, events, dp_rank] or a map");
        }
        if (!r_.at_end())
            return r_.fail(r_.pos(), "bytes after the end of the batch");
        shape.ok = true;
        shape.ts = ts, shape.dp = dp;
        for (kvreg_wire_event &e : out_.events) {
            e.ts = ts;
            e.has_dp_rank = has_dp;
            e.dp_rank = dp;
        }
        return true;
    }

private:
    // The batch map's keys in wire order (each at most once: repeats are errors).
    void record_key(uint8_t id) {
        if (n_keys_ < 3)
            out_.shape.key_order[n_keys_++] = id;
    }

    bool number(double &v) {
        MpHead h;
        if (!r_.head(h))
            return false;
        out_.shape.ts_int = h.kind != MpKind::Float;
        out_.shape.lossy |= out_.shape.ts_int; // upstream always sends a float
        if (h.kind == MpKind::Float)
            v = h.f;
        else if (h.kind == MpKind::Uint)
            v = static_cast<double>(h.u);
        else if (h.kind == MpKind::Int)
            v = static_cast<double>(h.i);
        else
            return r_.fail(h.off, "ts must be a number");
        return true;
    }

    // int or nil; anything else is an error.
    bool opt_int(bool &has, int64_t &v, const char *why) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Nil) {
            has = false;
            return true;
        }
        if (h.kind == MpKind::Uint && h.u <= static_cast<uint64_t>(INT64_MAX))
            v = static_cast<int64_t>(h.u);
        else if (h.kind == MpKind::Int)
            v = h.i;
        else
            return r_.fail(h.off, why);
        has = true;
        return true;
    }

    bool dp_rank(bool &has, int64_t &v) {
        return opt_int(has, v, "data_parallel_rank must be an integer or nil");
    }

    // Sets *sign for a negative int, *bin for bytes.
    bool hash_value(const MpHead &h, uint64_t &v, bool *sign = nullptr, bool *bin = nullptr) {
        if (h.kind == MpKind::Uint) {
            v = h.u;
        } else if (h.kind == MpKind::Int) {
            v = static_cast<uint64_t>(h.i);
            if (sign)
                *sign = true;
        } else if (h.kind == MpKind::Bin) {
            if (bin)
                *bin = true;
            // the last 8 bytes, big-endian; fewer bytes are left-padded with zeros
            size_t start = h.len > 8 ? h.len - 8 : 0;
            v = 0;
            for (size_t k = start; k < h.len; k++)
                v = (v << 8) | static_cast<uint8_t>(h.data[k]);
        } else {
            return r_.fail(h.off, "a block hash must be an integer or bytes");
        }
        return true;
    }

    // A copy of the payload's bytes [start, r_.pos()) into strings (raw values kept for
    // re-encoding); returns the offset.
    size_t keep_raw(size_t start, size_t &len) {
        const char *raw = reinterpret_cast<const char *>(r_.data()) + start;
        len = r_.pos() - start;
        size_t off = out_.strings.size();
        out_.strings.insert(out_.strings.end(), raw, raw + len);
        return off;
    }

    bool hashes(size_t idx) {
        const size_t start = r_.pos();
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind != MpKind::Array)
            return r_.fail(h.off, "block_hashes must be an array");
        if (!r_.check_depth(h, 4))
            return false;
        // The count is at most the bytes left (head() checked): room for it (reserve_more).
        const size_t at = out_.hashes.size();
        reserve_more(out_.hashes, h.count, r_.len());
        out_.hashes.resize(at + h.count);
        bool sign = false, bin = false, big = false; // big: an unsigned hash >= 2^63
        for (size_t k = 0; k < h.count; k++) {
            uint64_t &v = out_.hashes[at + k];
            if (r_.try_uint(v)) {
                big |= v > static_cast<uint64_t>(INT64_MAX);
                continue;
            }
            MpHead e;
            if (!r_.head(e) || !hash_value(e, v, &sign, &bin))
                return false;
            big |= e.kind == MpKind::Uint && v > static_cast<uint64_t>(INT64_MAX);
        }
        EventParts &p = out_.parts[idx];
        p.hashes_signed = sign;
        // One flag says how the event's hashes >= 2^63 go back: with both kinds in one array
        // (no upstream encoder writes that) some would come back changed.
        if (sign && big)
            p.lossy = true;
        if (bin)
            p.raw_hashes = keep_raw(start, p.raw_hashes_len);
        return true;
    }

    bool parent(size_t idx) {
        const size_t start = r_.pos();
        kvreg_wire_event &ev = out_.events[idx];
        EventParts &p = out_.parts[idx];
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Nil) {
            p.parent_form = KVREG_WIRE_FIELD_NIL;
            return true;
        }
        bool bin = false;
        if (!hash_value(h, ev.parent_block_hash, &p.parent_signed, &bin))
            return false;
        if (bin)
            p.raw_parent = keep_raw(start, p.raw_parent_len);
        ev.has_parent = 1;
        p.parent_form = KVREG_WIRE_FIELD_SET;
        return true;
    }

    // A token id at the reader (k-th of the array, for the error offset).
    bool token(uint32_t &dst) {
        const size_t off = r_.pos();
        uint64_t u;
        if (r_.try_uint(u)) {
            if (u > UINT32_MAX)
                return r_.fail(off, "a token id must be an integer in [0, 2^32)");
            dst = static_cast<uint32_t>(u);
            return true;
        }
        MpHead t;
        if (!r_.head(t))
            return false;
        if (t.kind != MpKind::Uint || t.u > UINT32_MAX)
            return r_.fail(t.off, "a token id must be an integer in [0, 2^32)");
        dst = static_cast<uint32_t>(t.u);
        return true;
    }

    // token_ids: ints, or EAGLE bigram pairs [[a, b], ...] (Dynamo reads Vec<(u32, u32)>):
    // the first element decides, and every element must then have its form.
    bool tokens(size_t idx) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind != MpKind::Array)
            return r_.fail(h.off, "token_ids must be an array");
        if (!r_.check_depth(h, 4))
            return false;
        const size_t body = r_.pos();
        MpHead first;
        const bool pairs = h.count > 0 && r_.head(first) && first.kind == MpKind::Array;
        if (r_.failed())
            return false;
        r_.seek(body);
        out_.parts[idx].token_pairs = pairs;
        const size_t per = pairs ? 2 : 1;
        // A token id takes a byte at least (the count is at most the bytes left, as above), a
        // pair [a, b] three: pairs get room for those the bytes left hold, plus the one the
        // payload's end cuts short, where reading stops (a count larger than that is a lie,
        // found below). Exact for an array that is read to its end.
        const size_t left = r_.len() - body;
        const size_t n = pairs && h.count > left / 3 + 1 ? left / 3 + 1 : h.count;
        const size_t at = out_.tokens.size();
        reserve_more(out_.tokens, per * n, r_.len());
        out_.tokens.resize(at + per * n);
        uint32_t *const dst = out_.tokens.data() + at;
        for (size_t k = pairs ? 0 : r_.try_uints32(dst, h.count); k < h.count; k++) {
            if (pairs) {
                MpHead pr;
                if (!r_.head(pr))
                    return false;
                if (pr.kind != MpKind::Array || pr.count != 2)
                    return r_.fail(pr.off, "a bigram token must be a pair [a, b] of token ids");
                if (!r_.check_depth(pr, 5) || !token(dst[2 * k]) || !token(dst[2 * k + 1]))
                    return false;
            } else if (!token(dst[k])) {
                return false;
            }
        }
        return true;
    }

    bool block_size(size_t idx) {
        MpHead h;
        if (!r_.head(h))
            return false;
        EventParts &p = out_.parts[idx];
        if (h.kind == MpKind::Nil) {
            p.block_size_form = KVREG_WIRE_FIELD_NIL;
            return true;
        }
        if (h.kind != MpKind::Uint || h.u > UINT32_MAX)
            return r_.fail(h.off, "block_size must be an integer in [0, 2^32)");
        out_.events[idx].block_size = static_cast<uint32_t>(h.u);
        p.block_size_form = KVREG_WIRE_FIELD_SET;
        return true;
    }

    // str or nil into a string slot, its form into *form; `other_ok`: any other value is
    // ignored (SGLang's metadata map where vLLM has lora_name) instead of an error.
    bool opt_str(size_t &slot, uint8_t &form, const char *why) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Str) {
            slot = out_.keep_string(h.data, h.len);
            form = KVREG_WIRE_FIELD_SET;
            if (std::memchr(h.data, 0, h.len)) // the C string ends early: not re-encodable
                out_.shape.lossy = true;
            return true;
        }
        if (h.kind == MpKind::Nil) {
            form = KVREG_WIRE_FIELD_NIL;
            return true;
        }
        return r_.fail(h.off, why);
    }

    bool medium(size_t k) {
        EventParts &p = out_.parts[k];
        if (!opt_str(p.medium_name, p.medium_form, "medium must be a string or nil"))
            return false;
        size_t m = out_.parts[k].medium_name;
        if (m != kNone)
            out_.events[k].medium = medium_from_name(&out_.strings[m], std::strlen(&out_.strings[m]));
        return true;
    }

    // lora_id: int or nil.
    bool lora_id(size_t idx) {
        EventParts &p = out_.parts[idx];
        bool has = false;
        if (!opt_int(has, p.lora_id, "lora_id must be an integer or nil"))
            return false;
        p.lora_id_form = has ? KVREG_WIRE_FIELD_SET : KVREG_WIRE_FIELD_NIL;
        return true;
    }

    bool sliding_window(size_t idx) {
        EventParts &p = out_.parts[idx];
        bool has = false;
        if (!opt_int(has, p.sliding_window, "kv_cache_spec_sliding_window must be an integer or nil"))
            return false;
        p.sliding_form = has ? KVREG_WIRE_FIELD_SET : KVREG_WIRE_FIELD_NIL;
        return true;
    }

    // extra_keys: kept as its MessagePack bytes (per-block tuples of mixed types).
    bool extra_keys(size_t idx) {
        const size_t start = r_.pos();
        MpHead h;
        if (!r_.head(h))
            return false;
        r_.seek(start);
        if (!r_.skip(4))
            return false;
        EventParts &p = out_.parts[idx];
        p.extra_keys_form = h.kind == MpKind::Nil ? KVREG_WIRE_FIELD_NIL : KVREG_WIRE_FIELD_SET;
        const char *raw = reinterpret_cast<const char *>(r_.data()) + start;
        p.extra_keys = out_.strings.size();
        p.extra_keys_len = r_.pos() - start;
        out_.strings.insert(out_.strings.end(), raw, raw + p.extra_keys_len);
        return true;
    }

    // SGLang's metadata map at position 7 ({"cache_salt": str | nil, ...}): its cache_salt.
    bool sglang_metadata(size_t idx, const MpHead &m) {
        if (!r_.check_depth(m, 4))
            return false;
        out_.parts[idx].sglang_meta = true;
        bool seen = false;
        for (size_t k = 0; k < m.count; k++) {
            MpHead key;
            if (!map_key(key, 5))
                return false;
            if (is(key, "cache_salt")) {
                if (seen)
                    return r_.fail(key.off, "a repeated key in a map");
                seen = true;
                EventParts &p = out_.parts[idx];
                if (!opt_str(p.cache_salt, p.cache_salt_form, "cache_salt must be a string or nil"))
                    return false;
            } else {
                out_.parts[idx].lossy = true;
                if (!r_.skip(5))
                    return false;
            }
        }
        return true;
    }

    // Position 7: vLLM's lora_name (str or nil), or SGLang's metadata map.
    bool lora_name_or_metadata(size_t idx) {
        MpHead h;
        const size_t at = r_.pos();
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Map)
            return sglang_metadata(idx, h);
        r_.seek(at);
        EventParts &p = out_.parts[idx];
        if (h.kind == MpKind::Str || h.kind == MpKind::Nil)
            return opt_str(p.lora_name, p.lora_name_form, "lora_name must be a string or nil");
        return ignore(idx); // tolerated, as before: ignored
    }

    bool group_idx(size_t idx) {
        bool has = false;
        kvreg_wire_event &ev = out_.events[idx];
        if (!opt_int(has, ev.group_idx, "group_idx must be an integer or nil"))
            return false;
        ev.has_group_idx = has;
        out_.parts[idx].group_idx_form = has ? KVREG_WIRE_FIELD_SET : KVREG_WIRE_FIELD_NIL;
        return true;
    }

    // Begin an event of a known type (the limit on events per payload first).
    bool begin(uint32_t type, const MpHead &at, const MpHead &tag, uint32_t shape, size_t &idx) {
        if (out_.events.size() >= lim_.max_events)
            return r_.fail(at.off, "more events than the decoder's max_events");
        idx = out_.begin(type);
        EventParts &p = out_.parts[idx];
        p.tag = tag_name(tag); // a static copy: no bytes per event
        p.shape = shape;
        p.n_fields = static_cast<uint32_t>(shape == KVREG_WIRE_SHAPE_MAP ? at.count : at.count);
        return true;
    }

    bool events() {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind != MpKind::Array)
            return r_.fail(h.off, "events must be an array");
        if (!r_.check_depth(h, 2))
            return false;
        // Room for every event this array can hold: at most its count, the limit, and the
        // bytes left over the smallest event's size; so the events buffer never grows while
        // decoding (growing holds the old and the new buffer at once). That costs
        // sizeof(kvreg_wire_event) (152 bytes) per 14 payload bytes, about 11 per byte, even
        // when the count lies (or counts events of unknown types) and the bytes hold hashes
        // instead; the events' other 264 bytes (EventParts) come only with the events read
        // (PartsList), 19 per byte of an event.
        size_t most = (r_.len() - r_.pos()) / kMinEventBytes;
        most = most < h.count ? most : h.count;
        most = most < lim_.max_events ? most : lim_.max_events;
        out_.events.reserve(most);
        for (size_t k = 0; k < h.count; k++) {
            MpHead e;
            if (!r_.head(e))
                return false;
            if ((e.kind == MpKind::Map || e.kind == MpKind::Array) && !r_.check_depth(e, 3))
                return false;
            if (e.kind == MpKind::Map) {
                if (!map_event(e))
                    return false;
            } else if (e.kind == MpKind::Array) {
                if (!array_event(e))
                    return false;
            } else {
                return r_.fail(e.off, "an event must be a map or an array");
            }
        }
        return true;
    }

    // Skip the `left` values still in an event of a type we do not know, and count it.
    bool skip_event(size_t left) {
        for (size_t k = 0; k < left; k++)
            if (!r_.skip(4))
                return false;
        out_.skipped++;
        out_.shape.lossy = true; // re-encoding would drop it
        return true;
    }

    // A map's next key. msgpack allows any value as a key: one that is an array or a map is
    // skipped whole here, its elements included (head() reads only a container's header, so
    // its elements were taken for the value and every later key for the one before it: a
    // valid payload was refused at its end). The caller then skips the value as unknown.
    bool map_key(MpHead &key, unsigned level) {
        if (!r_.head(key))
            return false;
        if (key.kind == MpKind::Array || key.kind == MpKind::Map) {
            r_.seek(key.off);
            return r_.skip(level);
        }
        return true;
    }

    bool map_event(const MpHead &m) {
        size_t body = r_.pos();
        // "type" comes first from every encoder seen; otherwise find it, then read again
        uint32_t type = 0;
        bool found = false;
        MpHead key, val, tag{};
        for (size_t k = 0; k < m.count && !found; k++) {
            if (!map_key(key, 4))
                return false;
            if (is(key, "type")) {
                if (!r_.head(val))
                    return false;
                if (val.kind != MpKind::Str)
                    return r_.fail(val.off, "an event's \"type\" must be a string");
                type = type_of(val);
                tag = val;
                found = true;
            } else if (!r_.skip(4)) {
                return false;
            }
        }
        if (!found)
            return r_.fail(m.off, "an event map without \"type\"");
        r_.seek(body);
        if (type == 0)
            return skip_event(2 * m.count);

        size_t idx;
        if (!begin(type, m, tag, KVREG_WIRE_SHAPE_MAP, idx))
            return false;
        const bool stored = type == KVREG_WIRE_STORED;
        uint32_t seen = 0;
        for (size_t k = 0; k < m.count; k++) {
            if (!map_key(key, 4))
                return false;
            if (key.kind != MpKind::Str) {
                out_.parts[idx].lossy = true;
                if (!r_.skip(4)) // not a field of ours
                    return false;
                continue;
            }
            Field f = F_COUNT;
            if (is(key, "type"))
                f = F_TYPE;
            else if (is(key, "block_hashes") && type != KVREG_WIRE_CLEARED)
                f = F_HASHES;
            else if (is(key, "medium"))
                f = F_MEDIUM;
            else if (is(key, "group_idx"))
                f = F_GROUP;
            else if (stored && is(key, "parent_block_hash"))
                f = F_PARENT;
            else if (stored && is(key, "token_ids"))
                f = F_TOKENS;
            else if (stored && is(key, "block_size"))
                f = F_BLOCK_SIZE;
            else if (stored && is(key, "lora_name"))
                f = F_LORA_NAME;
            else if (stored && is(key, "lora_id"))
                f = F_LORA_ID;
            else if (stored && is(key, "extra_keys"))
                f = F_EXTRA;
            else if (stored && is(key, "kv_cache_spec_kind"))
                f = F_KIND;
            else if (stored && is(key, "kv_cache_spec_sliding_window"))
                f = F_WINDOW;
            else if (stored && is(key, "cache_salt"))
                f = F_SALT;
            else if (type != KVREG_WIRE_CLEARED && is(key, "locality"))
                f = F_LOCALITY;
            else if (is(key, "ownership"))
                f = F_OWNERSHIP;
            else if (stored && is(key, "session_id"))
                f = F_SESSION;
            if (f == F_COUNT) {
                out_.parts[idx].lossy = true;
                if (!r_.skip(4)) // later fields
                    return false;
                continue;
            }
            if (seen & (1u << f))
                return r_.fail(key.off, "a repeated key in a map");
            seen |= 1u << f;
            EventParts &pp = out_.parts[idx];
            pp.order[pp.n_order++] = static_cast<uint8_t>(f);
            if (!map_field(f, idx))
                return false;
        }
        if (type != KVREG_WIRE_CLEARED && !(seen & (1u << F_HASHES)))
            return r_.fail(m.off, "a BlockStored or BlockRemoved map without block_hashes");
        return true;
    }

    bool map_field(Field f, size_t idx) {
        EventParts &p = out_.parts[idx];
        switch (f) {
        case F_TYPE: return r_.skip(4);
        case F_HASHES: return hashes(idx);
        case F_PARENT: return parent(idx);
        case F_TOKENS: return tokens(idx);
        case F_BLOCK_SIZE: return block_size(idx);
        case F_MEDIUM: return medium(idx);
        case F_LORA_NAME:
            return opt_str(p.lora_name, p.lora_name_form, "lora_name must be a string or nil");
        case F_LORA_ID: return lora_id(idx);
        case F_GROUP: return group_idx(idx);
        case F_EXTRA: return extra_keys(idx);
        case F_KIND:
            return opt_str(p.kind, p.kind_form, "kv_cache_spec_kind must be a string or nil");
        case F_WINDOW: return sliding_window(idx);
        case F_SALT:
            return opt_str(p.cache_salt, p.cache_salt_form, "cache_salt must be a string or nil");
        case F_LOCALITY:
            return opt_str(p.locality, p.locality_form, "locality must be a string or nil");
        case F_OWNERSHIP:
            return opt_str(p.ownership, p.ownership_form, "ownership must be a string or nil");
        case F_SESSION:
            return opt_str(p.session, p.session_form, "session_id must be a string or nil");
        default: return r_.skip(4);
        }
    }

    bool array_event(const MpHead &a) {
        if (a.count == 0)
            return r_.fail(a.off, "an empty event array (no tag)");
        MpHead tag;
        if (!r_.head(tag))
            return false;
        if (tag.kind != MpKind::Str)
            return r_.fail(tag.off, "a positional event must start with its tag string");
        uint32_t type = type_of(tag);
        if (type == 0)
            return skip_event(a.count - 1);
        if (type != KVREG_WIRE_CLEARED && a.count < 2)
            return r_.fail(a.off, "a positional BlockStored or BlockRemoved without hashes");
        size_t idx;
        if (!begin(type, a, tag, KVREG_WIRE_SHAPE_ARRAY, idx))
            return false;
        for (size_t pos = 1; pos < a.count; pos++) {
            bool ok = positional(type, idx, pos);
            if (!ok)
                return false;
        }
        return true;
    }

    // Field `pos` of a positional event (position 0 is the tag).
    bool positional(uint32_t type, size_t idx, size_t pos) {
        if (type == KVREG_WIRE_STORED) {
            switch (pos) {
            case 1: return hashes(idx);
            case 2: return parent(idx);
            case 3: return tokens(idx);
            case 4: return block_size(idx);
            case 5: return lora_id(idx);
            case 6: return medium(idx);
            case 7: return lora_name_or_metadata(idx); // or SGLang's {"cache_salt": ...}
            case 8: return extra_keys(idx);
            case 9: return trailing_group_idx(idx);
            case 10: return trailing_kind(idx);
            case 11: return trailing_window(idx);
            default: return ignore(idx); // later fields
            }
        }
        if (type == KVREG_WIRE_REMOVED) {
            switch (pos) {
            case 1: return hashes(idx);
            case 2: return medium(idx);
            case 3: return trailing_group_idx(idx);
            default: return ignore(idx);
            }
        }
        // AllBlocksCleared / TierBlocksCleared: llm-d reads a medium at position 1
        if (pos == 1)
            return medium(idx);
        return ignore(idx);
    }

    // A value this decoder does not keep: skipped, and the event cannot be re-encoded.
    bool ignore(size_t idx) {
        out_.parts[idx].lossy = true;
        return r_.skip(4);
    }

    // Trailing positions are recognised by type (as Dynamo does): a value of another type
    // there is ignored. nil counts as present-and-nil.
    bool trailing_group_idx(size_t idx) {
        kvreg_wire_event &ev = out_.events[idx];
        EventParts &p = out_.parts[idx];
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Uint && h.u <= static_cast<uint64_t>(INT64_MAX)) {
            ev.group_idx = static_cast<int64_t>(h.u), ev.has_group_idx = 1;
            p.group_idx_form = KVREG_WIRE_FIELD_SET;
            return true;
        }
        if (h.kind == MpKind::Int) {
            ev.group_idx = h.i, ev.has_group_idx = 1;
            p.group_idx_form = KVREG_WIRE_FIELD_SET;
            return true;
        }
        if (h.kind == MpKind::Nil) {
            p.group_idx_form = KVREG_WIRE_FIELD_NIL;
            return true;
        }
        r_.seek(h.off);
        return ignore(idx);
    }
    bool trailing_kind(size_t idx) {
        MpHead h;
        const size_t at = r_.pos();
        if (!r_.head(h))
            return false;
        r_.seek(at);
        if (h.kind != MpKind::Str && h.kind != MpKind::Nil)
            return ignore(idx);
        EventParts &p = out_.parts[idx];
        return opt_str(p.kind, p.kind_form, "");
    }
    bool trailing_window(size_t idx) {
        MpHead h;
        const size_t at = r_.pos();
        if (!r_.head(h))
            return false;
        r_.seek(at);
        if (h.kind != MpKind::Uint && h.kind != MpKind::Int && h.kind != MpKind::Nil)
            return ignore(idx);
        if (h.kind == MpKind::Uint && h.u > static_cast<uint64_t>(INT64_MAX))
            return ignore(idx);
        return sliding_window(idx);
    }

    MpReader &r_;
    DecodedBatch &out_;
    const DecodeLimits &lim_;
    unsigned n_keys_ = 0; // batch map keys recorded
};

} // namespace

// One reader covers vLLM and SGLang: SGLang's positional layouts are prefixes of vLLM's, and
// its metadata map at position 7 is recognised by type.
bool decode_vllm(MpReader &r, DecodedBatch &out, const DecodeLimits &lim) {
    out.clear();
    r.set_max_depth(lim.max_depth);
    VllmDecoder d(r, out, lim);
    if (!d.batch()) {
        out.clear();
        return false;
    }
    out.finish();
    return true;
}

} // namespace kvreg::wire
