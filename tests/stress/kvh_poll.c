/* kvh: consuming the POLL queue and comparing it with the model's queue. */
#include <string.h>

#include "kvh_int.h"

/* The model queues a kvreg_pool_free's Removes in its own order; the library may use another.
 * Event ids are positional either way, so move the entry with the received hash to the front
 * and keep the ids where they were. */
static void match_group(kvh *h, const kvreg_event *got)
{
    kvh_ev *front = &h->expect.v[h->q_head];
    for (size_t j = h->q_head; j < h->expect.n; j++) {
        kvh_ev *c = &h->expect.v[j];
        if (c->group != front->group || c->ev.sequence_hash != got->sequence_hash)
            continue;
        kvh_ev tmp = *c;
        uint64_t id_c = c->ev.event_id, id_f = front->ev.event_id;
        *c = *front;
        *front = tmp;
        c->ev.event_id = id_c;
        front->ev.event_id = id_f;
        return;
    }
    kvh_fail(h, "polled Remove of hash %llu not among the freed pool's hashes",
             (unsigned long long)got->sequence_hash);
}

static void compare_front(kvh *h, const kvreg_event *got)
{
    kvh_ev *front = &h->expect.v[h->q_head];
    if (front->wild) {
        KVH_EQ(h, "event kind", got->kind, front->ev.kind);
        KVH_EQ(h, "event_id", got->event_id, front->ev.event_id);
        KVH_EQ(h, "event pool_id", got->pool_id, front->ev.pool_id);
        /* Which of the group's hashes this is was the library's choice: its Remove carries
         * that hash's Register's medium (global event mode), as the model's entry for it in
         * the group says, not necessarily the front's. */
        uint32_t want = front->ev.medium;
        for (unsigned k = 0; k < KVH_GROUP_MEDIA; k++)
            if (front->group && h->group_media[k].group == front->group &&
                h->group_media[k].seq == got->sequence_hash)
                want = h->group_media[k].medium;
        KVH_EQ(h, "event medium", got->medium, want);
        h->events_checked++;
    } else {
        if (front->group)
            match_group(h, got);
        kvh_compare_event(h, got, front, 1);
    }
    h->q_head++;
}

void kvh_op_poll(kvh *h, size_t cap)
{
    kvreg_event out[9];
    size_t n = 12345, queued = h->expect.n - h->q_head;
    memset(out, 0xA5, sizeof out);
    h->opname = "kvreg_registry_poll";
    if (!h->poll) {
        KVH_EQ(h, "poll in INLINE mode", kvreg_registry_poll(h->reg, out, cap, &n), KVREG_EINVAL);
        return;
    }
    KVH_EQ(h, "kvreg_registry_poll", kvreg_registry_poll(h->reg, out, cap, &n), KVREG_OK);
    KVH_EQ(h, "polled events", n, queued < cap ? queued : cap);
    for (size_t i = 0; i < n; i++)
        compare_front(h, &out[i]);
    if (n < 9) {
        /* nothing is written past *n_events */
        unsigned char pat[sizeof out[0]];
        memset(pat, 0xA5, sizeof pat);
        if (memcmp(&out[n], pat, sizeof pat) != 0)
            kvh_fail(h, "poll wrote past the events it returned");
    }
    if (h->q_head == h->expect.n)
        h->expect.n = h->q_head = 0;
}

void kvh_drain_poll(kvh *h)
{
    while (h->q_head < h->expect.n) {
        size_t before = h->q_head;
        kvh_op_poll(h, 8);
        if (h->q_head == before && h->expect.n)
            kvh_fail(h, "poll made no progress");
    }
    kvh_op_poll(h, 8); /* and the queue is empty now */
}
