// What a decoder hands back: events whose arrays and strings live in a few growing buffers
// owned by the decoder (reused from payload to payload). While decoding, an event refers to
// its parts by index, since the buffers may move as they grow; finish() turns the indices into
// the pointers kvreg_wire_event carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kvreg_wire.h"

namespace kvreg::wire {

inline constexpr size_t kNone = SIZE_MAX;

// The fields of a vLLM / SGLang map event (a bit each for finding repeated keys; recorded in
// wire order for re-encoding).
enum Field : unsigned {
    F_TYPE, F_HASHES, F_PARENT, F_TOKENS, F_BLOCK_SIZE, F_MEDIUM, F_LORA_NAME, F_LORA_ID,
    F_GROUP, F_EXTRA, F_KIND, F_WINDOW, F_SALT, F_LOCALITY, F_OWNERSHIP, F_SESSION, F_COUNT
};
static_assert(F_COUNT <= 24, "EventParts::order holds every field once");

// Everything about an event that kvreg_wire_event_ext reports, by index / offset.
struct EventParts {
    size_t hashes = 0, tokens = 0, tokens_hashes = kNone; // first index in the buffers
    size_t medium_name = kNone, lora_name = kNone;        // offset in strings
    const char *tag = nullptr;                            // a static name (known tags only)
    size_t cache_salt = kNone, kind = kNone;              // offset in strings
    size_t extra_keys = kNone, extra_keys_len = 0;        // offset in strings (raw bytes)
    int64_t lora_id = 0, sliding_window = 0;
    uint32_t shape = 0, n_fields = 0;
    uint8_t medium_form = KVREG_WIRE_FIELD_ABSENT, lora_name_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t lora_id_form = KVREG_WIRE_FIELD_ABSENT, group_idx_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t cache_salt_form = KVREG_WIRE_FIELD_ABSENT, kind_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t sliding_form = KVREG_WIRE_FIELD_ABSENT, extra_keys_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t locality_form = KVREG_WIRE_FIELD_ABSENT, ownership_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t session_form = KVREG_WIRE_FIELD_ABSENT, block_size_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t parent_form = KVREG_WIRE_FIELD_ABSENT;
    size_t locality = kNone, ownership = kNone, session = kNone; // offset in strings
    bool token_pairs = false;
    // For re-encoding (reencode_vllm.cpp): map events' keys in wire order (Field ids of
    // decode_vllm.cpp), how hashes were spelt, and whether anything was dropped.
    uint8_t order[24] = {};
    uint8_t n_order = 0;
    bool lossy = false;          // a key not read, a value ignored: cannot re-encode
    bool hashes_signed = false;  // a hash came as a negative int: >= 2^63 goes back signed
    bool parent_signed = false;
    bool sglang_meta = false;    // position 7 held SGLang's {"cache_salt": ...} map
    size_t raw_hashes = kNone, raw_hashes_len = 0; // block_hashes' bytes when any was bin
    size_t raw_parent = kNone, raw_parent_len = 0; // parent_block_hash's bytes when bin
    // Dynamo RouterEvent fields (decode_dynamo.cpp), and which keys were on the wire so that
    // re-encoding (reencode_dynamo.cpp) writes the same ones: upstream's older releases lack
    // some that its newer ones always write.
    uint32_t start_position = 0;
    uint8_t start_form = KVREG_WIRE_FIELD_ABSENT, residency_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t state_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t dyn_keys = 0;                 // DYN_* bits
    size_t residency = kNone;             // offset in strings
    size_t state_source = kNone, state_source_len = 0; // offset in strings (raw value)
    size_t mm_forms = kNone;              // first index in mm_forms (stored events)
    size_t mm_objects = 0, mm_offsets = 0; // first index in mm_objects / mm_offsets
};

// The EventParts of a payload's events, in fixed chunks that never move. A decoder cannot
// know how many events an events array holds before reading them: its count may lie (or
// include events of unknown types, skipped), so sizing a vector of these 264-byte records by
// it charges them to bytes that turn out to hold hashes, and growing a vector instead holds
// the old and the new buffer at once. Chunks come as events do (the payload pays 264 bytes
// per event it really holds, nothing more) and are kept for the next payload.
class PartsList {
public:
    EventParts &operator[](size_t k) noexcept { return chunks_[k >> kShift][k & kMask]; }
    const EventParts &operator[](size_t k) const noexcept {
        return chunks_[k >> kShift][k & kMask];
    }
    size_t size() const noexcept { return n_; }
    bool empty() const noexcept { return n_ == 0; }
    EventParts &back() noexcept { return (*this)[n_ - 1]; }
    const EventParts &back() const noexcept { return (*this)[n_ - 1]; }
    void push_back(const EventParts &p) {
        if (n_ == chunks_.size() << kShift) [[unlikely]]
            add_chunk();
        (*this)[n_++] = p;
    }
    void pop_back() noexcept { n_--; }
    void clear() noexcept { n_ = 0; }

private:
    // Out of line: a decoder reuses its chunks, so this is the rare path of push_back().
    [[gnu::noinline]] void add_chunk() {
        chunks_.push_back(std::make_unique<EventParts[]>(size_t{1} << kShift));
    }

    static constexpr unsigned kShift = 5; // 32 per chunk: 8.4 KB
    static constexpr size_t kMask = (size_t{1} << kShift) - 1;
    std::vector<std::unique_ptr<EventParts[]>> chunks_;
    size_t n_ = 0;
};

// Room for n more elements at the end of v (n checked against the payload's bytes left, at
// an element's smallest encoding), of the at most `limit` the payload can put there (its
// length: an element takes a byte at least). A large array gets exactly its size; small ones
// grow the buffer by half (no reallocation per event, and headroom for the next payload), but
// not past `limit`. Growing holds the old and the new buffer at once: with doubling that is 3
// times the elements at the peak, 24 bytes per one-byte hash; by half within the limit, at
// most twice the limit, 16 bytes per payload byte for 8-byte hashes.
template <class T> void reserve_more(std::vector<T> &v, size_t n, size_t limit) {
    const size_t need = v.size() + n;
    if (need <= v.capacity())
        return;
    size_t want = v.capacity() + v.capacity() / 2;
    want = want < limit ? want : limit;
    v.reserve(want > need ? want : need);
}

// EventParts::dyn_keys: RouterEvent / KvCacheEvent keys present on the wire.
enum : uint8_t { DYN_WORKER = 1, DYN_EVENT_ID = 2, DYN_DP_RANK = 4 };

// The batch around the events, for re-encoding.
struct BatchShape {
    bool map = false;     // the outer batch was a map
    uint32_t count = 0;   // its elements (array) or keys (map)
    uint8_t dp_form = KVREG_WIRE_FIELD_ABSENT;
    uint8_t key_order[3] = {}; // map: 0 ts, 1 events, 2.. dp under name index (2, 3, 4)
    bool ts_int = false;  // ts came as an integer
    double ts = 0;
    int64_t dp = 0;
    bool lossy = false;   // extra elements / unknown keys
    bool ok = false;      // a vLLM-family payload was decoded last
    bool dynamo = false;  // a Dynamo payload was decoded last
    bool single = false;  // Dynamo: the payload was one RouterEvent, not an array
};

class DecodedBatch {
public:
    std::vector<kvreg_wire_event> events;
    PartsList parts;
    std::vector<uint64_t> hashes;
    std::vector<uint64_t> tokens_hashes;
    std::vector<uint32_t> tokens;
    std::vector<char> strings;
    std::vector<uint8_t> mm_forms;              // Dynamo: per stored block
    std::vector<kvreg_wire_mm_object> mm_objects; // Dynamo: first_offset relative to event
    std::vector<uint64_t> mm_offsets;           // Dynamo: (start, end) pairs
    uint64_t skipped = 0; // events of unknown type in this payload
    BatchShape shape;

    void clear() noexcept {
        events.clear(), parts.clear(), hashes.clear(), tokens_hashes.clear(), tokens.clear();
        strings.clear(), mm_forms.clear(), mm_objects.clear(), mm_offsets.clear();
        skipped = 0;
        shape = BatchShape{};
    }

    // Begin an event; returns its index.
    size_t begin(uint32_t type) {
        kvreg_wire_event e{};
        e.type = type;
        e.medium = KVREG_MEDIUM_GPU;
        events.push_back(e);
        EventParts p;
        p.hashes = hashes.size();
        p.tokens = tokens.size();
        p.mm_objects = mm_objects.size();
        p.mm_offsets = mm_offsets.size();
        parts.push_back(p);
        return events.size() - 1;
    }
    // Drop the last event and what it appended (an event of a type we skip).
    void drop_last() noexcept {
        const EventParts &p = parts.back();
        hashes.resize(p.hashes);
        tokens.resize(p.tokens);
        if (p.tokens_hashes != kNone)
            tokens_hashes.resize(p.tokens_hashes);
        if (p.mm_forms != kNone)
            mm_forms.resize(p.mm_forms);
        mm_objects.resize(p.mm_objects);
        mm_offsets.resize(p.mm_offsets);
        events.pop_back(), parts.pop_back();
    }
    // A copy of s[0..n) with a NUL; returns its offset.
    size_t keep_string(const char *s, size_t n) {
        size_t off = strings.size();
        strings.insert(strings.end(), s, s + n);
        strings.push_back('\0');
        return off;
    }

    // Counts from the buffer sizes, then pointers into the buffers.
    void finish() noexcept {
        for (size_t k = 0; k < events.size(); k++) {
            kvreg_wire_event &e = events[k];
            const EventParts &p = parts[k];
            size_t hash_end = k + 1 < parts.size() ? parts[k + 1].hashes : hashes.size();
            size_t tok_end = k + 1 < parts.size() ? parts[k + 1].tokens : tokens.size();
            e.n_block_hashes = hash_end - p.hashes;
            e.block_hashes = e.n_block_hashes ? hashes.data() + p.hashes : nullptr;
            e.n_token_ids = p.token_pairs ? 0 : tok_end - p.tokens;
            e.token_ids = e.n_token_ids ? tokens.data() + p.tokens : nullptr;
            e.tokens_hashes = p.tokens_hashes != kNone ? tokens_hashes.data() + p.tokens_hashes
                                                       : nullptr;
            e.medium_name = p.medium_name != kNone ? strings.data() + p.medium_name : nullptr;
            e.lora_name = p.lora_name != kNone ? strings.data() + p.lora_name : nullptr;
        }
    }

    // The extended view of event k (after finish()); fills at most ext.struct_size bytes.
    void ext(size_t k, kvreg_wire_event_ext &out) const noexcept {
        const EventParts &p = parts[k];
        size_t tok_end = k + 1 < parts.size() ? parts[k + 1].tokens : tokens.size();
        auto str = [&](size_t off) { return off != kNone ? strings.data() + off : nullptr; };
        kvreg_wire_event_ext x{};
        x.struct_size = static_cast<uint32_t>(sizeof x);
        x.shape = p.shape;
        x.tag = p.tag;
        x.n_fields = p.n_fields;
        x.medium_form = p.medium_form;
        x.lora_name_form = p.lora_name_form;
        x.lora_id_form = p.lora_id_form;
        x.lora_id = p.lora_id;
        x.token_pairs = p.token_pairs;
        x.group_idx_form = p.group_idx_form;
        if (p.token_pairs && tok_end > p.tokens)
            x.pair_token_ids = tokens.data() + p.tokens, x.n_pair_token_ids = tok_end - p.tokens;
        x.cache_salt = str(p.cache_salt);
        x.cache_salt_form = p.cache_salt_form;
        x.kv_cache_spec_kind_form = p.kind_form;
        x.kv_cache_spec_kind = str(p.kind);
        x.sliding_window_form = p.sliding_form;
        x.kv_cache_spec_sliding_window = p.sliding_window;
        x.extra_keys_form = p.extra_keys_form;
        if (p.extra_keys != kNone)
            x.extra_keys = reinterpret_cast<const uint8_t *>(strings.data() + p.extra_keys),
            x.extra_keys_len = p.extra_keys_len;
        x.locality = str(p.locality), x.locality_form = p.locality_form;
        x.ownership = str(p.ownership), x.ownership_form = p.ownership_form;
        x.session_id = str(p.session), x.session_id_form = p.session_form;
        x.block_size_form = p.block_size_form;
        x.parent_form = p.parent_form;
        if (p.shape == KVREG_WIRE_SHAPE_DYNAMO) {
            const bool last = k + 1 == parts.size();
            const size_t obj_end = last ? mm_objects.size() : parts[k + 1].mm_objects;
            const size_t off_end = last ? mm_offsets.size() : parts[k + 1].mm_offsets;
            x.start_position_form = p.start_form;
            x.start_position = p.start_position;
            if (p.mm_forms != kNone)
                x.mm_extra_info_forms = mm_forms.data() + p.mm_forms;
            if (obj_end > p.mm_objects)
                x.mm_objects = mm_objects.data() + p.mm_objects,
                x.n_mm_objects = obj_end - p.mm_objects;
            if (off_end > p.mm_offsets)
                x.mm_offsets = mm_offsets.data() + p.mm_offsets,
                x.n_mm_offsets = off_end - p.mm_offsets;
            x.residency_domain = str(p.residency);
            x.residency_domain_form = p.residency_form;
            x.state_source_form = p.state_form;
            if (p.state_source != kNone)
                x.state_source = reinterpret_cast<const uint8_t *>(strings.data() + p.state_source),
                x.state_source_len = p.state_source_len;
        }
        const size_t n = out.struct_size < sizeof x ? out.struct_size : sizeof x;
        std::memcpy(&out, &x, n);
        out.struct_size = static_cast<uint32_t>(n);
    }
};

} // namespace kvreg::wire
