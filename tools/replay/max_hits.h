/*
 * max_hits: the theoretical maximum hit count. With an infinite cache a block hits iff its id
 * was seen before; counted from the ids alone, independently of any cache model. Used by the
 * single-engine replay and the cluster replay alike.
 */
#ifndef KVREG_REPLAY_MAX_HITS_H
#define KVREG_REPLAY_MAX_HITS_H

#include <stdint.h>

#include "hmap.h"
#include "report.h"
#include "workload.h"

/* Adds req's hits to r->max_hit_blocks / max_hit_tokens; seen collects the ids.
 * 0, or -1 when memory runs out. */
int count_max_hits(hmap *seen, const replay_request *req, uint32_t block_tokens, report *r);

#endif
