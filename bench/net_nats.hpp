// kvreg-net-bench's `nats` workload (net_nats.cpp), built when the library has NATS.
#pragma once

#include <cstddef>

// Runs it and prints its JSON line; the exit status (0, 1 not verified, 77 skipped).
// sized: the throughput part's engine reserves its blocks (KVREG_OPT_RESERVE_BLOCKS, before
// the clock) and its replicas expect their entries (KVREG_INDEX_OPT_EXPECTED_ENTRIES, inside it).
int nats_workload(size_t events, const char *trace, size_t reps, bool sized);
