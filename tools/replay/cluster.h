/*
 * cluster: kvreg-replay --workers N. N engines, each its own G1/G2 cache model (cache.c) on
 * libkvreg, publish their events through the vLLM encoder and decoder (feed.c) into one
 * router-side index (kvreg_index.h); each request is routed by a policy (router.c) and
 * replayed on the chosen engine. The same requests also run through one shared cache of the
 * cluster's total size (N times each tier, N times the requests in flight), the ideal a
 * router tries to approach; the report says how much hit rate each policy loses against it.
 * With --transport zmq the events cross loopback ZeroMQ instead (zmq_feed.h); the index
 * catches up before each routing decision, so the routing is the same.
 *
 * Requests in flight: the cluster runs N x --inflight requests at once; a request counts as
 * in flight on its worker until N x --inflight later requests have been dispatched (with one
 * worker this is exactly the single-engine model).
 */
#ifndef KVREG_REPLAY_CLUSTER_H
#define KVREG_REPLAY_CLUSTER_H

#include "cli.h"
#include "outcome.h"
#include "workload.h"

/* Run the whole workload; the report goes to stdout. Returns the process exit status. */
int cluster_run(const replay_options *o, workload *w);
/* The same run with o->router, kept in *out (zeroed by the caller; free it with
 * cluster_outcome_free) instead of printed. */
int cluster_collect(const replay_options *o, workload *w, cluster_outcome *out);

#endif
