/*
 * nats_options: kvreg-replay's options for --transport nats (nats_cluster.h), kept in their
 * own block so the command line's other options stay apart.
 */
#ifndef KVREG_REPLAY_NATS_OPTIONS_H
#define KVREG_REPLAY_NATS_OPTIONS_H

#include <stdint.h>

typedef struct nats_options {
    uint32_t routers;    /* --routers R: router replicas (default 1) */
    const char *url;     /* --nats-url: NULL starts a private nats-server */
    int kill_router;     /* --kill-router: kill one replica mid-run and restore it */
    int corrupt_restored; /* --corrupt-restored (testing aid): the restored replica drops
                             worker 0's entries, so the checks must fail */
    int given;           /* any of them was on the command line */
} nats_options;

/* 1 if name is one of them; *takes_value says whether it takes a value. */
int nats_is_option(const char *name, int *takes_value);
/* Store it (val NULL for the flag); -1 after printing why. */
int nats_set_option(nats_options *n, const char *name, const char *val);
/* The --help lines. */
extern const char nats_usage[];

#endif
