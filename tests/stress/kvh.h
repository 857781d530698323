/*
 * kvh: a checked driver for libkvreg. It decodes a byte stream into API calls, performs each
 * call on the real library and on a small reference model, and aborts with a message at the
 * first difference (return code, output, query, statistic or event).
 *
 * Shared by the model-based test (bytes from a seeded PRNG) and the libFuzzer target (bytes
 * from the fuzzer), so one model is the oracle for both.
 */
#ifndef KVREG_TEST_KVH_H
#define KVREG_TEST_KVH_H

#include <stddef.h>
#include <stdint.h>

typedef struct kvh_src {
    const uint8_t *data; /* fuzz input; NULL: bytes come from the PRNG below */
    size_t len;
    size_t pos;
    uint64_t rng; /* splitmix64 state when data == NULL */
    int exhausted;
} kvh_src;

typedef struct kvh kvh;

/* Reads the registry configuration from src and creates registry + model. Returns NULL when the
 * input is too short to describe a configuration. context (may be NULL) is printed on failure,
 * e.g. "seed=42", so a failure can be replayed. */
kvh *kvh_new(kvh_src *src, const char *context);
/* One operation. Returns 0 when the source is exhausted (no operation done). */
int kvh_step(kvh *h);
/* Checks every hash and pool at quiescence, then frees everything (sometimes the registry with
 * live pools and blocks, to prove that path frees all). */
void kvh_free(kvh *h);

uint64_t kvh_ops(const kvh *h);    /* operations performed */
uint64_t kvh_events(const kvh *h); /* events compared against the model */

#endif
