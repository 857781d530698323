/* A TCP relay a test can cut (see tcp_cut.h). */
#define _POSIX_C_SOURCE 200809L
#include "tcp_cut.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    abort();
}

static void close_pair(tcp_cut *c, int i) {
    if (c->client[i] >= 0) close(c->client[i]);
    if (c->upstream[i] >= 0) close(c->upstream[i]);
    c->client[i] = c->upstream[i] = -1;
}

static int connect_upstream(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* All of buf to fd (loopback: the peer reads continuously). 0 on success. */
static int write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        const ssize_t w = send(fd, buf, n, MSG_NOSIGNAL); /* a closed peer: an error, not SIGPIPE */
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *relay(void *arg) {
    tcp_cut *c = arg;
    char *buf = malloc(65536);
    if (!buf) die("tcp_cut buffer");
    for (;;) {
        struct pollfd p[2 + 2 * TCP_CUT_MAX_PAIRS];
        int who[2 + 2 * TCP_CUT_MAX_PAIRS]; /* pair index, for the relayed sockets */
        nfds_t n = 0;
        p[n].fd = c->wake[0], p[n].events = POLLIN, n++;
        p[n].fd = c->listen_fd, p[n].events = POLLIN, n++;
        pthread_mutex_lock(&c->mu);
        const int frozen = c->cut == TCP_CUT_FREEZE;
        pthread_mutex_unlock(&c->mu);
        for (int i = 0; i < TCP_CUT_MAX_PAIRS && !frozen; i++)
            if (c->client[i] >= 0) {
                who[n] = i, p[n].fd = c->client[i], p[n].events = POLLIN, n++;
                who[n] = i, p[n].fd = c->upstream[i], p[n].events = POLLIN, n++;
            }
        if (poll(p, n, -1) < 0) {
            if (errno == EINTR) continue;
            die("tcp_cut poll");
        }
        pthread_mutex_lock(&c->mu);
        const int cut = c->cut, stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (p[0].revents) {
            char b[16];
            if (read(c->wake[0], b, sizeof b) < 0 && errno != EINTR) die("tcp_cut wake");
        }
        if (stop || cut == TCP_CUT_CUT) {
            for (int i = 0; i < TCP_CUT_MAX_PAIRS; i++) close_pair(c, i);
            if (stop) {
                free(buf);
                return NULL;
            }
        }
        if (p[1].revents & POLLIN) {
            const int fd = accept(c->listen_fd, NULL, NULL);
            if (fd >= 0) {
                int slot = -1;
                for (int i = 0; i < TCP_CUT_MAX_PAIRS && slot < 0; i++)
                    if (c->client[i] < 0) slot = i;
                const int up = cut || slot < 0 ? -1 : connect_upstream(c->to_port);
                if (up < 0) {
                    close(fd); /* cut (or full): the client sees its connection closed */
                } else {
                    c->client[slot] = fd;
                    c->upstream[slot] = up;
                }
            }
        }
        if (cut) continue; /* the pairs polled above are closed, or frozen (none polled) */
        for (nfds_t k = 2; k < n; k++) {
            if (!p[k].revents) continue;
            const int i = who[k];
            if (c->client[i] < 0) continue; /* closed with its other half */
            const int from = p[k].fd, to = from == c->client[i] ? c->upstream[i] : c->client[i];
            const ssize_t r = read(from, buf, 65536);
            if (r <= 0 || write_all(to, buf, (size_t)r) != 0) close_pair(c, i);
        }
    }
}

void tcp_cut_start(tcp_cut *c, int to_port) {
    memset(c, 0, sizeof *c);
    c->to_port = to_port;
    for (int i = 0; i < TCP_CUT_MAX_PAIRS; i++) c->client[i] = c->upstream[i] = -1;
    if (pipe(c->wake) != 0) die("tcp_cut pipe");
    c->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->listen_fd < 0) die("tcp_cut socket");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(c->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(c->listen_fd, 16) != 0 ||
        getsockname(c->listen_fd, (struct sockaddr *)&a, &len) != 0)
        die("tcp_cut listen");
    snprintf(c->url, sizeof c->url, "nats://127.0.0.1:%d", ntohs(a.sin_port));
    pthread_mutex_init(&c->mu, NULL);
    if (pthread_create(&c->thread, NULL, relay, c) != 0) die("tcp_cut thread");
}

static void command(tcp_cut *c, int cut, int stop) {
    pthread_mutex_lock(&c->mu);
    c->cut = cut;
    c->stop = stop;
    pthread_mutex_unlock(&c->mu);
    if (write(c->wake[1], "x", 1) != 1) die("tcp_cut command");
}

void tcp_cut_set(tcp_cut *c, int mode) { command(c, mode, 0); }

void tcp_cut_stop(tcp_cut *c) {
    command(c, 1, 1);
    pthread_join(c->thread, NULL);
    close(c->listen_fd);
    close(c->wake[0]);
    close(c->wake[1]);
    pthread_mutex_destroy(&c->mu);
}
