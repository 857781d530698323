// What the C entry points share: the library side of the opaque config and sequence types.
#pragma once

#include "kvreg.h"
#include "core/registry.hpp"
#include "core/sequence.hpp"

#include <utility>

namespace kvreg {

const Options &options_of(const kvreg_config *c) noexcept;
const Sequence *sequence_of(const kvreg_sequence *s) noexcept; // nullptr for NULL
// The KVREG_OPT_* value o holds (config.cpp); KVREG_EINVAL for an unknown option.
int option_value(const Options &o, uint32_t option, uint64_t *value) noexcept;

// A publisher's hold on its registry's events (EventLog::take_events, taken by the caller
// before): given back when this is destroyed, unless released to another holder.
class TakenEvents {
public:
    explicit TakenEvents(kvreg_registry *reg) noexcept : reg_(reg) {}
    ~TakenEvents() {
        if (reg_) reg_->log.give_back_events();
    }
    TakenEvents(const TakenEvents &) = delete;
    TakenEvents &operator=(const TakenEvents &) = delete;
    kvreg_registry *release() noexcept { return std::exchange(reg_, nullptr); }

private:
    kvreg_registry *reg_;
};

} // namespace kvreg
