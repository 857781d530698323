// Events together with their own copy of their tokens: what an event becomes when it must
// outlive the buffer it was written in (a ring slot about to be reused, a caller's array).
// Used for the run handed to the callback, the events spilled from the ring, and the POLL
// queue's chunks.
//
// Appending may move the token array, so an event's `tokens` pointer is only set by
// token_ptrs() (once nothing more will be appended) or looked up with tokens_of(). Not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvreg.h"

namespace kvreg {

struct EventCopies {
    std::vector<kvreg_event> events; // .tokens: see token_ptrs()
    std::vector<size_t> token_off;   // events[i]'s tokens start at tokens[token_off[i]]
    std::vector<uint32_t> tokens;

    size_t size() const noexcept { return events.size(); }
    void clear() noexcept {
        events.clear();
        token_off.clear();
        tokens.clear();
    }
    void reserve(size_t n) { // throws std::bad_alloc
        events.reserve(n);
        token_off.reserve(n);
    }
    // Append e and a copy of its tokens. Throws std::bad_alloc with nothing appended.
    void push(const kvreg_event &e) {
        const size_t off = tokens.size();
        if (e.n_tokens) tokens.insert(tokens.end(), e.tokens, e.tokens + e.n_tokens);
        try {
            events.push_back(e);
            try {
                token_off.push_back(off);
            } catch (...) {
                events.pop_back();
                throw;
            }
        } catch (...) {
            tokens.resize(off);
            throw;
        }
    }
    const uint32_t *tokens_of(size_t i) const noexcept {
        return events[i].n_tokens ? tokens.data() + token_off[i] : nullptr;
    }
    // Point every event at its copied tokens (after the last push).
    void token_ptrs() noexcept {
        for (size_t i = 0; i < events.size(); i++) events[i].tokens = tokens_of(i);
    }
    size_t bytes() const noexcept {
        return events.capacity() * sizeof(kvreg_event) + token_off.capacity() * sizeof(size_t) +
               tokens.capacity() * sizeof(uint32_t);
    }
};

} // namespace kvreg
