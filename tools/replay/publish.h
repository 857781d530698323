/*
 * publish: kvreg-replay --publish. The run's registry delivers its events in POLL mode to a
 * kvreg_publisher, which sends them on ZeroMQ as vLLM does (kvreg_net.h), so a router,
 * `kvreg-events sub` or a vLLM consumer can watch a replayed workload live.
 */
#ifndef KVREG_REPLAY_PUBLISH_H
#define KVREG_REPLAY_PUBLISH_H

#include <stdint.h>

#include <kvreg.h>
#include <kvreg_net.h>

typedef struct publish_options {
    const char *endpoint;        /* --publish; NULL: not publishing */
    const char *replay_endpoint; /* --replay-endpoint */
    const char *topic;           /* --topic (default "") */
    uint64_t linger_s;           /* --linger: answer replay requests this long after the run */
} publish_options;

/* 1 if name is one of the options above (it takes a value). */
int publish_is_option(const char *name);
/* Store an option's value; -1 (message printed) for a bad one. */
int publish_set_option(publish_options *p, const char *name, const char *val);
/* The --help lines. */
extern const char publish_usage[];

/* POLL delivery with a queue deep enough for a fast replay. */
int publish_configure(kvreg_config *cfg);
/* Start publishing reg's events (blocks of block_tokens tokens); prints the endpoints in use
 * on stderr. 0, or -1 with a message. */
int publish_start(kvreg_publisher **out, kvreg_registry *reg, const publish_options *p,
                  uint32_t block_tokens);
/* Stop (everything queued is sent), linger for replay requests, print the publisher's
 * counters on stderr, free. 0, or -1 when events were lost on the way. */
int publish_finish(kvreg_publisher *pub);

#endif
