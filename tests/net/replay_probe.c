/* Replay clients for the replay tests (see replay_probe.h). */
#define _POSIX_C_SOURCE 200809L
#include "replay_probe.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

/* n events of TOKENS tokens each (values past 2^24: 5 bytes apiece in msgpack). */
void register_big(net_pub *p, size_t n) {
    uint32_t tokens[TOKENS];
    for (size_t i = 0; i < n; i++) {
        for (uint32_t t = 0; t < TOKENS; t++) tokens[t] = 0x10000000u + (uint32_t)p->next_hash * 131u + t;
        kvreg_block_desc d;
        memset(&d, 0, sizeof d);
        d.sequence_hash = p->next_hash;
        d.block_hash = p->next_hash ^ UINT64_C(0x5555);
        d.block_size = TOKENS;
        d.tokens = tokens;
        d.n_tokens = TOKENS;
        p->next_hash++;
        kvreg_block b;
        assert_int_equal(kvreg_register(p->pool, &d, &b), KVREG_OK);
    }
}

void *dealer(void *ctx, const char *ep, int rcvhwm, int rcvbuf) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    assert_non_null(s);
    const int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (rcvhwm >= 0) zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    if (rcvbuf > 0) zmq_setsockopt(s, ZMQ_RCVBUF, &rcvbuf, sizeof rcvbuf);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

void request(void *s, uint64_t start) {
    unsigned char s8[8];
    for (int i = 0; i < 8; i++) s8[i] = (unsigned char)(start >> (56 - 8 * i));
    assert_true(zmq_send(s, "", 0, ZMQ_SNDMORE) == 0);
    assert_true(zmq_send(s, s8, 8, 0) == 8);
}

/* One answer message [ "", topic, seq8, payload ] within timeout_ms; 0 if none came. */
int read_answer(void *s, answer *a, int timeout_ms) {
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) != 1) return 0;
    zmq_msg_t m[4];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        assert_true(zmq_msg_recv(&part, s, 0) >= 0);
        more = zmq_msg_more(&part);
        assert_true(n < 4);
        m[n++] = part;
    }
    assert_int_equal(n, 4);
    assert_int_equal(zmq_msg_size(&m[0]), 0);
    const size_t tl = zmq_msg_size(&m[1]);
    assert_true(tl < sizeof a->topic);
    memcpy(a->topic, zmq_msg_data(&m[1]), tl);
    a->topic[tl] = 0;
    assert_int_equal(zmq_msg_size(&m[2]), 8);
    const unsigned char *s8 = zmq_msg_data(&m[2]);
    a->seq = 0;
    for (int i = 0; i < 8; i++) a->seq = (a->seq << 8) | s8[i];
    a->payload = zmq_msg_size(&m[3]);
    for (int i = 0; i < n; i++) zmq_msg_close(&m[i]);
    return 1;
}

int is_end(const answer *a) { return a->seq == UINT64_MAX && a->payload == 0; }


int is_instance_tag(const char *topic) {
    /* a complete answer's end marker names the publisher's instance: "kvreg-instance=<16 hex>" */
    static const char key[] = "kvreg-instance=";
    if (strncmp(topic, key, sizeof key - 1) != 0 || strlen(topic) != sizeof key - 1 + 16) return 0;
    for (const char *c = topic + sizeof key - 1; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return 0;
    return 1;
}
