/* Net test fixture (see net_fixture.h). */
#define _POSIX_C_SOURCE 200809L
#include "net_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

int64_t net_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

kvreg_registry *net_poll_registry(uint64_t poll_capacity) {
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    if (poll_capacity) assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, poll_capacity), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    return reg;
}

void net_pub_open(net_pub *p, int replay, const char *connect_to, uint64_t hash_base, ...) {
    memset(p, 0, sizeof *p);
    p->next_hash = hash_base;
    p->reg = net_poll_registry(1u << 22);
    assert_int_equal(kvreg_pool_new(&p->pool, p->reg, "gpu"), KVREG_OK);
    assert_int_equal(kvreg_publisher_new(&p->pub, p->reg), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(p->pub, KVREG_PUB_ENDPOINT,
                                                connect_to ? connect_to : "tcp://127.0.0.1:*"),
                     KVREG_OK);
    if (replay)
        assert_int_equal(kvreg_publisher_set_string(p->pub, KVREG_PUB_REPLAY_ENDPOINT, "tcp://127.0.0.1:*"),
                         KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(p->pub, KVREG_PUB_TOPIC, "kv@pod-a@model-x"), KVREG_OK);
    assert_int_equal(kvreg_publisher_set(p->pub, KVREG_PUB_OPT_MAX_EVENTS, 1), KVREG_OK);
    va_list ap;
    va_start(ap, hash_base);
    for (;;) {
        const unsigned opt = va_arg(ap, unsigned);
        if (!opt) break;
        const uint64_t v = va_arg(ap, uint64_t);
        assert_int_equal(kvreg_publisher_set(p->pub, opt, v), KVREG_OK);
    }
    va_end(ap);
    assert_int_equal(kvreg_publisher_start(p->pub), KVREG_OK);
    assert_int_equal(kvreg_publisher_endpoint(p->pub, KVREG_PUB_ENDPOINT, p->endpoint, sizeof p->endpoint, NULL),
                     KVREG_OK);
    if (replay)
        assert_int_equal(kvreg_publisher_endpoint(p->pub, KVREG_PUB_REPLAY_ENDPOINT, p->replay,
                                                  sizeof p->replay, NULL),
                         KVREG_OK);
}

void net_pub_close(net_pub *p) {
    kvreg_publisher_free(p->pub);
    kvreg_registry_free(p->reg);
    memset(p, 0, sizeof *p);
}

void net_pub_register(net_pub *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        kvreg_block_desc d;
        const uint32_t tokens[4] = {1, 2, 3, (uint32_t)p->next_hash};
        memset(&d, 0, sizeof d);
        d.sequence_hash = p->next_hash;
        d.block_hash = p->next_hash ^ UINT64_C(0x5555);
        d.block_size = 4;
        d.tokens = tokens;
        d.n_tokens = 4;
        p->next_hash++;
        kvreg_block b;
        assert_int_equal(kvreg_register(p->pool, &d, &b), KVREG_OK);
    }
}

uint64_t net_pub_stat(const net_pub *p, uint32_t stat) {
    uint64_t v = 0;
    assert_int_equal(kvreg_publisher_stat(p->pub, stat, &v), KVREG_OK);
    return v;
}

uint64_t net_pub_wait_stat(const net_pub *p, uint32_t stat, uint64_t want) {
    const int64_t deadline = net_now_ms() + 10000;
    uint64_t now = net_pub_stat(p, stat);
    while (now != want && net_now_ms() < deadline) {
        struct timespec ts = {0, 2000000}; /* polling a condition, not waiting for one */
        nanosleep(&ts, NULL);
        now = net_pub_stat(p, stat);
    }
    return now;
}

void net_pub_settle(net_pub *p) {
    assert_int_equal(kvreg_registry_flush(p->reg), KVREG_OK);
    const int64_t deadline = net_now_ms() + 20000;
    /* Every event the registry emitted (and its queue kept) is in a batch that went out: an
     * empty queue with every seq sent is not enough, as the sender thread holds events
     * between the two while it makes their batch (this returned early under load). */
    uint64_t reg = 0, rem = 0, clr = 0, lost = 0;
    kvreg_registry_stat(p->reg, KVREG_STAT_EVENTS_REGISTER, &reg);
    kvreg_registry_stat(p->reg, KVREG_STAT_EVENTS_REMOVE, &rem);
    kvreg_registry_stat(p->reg, KVREG_STAT_EVENTS_CLEARED, &clr);
    kvreg_registry_stat(p->reg, KVREG_STAT_EVENTS_DROPPED, &lost);
    for (;;) {
        const uint64_t a = net_pub_stat(p, KVREG_PUB_STAT_NEXT_SEQ);
        const uint64_t sent = net_pub_stat(p, KVREG_PUB_STAT_BATCHES_SENT) +
                              net_pub_stat(p, KVREG_PUB_STAT_BATCHES_DROPPED) +
                              net_pub_stat(p, KVREG_PUB_STAT_SEND_ERRORS);
        if (net_pub_stat(p, KVREG_PUB_STAT_EVENTS_HANDLED) + lost == reg + rem + clr && sent == a) return;
        assert_true(net_now_ms() < deadline);
        struct timespec ts = {0, 1000000}; /* polling a condition, not waiting for one */
        nanosleep(&ts, NULL);
    }
}

void net_collect_init(net_collect *c, kvreg_subscriber *sub) {
    memset(c, 0, sizeof *c);
    c->recs = calloc(NET_MAX_BATCHES, sizeof *c->recs);
    assert_non_null(c->recs);
    c->reset_after = -1;
    c->sub = sub;
    assert_int_equal(kvreg_subscriber_set_batch_fn(sub, net_batch_fn, c), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set_notice_fn(sub, net_notice_fn, c), KVREG_OK);
}

void net_collect_free(net_collect *c) { free(c->recs); }

void net_batch_fn(const kvreg_sub_batch *b, void *ud) {
    net_collect *c = ud;
    if (c->n >= NET_MAX_BATCHES) return;
    net_rec *r = &c->recs[c->n++];
    r->publisher = b->publisher;
    r->replayed = b->replayed;
    r->seq = b->seq;
    r->n_events = b->n_events;
    if (b->n_events) {
        r->first_type = b->events[0].type;
        r->first_hash = b->events[0].n_block_hashes ? b->events[0].block_hashes[0] : 0;
    }
    if (c->stop_after && c->n >= c->stop_after) kvreg_subscriber_stop(c->sub);
}

void net_notice_fn(const kvreg_sub_notice *n, void *ud) {
    net_collect *c = ud;
    if (n->kind < 8) c->notices[n->kind]++;
    if (n->kind == KVREG_SUB_LOSS) c->lost += n->last - n->first + 1;
    if (n->kind == KVREG_SUB_RESET && c->reset_after < 0) c->reset_after = (int64_t)c->n;
    if (getenv("KVREG_NET_VERBOSE"))
        fprintf(stderr, "notice %u pub %u [%llu, %llu] %s\n", n->kind, n->publisher,
                (unsigned long long)n->first, (unsigned long long)n->last, n->message);
}

int net_run_until(kvreg_subscriber *sub, net_collect *c, size_t want, int64_t deadline_ms) {
    while (c->n < want && net_now_ms() < deadline_ms)
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    return c->n >= want;
}

int net_run_until_notice(kvreg_subscriber *sub, net_collect *c, int kind, uint64_t want,
                         int64_t deadline_ms) {
    while (c->notices[kind] < want && net_now_ms() < deadline_ms)
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    return c->notices[kind] >= want;
}
