/*
 * trace: reads a Mooncake JSONL trace (one JSON object per line with timestamp, input_length,
 * output_length and hash_ids) with jansson, plain or gzip-compressed (lines.c). See
 * data/traces/README.md.
 */
#ifndef KVREG_REPLAY_TRACE_H
#define KVREG_REPLAY_TRACE_H

#include "workload.h"

/* 1 when this build can read traces (jansson was found at configure time). */
int trace_input_available(void);

/* Open path ("-" is stdin). skip_bad: count malformed lines and go on instead of failing
 * with the line number. NULL on failure, with a message on stderr. */
workload *trace_open(const char *path, int skip_bad);

#endif
