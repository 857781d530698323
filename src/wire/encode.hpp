// The encoders: a plan (plan.hpp) of kvreg events into the bytes of one payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvreg.h"
#include "wire/mp_write.hpp"
#include "wire/plan.hpp"

namespace kvreg::wire {

struct EncodeOptions {
    uint64_t dp_rank = 0;
    uint64_t worker_id = 0;
    bool has_lora = false;
    std::string lora_name;
    uint64_t next_event_id = 0; // KVREG_WIRE_OPT_NEXT_EVENT_ID
    bool kvreg_ids = false;     // KVREG_WIRE_OPT_EVENT_IDS == KVREG_WIRE_EVENT_IDS_KVREG
    // The previous call's first kvreg event id and the id it started from: a call starting
    // at the same live event encodes it again and reuses those ids.
    uint64_t last_first = KVREG_EVENT_ID_SNAPSHOT;
    uint64_t last_start = 0;
};

// vLLM KVEventBatch [ts, events, dp_rank]: map events (legacy = false) in msgspec's key order,
// or positional events with every field (legacy = true).
void encode_vllm(MpWriter &w, const Plan &plan, const kvreg_event *ev, double ts,
                 const EncodeOptions &o, bool legacy);

// Dynamo RouterEvents, one per group, as a JSON array (json = true) or a msgpack array of maps
// with field names (rmp_serde::to_vec_named's shape).
// RouterEvent ids per o.kvreg_ids (KVREG_WIRE_OPT_EVENT_IDS); o.next_event_id advances.
void encode_dynamo(MpWriter &w, const Plan &plan, const kvreg_event *ev, EncodeOptions &o,
                   bool json);

} // namespace kvreg::wire
