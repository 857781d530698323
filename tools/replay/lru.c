#include "lru.h"

#include <stdlib.h>

void lru_init(lru *t)
{
    t->slots = NULL;
    t->n_slots = t->cap_slots = 0;
    t->free_head = t->mru = t->lru = LRU_NIL;
    hmap_init(&t->index);
    t->size = 0;
}

void lru_free(lru *t)
{
    free(t->slots);
    hmap_free(&t->index);
    lru_init(t);
}

static uint32_t slot_no(const lru *t, const lru_entry *e)
{
    return (uint32_t)(e - t->slots);
}

lru_entry *lru_find(const lru *t, uint64_t hash)
{
    uint64_t *slot = hmap_get(&t->index, hash);
    return slot ? &t->slots[*slot] : NULL;
}

static void link_mru(lru *t, lru_entry *e)
{
    uint32_t i = slot_no(t, e);
    e->prev = LRU_NIL;
    e->next = t->mru;
    if (t->mru != LRU_NIL)
        t->slots[t->mru].prev = i;
    t->mru = i;
    if (t->lru == LRU_NIL)
        t->lru = i;
}

static void unlink_entry(lru *t, lru_entry *e)
{
    if (e->prev != LRU_NIL)
        t->slots[e->prev].next = e->next;
    else
        t->mru = e->next;
    if (e->next != LRU_NIL)
        t->slots[e->next].prev = e->prev;
    else
        t->lru = e->prev;
    e->prev = e->next = LRU_NIL;
}

lru_entry *lru_insert(lru *t, uint64_t hash, uint64_t handle)
{
    uint32_t i;
    lru_entry *e;

    if (t->free_head != LRU_NIL) {
        i = t->free_head;
        t->free_head = t->slots[i].next;
    } else {
        if (t->n_slots == t->cap_slots) {
            size_t cap = t->cap_slots ? t->cap_slots * 2 : 1024;
            lru_entry *grown;
            if (cap >= LRU_NIL)
                return NULL;
            grown = realloc(t->slots, cap * sizeof *grown);
            if (!grown)
                return NULL;
            t->slots = grown;
            t->cap_slots = cap;
        }
        i = (uint32_t)t->n_slots++;
    }
    if (hmap_put(&t->index, hash, i, NULL) != 0) {
        t->slots[i].next = t->free_head; /* give the slot back */
        t->free_head = i;
        return NULL;
    }
    e = &t->slots[i];
    e->hash = hash;
    e->handle = handle;
    e->users = 0;
    link_mru(t, e);
    t->size++;
    return e;
}

void lru_remove(lru *t, lru_entry *e)
{
    uint32_t i = slot_no(t, e);
    if (e->users == 0)
        unlink_entry(t, e);
    hmap_del(&t->index, e->hash);
    e->next = t->free_head;
    t->free_head = i;
    t->size--;
}

void lru_touch(lru *t, lru_entry *e)
{
    if (e->users == 0) {
        unlink_entry(t, e);
        link_mru(t, e);
    }
}

void lru_pin(lru *t, lru_entry *e)
{
    if (e->users++ == 0)
        unlink_entry(t, e);
}

void lru_unpin(lru *t, lru_entry *e)
{
    if (--e->users == 0)
        link_mru(t, e);
}

lru_entry *lru_victim(const lru *t)
{
    return t->lru == LRU_NIL ? NULL : &t->slots[t->lru];
}
