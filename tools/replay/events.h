/*
 * events: the registry's event consumer. It always counts Register and Remove events; with
 * --verify-events it also rebuilds the set of registered hashes from the event stream alone
 * and, at checkpoints, checks that set against the registry. It keys entries by (hash,
 * medium), as routers do: in either event mode (KVREG_OPT_EVENT_MODE) a Remove must name an
 * entry a Register made; in per-tier mode each entry must also be held by the pool of its
 * medium, and each block a pool holds must have its entry.
 *
 * Delivery mode: INLINE (the default). The callback runs on the replay thread before the
 * call that caused the events returns, so at any checkpoint between two library calls the
 * set is complete and can be compared exactly (no queue to drain, no dropped events).
 */
#ifndef KVREG_REPLAY_EVENTS_H
#define KVREG_REPLAY_EVENTS_H

#include <stdint.h>

#include <kvreg.h>

#include "hmap.h"

typedef struct event_sink {
    int verify;
    uint64_t registers, removes, callbacks;
    uint64_t next_event_id; /* the event_id the next delivered event must carry */
    hmap live;              /* hash -> bit m set per medium m it is registered on, according to
                               the events (verify only) */
    int per_tier;           /* the registry's event mode is KVREG_EVENTS_PER_TIER */
    const kvreg_pool *pools[KVREG_MEDIUM_COUNT]; /* per-tier checks: the pool of each medium */
    uint64_t stream_errors; /* events that contradict the set (Register of a live hash...) */
    uint64_t ignore_event;  /* testing aid: pretend this event_id never arrived */
    uint64_t checkpoints;
} event_sink;

#define EVENTS_IGNORE_NONE UINT64_MAX

void event_sink_init(event_sink *s, int verify, uint64_t ignore_event);
void event_sink_free(event_sink *s);

/* The kvreg_event_fn; user_data is the event_sink. */
void event_sink_fn(const kvreg_event *events, size_t n_events, void *user_data);

/* Compare the rebuilt set with the registry: same size as KVREG_STAT_HASHES and every
 * hash in it reported by kvreg_registry_contains (so the two sets are equal), event counts
 * equal to the registry's counters, no stream errors so far.
 * 0 when all hold, -1 after printing each difference. `when` names the checkpoint. */
int event_sink_check(event_sink *s, const kvreg_registry *reg, const char *when);

#endif
