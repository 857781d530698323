// Memory for a big array that is read and written at random or filled in one go (an index's
// tables and mappings, a load's scratch lists): 2 MB-aligned and advised for transparent huge
// pages once it spans one, so that filling it costs a page fault per 2 MB rather than per 4
// KB (dear in VMs: docs/design/index.md, "How it applies") and random reads miss the TLB
// less. The advice may be ignored (transparent huge pages off): then it is a plain
// allocation. Freed with std::free.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace kvreg {

inline constexpr size_t kHugePage = size_t{2} << 20;

// bytes (not zeroed), aligned to small_align below a huge page. Throws std::bad_alloc.
inline void *alloc_huge_advised(size_t bytes, size_t small_align) {
    void *p = nullptr;
    if (posix_memalign(&p, bytes >= kHugePage ? kHugePage : small_align, bytes) != 0) throw std::bad_alloc();
    if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

} // namespace kvreg
