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
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "kvreg.h"

namespace kvreg {

// std::allocator, except that an element made with no arguments is left uninitialised
// (default-, not value-initialised): push_made() writes every field of the event it appends,
// and zeroing it first cost a `rep stos` per event on the POLL queue's push.
template <class T> struct NoZeroAlloc : std::allocator<T> {
    template <class U> struct rebind {
        using other = NoZeroAlloc<U>;
    };
    NoZeroAlloc() noexcept = default;
    template <class U> NoZeroAlloc(const NoZeroAlloc<U> &) noexcept {}
    template <class U> void construct(U *p) noexcept { ::new (static_cast<void *>(p)) U; }
    template <class U, class... A> void construct(U *p, A &&...a) {
        ::new (static_cast<void *>(p)) U(std::forward<A>(a)...);
    }
};

struct EventCopies {
    using Events = std::vector<kvreg_event, NoZeroAlloc<kvreg_event>>;
    Events events; // .tokens: see token_ptrs()
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
        push_made([&e](kvreg_event &x) noexcept { x = e; });
    }
    // Append the event make(e) writes in place (every field: it starts uninitialised), and a
    // copy of its tokens (e.tokens need only live until then). In place, not made elsewhere
    // and copied: an event written field by field and read back whole stalls on store
    // forwarding (the POLL queue spent most of its push there). Throws std::bad_alloc (from
    // make too) with nothing appended.
    template <class Make> void push_made(Make make) {
        events.emplace_back();
        try {
            kvreg_event &e = events.back();
            make(e);
            const size_t off = tokens.size();
            if (e.n_tokens) tokens.insert(tokens.end(), e.tokens, e.tokens + e.n_tokens);
            try {
                token_off.push_back(off);
            } catch (...) {
                tokens.resize(off);
                throw;
            }
        } catch (...) {
            events.pop_back();
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
