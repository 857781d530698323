#include "hmap.h"

#include <stdlib.h>
#include <string.h>

/* Block ids in traces are dense small integers, so they need real mixing before masking.
 * This is the splitmix64 finaliser. */
static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 30;
    key *= UINT64_C(0xbf58476d1ce4e5b9);
    key ^= key >> 27;
    key *= UINT64_C(0x94d049bb133111eb);
    key ^= key >> 31;
    return (size_t)key & (cap - 1);
}

void hmap_init(hmap *m)
{
    memset(m, 0, sizeof *m);
}

void hmap_free(hmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    hmap_init(m);
}

uint64_t *hmap_get(const hmap *m, uint64_t key)
{
    size_t i;
    if (m->cap == 0)
        return NULL;
    for (i = slot_of(key, m->cap); m->used[i]; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->vals[i];
    }
    return NULL;
}

/* Place a key known to be absent; the caller guarantees a free slot. */
static void place(hmap *m, uint64_t key, uint64_t val)
{
    size_t i = slot_of(key, m->cap);
    while (m->used[i])
        i = (i + 1) & (m->cap - 1);
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->len++;
}

static int grow(hmap *m)
{
    hmap bigger;
    size_t i;
    size_t cap = m->cap ? m->cap * 2 : 64;

    if (cap < m->cap) /* size_t overflow: cannot grow further */
        return -1;
    bigger.cap = cap;
    bigger.len = 0;
    bigger.keys = malloc(cap * sizeof *bigger.keys);
    bigger.vals = malloc(cap * sizeof *bigger.vals);
    bigger.used = calloc(cap, 1);
    if (!bigger.keys || !bigger.vals || !bigger.used) {
        free(bigger.keys);
        free(bigger.vals);
        free(bigger.used);
        return -1;
    }
    for (i = 0; i < m->cap; i++) {
        if (m->used[i])
            place(&bigger, m->keys[i], m->vals[i]);
    }
    hmap_free(m);
    *m = bigger;
    return 0;
}

int hmap_put(hmap *m, uint64_t key, uint64_t val, int *inserted)
{
    uint64_t *v = hmap_get(m, key);
    if (v) {
        *v = val;
        if (inserted)
            *inserted = 0;
        return 0;
    }
    /* Keep the load factor at or below 3/4 so probe chains stay short. */
    if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return -1;
    place(m, key, val);
    if (inserted)
        *inserted = 1;
    return 0;
}

int hmap_del(hmap *m, uint64_t key)
{
    size_t mask, i, j;
    if (m->cap == 0)
        return 0;
    mask = m->cap - 1;
    for (i = slot_of(key, m->cap); m->used[i]; i = (i + 1) & mask) {
        if (m->keys[i] == key)
            break;
    }
    if (!m->used[i])
        return 0;
    /* Backward-shift: move later members of the probe run into the hole when their home
     * slot does not lie cyclically within (hole, j]; otherwise lookups would stop early. */
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & mask;
        if (!m->used[j])
            break;
        home = slot_of(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->used[i] = 0;
    m->len--;
    return 1;
}
