/* What a peer of the publisher's PUB socket can make it hold (suite net). Upstream, a PUB
 * socket only ever needs subscriptions (a byte, or ZMTP 3.1's SUBSCRIBE command, plus a topic
 * prefix), but libzmq reads whatever an XSUB peer sends up to ZMQ_MAXMSGSIZE, which was not
 * set: an XSUB that sent 64 messages of 8 MiB grew the publisher by 512 MiB.
 *
 * The attack: 64 XSUB peers connect to the PUB socket and each sends a message of 8 MiB, then
 * an ordinary subscription to every topic, while the publisher is idle; then the publisher
 * publishes to an honest subscriber (FROM_SEQ 0 with a replay endpoint). A peer's connection
 * delivers in order, so the first live batch it receives says the publisher has taken (or
 * refused) its big message: once every peer has one the attack is over, with no sleep
 * standing in for it. Asserted:
 *  - the process's resident memory (VmHWM over VmRSS once set up, /proc/self/status) grows by
 *    at most 32 MiB, where the peers sent 512 MiB (plain builds only: under sanitizers
 *    resident memory is theirs);
 *  - every XSUB peer was disconnected (libzmq refuses a frame over ZMQ_MAXMSGSIZE by closing
 *    the connection, from its size header, before reading it);
 *  - the honest subscriber received every batch, in order, nothing lost.
 * The attacker's messages are sent zero-copy from one static buffer, part of the baseline,
 * so that what grows is the publisher. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "net_fixture.h"
#include "net_peer.h"

#ifdef SANITIZED
#define TIME_SCALE 5
#else
#define TIME_SCALE 1
#endif

#define BIG_SIZE (8u << 20)
#define ATTACKERS 64 /* XSUB peers, one message of BIG_SIZE each */
/* Unattacked, the 64 connections and their reconnects cost the process about 10 MiB (libzmq's
 * per-connection buffers); before the fix the idle publisher grew by the 512 MiB it read. */
#define GROWTH_MIB 32
#define HASH0 UINT64_C(0x7700000)

static unsigned char big[BIG_SIZE];

static void noop_free(void *data, void *hint) {
    (void)data;
    (void)hint;
}

/* Monitor events of the attacker's socket read so far. */
static void read_monitor(void *mon, int *connected, int *disconnected) {
    for (;;) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        const unsigned char *d = zmq_msg_data(&ev);
        const int more = zmq_msg_more(&ev);
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2) event = (uint16_t)(d[0] | d[1] << 8);
        zmq_msg_close(&ev);
        if (more) { /* the address frame */
            zmq_msg_init(&ev);
            zmq_msg_recv(&ev, mon, 0);
            zmq_msg_close(&ev);
        }
        if (event == ZMQ_EVENT_CONNECTED) (*connected)++;
        if (event == ZMQ_EVENT_DISCONNECTED) (*disconnected)++;
    }
}

typedef struct attacker {
    void *xsub, *mon;
    int connected, disconnected, done;
} attacker;

static void xsub_upstream_is_bounded(void **state) {
    (void)state;
    memset(big, 'x', sizeof big); /* not 0 or 1: not a subscription, which the XSUB would keep */

    net_pub p;
    net_pub_open(&p, 1, NULL, HASH0, 0u);
    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_FROM_SEQ, 0), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set_string(sub, KVREG_SUB_TOPIC, "kv@"), KVREG_OK);
    net_collect c;
    net_collect_init(&c, sub);
    assert_int_equal(kvreg_subscriber_add(sub, p.endpoint, p.replay, NULL), KVREG_OK);
    net_pub_register(&p, 1);
    assert_true(net_run_until(sub, &c, 1, net_now_ms() + 10000 * TIME_SCALE));

    /* One XSUB per message: a SUB or XSUB socket drops what it still has queued when it
     * reconnects (libzmq's pipe hiccup), so one socket would offer the publisher only its
     * first message once that one is refused. */
    static attacker att[ATTACKERS];
    void *ctx = zmq_ctx_new();
    const int zero = 0;
    for (int i = 0; i < ATTACKERS; i++) {
        attacker *a = &att[i];
        memset(a, 0, sizeof *a);
        a->xsub = zmq_socket(ctx, ZMQ_XSUB);
        a->mon = zmq_socket(ctx, ZMQ_PAIR);
        zmq_setsockopt(a->xsub, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(a->mon, ZMQ_LINGER, &zero, sizeof zero);
        char mon_ep[64];
        snprintf(mon_ep, sizeof mon_ep, "inproc://xsub-monitor-%d", i);
        assert_int_equal(zmq_socket_monitor(a->xsub, mon_ep, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED), 0);
        assert_int_equal(zmq_connect(a->mon, mon_ep), 0);
        assert_int_equal(zmq_connect(a->xsub, p.endpoint), 0);
    }
    for (const int64_t deadline = net_now_ms() + 10000 * TIME_SCALE;;) {
        int up = 0;
        for (int i = 0; i < ATTACKERS; i++) {
            read_monitor(att[i].mon, &att[i].connected, &att[i].disconnected);
            up += att[i].connected > 0;
        }
        if (up == ATTACKERS) break;
        assert_true(net_now_ms() < deadline);
        zmq_pollitem_t item = {att[0].mon, 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 1); /* any event will do: all are read above */
    }

    const uint64_t base_kib = net_rss_kib();
    const int64_t t0 = net_now_ms();
    for (int i = 0; i < ATTACKERS; i++) {
        zmq_msg_t m;
        assert_int_equal(zmq_msg_init_data(&m, big, sizeof big, noop_free, NULL), 0);
        assert_true(zmq_msg_send(&m, att[i].xsub, 0) >= 0);
        const unsigned char subscribe_all = 1;
        assert_int_equal(zmq_send(att[i].xsub, &subscribe_all, 1, 0), 1);
    }

    /* First with the publisher idle, as an engine between requests is: its thread does not
     * touch the PUB socket, so what libzmq reads from the peers waits in the socket's queues
     * (up to ZMQ_RCVHWM, 1,000 messages each). Until every peer was disconnected, or the
     * process has grown past the bound (the attack worked: no need to wait for more). */
    for (const int64_t deadline = net_now_ms() + 10000 * TIME_SCALE;;) {
        int refused = 0;
        for (int i = 0; i < ATTACKERS; i++) {
            read_monitor(att[i].mon, &att[i].connected, &att[i].disconnected);
            refused += att[i].disconnected > 0;
        }
        if (refused == ATTACKERS || net_rss_kib() >= base_kib + GROWTH_MIB * 1024) break;
        assert_true(net_now_ms() < deadline);
        zmq_pollitem_t item = {att[0].mon, 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 1);
    }
    /* Then publishing, until every peer receives a live batch: its big message, before its
     * subscription on the same connection, has then been read or refused by the publisher. */
    for (const int64_t deadline = net_now_ms() + 60000 * TIME_SCALE;;) {
        int done = 0;
        for (int i = 0; i < ATTACKERS; i++) {
            attacker *a = &att[i];
            read_monitor(a->mon, &a->connected, &a->disconnected);
            zmq_pollitem_t item = {a->xsub, 0, ZMQ_POLLIN, 0};
            if (!a->done) a->done = zmq_poll(&item, 1, 0) > 0;
            done += a->done;
        }
        if (done == ATTACKERS) break;
        assert_true(net_now_ms() < deadline);
        net_pub_register(&p, 2);
        assert_int_equal(kvreg_subscriber_run(sub, 5), KVREG_OK);
    }
    const int64_t ms = net_now_ms() - t0;
    const uint64_t hwm_kib = net_hwm_kib();
    const uint64_t growth = hwm_kib > base_kib ? hwm_kib - base_kib : 0;
    int refused = 0;
    for (int i = 0; i < ATTACKERS; i++) {
        read_monitor(att[i].mon, &att[i].connected, &att[i].disconnected);
        refused += att[i].disconnected > 0;
        zmq_close(att[i].xsub);
        zmq_close(att[i].mon);
    }
    zmq_ctx_term(ctx);

    net_pub_settle(&p);
    const uint64_t total = net_pub_stat(&p, KVREG_PUB_STAT_NEXT_SEQ);
    assert_true(net_run_until(sub, &c, total, net_now_ms() + 20000 * TIME_SCALE));
    printf("xsub upstream: %d peers x %u MiB, growth %llu KiB, %lld ms, %d peers disconnected, %zu/%llu batches\n",
           ATTACKERS, BIG_SIZE >> 20, (unsigned long long)growth, (long long)ms, refused, c.n,
           (unsigned long long)total);
#ifdef SANITIZED
    printf("xsub upstream: memory bound not checked in a sanitizer build\n");
#else
    assert_true(growth <= GROWTH_MIB * 1024);
#endif
    assert_int_equal(refused, ATTACKERS);
    /* The honest subscriber: every batch, in order, its own contents, nothing lost. */
    assert_int_equal(c.n, total);
    for (size_t i = 0; i < c.n; i++) {
        assert_int_equal(c.recs[i].seq, i);
        assert_int_equal(c.recs[i].first_hash, HASH0 + i);
    }
    assert_int_equal(c.lost, 0);

    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_pub_close(&p);
}

/* The bound follows the topic: a subscription to the whole of a long topic (here 6,000 bytes
 * with its instance suffix) still fits, sent as ZMTP 3.1's SUBSCRIBE command (10 bytes more),
 * while one a byte longer, which can match nothing the publisher sends, disconnects its
 * sender. Both subscribers are libzmq SUB sockets, as vLLM's consumers use. */
static void long_topic_subscription_fits(void **state) {
    (void)state;
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_publisher *pub = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&pool, reg, "gpu"), KVREG_OK);
    assert_int_equal(kvreg_publisher_new(&pub, reg), KVREG_OK);
    static char topic[6000 + 64];
    memset(topic, 'a', 6000);
    topic[6000] = 0;
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*"), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, topic), KVREG_OK);
    assert_int_equal(kvreg_publisher_set(pub, KVREG_PUB_OPT_TOPIC_INSTANCE, 1), KVREG_OK);
    assert_int_equal(kvreg_publisher_start(pub), KVREG_OK);
    char ep[256];
    size_t len = 0;
    assert_int_equal(kvreg_publisher_endpoint(pub, KVREG_PUB_ENDPOINT, ep, sizeof ep, NULL), KVREG_OK);
    assert_int_equal(kvreg_publisher_get_string(pub, KVREG_PUB_TOPIC, topic, sizeof topic - 1, &len), KVREG_OK);
    assert_true(len > 6000);

    void *ctx = zmq_ctx_new();
    void *fits = zmq_socket(ctx, ZMQ_SUB), *over = zmq_socket(ctx, ZMQ_SUB);
    void *fits_mon = zmq_socket(ctx, ZMQ_PAIR), *over_mon = zmq_socket(ctx, ZMQ_PAIR);
    const int zero = 0;
    zmq_setsockopt(fits, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(over, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(fits_mon, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(over_mon, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_socket_monitor(fits, "inproc://fits-monitor", ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED), 0);
    assert_int_equal(zmq_socket_monitor(over, "inproc://over-monitor", ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED), 0);
    assert_int_equal(zmq_connect(fits_mon, "inproc://fits-monitor"), 0);
    assert_int_equal(zmq_connect(over_mon, "inproc://over-monitor"), 0);
    assert_int_equal(zmq_setsockopt(fits, ZMQ_SUBSCRIBE, topic, len), 0);
    topic[len] = 'z';
    assert_int_equal(zmq_setsockopt(over, ZMQ_SUBSCRIBE, topic, len + 1), 0);
    assert_int_equal(zmq_connect(fits, ep), 0);
    assert_int_equal(zmq_connect(over, ep), 0);

    int fits_up = 0, fits_down = 0, over_up = 0, over_down = 0, got = 0;
    static unsigned char frame[8192];
    int frame_len = -1;
    uint64_t hash = 1;
    for (const int64_t deadline = net_now_ms() + 10000 * TIME_SCALE; !got || over_down == 0;) {
        assert_true(net_now_ms() < deadline);
        kvreg_block_desc d;
        const uint32_t tokens[4] = {1, 2, 3, 4};
        memset(&d, 0, sizeof d);
        d.sequence_hash = d.block_hash = hash++;
        d.block_size = 4;
        d.tokens = tokens;
        d.n_tokens = 4;
        kvreg_block b;
        assert_int_equal(kvreg_register(pool, &d, &b), KVREG_OK);
        zmq_pollitem_t item = {fits, 0, ZMQ_POLLIN, 0};
        if (!got && zmq_poll(&item, 1, 5) > 0) {
            frame_len = zmq_recv(fits, frame, sizeof frame, 0);
            got = 1;
        }
        read_monitor(fits_mon, &fits_up, &fits_down);
        read_monitor(over_mon, &over_up, &over_down);
    }
    assert_int_equal(frame_len, (int)len); /* the topic frame, whole */
    assert_memory_equal(frame, topic, len);
    assert_int_equal(fits_down, 0);
    assert_true(over_down >= 1);

    zmq_close(fits);
    zmq_close(over);
    zmq_close(fits_mon);
    zmq_close(over_mon);
    zmq_ctx_term(ctx);
    kvreg_publisher_free(pub);
    kvreg_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(xsub_upstream_is_bounded),
        cmocka_unit_test(long_topic_subscription_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
