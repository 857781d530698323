/*
 * nats_server: kvreg-replay --transport nats without --nats-url starts a private nats-server
 * (Debian's, which lives in /usr/sbin, off a plain user's PATH): JetStream on (-js), a
 * temporary store directory, 127.0.0.1 on a port the kernel picks (read back from the
 * server's ports file). It is stopped by its pid and its directory removed, on every exit
 * path that reaches nats_server_stop(); PR_SET_PDEATHSIG also ends it if kvreg-replay dies.
 */
#ifndef KVREG_REPLAY_NATS_SERVER_H
#define KVREG_REPLAY_NATS_SERVER_H

#include <sys/types.h>

typedef struct replay_nats_server {
    pid_t pid;        /* 0: not running */
    char dir[256];    /* temporary: store/, log, ports file; "" once removed */
    char url[64];     /* nats://127.0.0.1:PORT once started */
} replay_nats_server;

/* Find nats-server ($KVREG_NATS_SERVER, then PATH, /usr/sbin, /usr/local/sbin), start it and
 * wait (bounded) for its port. 0, or -1 after printing why (nothing is left running). */
int nats_server_launch(replay_nats_server *s);
/* SIGTERM (SIGKILL after a bound), reap, remove the directory. Safe to call twice. */
void nats_server_stop(replay_nats_server *s);

#endif
