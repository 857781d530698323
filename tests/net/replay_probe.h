/* For the replay tests: batches of a known size, and a raw replay client (a DEALER, as
 * vLLM's and llm-d's replay clients are) that sends [ "", start8 ] and reads answers
 * [ "", topic, seq8, payload ] one message at a time. */
#ifndef KVREG_REPLAY_PROBE_H
#define KVREG_REPLAY_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "net_fixture.h"

#define TOKENS 64 /* tokens per event of register_big: 5 bytes each in msgpack */

/* n events of TOKENS tokens each (values past 2^24); with MAX_EVENTS 16 a batch is ~8 KB. */
void register_big(net_pub *p, size_t n);

/* A DEALER connected to ep (linger 0). rcvhwm < 0 / rcvbuf <= 0: libzmq's defaults. */
void *dealer(void *ctx, const char *ep, int rcvhwm, int rcvbuf);
void request(void *s, uint64_t start);

typedef struct answer {
    char topic[64];
    uint64_t seq;
    size_t payload;
} answer;
/* One answer message within timeout_ms (its shape asserted); 0 if none came. */
int read_answer(void *s, answer *a, int timeout_ms);
/* An end marker: seq ff x 8 and an empty payload (the topic frame says which). */
int is_end(const answer *a);
/* 1 when topic is the end marker of a complete answer: "kvreg-instance=<16 hex>". */
int is_instance_tag(const char *topic);

#endif
