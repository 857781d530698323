// Re-encoding what a decoder decoded (kvreg_wire_decoder_reencode), byte-identical to the
// upstream encoder that wrote it.
#pragma once

#include "wire/decoded.hpp"
#include "wire/mp_write.hpp"

namespace kvreg::wire {

// Whether b (a vLLM-family decode) kept everything its payload held.
bool reencodable(const DecodedBatch &b) noexcept;
// b into w (cleared first). Call only when reencodable(b).
void reencode_vllm(const DecodedBatch &b, MpWriter &w);

// Whether b (a Dynamo decode) kept everything its payload held (reencode_dynamo.cpp).
bool dynamo_reencodable(const DecodedBatch &b) noexcept;
// b into w (cleared first), as JSON or named MessagePack. Call only when dynamo_reencodable(b).
void reencode_dynamo(const DecodedBatch &b, MpWriter &w, bool json);

} // namespace kvreg::wire
