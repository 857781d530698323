#include "wire/plan.hpp"

#include "kvreg_wire.h"

namespace kvreg::wire {
namespace {

int check_event(const kvreg_event &e, const PlanRules &rules) {
    if (e.kind < KVREG_EVENT_REGISTER || e.kind > KVREG_EVENT_CLEARED)
        return KVREG_EINVAL;
    if (e.kind != KVREG_EVENT_CLEARED && e.medium >= KVREG_MEDIUM_COUNT)
        return KVREG_EINVAL;
    if (e.n_tokens > 0 && !e.tokens)
        return KVREG_EINVAL;
    if (e.kind == KVREG_EVENT_REGISTER && rules.need_tokens) {
        if (e.n_tokens == 0)
            return KVREG_ESTATE;
        if (rules.block_size != 0 && e.n_tokens != rules.block_size)
            return KVREG_ESTATE;
    }
    return KVREG_OK;
}

bool continues_chain(const kvreg_event &prev, const kvreg_event &e, const PlanRules &rules) {
    return e.kind == KVREG_EVENT_REGISTER && e.medium == prev.medium && e.has_parent &&
           e.parent_sequence_hash == prev.sequence_hash &&
           (!rules.need_tokens || e.n_tokens == prev.n_tokens);
}

} // namespace

void plan_events(const kvreg_event *ev, size_t n, size_t max_events, const PlanRules &rules,
                 Plan &out) {
    out.groups.clear();
    out.stop = KVREG_OK;
    size_t limit = n < max_events ? n : max_events;
    size_t end = 0; // events checked so far
    while (end < limit) {
        if (int rc = check_event(ev[end], rules); rc != KVREG_OK) {
            out.stop = rc;
            break;
        }
        end++;
    }
    out.n_events = end;

    size_t i = 0;
    while (i < end) {
        const kvreg_event &e = ev[i];
        if (e.kind == KVREG_EVENT_CLEARED) {
            out.groups.push_back({KVREG_WIRE_CLEARED, KVREG_MEDIUM_GPU, i, i + 1});
            i++;
        } else if (e.kind == KVREG_EVENT_REGISTER) {
            size_t j = i + 1;
            while (j < end && continues_chain(ev[j - 1], ev[j], rules))
                j++;
            out.groups.push_back({KVREG_WIRE_STORED, e.medium, i, j});
            i = j;
        } else {
            size_t j = i;
            unsigned seen = 0; // bit per medium
            while (j < end && ev[j].kind == KVREG_EVENT_REMOVE)
                j++;
            for (size_t k = i; k < j; k++) {
                unsigned bit = 1u << ev[k].medium;
                if (seen & bit)
                    continue;
                seen |= bit;
                out.groups.push_back({KVREG_WIRE_REMOVED, ev[k].medium, k, j});
            }
            i = j;
        }
    }
}

} // namespace kvreg::wire
