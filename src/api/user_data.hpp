// A user_data the library owns: its destroy function runs exactly once, when the value is
// replaced or when the object holding it is freed (kvreg.h, "destroy").
#pragma once

#include <utility>

#include "kvreg.h"

namespace kvreg {

class OwnedUserData {
public:
    OwnedUserData() noexcept = default;
    OwnedUserData(const OwnedUserData &) = delete;
    OwnedUserData &operator=(const OwnedUserData &) = delete;
    ~OwnedUserData() { reset(nullptr, nullptr); }
    // Take ud (destroy may be NULL: borrowed); the previous one is destroyed.
    void reset(void *ud, kvreg_destroy_fn destroy) noexcept {
        void *old = std::exchange(ud_, ud);
        kvreg_destroy_fn old_destroy = std::exchange(destroy_, destroy);
        if (old_destroy) old_destroy(old);
    }

private:
    void *ud_ = nullptr;
    kvreg_destroy_fn destroy_ = nullptr;
};

} // namespace kvreg
