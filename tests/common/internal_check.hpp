// CHECK for the C++ tests that link the library's internals: report a failed condition with its
// place and go on (so one run shows every failure), abort after 20. main() returns
// check_failures() != 0.
#pragma once

#include <cstdio>
#include <cstdlib>

inline int &check_failures() {
    static int n = 0; // one test program, one count
    return n;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);          \
            if (++check_failures() > 20) std::abort();                                             \
        }                                                                                          \
    } while (0)
