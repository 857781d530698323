/*
 * chart: draws the sweep's hit rate against G1 capacity with cairo (Debian libcairo2-dev),
 * one curve per G2 capacity, and the theoretical maximum, as SVG or PNG by the file name's
 * extension. Optional: a build without cairo says so.
 */
#ifndef KVREG_REPLAY_CHART_H
#define KVREG_REPLAY_CHART_H

#include <stddef.h>

#include "sweep.h"

/* 1 when this build can draw charts. */
int chart_available(void);
/* Write the chart of rows[0..n) (sorted by G2, then G1 capacity) to path (.svg or .png);
 * title names the workload. 0, or -1 after a message. */
int chart_write(const char *path, const char *title, const sweep_row *rows, size_t n,
                uint32_t block_tokens);

#endif
