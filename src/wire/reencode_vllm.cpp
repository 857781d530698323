// Re-encoding a decoded vLLM / SGLang batch the way the upstream encoder wrote it (msgspec's
// rules): the outer batch and positional events as arrays of their decoded length, map events
// with the decoded keys in their decoded order, integers in their smallest form (msgspec's
// and msgpack-c's choice alike), floats as float64, None as nil. The decoder records what the
// struct alone cannot say (decoded.hpp: key order, nil vs absent, signed hashes, bytes hashes'
// bytes); a payload with anything the decoder dropped is refused rather than re-encoded short.
#include "wire/reencode.hpp"

namespace kvreg::wire {
namespace {

class Reencoder {
public:
    Reencoder(const DecodedBatch &b, MpWriter &w) : b_(b), w_(w) {}

    void batch() {
        const BatchShape &s = b_.shape;
        if (s.map) {
            static const char *const names[] = {"ts", "events", "data_parallel_rank", "dp_rank",
                                                "attn_dp_rank"};
            w_.map(s.count);
            for (uint32_t k = 0; k < s.count; k++) {
                uint8_t id = s.key_order[k];
                w_.str(names[id]);
                if (id == 0)
                    w_.f64(s.ts);
                else if (id == 1)
                    events();
                else
                    dp();
            }
            return;
        }
        w_.array(s.count);
        w_.f64(s.ts);
        events();
        if (s.count >= 3)
            dp();
    }

private:
    void dp() {
        if (b_.shape.dp_form == KVREG_WIRE_FIELD_SET)
            w_.sint(b_.shape.dp);
        else
            w_.nil();
    }
    void events() {
        w_.array(b_.events.size());
        for (size_t k = 0; k < b_.events.size(); k++)
            event(k);
    }
    const char *str(size_t off) const { return b_.strings.data() + off; }
    void opt_str(uint8_t form, size_t off) {
        if (form == KVREG_WIRE_FIELD_SET && off != kNone)
            w_.str(str(off));
        else
            w_.nil();
    }
    void opt_int(uint8_t form, int64_t v) {
        if (form == KVREG_WIRE_FIELD_SET)
            w_.sint(v);
        else
            w_.nil();
    }
    void hash(uint64_t v, bool sign) {
        if (sign && v > static_cast<uint64_t>(INT64_MAX))
            w_.sint(static_cast<int64_t>(v));
        else
            w_.uint(v);
    }
    void raw(size_t off, size_t len) { w_.raw(str(off), len); }

    void field(size_t k, Field f) {
        const kvreg_wire_event &e = b_.events[k];
        const EventParts &p = b_.parts[k];
        switch (f) {
        case F_TYPE: w_.str(p.tag); break;
        case F_HASHES:
            if (p.raw_hashes != kNone) {
                raw(p.raw_hashes, p.raw_hashes_len);
                break;
            }
            w_.array(e.n_block_hashes);
            for (size_t i = 0; i < e.n_block_hashes; i++)
                hash(e.block_hashes[i], p.hashes_signed);
            break;
        case F_PARENT:
            if (p.raw_parent != kNone)
                raw(p.raw_parent, p.raw_parent_len);
            else if (e.has_parent)
                hash(e.parent_block_hash, p.parent_signed);
            else
                w_.nil();
            break;
        case F_TOKENS: {
            const size_t end = k + 1 < b_.parts.size() ? b_.parts[k + 1].tokens : b_.tokens.size();
            const size_t n = end - p.tokens;
            const uint32_t *t = b_.tokens.data() + p.tokens;
            if (p.token_pairs) {
                w_.array(n / 2);
                for (size_t i = 0; i + 1 < n; i += 2)
                    w_.array(2), w_.uint(t[i]), w_.uint(t[i + 1]);
            } else {
                w_.array(n);
                w_.uints(t, n);
            }
            break;
        }
        case F_BLOCK_SIZE: opt_int(p.block_size_form, e.block_size); break;
        case F_MEDIUM: opt_str(p.medium_form, p.medium_name); break;
        case F_LORA_NAME: opt_str(p.lora_name_form, p.lora_name); break;
        case F_LORA_ID: opt_int(p.lora_id_form, p.lora_id); break;
        case F_GROUP: opt_int(p.group_idx_form, e.group_idx); break;
        case F_EXTRA:
            if (p.extra_keys != kNone)
                raw(p.extra_keys, p.extra_keys_len);
            else
                w_.nil();
            break;
        case F_KIND: opt_str(p.kind_form, p.kind); break;
        case F_WINDOW: opt_int(p.sliding_form, p.sliding_window); break;
        case F_SALT: opt_str(p.cache_salt_form, p.cache_salt); break;
        case F_LOCALITY: opt_str(p.locality_form, p.locality); break;
        case F_OWNERSHIP: opt_str(p.ownership_form, p.ownership); break;
        case F_SESSION: opt_str(p.session_form, p.session); break;
        default: w_.nil(); break;
        }
    }

    static const char *name(Field f) {
        static const char *const names[F_COUNT] = {
            "type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "medium",
            "lora_name", "lora_id", "group_idx", "extra_keys", "kv_cache_spec_kind",
            "kv_cache_spec_sliding_window", "cache_salt", "locality", "ownership", "session_id"};
        return names[f];
    }

    // Positional layouts (position 0 is the tag).
    static constexpr Field kStored[] = {F_TYPE,   F_HASHES,  F_PARENT,    F_TOKENS,
                                        F_BLOCK_SIZE, F_LORA_ID, F_MEDIUM, F_LORA_NAME,
                                        F_EXTRA,  F_GROUP,   F_KIND,      F_WINDOW};
    static constexpr Field kRemoved[] = {F_TYPE, F_HASHES, F_MEDIUM, F_GROUP};
    static constexpr Field kCleared[] = {F_TYPE, F_MEDIUM};

    void event(size_t k) {
        const kvreg_wire_event &e = b_.events[k];
        const EventParts &p = b_.parts[k];
        if (p.shape == KVREG_WIRE_SHAPE_MAP) {
            w_.map(p.n_order);
            for (uint8_t i = 0; i < p.n_order; i++) {
                const Field f = static_cast<Field>(p.order[i]);
                w_.str(name(f));
                field(k, f);
            }
            return;
        }
        w_.array(p.n_fields);
        for (uint32_t pos = 0; pos < p.n_fields; pos++) {
            if (e.type == KVREG_WIRE_STORED) {
                if (pos == 7 && p.sglang_meta) {
                    const bool salt = p.cache_salt_form != KVREG_WIRE_FIELD_ABSENT;
                    w_.map(salt ? 1 : 0);
                    if (salt)
                        w_.str("cache_salt"), opt_str(p.cache_salt_form, p.cache_salt);
                } else {
                    field(k, kStored[pos]);
                }
            } else if (e.type == KVREG_WIRE_REMOVED) {
                field(k, kRemoved[pos]);
            } else {
                field(k, kCleared[pos]);
            }
        }
    }

    const DecodedBatch &b_;
    MpWriter &w_;
};

} // namespace

bool reencodable(const DecodedBatch &b) noexcept {
    if (!b.shape.ok || b.shape.lossy)
        return false;
    for (size_t k = 0; k < b.parts.size(); k++) {
        const EventParts &p = b.parts[k];
        if (p.lossy)
            return false;
        // positions past the layouts above are never kept (the decoder marks them lossy)
        const uint32_t type = b.events[k].type;
        const uint32_t most = type == KVREG_WIRE_STORED ? 12 : type == KVREG_WIRE_REMOVED ? 4 : 2;
        if (p.shape == KVREG_WIRE_SHAPE_ARRAY && p.n_fields > most)
            return false;
    }
    return true;
}

void reencode_vllm(const DecodedBatch &b, MpWriter &w) {
    w.clear();
    Reencoder(b, w).batch();
}

} // namespace kvreg::wire
