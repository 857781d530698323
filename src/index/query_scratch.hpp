// What both kinds of query (query.cpp: ranked matches; depths.cpp: depths only) need to walk
// a prompt over the holder table: buffers that stay on the stack for small clusters, and the
// copy of a hash's holders.
#pragma once

#include <cstddef>
#include <memory>

#include "index/holder_table.hpp"

namespace kvreg::index {

constexpr size_t kInline = 64;

// Load two blocks ahead: a walk is a chain of cache misses the core cannot overlap by itself
// (each block's work is long), so the table's lines are requested early. Two ahead
// measured best on the conversation trace (kvreg-bench --workload index); further ahead, more
// of the lines are for blocks past where the walk ends.
constexpr size_t kAhead = 2;

// A buffer on the stack that moves to the heap only when it must. Never initialised: every
// user writes before it reads (a cluster of thousands of workers used to zero hundreds of
// kilobytes per query here).
template <class T> class Scratch {
public:
    T *data() noexcept { return heap_ ? heap_.get() : inline_; }
    size_t cap() const noexcept { return heap_ ? heap_cap_ : kInline; }
    void reserve(size_t n) { // throws std::bad_alloc; contents are not kept
        if (n > cap()) {
            heap_.reset(new T[n]); // default-initialised: T is trivial
            heap_cap_ = n;
        }
    }

private:
    T inline_[kInline];
    std::unique_ptr<T[]> heap_;
    size_t heap_cap_ = 0;
};

// The holders of hash, in h (grown as needed); returns their number.
inline size_t read_holders(const HolderTable &t, uint64_t hash, Scratch<Holder> &h) {
    for (;;) {
        const size_t n = t.holders(hash, h.data(), h.cap());
        if (n <= h.cap()) return n;
        h.reserve(n * 2);
    }
}

} // namespace kvreg::index
