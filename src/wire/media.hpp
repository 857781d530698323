// Medium (tier) names on the wire, both directions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvreg::wire {

// vLLM's medium string for a KVREG_MEDIUM_* ("GPU", "CPU", "STORAGE", "EXTERNAL").
const char *vllm_medium_name(uint32_t medium) noexcept;
// Dynamo's StorageTier (serde snake_case): device, host_pinned, disk, external.
const char *dynamo_tier_name(uint32_t medium) noexcept;
// A medium name as any engine or Dynamo writes it, ASCII case-insensitive: vLLM GPU / CPU /
// STORAGE (and v0.26's FS / OBJ), SGLang CPU_PINNED / DISK / EXTERNAL, Dynamo's
// from_kv_medium aliases and StorageTier names. KVREG_MEDIUM_UNKNOWN for anything else.
uint32_t medium_from_name(const char *s, size_t n) noexcept;

} // namespace kvreg::wire
