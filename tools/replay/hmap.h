/*
 * hmap: a small open-addressing map from uint64_t keys to uint64_t values.
 *
 * kvreg-replay needs three such maps (block id -> block hash, sequence hash -> LRU entry,
 * and the verifier's set of registered hashes). C99 has none, so this is the one place that
 * implements it. Linear probing with backward-shift deletion: no tombstones, so a long
 * replay with many evictions never degrades.
 */
#ifndef KVREG_REPLAY_HMAP_H
#define KVREG_REPLAY_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hmap {
    uint64_t *keys;
    uint64_t *vals;
    unsigned char *used; /* 1 per slot in use; keys may be any value, including 0 */
    size_t cap;          /* power of two, or 0 before the first insert */
    size_t len;
} hmap;

/* An empty map; allocates nothing until the first insert. */
void hmap_init(hmap *m);
void hmap_free(hmap *m);

/* Pointer to the value stored for key, or NULL. Valid until the next insert or delete. */
uint64_t *hmap_get(const hmap *m, uint64_t key);

/* Insert or overwrite. *inserted (may be NULL) is 1 when the key was new.
 * Returns 0, or -1 when memory ran out (the map is unchanged). */
int hmap_put(hmap *m, uint64_t key, uint64_t val, int *inserted);

/* Remove key; 1 if it was present, 0 if not. */
int hmap_del(hmap *m, uint64_t key);

/* Iterate: for (size_t i = 0; i < m->cap; i++) if (m->used[i]) ... m->keys[i] ... */

#endif
