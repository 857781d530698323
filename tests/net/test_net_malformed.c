/* A raw ZeroMQ publisher, so the test decides what arrives and in which order (suite net):
 *  - malformed frames: wrong frame counts, a short seq frame and a payload the decoder rejects
 *    are counted and skipped; the subscriber keeps going and the rejected payload's seq does
 *    not look like a gap;
 *  - a replay answer that overtakes the live copy of the same batch (two connections, no order
 *    between them): the live copy is a duplicate, not a publisher restart. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "net_fixture.h"
#include "net_peer.h"

static const char topic[] = "kv@pod-m@model-m";

static void send_frames(void *pub, const void *const *frames, const size_t *sizes, int n) {
    for (int i = 0; i < n; i++)
        assert_true(zmq_send(pub, frames[i], sizes[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
}

static void send_batch(void *pub, uint64_t seq, const uint8_t *payload, size_t len) {
    unsigned char s8[8];
    for (int i = 7; i >= 0; i--, seq >>= 8) s8[i] = (unsigned char)(seq & 0xff);
    const void *f[3] = {topic, s8, payload};
    const size_t z[3] = {strlen(topic), 8, len};
    send_frames(pub, f, z, 3);
}

static void malformed_frames_skipped(void **state) {
    (void)state;
    /* A valid payload, whatever the format: the library's own encoder makes it. */
    uint8_t good[4096];
    const size_t len = net_payload(UINT64_C(0xdab89baa7b5857c0), good, sizeof good);

    void *ctx = zmq_ctx_new();
    void *pub = zmq_socket(ctx, ZMQ_PUB);
    int zero = 0;
    zmq_setsockopt(pub, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(pub, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t eplen = sizeof ep;
    assert_int_equal(zmq_getsockopt(pub, ZMQ_LAST_ENDPOINT, ep, &eplen), 0);

    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    net_collect c;
    net_collect_init(&c, sub);
    assert_int_equal(kvreg_subscriber_add(sub, ep, NULL, NULL), KVREG_OK);

    /* Until the subscription reaches the PUB, what it sends is dropped: send probes with
     * growing seqs until one arrives. */
    uint64_t seq = 0;
    const int64_t deadline = net_now_ms() + 10000;
    while (c.n == 0 && net_now_ms() < deadline) {
        send_batch(pub, seq++, good, len);
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    }
    assert_int_equal(c.n, 1);
    uint64_t gaps_before = 0, malformed = 0;
    kvreg_subscriber_stat(sub, KVREG_SUB_STAT_GAPS, &gaps_before);

    unsigned char s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const void *two[2] = {topic, s8};
    const size_t two_z[2] = {strlen(topic), 8};
    send_frames(pub, two, two_z, 2); /* 2 frames */
    const void *four[4] = {topic, s8, good, good};
    const size_t four_z[4] = {strlen(topic), 8, len, len};
    send_frames(pub, four, four_z, 4); /* 4 frames */
    const void *shortseq[3] = {topic, s8, good};
    const size_t shortseq_z[3] = {strlen(topic), 4, len};
    send_frames(pub, shortseq, shortseq_z, 3); /* seq of 4 bytes */
    const uint8_t garbage[] = {0xc1, 0xff, 0x00, 0x93, 0x01};
    send_batch(pub, seq++, garbage, sizeof garbage); /* a payload no decoder takes */
    send_batch(pub, seq++, good, 0);                 /* an empty payload */
    send_batch(pub, seq++, good, len);               /* the sentinel */
    const uint64_t sentinel = seq - 1;

    assert_true(net_run_until(sub, &c, 2, net_now_ms() + 10000));
    assert_int_equal(c.recs[1].seq, sentinel);
    assert_int_equal(c.recs[1].first_hash, UINT64_C(0xdab89baa7b5857c0));
    kvreg_subscriber_stat(sub, KVREG_SUB_STAT_MALFORMED, &malformed);
    assert_int_equal(malformed, 5);
    assert_int_equal(c.notices[KVREG_SUB_MALFORMED], 5);
    uint64_t gaps = 0;
    kvreg_subscriber_stat(sub, KVREG_SUB_STAT_GAPS, &gaps);
    assert_int_equal(gaps, gaps_before); /* the rejected payloads used their seqs */

    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}

static void be64(unsigned char s8[8], uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) s8[i] = (unsigned char)(v & 0xff);
}

static void bind_any(void *sock, char *ep, size_t cap) {
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(sock, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &cap), 0);
}

/* The subscriber starts FROM_SEQ 0, so its first run asks the ROUTER for seqs from 0. The
 * answer (seq 0, then the end marker) is delivered before the PUB sends seq 0 live: when the
 * live copy comes it must be counted as a duplicate, with no RESET notice and no second
 * delivery, and seq 1 must follow. Before the fix, any live seq below the next expected one
 * was taken for a restarted publisher: a RESET, and seq 0 delivered again. */
static void replay_overtaking_live_is_not_a_reset(void **state) {
    (void)state;
    uint8_t p0[4096], p1[4096];
    const size_t n0 = net_payload(1000, p0, sizeof p0), n1 = net_payload(1001, p1, sizeof p1);
    void *ctx = zmq_ctx_new();
    void *pub = zmq_socket(ctx, ZMQ_PUB), *router = zmq_socket(ctx, ZMQ_ROUTER);
    char pub_ep[256], router_ep[256];
    bind_any(pub, pub_ep, sizeof pub_ep);
    bind_any(router, router_ep, sizeof router_ep);

    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_FROM_SEQ, 0), KVREG_OK);
    net_collect c;
    net_collect_init(&c, sub);
    assert_int_equal(kvreg_subscriber_add(sub, pub_ep, router_ep, NULL), KVREG_OK);

    /* The request: [identity, "", start8 = 0]. */
    assert_int_equal(kvreg_subscriber_run(sub, 0), KVREG_OK);
    unsigned char id[256], delim[8], start[16];
    zmq_pollitem_t item = {router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&item, 1, 10000), 1);
    const int id_len = zmq_recv(router, id, sizeof id, 0);
    assert_true(id_len > 0);
    assert_int_equal(zmq_recv(router, delim, sizeof delim, 0), 0);
    assert_int_equal(zmq_recv(router, start, sizeof start, 0), 8);
    for (int i = 0; i < 8; i++) assert_int_equal(start[i], 0);

    /* The answer: seq 0, then the end marker (seq ff x 8, empty payload). */
    unsigned char s8[8], end8[8];
    be64(s8, 0);
    memset(end8, 0xff, sizeof end8);
    const void *answer[5] = {id, "", topic, s8, p0};
    const size_t answer_z[5] = {(size_t)id_len, 0, strlen(topic), 8, n0};
    send_frames(router, answer, answer_z, 5);
    const void *done[5] = {id, "", topic, end8, ""};
    const size_t done_z[5] = {(size_t)id_len, 0, strlen(topic), 8, 0};
    send_frames(router, done, done_z, 5);
    const int64_t deadline = net_now_ms() + 10000;
    while (c.notices[KVREG_SUB_REPLAY_DONE] == 0 && net_now_ms() < deadline)
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    assert_int_equal(c.notices[KVREG_SUB_REPLAY_DONE], 1);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.recs[0].seq, 0);

    /* Now the live copy of seq 0, resent until the subscription has reached the PUB and the
     * subscriber has seen one (a duplicate before the fix, a second delivery and a RESET). */
    uint64_t dups = 0;
    while (dups == 0 && c.n == 1 && net_now_ms() < deadline) {
        send_batch(pub, 0, p0, n0);
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
        kvreg_subscriber_stat(sub, KVREG_SUB_STAT_DUPLICATES, &dups);
    }
    assert_true(dups >= 1);
    assert_int_equal(c.notices[KVREG_SUB_RESET], 0);
    assert_int_equal(c.n, 1);

    send_batch(pub, 1, p1, n1);
    assert_true(net_run_until(sub, &c, 2, net_now_ms() + 10000));
    assert_int_equal(c.recs[1].seq, 1);
    assert_int_equal(c.recs[1].first_hash, 1001);
    assert_int_equal(c.notices[KVREG_SUB_RESET], 0);
    assert_int_equal(c.notices[KVREG_SUB_GAP], 0);

    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    zmq_close(pub);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_frames_skipped),
        cmocka_unit_test(replay_overtaking_live_is_not_a_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
