// kvreg-net-bench's `nats` workload (net_nats.cpp), built when the library has NATS.
#pragma once

#include <cstddef>

// Runs it and prints its JSON line; the exit status (0, 1 not verified, 77 skipped).
int nats_workload(size_t events, const char *trace, size_t reps);
