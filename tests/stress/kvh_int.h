/* Internal state of the kvh checked driver: the real objects side by side with the model. */
#ifndef KVREG_TEST_KVH_INT_H
#define KVREG_TEST_KVH_INT_H

#include <kvreg.h>

#include "kvh.h"

#define KVH_GROUP_MEDIA 256
#define KVH_NH 14    /* hashes in the universe: few, so pools collide on them often */
#define KVH_NP 5     /* pool slots */
#define KVH_STALE 64 /* recently invalidated handles kept to replay as stale */
#define KVH_NUD 64   /* callback user_data records (one per kvreg_registry_set_event_fn) */
#define KVH_NSEQ 3   /* complete blocks of the test sequence (tokens 1..14, B=4) */

typedef struct kvh_hash {
    kvreg_block_desc desc; /* tokens point into tok when has_tokens */
    uint32_t tok[4];
    int has_tokens;
    uint32_t reg_medium; /* the medium its last Register carried: its Remove carries it too */
} kvh_hash;

enum { KVH_EMPTY, KVH_LIVE, KVH_FREED };

typedef struct kvh_slot {
    int state;
    kvreg_pool *pool;
    uint32_t id;
    uint32_t medium; /* KVREG_MEDIUM_* it was made with */
    char name[16];
    uint32_t ref[KVH_NH];         /* model reference count of each hash in this pool */
    kvreg_block handle[KVH_NH];   /* the handle the library gave for it while ref > 0 */
} kvh_slot;

typedef struct kvh_ev {
    kvreg_event ev;
    uint32_t tok[4]; /* copy of ev.tokens (every token block here has 4 tokens) */
    unsigned group;  /* != 0: emitted by one kvreg_pool_free, order within the group free */
    int wild;        /* poll: part of the group was dropped, so which hashes made it is open */
} kvh_ev;

typedef struct kvh_evlist {
    kvh_ev *v;
    size_t n, cap;
} kvh_evlist;

typedef struct kvh_ud {
    kvh *h;
    int destroyed; /* times destroy ran: must end at exactly 1 */
} kvh_ud;

struct kvh {
    kvh_src *src;
    const char *context;
    const char *opname;
    uint64_t ops, events_checked;

    int poll, keep;
    uint64_t poll_cap;
    kvreg_registry *reg;
    kvreg_registry *reg2; /* a second registry: its handle is "foreign" to ours */
    kvreg_pool *pool2;
    kvreg_block foreign;
    kvreg_sequence *seq;

    kvh_hash hash[KVH_NH];
    kvh_slot slot[KVH_NP];
    uint32_t holders[KVH_NH]; /* pools holding each hash */

    struct {
        kvreg_block b;
        const kvreg_pool *pool;
    } stale[KVH_STALE];
    size_t nstale, stale_next;

    uint64_t next_id, n_reg, n_rem, dropped;

    kvh_evlist expect; /* inline: expected during this op; poll: the model's queue */
    size_t q_head;     /* poll: first unconsumed entry of expect */
    kvh_evlist seen;   /* inline: what the callback received during this op */
    unsigned cb_calls; /* callback invocations during this op */
    int unordered;     /* this op's events may come in any order (kvreg_pool_free) */
    unsigned group;    /* group number given to events emitted now (0: none) */
    unsigned ngroups;
    /* The medium of each Remove a group emitted, queued or dropped (the last KVH_GROUP_MEDIA):
     * which of a group's Removes the poll queue kept is the library's choice. */
    struct { unsigned group; uint64_t seq; uint32_t medium; } group_media[KVH_GROUP_MEDIA];
    unsigned n_group_media;

    kvh_ud ud[KVH_NUD];
    int nud;
    int cur_ud; /* -1: no callback installed */
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3), noreturn))
#endif
void kvh_fail(const kvh *h, const char *fmt, ...);

#define KVH_EQ(h, what, got, exp)                                                              \
    do {                                                                                       \
        long long kvh_g_ = (long long)(got), kvh_e_ = (long long)(exp);                        \
        if (kvh_g_ != kvh_e_)                                                                  \
            kvh_fail((h), "%s: got %lld, expected %lld", (what), kvh_g_, kvh_e_);             \
    } while (0)

/* kvh_model.c */
unsigned kvh_u8(kvh *h);
unsigned kvh_pick(kvh *h, unsigned n);
void kvh_hold(kvh *h, int s, int hi);
void kvh_unhold(kvh *h, int s, int hi);
void kvh_stale_add(kvh *h, kvreg_block b, const kvreg_pool *pool);
void kvh_check_new_handle(kvh *h, kvreg_block b, const kvreg_pool *pool);
int kvh_find_live(const kvh *h, int s, kvreg_block b); /* hash index or -1 */
void kvh_event_fn(const kvreg_event *events, size_t n, void *user_data);
void kvh_destroy_fn(void *user_data);
void kvh_after_op(kvh *h); /* compare events (inline) and every statistic */
void kvh_compare_event(kvh *h, const kvreg_event *got, const kvh_ev *exp, int check_id);
void kvh_check_hash(kvh *h, int hi);

/* kvh_ops.c */
void kvh_do_op(kvh *h, unsigned op);
void kvh_op_pool_free(kvh *h, int s);
void kvh_op_pool_new(kvh *h, int s);
/* kvh_poll.c */
void kvh_op_poll(kvh *h, size_t cap);
void kvh_drain_poll(kvh *h);

#endif
