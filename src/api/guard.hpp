// The exception firewall every exported function sits behind: no C++ exception crosses the C
// ABI. Nothing in the library throws anything but std::bad_alloc, which becomes KVREG_ENOMEM;
// operations are written so that a throw leaves their state unchanged.
#pragma once

#include <new>

#include "kvreg.h"

#define KVREG_GUARD_BEGIN try {
#define KVREG_GUARD_END                                                                          \
    }                                                                                            \
    catch (const std::bad_alloc &) {                                                             \
        return KVREG_ENOMEM;                                                                     \
    }                                                                                            \
    catch (...) {                                                                                \
        return KVREG_EINVAL;                                                                     \
    }
