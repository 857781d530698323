#include "events.h"

#include <stdio.h>

void event_sink_init(event_sink *s, int verify, uint64_t ignore_event)
{
    s->verify = verify;
    s->registers = s->removes = s->callbacks = 0;
    s->next_event_id = 0;
    hmap_init(&s->live);
    s->stream_errors = 0;
    s->ignore_event = ignore_event;
    s->checkpoints = 0;
    s->per_tier = 0;
    for (size_t m = 0; m < KVREG_MEDIUM_COUNT; m++)
        s->pools[m] = NULL;
}

void event_sink_free(event_sink *s)
{
    hmap_free(&s->live);
}

static void stream_error(event_sink *s, const kvreg_event *ev, const char *what)
{
    /* Report the first few; a broken stream would otherwise flood stderr. */
    if (s->stream_errors++ < 10)
        fprintf(stderr, "kvreg-replay: event %llu (hash %016llx): %s\n",
                (unsigned long long)ev->event_id, (unsigned long long)ev->sequence_hash, what);
}

void event_sink_fn(const kvreg_event *events, size_t n_events, void *user_data)
{
    event_sink *s = user_data;
    size_t i;
    s->callbacks++;
    for (i = 0; i < n_events; i++) {
        const kvreg_event *ev = &events[i];
        int inserted;
        if (ev->kind == KVREG_EVENT_REGISTER)
            s->registers++;
        else if (ev->kind == KVREG_EVENT_REMOVE)
            s->removes++;
        if (!s->verify)
            continue;
        if (ev->event_id != s->next_event_id)
            stream_error(s, ev, "event_id out of sequence (INLINE delivery drops nothing)");
        s->next_event_id = ev->event_id + 1;
        if (ev->event_id == s->ignore_event)
            continue;
        const uint64_t bit = ev->medium < KVREG_MEDIUM_COUNT ? UINT64_C(1) << ev->medium : 0;
        uint64_t *media = hmap_get(&s->live, ev->sequence_hash);
        if (!bit) {
            stream_error(s, ev, "unknown medium");
        } else if (ev->kind == KVREG_EVENT_REGISTER) {
            /* Global mode: one entry per hash. Per-tier: one per (hash, medium). */
            if (media && (s->per_tier ? (*media & bit) != 0 : 1))
                stream_error(s, ev, "Register for an entry that is already registered");
            else if (hmap_put(&s->live, ev->sequence_hash, (media ? *media : 0) | bit, &inserted) != 0)
                stream_error(s, ev, "out of memory in the verifier");
        } else if (ev->kind == KVREG_EVENT_REMOVE) {
            if (!media || !(*media & bit))
                stream_error(s, ev, "Remove for an entry that is not registered (hash and medium)");
            else if ((*media &= ~bit) == 0)
                hmap_del(&s->live, ev->sequence_hash);
        } else {
            stream_error(s, ev, "unknown event kind");
        }
    }
}

int event_sink_check(event_sink *s, const kvreg_registry *reg, const char *when)
{
    uint64_t hashes = 0, reg_registers = 0, reg_removes = 0;
    uint64_t missing = 0;
    size_t i;
    int ok = 1;

    s->checkpoints++;
    if (kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes) != KVREG_OK ||
        kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REGISTER, &reg_registers) != KVREG_OK ||
        kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REMOVE, &reg_removes) != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: verify (%s): kvreg_registry_stat failed\n", when);
        return -1;
    }
    if (s->stream_errors) {
        fprintf(stderr, "kvreg-replay: verify (%s): %llu inconsistent events\n", when,
                (unsigned long long)s->stream_errors);
        ok = 0;
    }
    if (hashes != s->live.len) {
        fprintf(stderr,
                "kvreg-replay: verify (%s): events say %zu hashes are registered, "
                "the registry has %llu\n",
                when, s->live.len, (unsigned long long)hashes);
        ok = 0;
    }
    for (i = 0; i < s->live.cap; i++) {
        int present = 0;
        if (s->live.used[i] && (kvreg_registry_contains(reg, s->live.keys[i], &present) != KVREG_OK || !present)) {
            if (missing++ < 10)
                fprintf(stderr, "kvreg-replay: verify (%s): hash %016llx registered per events, "
                        "not in the registry\n", when, (unsigned long long)s->live.keys[i]);
        }
    }
    /* Per-tier: every entry is held by its medium's pool, and each pool holds no more blocks
     * than the entries of its medium (with the check above, the sets are equal). */
    if (s->per_tier) {
        uint64_t per_medium[KVREG_MEDIUM_COUNT] = {0};
        for (i = 0; i < s->live.cap; i++) {
            if (!s->live.used[i])
                continue;
            for (unsigned m = 0; m < KVREG_MEDIUM_COUNT; m++) {
                int present = 0;
                if (!(s->live.vals[i] & (UINT64_C(1) << m)))
                    continue;
                per_medium[m]++;
                if (!s->pools[m] || kvreg_pool_contains(s->pools[m], s->live.keys[i], &present) != KVREG_OK || !present) {
                    if (missing++ < 10)
                        fprintf(stderr, "kvreg-replay: verify (%s): hash %016llx registered on medium %u per "
                                "events, not in that pool\n", when, (unsigned long long)s->live.keys[i], m);
                }
            }
        }
        for (unsigned m = 0; m < KVREG_MEDIUM_COUNT; m++) {
            if (s->pools[m] && kvreg_pool_size(s->pools[m]) != per_medium[m]) {
                fprintf(stderr, "kvreg-replay: verify (%s): events say %llu blocks on medium %u, its pool "
                        "holds %zu\n", when, (unsigned long long)per_medium[m], m, kvreg_pool_size(s->pools[m]));
                ok = 0;
            }
        }
    }
    if (missing) {
        fprintf(stderr, "kvreg-replay: verify (%s): %llu hashes missing from the registry\n",
                when, (unsigned long long)missing);
        ok = 0;
    }
    if (reg_registers != s->registers || reg_removes != s->removes) {
        fprintf(stderr,
                "kvreg-replay: verify (%s): delivered %llu Register / %llu Remove, registry "
                "counted %llu / %llu\n",
                when, (unsigned long long)s->registers, (unsigned long long)s->removes,
                (unsigned long long)reg_registers, (unsigned long long)reg_removes);
        ok = 0;
    }
    return ok ? 0 : -1;
}
