/*
 * libkvreg over NATS JetStream: engines publish their registry's events into a stream, and each
 * router replica reads the whole stream through its own durable pull consumer into a
 * kvreg_index. docs/nats.md describes the protocol (subjects, headers, stream and consumer
 * settings, and what each failure does); this header is the API.
 *
 * SPDX-License-Identifier: Apache-2.0
 *
 * Message (one per batch): subject <prefix>.<namespace>.<component>.<worker_id>.<dp_rank>
 * (default prefix "kvreg.events", namespace "default", component "backend"; or one subject
 * set whole), payload one encoded batch (kvreg_wire.h: vLLM KVEventBatch by default, or Dynamo
 * RouterEvents), and two headers:
 *   Nats-Msg-Id   "<worker_id>-<dp_rank>-<instance>-<seq>": the stream drops a resent batch
 *                 inside its duplicate window, so a retry is never a duplicate;
 *   Kvreg-Batch   "1 <worker_id> <dp_rank> <instance> <seq> <format>" (decimal, one space):
 *                 what a consumer orders by. instance names one run of a publisher (it grows
 *                 from run to run: nanoseconds since the epoch at start by default); seq is
 *                 0, 1, 2, ... per instance, one per batch.
 *
 * Everything here returns KVREG_ENOTSUP when the library was built without NATS
 * (kvreg_nats_available() == 0); the symbols exist either way.
 */
#ifndef KVREG_NATS_H
#define KVREG_NATS_H

/* Experimental tier (README, "API stability"): these calls may still change between 0.x
 * releases, while kvreg.h and kvreg_wire.h only grow. Opt in by defining KVREG_EXPERIMENTAL
 * before the first include (or -DKVREG_EXPERIMENTAL on the command line). */
#ifndef KVREG_EXPERIMENTAL
#error "kvreg_nats.h is libkvreg's experimental API (it may change between 0.x releases): #define KVREG_EXPERIMENTAL before including it, or compile with -DKVREG_EXPERIMENTAL"
#endif

#include "kvreg.h"
#include "kvreg_index.h"
#include "kvreg_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this library was built with libnats (the Meson feature `nats`), else 0. */
KVREG_API int kvreg_nats_available(void) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Publisher (engine side)                                                                     */
/* ------------------------------------------------------------------------------------------ */
/* One sender thread, started by kvreg_nats_publisher_start(), takes the registry's events
 * (POLL delivery: the engine's threads only queue them and never wait for the network),
 * encodes them and publishes each batch asynchronously with at most KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT
 * batches not yet acknowledged by the stream. A batch whose acknowledgment fails or times out is
 * resent (same Nats-Msg-Id) after KVREG_NATS_PUB_OPT_RETRY_MS, oldest first, until it is
 * acknowledged or the publisher stops. A message is never larger than the server's max_payload
 * nor the stream's max_msg_size; a batch refused for its size after it was made (a limit
 * lowered) goes out again with no events under its seq, and the worker resyncs (below).
 *
 * Bounded memory when the server is slow or away: at most MAX_IN_FLIGHT batches are held; the
 * sender then stops taking events and they wait in the registry's poll queue (bounded by
 * KVREG_OPT_POLL_CAPACITY). When that queue overflows, the registry drops events and skips
 * their ids: the publisher sees the gap, counts a resync (KVREG_NATS_PUB_STAT_RESYNCS) and,
 * before any later event, publishes the worker's whole state again: a Cleared event followed by
 * one Register per block the registry holds (kvreg_registry_snapshot), then the events after the
 * snapshot. Consumers that apply batches in order therefore end with the engine's blocks. The
 * same resync starts a publisher whose registry already emitted events. With the vLLM formats a
 * resync needs the blocks' tokens: create the registry with KVREG_OPT_KEEP_TOKENS (registers
 * without tokens are skipped and counted, as for live events).
 *
 * Thread-safety and lifetime as kvreg_publisher (kvreg_net.h): configure, start, stop and free
 * from one thread; stat from any thread. The registry must outlive the publisher. The
 * publisher is its only poller: until kvreg_nats_publisher_free(), kvreg_registry_poll() and
 * kvreg_registry_poll_wait() on it return KVREG_EBUSY, and so does creating another publisher
 * (ZeroMQ or NATS) for it. libnats runs its own threads for the connection. */
typedef struct kvreg_nats_publisher kvreg_nats_publisher;

/* KVREG_EINVAL: out or reg NULL, or reg not in KVREG_DELIVERY_POLL mode. KVREG_EBUSY: another
 * publisher (ZeroMQ or NATS) takes reg's events. Connects nothing. */
KVREG_API int kvreg_nats_publisher_new(kvreg_nats_publisher **out,
                                       kvreg_registry *reg) KVREG_NOEXCEPT;
/* Stops it if it runs, then frees it. NULL-safe. */
KVREG_API void kvreg_nats_publisher_free(kvreg_nats_publisher *pub) KVREG_NOEXCEPT;

/* Options (uint64_t values). KVREG_EINVAL: unknown option or value out of range; KVREG_ESTATE
 * once started. Here and in the consumer's options a duration with no upper bound given is
 * at most INT64_MAX / 10^6 ms (INT64_MAX / 10^9 s for MAX_AGE_S): NATS counts in int64 ns. */
#define KVREG_NATS_PUB_OPT_FORMAT 1u        /* KVREG_WIRE_VLLM (default), _VLLM_LEGACY,
                                               _DYNAMO_JSON or _DYNAMO_MSGPACK */
#define KVREG_NATS_PUB_OPT_WORKER_ID 2u     /* worker id in subject and headers (default 0) */
#define KVREG_NATS_PUB_OPT_DP_RANK 3u       /* data-parallel rank (default 0, <= INT32_MAX) */
#define KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT 4u /* batches published and not yet acknowledged
                                               (default 256, 1 .. 65536) */
#define KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS 5u /* an acknowledgment not back after this is a
                                               failure, and the batch is resent (default 5000,
                                               10 .. 3600000) */
#define KVREG_NATS_PUB_OPT_RETRY_MS 6u      /* wait before resending a failed batch, from its
                                               own failure; each is resent on its own, so one
                                               refused again holds back no other (default
                                               100, 1 .. 60000) */
#define KVREG_NATS_PUB_OPT_MAX_EVENTS 7u    /* most kvreg events per batch (default 1024, >= 1);
                                               a batch whose payload and headers together are
                                               over the server's max_payload (the server counts
                                               both) is split */
#define KVREG_NATS_PUB_OPT_BLOCK_SIZE 8u    /* as KVREG_WIRE_OPT_BLOCK_SIZE (default 0) */
#define KVREG_NATS_PUB_OPT_BATCH_US 9u      /* let events gather this long after draining the
                                               queue (default 1000, <= 1000000) */
#define KVREG_NATS_PUB_OPT_LINGER_MS 10u    /* how long stop may spend publishing what is
                                               queued and awaiting acks (default 5000,
                                               <= 3600000) */
#define KVREG_NATS_PUB_OPT_INSTANCE 11u     /* this run's instance number (default: nanoseconds
                                               since the epoch at start; must grow from run to
                                               run of one worker) */
#define KVREG_NATS_PUB_OPT_CREATE_STREAM 12u /* 1 (default): create the stream at start if it
                                               does not exist; 0: it must exist */
#define KVREG_NATS_PUB_OPT_MAX_AGE_S 13u    /* stream retention when created (default 3600) */
#define KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS 14u /* stream duplicate window when created
                                               (default 120000; must exceed the longest time a
                                               batch may be retried) */
#define KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS 15u /* bound of start's connect (default 2000) */
/* Liveness (docs/nats.md "Worker liveness"): with a KVREG_NATS_LIVENESS_BUCKET set, the sender
 * thread puts the key "<worker_id>.<dp_rank>" (value: the instance, decimal) into that JetStream
 * key-value bucket every HEARTBEAT_MS, without waiting for an answer; the bucket's TTL makes a
 * key vanish when its worker stops. When the key may have expired while the worker lived (a
 * reconnect, or a TTL between heartbeats that reached the server) the worker resyncs, since
 * replicas removed its blocks; the client then pings the server every LIVENESS_TTL_MS / 2, so
 * that a connection that hangs without closing ends within about a TTL. */
#define KVREG_NATS_PUB_OPT_HEARTBEAT_MS 16u /* heartbeat period (default 1000, 10 .. 3600000);
                                               at most a third of the TTL the bucket really
                                               has (it may have been made by another) */
#define KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS 17u /* the bucket's TTL when start creates it (default
                                               5000, >= 100; should be a few heartbeats) */
KVREG_API int kvreg_nats_publisher_set(kvreg_nats_publisher *pub, uint32_t option,
                                       uint64_t value) KVREG_NOEXCEPT;

/* String options (copied). KVREG_ESTATE once started. */
#define KVREG_NATS_URL 1u            /* server URL(s), comma-separated (default
                                        "nats://127.0.0.1:4222") */
#define KVREG_NATS_STREAM 2u         /* stream name (default "KVREG_EVENTS") */
#define KVREG_NATS_SUBJECT_PREFIX 3u /* default "kvreg.events"; the stream created takes
                                        "<prefix>.>" */
#define KVREG_NATS_NAMESPACE 4u      /* default "default" */
#define KVREG_NATS_COMPONENT 5u      /* default "backend" */
#define KVREG_NATS_SUBJECT 6u        /* the whole subject, overriding the layout (default NULL) */
#define KVREG_NATS_LORA_NAME 7u      /* lora_name of stored events (default NULL: nil; UTF-8) */
#define KVREG_NATS_LIVENESS_BUCKET 12u /* key-value bucket of worker heartbeats (default NULL:
                                        none); publisher and consumer (numbers 8-11 are the
                                        consumer's) */
KVREG_API int kvreg_nats_publisher_set_string(kvreg_nats_publisher *pub, uint32_t option,
                                              const char *value) KVREG_NOEXCEPT;
/* The value in effect of an option above (0.6; rules in kvreg.h, "One configuration
 * pattern"): the default until set, and after start what the publisher uses. INSTANCE is 0
 * until set or until start draws it. _get_string: KVREG_ENOENT while LORA_NAME or
 * LIVENESS_BUCKET is NULL, and for SUBJECT until it is set or start fills in the layout. Any
 * thread, also while the publisher runs: they never wait for its sender thread. */
KVREG_API int kvreg_nats_publisher_get(const kvreg_nats_publisher *pub, uint32_t option,
                                       uint64_t *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_nats_publisher_get_string(const kvreg_nats_publisher *pub, uint32_t option,
                                              char *buf, size_t cap, size_t *len) KVREG_NOEXCEPT;

/* Connect (bounded by CONNECT_TIMEOUT_MS), make sure the stream exists, start the sender
 * thread. KVREG_ESTATE if already started; KVREG_EINVAL: bad subject or token; KVREG_EPROTO:
 * no server answered, or the stream is missing (CREATE_STREAM 0) or could not be created;
 * nothing stays open then. Once started, the connection reconnects by itself for ever. */
KVREG_API int kvreg_nats_publisher_start(kvreg_nats_publisher *pub) KVREG_NOEXCEPT;

/* Flush the registry (everything emitted before the call is queued), publish what is queued
 * and wait for every acknowledgment, for at most LINGER_MS; what is left then is counted in
 * KVREG_NATS_PUB_STAT_EVENTS_UNSENT / _BATCHES_UNACKED. Joins the thread and closes the
 * connection. A server that stops reading holds it up to 2 s more (every write has a 2 s
 * deadline; past it the connection is dropped and reconnects). When it returns, no
 * acknowledgment callback is running or will run. KVREG_OK also when not running. */
KVREG_API int kvreg_nats_publisher_stop(kvreg_nats_publisher *pub) KVREG_NOEXCEPT;

#define KVREG_NATS_PUB_STAT_BATCHES 1u         /* batches made (= next seq) */
#define KVREG_NATS_PUB_STAT_ACKED 2u           /* batches the stream acknowledged */
#define KVREG_NATS_PUB_STAT_DUPLICATES 3u      /* of those, acknowledged as duplicates (a resend
                                                  of a batch the stream already had) */
#define KVREG_NATS_PUB_STAT_RETRIES 4u         /* batches resent */
#define KVREG_NATS_PUB_STAT_IN_FLIGHT 5u       /* batches not acknowledged yet, now */
#define KVREG_NATS_PUB_STAT_EVENTS_SENT 6u     /* kvreg events in batches made */
#define KVREG_NATS_PUB_STAT_EVENTS_LOST 7u     /* events the registry dropped (its queue was full)
                                                  since start: each loss leads to a resync */
#define KVREG_NATS_PUB_STAT_RESYNCS 8u         /* resyncs published (Cleared + snapshot) */
#define KVREG_NATS_PUB_STAT_EVENTS_SKIPPED 9u  /* events the format cannot carry, or too large
                                                  for max_payload alone with the headers */
#define KVREG_NATS_PUB_STAT_EVENTS_UNSENT 10u  /* not in any batch when stop's bound ran out:
                                                  left in the registry's queue, or taken from
                                                  it and not yet in a batch */
#define KVREG_NATS_PUB_STAT_BATCHES_UNACKED 11u /* not acknowledged when stop's bound ran out */
#define KVREG_NATS_PUB_STAT_ERRORS 12u         /* publish failures (each then retried) and
                                                  encode failures */
#define KVREG_NATS_PUB_STAT_EVENTS_HANDLED 13u /* events taken from the registry's queue and done
                                                  with (in a batch, skipped, or before a
                                                  resync's snapshot position) */
#define KVREG_NATS_PUB_STAT_BATCHES_REFUSED 14u /* batches refused for their size after they
                                                   were made (the stream's max_msg_size was
                                                   lowered, or the server came back with a
                                                   smaller max_payload): each went out again
                                                   with no events under its seq, and the
                                                   worker resynced */
KVREG_API int kvreg_nats_publisher_stat(const kvreg_nats_publisher *pub, uint32_t stat,
                                        uint64_t *value) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Consumer (router side)                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* One durable pull consumer of the stream, feeding one kvreg_index. It has no thread:
 * kvreg_nats_consumer_run() fetches, orders and applies on the caller's thread and acknowledges
 * each message after it is applied (or judged). Per worker (worker_id, dp_rank), batches are
 * applied in seq order, each at most once:
 *  - seq below the next expected (a redelivery, or a resend the stream kept twice): skipped,
 *    counted in KVREG_NATS_CON_STAT_DUPLICATES;
 *  - seq above it: held (not acknowledged) until the missing ones arrive, as a resent batch
 *    can land after later ones; after KVREG_NATS_CON_OPT_REORDER_WINDOW held batches or
 *    KVREG_NATS_CON_OPT_REORDER_MS, the missing seqs get a LOSS notice and the held batches
 *    are applied (the index flags the gap; the publisher's next resync repairs the worker).
 *    Across workers, once the held batches pass KVREG_NATS_CON_OPT_MAX_HELD_BYTES or number
 *    MAX_ACK_PENDING (the server then sends nothing new, the missing batches included), the
 *    gap that has waited longest is given up at once the same way, until within both;
 *  - a higher instance: the worker restarted. A RESET notice, its entries are dropped, and the
 *    new instance is expected from seq 0. A lower instance: a late batch of an old run,
 *    skipped (counted in KVREG_NATS_CON_STAT_STALE);
 *  - a message without a valid Kvreg-Batch header, bigger than KVREG_NATS_CON_OPT_MAX_MSG_BYTES,
 *    or whose payload does not decode: a MALFORMED notice, counted, terminated (the stream
 *    does not redeliver it), and the consumer goes on. A payload that does not decode still
 *    uses its seq.
 * Without a restored snapshot a new replica must read the stream from its start: by default
 * start() deletes this consumer's durable and creates it again from the stream's first message
 * (KVREG_NATS_CON_OPT_RESUME 1 keeps its position instead, for an index that is already
 * current: the first batch then seen of each worker is taken as its next). Without RESUME
 * each worker is expected from seq 0; if the stream no longer has its first batches (its
 * age limit), the reorder bound reports them as a LOSS.
 *
 * Thread-safety: one thread at a time runs a consumer; kvreg_nats_consumer_stop() and
 * kvreg_nats_consumer_stat() from any thread. The index is borrowed and must outlive it. */
typedef struct kvreg_nats_consumer kvreg_nats_consumer;

/* KVREG_EINVAL: out or idx NULL. */
KVREG_API int kvreg_nats_consumer_new(kvreg_nats_consumer **out,
                                      kvreg_index *idx) KVREG_NOEXCEPT;
KVREG_API void kvreg_nats_consumer_free(kvreg_nats_consumer *con) KVREG_NOEXCEPT; /* NULL-safe */

/* Options (uint64_t values); KVREG_ESTATE once started. */
#define KVREG_NATS_CON_OPT_FETCH_BATCH 1u     /* messages per fetch (default 256, 1 .. 65536) */
#define KVREG_NATS_CON_OPT_ACK_WAIT_MS 2u     /* consumer's ack wait when created (default
                                                 5000, >= 100): a message lost on its way to
                                                 the replica (a server restart) comes again
                                                 after this; keep it below REORDER_MS */
#define KVREG_NATS_CON_OPT_MAX_ACK_PENDING 3u /* consumer's max ack pending when created
                                                 (default 65536, >= 1) */
#define KVREG_NATS_CON_OPT_REORDER_WINDOW 4u  /* held batches per worker before a gap is given
                                                 up (default 4096, >= 1) */
#define KVREG_NATS_CON_OPT_REORDER_MS 5u      /* ... or after this long (default 30000) */
#define KVREG_NATS_CON_OPT_MAX_MSG_BYTES 6u   /* larger messages are malformed (default
                                                 67108864, >= 1) */
#define KVREG_NATS_CON_OPT_RESUME 7u          /* 0 (default): start from the stream's first
                                                 message; 1: keep the durable's position */
#define KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS 8u /* bound of start's connect (default 2000) */
/* Snapshots (docs/nats.md "Snapshots"; they need KVREG_NATS_SNAPSHOT_BUCKET). A snapshot is the
 * index's dump (kvreg_index_dump) with the consumer's per-worker positions and the stream
 * sequence it covers, stored as an object of that object-store bucket (the NATS object store's
 * own stream layout, chunked: readable by any NATS client's object-store API). */
#define KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS 9u /* write one after this many applied events
                                                 (default 0: not by count) */
#define KVREG_NATS_CON_OPT_SNAPSHOT_MS 10u    /* ... or this long after the last one, when
                                                 events were applied since (default 0: not by
                                                 time) */
#define KVREG_NATS_CON_OPT_SNAPSHOT_KEEP 11u  /* snapshots kept, newest first (default 2,
                                                 1 .. 16): a corrupt newest falls back to an
                                                 older one */
#define KVREG_NATS_CON_OPT_SNAPSHOT_PURGE 12u /* 1: after writing, purge the event stream below
                                                 the oldest snapshot kept (default 0). Only for
                                                 deployments whose every replica restores from
                                                 snapshots: a replica behind that point loses
                                                 the purged batches (LOSS notices) */
#define KVREG_NATS_CON_OPT_SNAPSHOT_CHUNK_BYTES 13u /* chunk size (default 131072, 256 ..
                                                 16777216); never more than the server's
                                                 max_payload allows */
#define KVREG_NATS_CON_OPT_RESTORE 14u        /* 1 (default): start() restores the newest valid
                                                 snapshot into the index and consumes from the
                                                 sequence after it; if none is valid, the whole
                                                 stream. 0: never restore. Ignored with RESUME
                                                 1 or an index that already knows a worker */
#define KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS 15u /* with a KVREG_NATS_LIVENESS_BUCKET: how often
                                                 run() checks the workers' keys (default 1000,
                                                 10 .. 3600000); also how long a key lookup
                                                 waits (100 .. 5000 ms) and how often the
                                                 client pings the server (at least 100 ms) */
#define KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS 16u /* after writing a snapshot, purge the bucket's
                                                 chunks that no snapshot names and that are
                                                 older than this (a writer that died mid-write,
                                                 or a replica that lost a race for the same
                                                 name to another; default 60000, 0: never) */
#define KVREG_NATS_CON_OPT_MAX_HELD_BYTES 17u /* payload bytes of batches held out of order,
                                                 every worker's (default 268435456, >= 1);
                                                 past it, see "seq above it" above */
KVREG_API int kvreg_nats_consumer_set(kvreg_nats_consumer *con, uint32_t option,
                                      uint64_t value) KVREG_NOEXCEPT;
/* String options (copied): KVREG_NATS_URL, KVREG_NATS_STREAM (as for the publisher),
 * KVREG_NATS_DURABLE (durable name, default "kvreg-router"; one per replica) and
 * KVREG_NATS_FILTER (subject filter, default "<stream's subjects>": every message). */
#define KVREG_NATS_DURABLE 8u
#define KVREG_NATS_FILTER 9u
/* Consumer only: the object-store bucket of snapshots (default NULL: no snapshots; created at
 * start when missing) and the name snapshots are stored under (default: the stream's name; the
 * objects are "<name>.0" .. "<name>.<KEEP-1>"). Replicas that share a name must read the same
 * stream with the same filter. Also KVREG_NATS_LIVENESS_BUCKET (12), as for the publisher:
 * a worker whose key is missing at a check and that applied no batch within the bucket's TTL
 * is removed from the index (kvreg_index_remove_worker) with an EXPIRED notice. */
#define KVREG_NATS_SNAPSHOT_BUCKET 10u
#define KVREG_NATS_SNAPSHOT_NAME 11u
KVREG_API int kvreg_nats_consumer_set_string(kvreg_nats_consumer *con, uint32_t option,
                                             const char *value) KVREG_NOEXCEPT;
/* The value in effect of an option above (0.6; rules in kvreg.h, "One configuration
 * pattern"): the default until set. SNAPSHOT_NAME gives the stream's name while not set.
 * _get_string: KVREG_ENOENT while SNAPSHOT_BUCKET, LIVENESS_BUCKET or FILTER is NULL (or
 * FILTER ""). Any thread, also during kvreg_nats_consumer_run(). */
KVREG_API int kvreg_nats_consumer_get(const kvreg_nats_consumer *con, uint32_t option,
                                      uint64_t *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_nats_consumer_get_string(const kvreg_nats_consumer *con, uint32_t option,
                                             char *buf, size_t cap, size_t *len) KVREG_NOEXCEPT;

#define KVREG_NATS_NOTICE_LOSS 1u      /* seqs [first, last] of the worker will never apply */
#define KVREG_NATS_NOTICE_RESET 2u     /* the worker's instance changed: first = old, last =
                                          new instance; its entries were dropped */
#define KVREG_NATS_NOTICE_MALFORMED 3u /* a message was skipped: message says why; first = its
                                          seq when it had a header (has_seq) */
#define KVREG_NATS_NOTICE_APPLY 4u     /* kvreg_index_apply failed (status in count) */
#define KVREG_NATS_NOTICE_SNAPSHOT 5u  /* a snapshot was restored (count 1), written (count 2),
                                          rejected (count 0: corrupt, unreadable or of another
                                          configuration; message says why) or not written
                                          because the bucket has one that covers more (count
                                          3); first = the stream sequence it covers */
#define KVREG_NATS_NOTICE_EXPIRED 6u   /* the worker's liveness key expired: its entries were
                                          removed from the index */
typedef struct kvreg_nats_notice {
    uint32_t kind;           /* KVREG_NATS_NOTICE_* */
    uint32_t dp_rank;
    uint64_t worker_id;      /* 0 for a message without a header */
    uint64_t instance;
    uint64_t first;
    uint64_t last;
    uint64_t count;
    uint64_t stream_seq;     /* the message's stream sequence (0 when unknown) */
    uint32_t has_seq;
    uint32_t reserved32;
    const char *subject;     /* the message's subject, "" when unknown */
    const char *message;     /* short English description, never NULL */
    uint64_t reserved[2];
} kvreg_nats_notice;
typedef void (*kvreg_nats_notice_fn)(const kvreg_nats_notice *notice, void *user_data);
/* Called on the thread in kvreg_nats_consumer_run(); KVREG_ESTATE once started. */
KVREG_API KVREG_DEPRECATED("use kvreg_nats_consumer_set_notice_cb") int kvreg_nats_consumer_set_notice_fn(kvreg_nats_consumer *con,
                                                kvreg_nats_notice_fn fn,
                                                void *user_data) KVREG_NOEXCEPT;
/* As kvreg_nats_consumer_set_notice_fn, and the consumer owns user_data: destroy (may be NULL)
 * runs exactly once, when the callback is replaced or in kvreg_nats_consumer_free(). On an
 * error the caller keeps user_data. (0.6) */
KVREG_API int kvreg_nats_consumer_set_notice_cb(kvreg_nats_consumer *con, kvreg_nats_notice_fn fn,
                                                void *user_data,
                                                kvreg_destroy_fn destroy) KVREG_NOEXCEPT;

/* Connect, check the stream exists, (re)create the durable pull consumer. KVREG_ESTATE if
 * started; KVREG_EPROTO: no server, no such stream, or the consumer could not be made. A
 * start that failed holds nothing (connection, subscriptions, decoders): it may be called
 * again. */
KVREG_API int kvreg_nats_consumer_start(kvreg_nats_consumer *con) KVREG_NOEXCEPT;
/* Fetch and apply for timeout_ms (-1: until stopped; 0: one fetch of what is ready), or until
 * kvreg_nats_consumer_stop(). Rides through disconnections (libnats reconnects; while it does,
 * run() waits for nothing of it). A snapshot that SNAPSHOT_EVENTS or SNAPSHOT_MS calls for is
 * written inside run(), which then lasts as long as the write: with a server that stopped
 * answering and a connection not yet known to be down, up to its flush's 2 s and requests'
 * 5 s. KVREG_ESTATE before start; KVREG_EINVAL for timeout_ms < -1. */
KVREG_API int kvreg_nats_consumer_run(kvreg_nats_consumer *con, int timeout_ms) KVREG_NOEXCEPT;
/* Make the current (or next) run return within one fetch wait (<= 100 ms). Any thread. */
KVREG_API int kvreg_nats_consumer_stop(kvreg_nats_consumer *con) KVREG_NOEXCEPT;

#define KVREG_NATS_CON_STAT_MESSAGES 1u   /* messages received (redeliveries included) */
#define KVREG_NATS_CON_STAT_BATCHES 2u    /* batches applied (distinct per worker and seq) */
#define KVREG_NATS_CON_STAT_EVENTS 3u     /* decoded events applied */
#define KVREG_NATS_CON_STAT_DUPLICATES 4u /* batches skipped as already applied */
#define KVREG_NATS_CON_STAT_LOST 5u       /* seqs named in LOSS notices */
#define KVREG_NATS_CON_STAT_RESETS 6u     /* RESET notices */
#define KVREG_NATS_CON_STAT_MALFORMED 7u  /* MALFORMED notices */
#define KVREG_NATS_CON_STAT_STALE 8u      /* batches of an older instance skipped */
#define KVREG_NATS_CON_STAT_HELD 9u       /* batches held out of order, now */
#define KVREG_NATS_CON_STAT_FETCH_ERRORS 10u /* fetches that failed (server away) */
#define KVREG_NATS_CON_STAT_SNAPSHOTS 11u   /* snapshots written by this consumer */
#define KVREG_NATS_CON_STAT_SNAPSHOT_SEQ 12u /* stream sequence covered by the newest snapshot
                                               this consumer wrote or restored (0: none) */
#define KVREG_NATS_CON_STAT_RESTORED 13u    /* 1 when start() restored a snapshot, else 0 */
#define KVREG_NATS_CON_STAT_SNAPSHOTS_REJECTED 14u /* snapshots found invalid at restore */
#define KVREG_NATS_CON_STAT_EXPIRED 15u     /* workers removed because their key expired */
#define KVREG_NATS_CON_STAT_SNAPSHOT_ERRORS 16u /* snapshot writes that failed (the consumer
                                               goes on; the next one is tried at the next
                                               threshold) */
#define KVREG_NATS_CON_STAT_SNAPSHOT_ORPHANS 17u /* chunk subjects no snapshot named, purged
                                               (SNAPSHOT_ORPHAN_MS) */
/* Where the last kvreg_nats_consumer_start() spent its time, in microseconds (0 before one):
 * all of it; of that, reading snapshot objects (chunks and their check, every snapshot tried,
 * the loading included: each chunk is loaded into the index as it arrives, while the next ones
 * are on their way); and of the reading, the time spent loading. The rest is connecting, the
 * stream and bucket checks, the snapshots' metadata and (re)creating the durable. */
#define KVREG_NATS_CON_STAT_START_US 18u
#define KVREG_NATS_CON_STAT_RESTORE_READ_US 19u
#define KVREG_NATS_CON_STAT_RESTORE_LOAD_US 20u
KVREG_API int kvreg_nats_consumer_stat(const kvreg_nats_consumer *con, uint32_t stat,
                                       uint64_t *value) KVREG_NOEXCEPT;

/* The next seq the consumer expects from (worker_id, dp_rank) and the instance it follows.
 * KVREG_ENOENT for a worker it has not seen. Call it between runs (not during one). */
KVREG_API int kvreg_nats_consumer_worker(const kvreg_nats_consumer *con, uint64_t worker_id,
                                         uint32_t dp_rank, uint64_t *instance,
                                         uint64_t *next_seq) KVREG_NOEXCEPT;

/* Write a snapshot now (as the thresholds do), on the caller's thread between runs; out_seq
 * (may be NULL) gets the stream sequence it covers: the durable's acknowledgment floor, but
 * never past what this replica applied itself (a purge moves the floor of every durable) nor
 * past a batch it holds out of order. When the bucket already has a snapshot of this name
 * that covers more (another replica's), nothing is written: KVREG_OK, out_seq gets that one's
 * sequence, and a SNAPSHOT notice with count 3 says so. KVREG_ESTATE before start or without a
 * KVREG_NATS_SNAPSHOT_BUCKET; KVREG_EPROTO: the server refused or did not answer (nothing is
 * half-written: an object whose metadata was not stored is never read). */
KVREG_API int kvreg_nats_consumer_snapshot(kvreg_nats_consumer *con,
                                           uint64_t *out_seq) KVREG_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVREG_NATS_H */
