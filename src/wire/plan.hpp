// Which kvreg events go together into one wire event, shared by every encoder.
//
//   stored:  consecutive Registers that continue one chain (each one's parent is the previous
//            one's sequence hash) on one medium; for the vLLM formats also with one token
//            count, since one BlockStored has one block_size.
//   removed: within a run of consecutive Removes, one group per medium (in the order the media
//            first appear); Removes carry no order among themselves that a consumer could see.
//   cleared: one per Cleared.
//
// Events the format cannot carry stop the plan (see Plan::stop): the caller encodes what came
// before and reports the stopping event to its caller on the next call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvreg.h"

namespace kvreg::wire {

struct Group {
    uint32_t type;   // KVREG_WIRE_STORED / _REMOVED / _CLEARED
    uint32_t medium; // KVREG_MEDIUM_*
    size_t first;    // events [first, end): stored = every one; removed = those of this medium
    size_t end;
};

struct PlanRules {
    bool need_tokens;    // vLLM: a stored event needs token_ids = blocks * block_size
    uint32_t block_size; // 0: any (one per stored event); else every Register must have it
};

struct Plan {
    std::vector<Group> groups;
    size_t n_events = 0; // events [0, n_events) are planned
    int stop = 0;        // KVREG_OK, or why events[n_events] cannot be encoded
};

// Plan events[0 .. min(n, max_events)). Unencodable events (the status in Plan::stop):
//   KVREG_EINVAL  unknown kind or medium, or n_tokens > 0 with tokens NULL;
//   KVREG_ESTATE  (need_tokens) a Register without tokens, or with a token count other than
//                 rules.block_size when that is set.
// Throws std::bad_alloc.
void plan_events(const kvreg_event *ev, size_t n, size_t max_events, const PlanRules &rules,
                 Plan &out);

} // namespace kvreg::wire
