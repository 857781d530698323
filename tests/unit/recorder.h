/* An event callback that records everything it is given, for the cmocka suites. */
#ifndef KVREG_TEST_RECORDER_H
#define KVREG_TEST_RECORDER_H

#include <kvreg.h>
#include <stddef.h>
#include <stdint.h>

#define REC_MAX 4096

typedef struct recorder {
    kvreg_event events[REC_MAX];
    uint32_t tokens[REC_MAX][4]; /* first tokens of each event, copied (they are borrowed) */
    size_t n;                    /* events seen */
    size_t calls;                /* callback invocations */
    size_t call_sizes[REC_MAX];  /* events per invocation */
    int destroyed;               /* destroy-notify count */
} recorder;

void recorder_fn(const kvreg_event *events, size_t n, void *ud);
void recorder_destroy(void *ud);

/* A registry in INLINE mode whose callback is the recorder (and keep_tokens as given). */
kvreg_registry *recorder_registry(recorder *r, int keep_tokens);

/* A registry in POLL mode with a queue of `capacity` events (aborts on failure). */
kvreg_registry *poll_registry(uint64_t capacity);

/* Describe block i of seq as a desc (tokens borrowed from seq). */
kvreg_block_desc seq_desc(const kvreg_sequence *seq, size_t i);

/* A hash-only desc. */
kvreg_block_desc hash_desc(uint64_t seq_hash, uint64_t block_hash, int has_parent, uint64_t parent);

#endif
