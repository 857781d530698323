/* Shared by the net tests: a POLL registry with a started publisher on 127.0.0.1 ephemeral
 * ports, a collector for subscriber callbacks, and bounded waits (retry until a condition
 * holds or a deadline passes: no sleep stands in for synchronisation). */
#ifndef KVREG_NET_FIXTURE_H
#define KVREG_NET_FIXTURE_H

#include <kvreg.h>
#include <kvreg_net.h>

#include <stddef.h>
#include <stdint.h>

/* SANITIZED: an ASan or TSan build, where resident memory is mostly the sanitizer's and time
 * runs several times slower (tests check memory bounds only without it and scale deadlines). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

typedef struct net_pub {
    kvreg_registry *reg;
    kvreg_pool *pool;
    kvreg_publisher *pub;
    char endpoint[256];
    char replay[256];
    uint64_t next_hash; /* sequence hash of the next block register_blocks() makes */
} net_pub;

/* A POLL registry (a publisher's): capacity poll_capacity events (0: the default). */
kvreg_registry *net_poll_registry(uint64_t poll_capacity);
/* Opens reg + pool + publisher. replay: also a replay ROUTER. Options: pairs (opt, value)
 * ended by 0. connect_to: NULL to bind tcp://127.0.0.1:*, else the endpoint to connect to. */
void net_pub_open(net_pub *p, int replay, const char *connect_to, uint64_t hash_base, ...);
void net_pub_close(net_pub *p);
/* Register n hash-only blocks (no parent: one kvreg event, one batch with MAX_EVENTS 1). */
void net_pub_register(net_pub *p, size_t n);
uint64_t net_pub_stat(const net_pub *p, uint32_t stat);
/* Poll stat until it equals want or 10 s pass; returns its last value. For the counters the
 * publisher's thread moves after it hands a message to ZeroMQ (REPLAYS_SERVED counts an answer
 * once its end marker is sent): a reader can have that message before the count moves. */
uint64_t net_pub_wait_stat(const net_pub *p, uint32_t stat, uint64_t want);
/* Wait (bounded) until every event emitted so far is in a batch: NEXT_SEQ stops moving after
 * the registry's queue is empty. */
void net_pub_settle(net_pub *p);

#define NET_MAX_BATCHES 200000
typedef struct net_rec {
    uint32_t publisher;
    uint32_t replayed;
    uint64_t seq;
    uint64_t first_hash; /* block_hashes[0] of the first event */
    uint32_t first_type;
    size_t n_events;
} net_rec;

typedef struct net_collect {
    net_rec *recs;
    size_t n;
    uint64_t notices[8];   /* by kind */
    uint64_t lost;         /* seqs named in LOSS notices */
    int64_t reset_after;   /* index in recs of the first batch after the first RESET, or -1 */
    uint64_t stop_after;   /* kvreg_subscriber_stop() once n reaches it (0: never) */
    kvreg_subscriber *sub;
} net_collect;

void net_collect_init(net_collect *c, kvreg_subscriber *sub);
void net_collect_free(net_collect *c);
void net_batch_fn(const kvreg_sub_batch *b, void *ud);
void net_notice_fn(const kvreg_sub_notice *n, void *ud);

/* Milliseconds on a monotonic clock. */
int64_t net_now_ms(void);
/* Run sub in short slices until c->n >= want or deadline_ms passes; returns c->n >= want. */
int net_run_until(kvreg_subscriber *sub, net_collect *c, size_t want, int64_t deadline_ms);
/* Run sub until c has seen `want` notices of `kind` or deadline_ms passes. A replay's last
 * batch and its end marker are separate messages, so the batches can all be delivered one
 * run before REPLAY_DONE is. */
int net_run_until_notice(kvreg_subscriber *sub, net_collect *c, int kind, uint64_t want,
                         int64_t deadline_ms);

#endif
