// Replaces global operator new / new[] / delete (every variant) for a test program that links
// the library statically, so the library's own allocations go through it too. Before each
// allocation it calls the test's hook, defined by the test (outside any namespace):
//
//     bool replaced_new_fails(std::size_t n); // true: this allocation fails
//
// which may also just count. Include from exactly one source file of the program: these are
// the replaceable global functions themselves, not inline ones. valgrind substitutes its own
// operator new for the library's calls (see under_valgrind()).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

bool replaced_new_fails(std::size_t n);

namespace replace_new_detail {
inline void *alloc(std::size_t n, std::size_t align)
{
    if (replaced_new_fails(n))
        return nullptr;
    if (n == 0)
        n = 1;
    if (align <= alignof(std::max_align_t))
        return std::malloc(n);
    return std::aligned_alloc(align, (n + align - 1) / align * align);
}
inline void *alloc_or_throw(std::size_t n, std::size_t align)
{
    if (void *p = alloc(n, align))
        return p;
    throw std::bad_alloc();
}
} // namespace replace_new_detail

// True when running under valgrind, whose operator new replaces ours for the library's calls.
inline bool under_valgrind()
{
    const char *pre = std::getenv("LD_PRELOAD");
    return pre && std::strstr(pre, "vgpreload");
}

void *operator new(std::size_t n) { return replace_new_detail::alloc_or_throw(n, 0); }
void *operator new[](std::size_t n) { return replace_new_detail::alloc_or_throw(n, 0); }
void *operator new(std::size_t n, std::align_val_t a)
{
    return replace_new_detail::alloc_or_throw(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a)
{
    return replace_new_detail::alloc_or_throw(n, static_cast<std::size_t>(a));
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return replace_new_detail::alloc(n, 0); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return replace_new_detail::alloc(n, 0); }
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
    return replace_new_detail::alloc(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
    return replace_new_detail::alloc(n, static_cast<std::size_t>(a));
}
// Every operator new above returns malloc/aligned_alloc memory, so free() is the matching
// release; GCC cannot see that through the replacement and warns about the pairing.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }
