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
// the caller gets the offset of that value.
#include "decode.hpp"
#include "media.hpp"

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
    if (is(h, "AllBlocksCleared"))
        return KVREG_WIRE_CLEARED;
    return 0;
}

class VllmDecoder {
public:
    VllmDecoder(MpReader &r, DecodedBatch &out) : r_(r), out_(out) {}

    bool batch() {
        MpHead h;
        if (!r_.head(h))
            return false;
        double ts = 0;
        bool has_dp = false;
        int64_t dp = 0;
        if (h.kind == MpKind::Array) {
            if (h.count < 2)
                return r_.fail(h.off, "the batch array needs at least 2 elements [ts, events]");
            if (!number(ts) || !events())
                return false;
            if (h.count >= 3 && !dp_rank(has_dp, dp))
                return false;
            for (size_t k = 3; k < h.count; k++)
                if (!r_.skip())
                    return false;
        } else if (h.kind == MpKind::Map) {
            bool has_ts = false, has_events = false;
            for (size_t k = 0; k < h.count; k++) {
                MpHead key;
                if (!r_.head(key))
                    return false;
                if (is(key, "ts")) {
                    if (!number(ts))
                        return false;
                    has_ts = true;
                } else if (is(key, "events")) {
                    if (!events())
                        return false;
                    has_events = true;
                } else if (is(key, "data_parallel_rank") || is(key, "dp_rank") ||
                           is(key, "attn_dp_rank")) {
                    if (!dp_rank(has_dp, dp))
                        return false;
                } else if (!r_.skip()) {
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
        for (kvreg_wire_event &e : out_.events) {
            e.ts = ts;
            e.has_dp_rank = has_dp;
            e.dp_rank = dp;
        }
        return true;
    }

private:
    bool number(double &v) {
        MpHead h;
        if (!r_.head(h))
            return false;
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

    bool hash_value(const MpHead &h, uint64_t &v) {
        if (h.kind == MpKind::Uint) {
            v = h.u;
        } else if (h.kind == MpKind::Int) {
            v = static_cast<uint64_t>(h.i);
        } else if (h.kind == MpKind::Bin) {
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

    bool hashes() {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind != MpKind::Array)
            return r_.fail(h.off, "block_hashes must be an array");
        // The count is bounded by the bytes left (head() checked): sizing for it is safe.
        const size_t at = out_.hashes.size();
        out_.hashes.resize(at + h.count);
        for (size_t k = 0; k < h.count; k++) {
            uint64_t &v = out_.hashes[at + k];
            if (r_.try_uint(v))
                continue;
            MpHead e;
            if (!r_.head(e) || !hash_value(e, v))
                return false;
        }
        return true;
    }

    bool parent(kvreg_wire_event &ev) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Nil)
            return true;
        if (!hash_value(h, ev.parent_block_hash))
            return false;
        ev.has_parent = 1;
        return true;
    }

    bool tokens() {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind != MpKind::Array)
            return r_.fail(h.off, "token_ids must be an array");
        const size_t at = out_.tokens.size(); // count bounded by the bytes left, as above
        out_.tokens.resize(at + h.count);
        uint32_t *const dst = out_.tokens.data() + at;
        for (size_t k = 0; k < h.count; k++) {
            const size_t off = r_.pos();
            uint64_t u;
            if (r_.try_uint(u)) {
                if (u > UINT32_MAX)
                    return r_.fail(off, "a token id must be an integer in [0, 2^32)");
                dst[k] = static_cast<uint32_t>(u);
                continue;
            }
            MpHead t;
            if (!r_.head(t))
                return false;
            if (t.kind != MpKind::Uint || t.u > UINT32_MAX)
                return r_.fail(t.off, "a token id must be an integer in [0, 2^32)");
            dst[k] = static_cast<uint32_t>(t.u);
        }
        return true;
    }

    bool block_size(kvreg_wire_event &ev) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Nil)
            return true;
        if (h.kind != MpKind::Uint || h.u > UINT32_MAX)
            return r_.fail(h.off, "block_size must be an integer in [0, 2^32)");
        ev.block_size = static_cast<uint32_t>(h.u);
        return true;
    }

    // str or nil into a string slot; `other_ok`: any other value is ignored (SGLang's metadata
    // map where vLLM has lora_name) instead of an error.
    bool opt_str(size_t &slot, const char *why, bool other_ok = false) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Str) {
            slot = out_.keep_string(h.data, h.len);
            return true;
        }
        if (h.kind == MpKind::Nil)
            return true;
        if (other_ok) {
            r_.seek(h.off);
            return r_.skip();
        }
        return r_.fail(h.off, why);
    }

    bool medium(size_t k) {
        if (!opt_str(out_.parts[k].medium_name, "medium must be a string or nil"))
            return false;
        size_t m = out_.parts[k].medium_name;
        if (m != kNone)
            out_.events[k].medium = medium_from_name(&out_.strings[m], std::strlen(&out_.strings[m]));
        return true;
    }

    bool group_idx(kvreg_wire_event &ev) {
        bool has = false;
        if (!opt_int(has, ev.group_idx, "group_idx must be an integer or nil"))
            return false;
        ev.has_group_idx = has;
        return true;
    }

    bool events() {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind != MpKind::Array)
            return r_.fail(h.off, "events must be an array");
        for (size_t k = 0; k < h.count; k++) {
            MpHead e;
            if (!r_.head(e))
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
            if (!r_.skip())
                return false;
        out_.skipped++;
        return true;
    }

    bool map_event(const MpHead &m) {
        size_t body = r_.pos();
        // "type" comes first from every encoder seen; otherwise find it, then read again
        uint32_t type = 0;
        bool found = false;
        MpHead key, val;
        for (size_t k = 0; k < m.count && !found; k++) {
            if (!r_.head(key))
                return false;
            if (is(key, "type")) {
                if (!r_.head(val))
                    return false;
                if (val.kind != MpKind::Str)
                    return r_.fail(val.off, "an event's \"type\" must be a string");
                type = type_of(val);
                found = true;
            } else if (!r_.skip()) {
                return false;
            }
        }
        if (!found)
            return r_.fail(m.off, "an event map without \"type\"");
        r_.seek(body);
        if (type == 0)
            return skip_event(2 * m.count);

        size_t idx = out_.begin(type);
        bool has_hashes = false;
        for (size_t k = 0; k < m.count; k++) {
            if (!r_.head(key))
                return false;
            bool ok = true;
            if (key.kind != MpKind::Str) {
                ok = r_.skip(); // not a field of ours
            } else if (is(key, "block_hashes") && type != KVREG_WIRE_CLEARED) {
                ok = hashes(), has_hashes = true;
            } else if (is(key, "parent_block_hash") && type == KVREG_WIRE_STORED) {
                ok = parent(out_.events[idx]);
            } else if (is(key, "token_ids") && type == KVREG_WIRE_STORED) {
                ok = tokens();
            } else if (is(key, "block_size") && type == KVREG_WIRE_STORED) {
                ok = block_size(out_.events[idx]);
            } else if (is(key, "medium")) {
                ok = medium(idx);
            } else if (is(key, "lora_name") && type == KVREG_WIRE_STORED) {
                ok = opt_str(out_.parts[idx].lora_name, "lora_name must be a string or nil");
            } else if (is(key, "group_idx")) {
                ok = group_idx(out_.events[idx]);
            } else {
                ok = r_.skip(); // "type", lora_id, extra_keys, kv_cache_spec_*, newer fields
            }
            if (!ok)
                return false;
        }
        if (type != KVREG_WIRE_CLEARED && !has_hashes)
            return r_.fail(m.off, "a BlockStored or BlockRemoved map without block_hashes");
        return true;
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
        size_t idx = out_.begin(type);
        for (size_t pos = 1; pos < a.count; pos++) {
            bool ok = positional(type, idx, pos);
            if (!ok)
                return false;
        }
        return true;
    }

    // Field `pos` of a positional event (position 0 is the tag).
    bool positional(uint32_t type, size_t idx, size_t pos) {
        kvreg_wire_event &ev = out_.events[idx];
        if (type == KVREG_WIRE_STORED) {
            switch (pos) {
            case 1: return hashes();
            case 2: return parent(ev);
            case 3: return tokens();
            case 4: return block_size(ev);
            case 6: return medium(idx);
            // vLLM's lora_name, or SGLang's {"cache_salt": ...} metadata map (ignored)
            case 7: return opt_str(out_.parts[idx].lora_name, "lora_name must be a string or nil", true);
            case 9: return trailing_group_idx(ev);
            default: return r_.skip(); // lora_id, extra_keys, kv_cache_spec_*, later fields
            }
        }
        if (type == KVREG_WIRE_REMOVED) {
            switch (pos) {
            case 1: return hashes();
            case 2: return medium(idx);
            case 3: return trailing_group_idx(ev);
            default: return r_.skip();
            }
        }
        // AllBlocksCleared: llm-d reads a medium at position 1; nothing else is defined
        if (pos == 1)
            return medium(idx);
        return r_.skip();
    }

    // A group_idx in a trailing position is taken when it is an int (Dynamo recognises the
    // trailing fields by type); other values there are ignored.
    bool trailing_group_idx(kvreg_wire_event &ev) {
        MpHead h;
        if (!r_.head(h))
            return false;
        if (h.kind == MpKind::Uint && h.u <= static_cast<uint64_t>(INT64_MAX)) {
            ev.group_idx = static_cast<int64_t>(h.u), ev.has_group_idx = 1;
            return true;
        }
        if (h.kind == MpKind::Int) {
            ev.group_idx = h.i, ev.has_group_idx = 1;
            return true;
        }
        r_.seek(h.off);
        return r_.skip();
    }

    MpReader &r_;
    DecodedBatch &out_;
};

} // namespace

bool decode_vllm(MpReader &r, DecodedBatch &out, bool sglang) {
    (void)sglang; // one reader covers both: SGLang's positional layouts are prefixes of vLLM's,
                  // and its metadata map at position 7 is recognised by type
    out.clear();
    VllmDecoder d(r, out);
    if (!d.batch()) {
        out.clear();
        return false;
    }
    out.finish();
    return true;
}

} // namespace kvreg::wire
