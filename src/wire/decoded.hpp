// What a decoder hands back: events whose arrays and strings live in a few growing buffers
// owned by the decoder (reused from payload to payload). While decoding, an event refers to
// its parts by index, since the buffers may move as they grow; finish() turns the indices into
// the pointers kvreg_wire_event carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvreg_wire.h"

namespace kvreg::wire {

inline constexpr size_t kNone = SIZE_MAX;

struct EventParts {
    size_t hashes = 0, tokens = 0, tokens_hashes = kNone; // first index in the buffers
    size_t medium_name = kNone, lora_name = kNone;        // offset in strings
};

class DecodedBatch {
public:
    std::vector<kvreg_wire_event> events;
    std::vector<EventParts> parts;
    std::vector<uint64_t> hashes;
    std::vector<uint64_t> tokens_hashes;
    std::vector<uint32_t> tokens;
    std::vector<char> strings;
    uint64_t skipped = 0; // events of unknown type in this payload

    void clear() noexcept {
        events.clear(), parts.clear(), hashes.clear(), tokens_hashes.clear(), tokens.clear();
        strings.clear();
        skipped = 0;
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
            e.n_token_ids = tok_end - p.tokens;
            e.token_ids = e.n_token_ids ? tokens.data() + p.tokens : nullptr;
            e.tokens_hashes = p.tokens_hashes != kNone ? tokens_hashes.data() + p.tokens_hashes
                                                       : nullptr;
            e.medium_name = p.medium_name != kNone ? strings.data() + p.medium_name : nullptr;
            e.lora_name = p.lora_name != kNone ? strings.data() + p.lora_name : nullptr;
        }
    }
};

} // namespace kvreg::wire
