/* The replay attacker of test_replay_flood, in a process of its own so that what it holds
 * never counts in the publisher's resident memory: it opens N DEALER sockets to a replay
 * ROUTER, sends each one request [ "", start8 ], prints "SENT" once all are queued, and then
 * never reads an answer. Each DEALER takes at most one message into its queue (RCVHWM 1) and
 * has a small kernel receive buffer, so the publisher soon finds it full: a requester that does
 * not read. It exits when its stdin closes (the test is done) or after 120 s (a test that died).
 *
 *   replay_flood_client <replay endpoint> <clients> <start seq> */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_CLIENTS 256

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <replay endpoint> <clients> <start seq>\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[2]);
    const uint64_t start = strtoull(argv[3], NULL, 10);
    if (n < 1 || n > MAX_CLIENTS) return 2;
    void *ctx = zmq_ctx_new();
    void *socks[MAX_CLIENTS];
    unsigned char start8[8];
    for (int i = 0; i < 8; i++) start8[i] = (unsigned char)(start >> (56 - 8 * i));
    for (int i = 0; i < n; i++) {
        socks[i] = zmq_socket(ctx, ZMQ_DEALER);
        const int one = 1, zero = 0, small = 4096;
        zmq_setsockopt(socks[i], ZMQ_RCVHWM, &one, sizeof one);
        zmq_setsockopt(socks[i], ZMQ_RCVBUF, &small, sizeof small);
        zmq_setsockopt(socks[i], ZMQ_LINGER, &zero, sizeof zero);
        if (zmq_connect(socks[i], argv[1]) != 0) return 1;
        /* Queued until the connection is up: the request goes out as soon as it is. */
        if (zmq_send(socks[i], "", 0, ZMQ_SNDMORE) < 0 || zmq_send(socks[i], start8, 8, 0) < 0) return 1;
    }
    printf("SENT\n");
    fflush(stdout);
    struct pollfd in = {0, POLLIN, 0};
    char buf[64];
    while (poll(&in, 1, 120000) > 0 && read(0, buf, sizeof buf) > 0) {
    }
    for (int i = 0; i < n; i++) zmq_close(socks[i]);
    zmq_ctx_term(ctx);
    return 0;
}
