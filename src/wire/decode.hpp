// The decoders. Each returns false with the error (offset, reason) in the reader on the first
// problem; on success the batch holds the events (finish() already called).
#pragma once

#include <cstddef>
#include <cstdint>

#include "decoded.hpp"
#include "mp_read.hpp"
#include "tree.hpp"

namespace kvreg::wire {

// vLLM / SGLang KVEventBatch, every generation (decode_vllm.cpp).
bool decode_vllm(MpReader &r, DecodedBatch &out, bool sglang);

// Where a Dynamo decode failed (JSON text has no MpReader).
struct DecodeError {
    size_t offset = 0;
    const char *why = nullptr;
};

// Dynamo RouterEvent payloads (decode_dynamo.cpp): JSON text or msgpack with field names.
// tree is scratch space the caller keeps between payloads.
bool decode_dynamo(const uint8_t *p, size_t len, bool json, Tree &tree, DecodedBatch &out,
                   DecodeError &err);

} // namespace kvreg::wire
