/* A TCP relay on 127.0.0.1 (an ephemeral port) to one server port, whose connections a test can
 * cut: one side of the NATS plane (an engine) loses the server while the other (a replica)
 * keeps it. While cut, every relayed connection is closed and new ones are accepted and closed
 * at once (a client's reconnect attempts fail fast); frozen, the relayed connections stay open
 * but nothing passes either way (a connection that hangs without closing) and new ones are
 * closed at once; healed, what is open is relayed again, and new connections too.
 * One thread, started by tcp_cut_start and joined by tcp_cut_stop. */
#ifndef KVREG_TCP_CUT_H
#define KVREG_TCP_CUT_H

#include <pthread.h>

#define TCP_CUT_MAX_PAIRS 16

typedef struct tcp_cut {
    int listen_fd, to_port;
    int wake[2]; /* a pipe: commands reach the thread's poll */
    int client[TCP_CUT_MAX_PAIRS], upstream[TCP_CUT_MAX_PAIRS];
    volatile int cut, stop; /* written under mu, read by the thread after a wake */
    pthread_mutex_t mu;
    pthread_t thread;
    char url[64]; /* nats://127.0.0.1:PORT of the relay */
} tcp_cut;

void tcp_cut_start(tcp_cut *c, int to_port);
#define TCP_CUT_HEAL 0
#define TCP_CUT_CUT 1    /* closes what is open */
#define TCP_CUT_FREEZE 2 /* keeps what is open, passes nothing */
void tcp_cut_set(tcp_cut *c, int mode);
void tcp_cut_stop(tcp_cut *c);

#endif
