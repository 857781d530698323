// What a kvreg_index handle is: the C API's (api/index.cpp) and the NATS consumer's, which
// loads a snapshot straight into the index as its chunks arrive (nats/snapshot.cpp).
#pragma once

#include "index/index.hpp"

struct kvreg_index {
    explicit kvreg_index(const kvreg::index::Options &o) : impl(o) {}
    kvreg::index::Index impl;
};
