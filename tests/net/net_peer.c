/* The hand-made publisher peer of the net tests (see net_peer.h). */
#define _POSIX_C_SOURCE 200809L
#include "net_peer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "net_fixture.h"

static void bind_at(void *sock, const char *at, char *ep, size_t cap) {
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(sock, at), 0);
    assert_int_equal(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &cap), 0);
}

void net_peer_open(net_peer *p, int replay, const net_peer *reuse) {
    memset(p, 0, sizeof *p);
    p->ctx = zmq_ctx_new();
    assert_non_null(p->ctx);
    p->pub = zmq_socket(p->ctx, ZMQ_XPUB);
    int zero = 0;
    /* No send limit: a test that sends more than the default 1000 before the subscriber reads
     * must not lose any to the peer's own high-water mark. */
    zmq_setsockopt(p->pub, ZMQ_SNDHWM, &zero, sizeof zero);
    bind_at(p->pub, reuse ? reuse->endpoint : "tcp://127.0.0.1:*", p->endpoint, sizeof p->endpoint);
    if (replay) {
        p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
        zmq_setsockopt(p->router, ZMQ_SNDHWM, &zero, sizeof zero);
        bind_at(p->router, reuse ? reuse->replay : "tcp://127.0.0.1:*", p->replay, sizeof p->replay);
    }
}

void net_peer_close(net_peer *p) {
    if (p->pub) zmq_close(p->pub);
    if (p->router) zmq_close(p->router);
    if (p->ctx) zmq_ctx_term(p->ctx);
    memset(p, 0, sizeof *p);
}

void net_peer_wait_subscribed(net_peer *p, kvreg_subscriber *sub, int n) {
    const int64_t deadline = net_now_ms() + 10000;
    unsigned char buf[512];
    for (int seen = 0; seen < n;) {
        assert_true(net_now_ms() < deadline);
        assert_int_equal(kvreg_subscriber_run(sub, 0), KVREG_OK);
        zmq_pollitem_t item = {p->pub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 5) <= 0) continue;
        const int len = zmq_recv(p->pub, buf, sizeof buf, 0);
        if (len > 0 && buf[0] == 1) seen++;
    }
}

static void send_frames(void *sock, const void *const *f, const size_t *z, int n) {
    for (int i = 0; i < n; i++) assert_true(zmq_send(sock, f[i], z[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
}

void net_be64(unsigned char out[8], uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) out[i] = (unsigned char)(v & 0xff);
}

void net_peer_live(net_peer *p, const char *topic, uint64_t seq, const void *payload, size_t len) {
    unsigned char s8[8];
    net_be64(s8, seq);
    const void *f[3] = {topic, s8, payload};
    const size_t z[3] = {strlen(topic), 8, len};
    send_frames(p->pub, f, z, 3);
}

int net_peer_has_request(net_peer *p) {
    zmq_pollitem_t item = {p->router, 0, ZMQ_POLLIN, 0};
    return zmq_poll(&item, 1, 0) > 0;
}

uint64_t net_peer_request(net_peer *p, kvreg_subscriber *sub) {
    const int64_t deadline = net_now_ms() + 10000;
    for (;;) {
        assert_true(net_now_ms() < deadline);
        zmq_pollitem_t item = {p->router, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 5) > 0) break;
        assert_int_equal(kvreg_subscriber_run(sub, 0), KVREG_OK);
    }
    unsigned char delim[8], start[16];
    const int id_len = zmq_recv(p->router, p->id, sizeof p->id, 0);
    assert_true(id_len > 0);
    p->id_len = (size_t)id_len;
    assert_int_equal(zmq_recv(p->router, delim, sizeof delim, 0), 0);
    assert_int_equal(zmq_recv(p->router, start, sizeof start, 0), 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | start[i];
    return v;
}

void net_peer_replay(net_peer *p, const char *topic, uint64_t seq, const void *payload, size_t len) {
    unsigned char s8[8];
    net_be64(s8, seq);
    const void *f[5] = {p->id, "", topic, s8, payload};
    const size_t z[5] = {p->id_len, 0, strlen(topic), 8, len};
    send_frames(p->router, f, z, 5);
}

void net_peer_replay_end(net_peer *p, const char *topic) {
    unsigned char s8[8];
    memset(s8, 0xff, sizeof s8);
    const void *f[5] = {p->id, "", topic, s8, ""};
    const size_t z[5] = {p->id_len, 0, strlen(topic), 8, 0};
    send_frames(p->router, f, z, 5);
}

size_t net_payload(uint64_t h, uint8_t *out, size_t cap) {
    kvreg_wire_encoder *enc = NULL;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    kvreg_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = KVREG_EVENT_REGISTER;
    ev.sequence_hash = h;
    ev.block_hash = h;
    const uint32_t tokens[4] = {9, 8, 7, 6};
    ev.tokens = tokens;
    ev.n_tokens = 4;
    size_t used = 0, len = 0;
    const uint8_t *q = NULL;
    assert_int_equal(kvreg_wire_encode(enc, &ev, 1, 1.5, &used, &q, &len), KVREG_OK);
    assert_true(len <= cap);
    memcpy(out, q, len);
    kvreg_wire_encoder_free(enc);
    return len;
}

static uint64_t status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    uint64_t v = 0;
    const size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) v = strtoull(line + klen, NULL, 10);
    fclose(f);
    return v;
}

uint64_t net_rss_kib(void) { return status_kib("VmRSS:"); }
uint64_t net_hwm_kib(void) { return status_kib("VmHWM:"); }
