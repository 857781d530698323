// kvreg-net-bench's `nats` workload (net_nats.cpp), built when the library has NATS.
#pragma once

#include <cstddef>
#include <cstdint>

// Runs it and prints its JSON line; the exit status (0, 1 not verified, 77 skipped).
// sized: the throughput part's engine reserves its blocks (KVREG_OPT_RESERVE_BLOCKS, before
// the clock) and its replicas expect their entries (KVREG_INDEX_OPT_EXPECTED_ENTRIES, inside it).
int nats_workload(size_t events, const char *trace, size_t reps, bool sized);

// --workload nats-replica: one replica of the restore part in this process (a child of
// nats_workload): mode "rebuild" or "restore", into the server at url, caught up through
// batches; prints its JSON line (time, start() parts, digest). Exit status 0, or 2 on usage.
int nats_replica_process(const char *mode, const char *url, const char *durable, uint64_t batches);
