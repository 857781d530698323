/* A hand-made publisher peer for the net tests: an XPUB (so the test knows when the
 * subscription has arrived, instead of sending probes until one lands) and an optional ROUTER
 * for replay, both bound on 127.0.0.1 ephemeral ports. The test decides every frame and its
 * order: interleavings, restarts and attacks are exact, with no sleeps. */
#ifndef KVREG_NET_PEER_H
#define KVREG_NET_PEER_H

#include <kvreg.h>
#include <kvreg_net.h>

#include <stddef.h>
#include <stdint.h>

typedef struct net_peer {
    void *ctx, *pub, *router;
    char endpoint[256], replay[256];
    unsigned char id[256]; /* the identity of the last replay request */
    size_t id_len;
} net_peer;

/* replay: also a ROUTER. reuse: bind these endpoints again (a restarted process), or NULL. */
void net_peer_open(net_peer *p, int replay, const net_peer *reuse);
void net_peer_close(net_peer *p);
/* Run sub (run(sub, 0) slices) until the XPUB has seen `n` subscriptions; bounded. */
void net_peer_wait_subscribed(net_peer *p, kvreg_subscriber *sub, int n);
void net_peer_live(net_peer *p, const char *topic, uint64_t seq, const void *payload, size_t len);
/* Run sub until a replay request reaches the ROUTER; returns its start seq. Bounded. */
uint64_t net_peer_request(net_peer *p, kvreg_subscriber *sub);
/* true: a replay request is waiting (does not read it). */
int net_peer_has_request(net_peer *p);
void net_peer_replay(net_peer *p, const char *topic, uint64_t seq, const void *payload, size_t len);
/* The end marker [id, "", topic, ff x 8, ""]; topic may carry a publisher instance. */
void net_peer_replay_end(net_peer *p, const char *topic);

/* One encoded vLLM batch holding one Register of hash h with 4 tokens (the library's encoder). */
size_t net_payload(uint64_t h, uint8_t *out, size_t cap);
void net_be64(unsigned char out[8], uint64_t v);

/* VmRSS / VmHWM of this process in KiB (from /proc/self/status). */
uint64_t net_rss_kib(void);
uint64_t net_hwm_kib(void);

#endif
