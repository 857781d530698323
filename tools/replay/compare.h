/*
 * compare: kvreg-replay --workers N --router kv,kv-load,llm-d,least_loaded,round_robin,random.
 * Every listed policy replays the same workload on its own cluster (cluster_collect); the
 * engine timing model (timing.h) turns each run's per-request hits into TTFT and throughput on
 * the trace's own timestamps; one table compares them: hit rate per tier, load imbalance
 * (busiest worker's requests / the mean), TTFT p50/p99, throughput, index query p50.
 * --sweep-workers 2,4,8,16 runs that comparison once per worker count: one table (TTFT and hit
 * rate per policy per count) and, with --plot, TTFT p99 and hit rate against the count.
 */
#ifndef KVREG_REPLAY_COMPARE_H
#define KVREG_REPLAY_COMPARE_H

#include "cli.h"

/* The routing and timing options (--overlap-weight, --prefill-tps, ...): 1 if name is one. */
int compare_is_option(const char *name);
/* 0, or -1 after printing what is wrong with val. */
int compare_set_option(replay_options *o, const char *name, const char *val);
/* Their --help section. */
extern const char compare_usage[];

/* Run every policy of o->routers; the table goes to stdout. Returns the exit status. */
int compare_main(const replay_options *o);

#endif
