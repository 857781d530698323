// kvreg_snapshot: the registered set at one position of the event stream, as Register events
// with their own tokens, parents before children (see kvreg_registry_snapshot in kvreg.h).
#pragma once

#include <cstdint>

#include "events/event_copies.hpp"
#include "kvreg.h"

struct kvreg_snapshot {
    kvreg::EventCopies events; // .tokens point into events.tokens (token_ptrs() was called)
    uint64_t position = 0;     // id of the first event not reflected in `events`
};

namespace kvreg {

// Reorder ev so that an event whose parent_sequence_hash is another event's sequence_hash
// comes after that event (a parent cycle, which only made-up hashes can form, is cut at an
// arbitrary point); otherwise the order is kept. Points the tokens afterwards. Throws
// std::bad_alloc (ev unchanged).
void order_parents_first(EventCopies &ev);

} // namespace kvreg
