/* The nats suite's fixture: a Debian nats-server started by the test itself (JetStream on, a
 * temporary store directory, 127.0.0.1 on an ephemeral port learnt from the server's ports
 * file), ready once a client connects and JetStream answers, stopped by its pid. Every wait
 * polls a condition with a deadline. */
#ifndef KVREG_NATS_FIXTURE_H
#define KVREG_NATS_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

typedef struct nats_server {
    pid_t pid;
    int port;
    char exe[512];
    char dir[256];   /* temporary: store (dir/store), ports file, log */
    char url[64];    /* nats://127.0.0.1:PORT */
    int max_payload; /* 0: the server's default (1 MiB) */
} nats_server;

/* Find nats-server ($KVREG_NATS_SERVER, then PATH, then /usr/sbin and /usr/local/sbin) and
 * start it. When it is missing: exit 77 (skip) with a message, or, in CI (CI=true), fail. */
void nats_server_start(nats_server *s);
/* The same with the server's max_payload set (a config file in its directory), for messages
 * that must be chunked. */
void nats_server_start_max_payload(nats_server *s, int max_payload);
/* Send sig to the server and reap it (bounded); the store directory stays. */
void nats_server_kill(nats_server *s, int sig);
/* Start it again on the same port and store directory (after nats_server_kill). */
void nats_server_restart(nats_server *s);
/* Kill it (if running) and remove its directory. */
void nats_server_destroy(nats_server *s);

int64_t nats_now_ms(void);

#endif
