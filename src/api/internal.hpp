// What the C entry points share: the library side of the opaque config and sequence types.
#pragma once

#include "kvreg.h"
#include "core/registry.hpp"
#include "core/sequence.hpp"

namespace kvreg {

const Options &options_of(const kvreg_config *c) noexcept;
const Sequence *sequence_of(const kvreg_sequence *s) noexcept; // nullptr for NULL
// The KVREG_OPT_* value o holds (config.cpp); KVREG_EINVAL for an unknown option.
int option_value(const Options &o, uint32_t option, uint64_t *value) noexcept;

} // namespace kvreg
