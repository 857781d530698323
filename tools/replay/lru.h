/*
 * lru: bookkeeping of one cache tier: which blocks it holds, the handle of the reference
 * the cache itself keeps on each, how many running requests use each, and the least
 * recently used order of the blocks nobody uses (the eviction candidates).
 * Pure data structure: it knows nothing of libkvreg beyond storing a handle value.
 *
 * Blocks in use (users > 0) are kept out of the list, so the list's tail is always
 * evictable and picking a victim is O(1) however many blocks are pinned.
 */
#ifndef KVREG_REPLAY_LRU_H
#define KVREG_REPLAY_LRU_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"

#define LRU_NIL UINT32_MAX

typedef struct lru_entry {
    uint64_t hash;   /* sequence hash */
    uint64_t handle; /* the cache's own kvreg_block reference */
    uint32_t users;  /* running requests holding the block */
    uint32_t prev, next; /* list links (towards MRU / towards LRU), LRU_NIL at the ends */
} lru_entry;

typedef struct lru {
    lru_entry *slots;
    size_t n_slots, cap_slots;
    uint32_t free_head; /* free slots chained through .next */
    uint32_t mru, lru;  /* ends of the list of unused blocks */
    hmap index;         /* hash -> slot */
    size_t size;        /* blocks held (used or not) */
} lru;

void lru_init(lru *t);
void lru_free(lru *t);

/* NULL when the tier does not hold hash. Pointers stay valid until the next lru_insert. */
lru_entry *lru_find(const lru *t, uint64_t hash);
/* A new, unused block at the MRU end. NULL when memory ran out. */
lru_entry *lru_insert(lru *t, uint64_t hash, uint64_t handle);
/* Forget a block (it must be unused). */
void lru_remove(lru *t, lru_entry *e);
/* Mark recently used (no-op for a block in use: it re-enters at the MRU end when freed). */
void lru_touch(lru *t, lru_entry *e);
void lru_pin(lru *t, lru_entry *e);
void lru_unpin(lru *t, lru_entry *e);
/* The least recently used unused block, or NULL when every block is in use. */
lru_entry *lru_victim(const lru *t);

#endif
