// An array of trivially copyable T for a big, short-lived scratch list (a load's records on
// their way to the table), in memory advised for huge pages.
//
// Why not std::vector: a fresh process (a replica restoring its snapshot) gets such memory
// from the kernel a 4 KB page at a time, one page fault each; a vector also zeroes what it
// resizes into and copies itself as it doubles. The trace's 182,790-record load took about
// 1,000 faults for its scratch lists alone (docs/design/index.md, "How it applies", has the
// figures). Here the storage is one allocation at the size asked for (grown by doubling only
// past it), 2 MB-aligned and advised for huge pages from 1 MB on (rounded up to whole huge
// pages): a handful of faults where the kernel honours the advice. Elements are not
// initialised; append() hands out room the caller writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "util/huge_pages.hpp"

namespace kvreg {

template <class T> class HugeArray {
    static_assert(std::is_trivially_copyable_v<T>, "elements are moved with memcpy, never constructed");

  public:
    HugeArray() = default;
    HugeArray(const HugeArray &) = delete;
    HugeArray &operator=(const HugeArray &) = delete;
    ~HugeArray() { release(); }

    T *data() noexcept { return data_; }
    const T *data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    T &operator[](size_t i) noexcept { return data_[i]; }

    // Room for at least n elements (kept ones moved). Throws std::bad_alloc (nothing changed).
    void reserve(size_t n) {
        if (n <= cap_) return;
        if (n > (SIZE_MAX - kHuge) / sizeof(T)) throw std::bad_alloc();
        const size_t bytes = round_up(n * sizeof(T));
        void *p = alloc_huge_advised(bytes, 64);
        if (size_) std::memcpy(p, data_, size_ * sizeof(T));
        std::free(data_);
        data_ = static_cast<T *>(p);
        cap_ = bytes / sizeof(T);
    }
    // n more elements, uninitialised, for the caller to write; growing by doubling. Throws
    // std::bad_alloc (nothing changed).
    T *append(size_t n) {
        if (n > SIZE_MAX / sizeof(T) - size_) throw std::bad_alloc();
        if (n > cap_ - size_) reserve(size_ + n > 2 * cap_ ? size_ + n : 2 * cap_);
        T *at = data_ + size_;
        size_ += n;
        return at;
    }
    void clear() noexcept { size_ = 0; } // the storage is kept for the next appends
    void release() noexcept {
        std::free(data_);
        data_ = nullptr;
        size_ = cap_ = 0;
    }

  private:
    static constexpr size_t kHuge = kHugePage;
    // Whole pages; whole huge pages from 1 MB on (a list that big would take 256 or more
    // faults in 4 KB pages; one huge page costs one).
    static size_t round_up(size_t bytes) noexcept {
        const size_t unit = bytes >= kHuge / 2 ? kHuge : 4096;
        return (bytes + unit - 1) / unit * unit;
    }
    T *data_ = nullptr;
    size_t size_ = 0, cap_ = 0;
};

} // namespace kvreg
