// The decoders. Each returns false with the error (offset, reason) on the first problem; on
// success the batch holds the events (finish() already called).
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/decoded.hpp"
#include "wire/mp_read.hpp"

namespace kvreg::wire {

// The decoder's limits (KVREG_WIRE_DEC_OPT_*): checked before anything is allocated for the
// value that would pass them.
struct DecodeLimits {
    size_t max_payload = KVREG_WIRE_DEC_DEFAULT_MAX_PAYLOAD;
    unsigned max_depth = KVREG_WIRE_DEC_DEFAULT_MAX_DEPTH;
    size_t max_events = KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS;
};

// vLLM / SGLang KVEventBatch, every generation (decode_vllm.cpp).
bool decode_vllm(MpReader &r, DecodedBatch &out, const DecodeLimits &lim);

// Where a Dynamo decode failed.
struct DecodeError {
    size_t offset = 0;
    const char *why = nullptr;
};

// Dynamo RouterEvent payloads (decode_dynamo.cpp): JSON text or msgpack with field names.
bool decode_dynamo(const uint8_t *p, size_t len, bool json, DecodedBatch &out, DecodeError &err,
                   const DecodeLimits &lim);

} // namespace kvreg::wire
