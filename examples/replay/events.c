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
        if (ev->kind == KVREG_EVENT_REGISTER) {
            if (hmap_put(&s->live, ev->sequence_hash, 1, &inserted) != 0)
                stream_error(s, ev, "out of memory in the verifier");
            else if (!inserted)
                stream_error(s, ev, "Register for a hash that is already registered");
        } else if (ev->kind == KVREG_EVENT_REMOVE) {
            if (!hmap_del(&s->live, ev->sequence_hash))
                stream_error(s, ev, "Remove for a hash that is not registered");
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
