/*
 * libkvreg over the network: publish a registry's events on ZeroMQ the way vLLM does, and
 * subscribe to many publishers (ours, vLLM's, SGLang's) with gaps detected and repaired.
 *
 * SPDX-License-Identifier: Apache-2.0
 *
 * Wire (vLLM's ZmqEventPublisher, which Dynamo's ZMQ listener and llm-d's indexer consume):
 *   live      PUB socket, three frames [topic, seq as u64 big-endian, payload]; seq starts at 0
 *             and grows by 1 per batch; the payload is one KVEventBatch (kvreg_wire.h).
 *   replay    optional ROUTER socket keeping the last N batches. A request [id, "", start8]
 *             is answered with [id, "", topic, seq8, payload] for every kept batch with
 *             seq >= start, in order, then the end marker [id, "", "", ff x 8, ""] (the shape of
 *             vLLM >= 0.26). If start is no longer kept, the answer starts at the oldest kept.
 *             Two more end markers, ours, differ from it only in the frame after "" (the
 *             topic frame, which vLLM leaves empty in its marker), so a client that knows
 *             only vLLM's marker still sees an answer that ends:
 *               [id, "", KVREG_PUB_REPLAY_BUSY, ff x 8, ""]  busy: too many replays in flight
 *                   (KVREG_PUB_OPT_REPLAY_MAX); sent at once instead of any batch. Ask again
 *                   later (back off: a client that asks again at once is refused again).
 *               [id, "", KVREG_PUB_REPLAY_GONE, ff x 8, ""]  gone: the answer stops early,
 *                   after the batches already sent (contiguous from the start), because the
 *                   ring overwrote the next one before the requester read that far. The seqs
 *                   after the last one received are lost unless a new request finds them.
 *             A requester has one answer at a time: a request it sends while its answer is
 *             streaming is answered after it (at most 4 wait; more are ignored and counted
 *             as bad requests).
 *   endpoints a socket binds when its endpoint contains "*" or "::" or is ipc:// or inproc://,
 *             and connects otherwise (vLLM's rule); the replay ROUTER always binds.
 *             Data-parallel rank r moves a tcp port p to p + r and names an ipc/inproc
 *             endpoint "<endpoint>_dp<r>" (vLLM's offset_endpoint_port; rank 0 is unchanged).
 *
 * Everything here returns KVREG_ENOTSUP when the library was built without KVREG_FEATURE_ZMQ
 * (see kvreg_features()); the symbols exist either way.
 */
#ifndef KVREG_NET_H
#define KVREG_NET_H

/* Experimental tier (README, "API stability"): these calls may still change between 0.x
 * releases, while kvreg.h and kvreg_wire.h only grow. Opt in by defining KVREG_EXPERIMENTAL
 * before the first include (or -DKVREG_EXPERIMENTAL on the command line). */
#ifndef KVREG_EXPERIMENTAL
#error "kvreg_net.h is libkvreg's experimental API (it may change between 0.x releases): #define KVREG_EXPERIMENTAL before including it, or compile with -DKVREG_EXPERIMENTAL"
#endif

#include "kvreg.h"
#include "kvreg_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The endpoint a publisher of data-parallel rank `rank` uses for `endpoint` (the rule above),
 * written NUL-terminated into buf[0..cap); *len (may be NULL) gets its length without the NUL,
 * also on KVREG_ERANGE (buf too small: nothing written). A tcp endpoint whose port is not a
 * number ("*") is returned unchanged. KVREG_EINVAL: endpoint or buf NULL with cap > 0, or a
 * port that would pass 65535. Thread-safe (pure). */
KVREG_API int kvreg_net_offset_endpoint(const char *endpoint, uint32_t rank, char *buf,
                                        size_t cap, size_t *len) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Publisher (engine side)                                                                     */
/* ------------------------------------------------------------------------------------------ */
/* A publisher owns one sender thread, started by kvreg_publisher_start(): it takes the
 * registry's events with kvreg_registry_poll_wait(), encodes them (KVREG_WIRE_VLLM by
 * default), and sends one batch per encoded payload (vLLM's format needs every Register's
 * tokens: register with tokens, or see KVREG_PUB_STAT_EVENTS_SKIPPED). The engine's threads only queue events
 * (POLL delivery): they never wait for the network. The publisher is the registry's only
 * poller: from kvreg_publisher_new() to kvreg_publisher_free(), kvreg_registry_poll() and
 * kvreg_registry_poll_wait() on it return KVREG_EBUSY, and so does creating another publisher
 * (ZeroMQ or NATS) for it. Sends never block: a batch the PUB socket cannot take (a subscriber is slower than
 * the high-water mark allows) is dropped and counted, and its seq is still used, so
 * subscribers see the gap and can fill it from the replay ring, which keeps every batch.
 *
 * Replay requests are served by the same thread between batches; when it is idle it checks
 * for them every KVREG_PUB_OPT_REPLAY_POLL_MS (it cannot sleep on the registry and the
 * socket at once). An answer is streamed from the ring without copying it: each round of the
 * thread queues at most 256 replayed batches (and reads at most 64 requests), so live batches
 * never wait behind a replay, and no send waits for a requester: one that does not read keeps
 * at most 64 messages (ZeroMQ's SNDHWM of the ROUTER) and its share of
 * KVREG_PUB_OPT_REPLAY_MAX_BYTES queued, and its answer waits. A replay holds one of
 * KVREG_PUB_OPT_REPLAY_MAX slots from its request until its answer is written to the network
 * (or its requester disconnects): requests past that get the busy marker. So requesters that
 * never read make the publisher hold at most REPLAY_MAX_BYTES (plus, for a slot whose share
 * is smaller than one batch, that batch) beyond its ring, and cannot slow its live batches;
 * while they hold every slot, other requesters are answered busy. A request frame larger
 * than 4 KiB disconnects its sender (ZMQ_MAXMSGSIZE); at most 64 requests wait per
 * requester (ZMQ_RCVHWM). docs/limits-publisher.md has the table.
 *
 * Subscribers' upstream traffic: a PUB socket only needs subscriptions from its peers (1
 * byte, or the 10 of ZMTP 3.1's SUBSCRIBE command, plus a topic prefix; a prefix longer than
 * the topic frame matches nothing). A frame a peer sends upstream larger than 4 KiB, or than
 * the topic frame's length (with its "|kvreg-instance=" suffix under TOPIC_INSTANCE) plus 10
 * bytes when that is larger, disconnects the peer (ZMQ_MAXMSGSIZE of the PUB socket) from its
 * size header, before its body is read; a connecting SUB peer reconnects. At most 1,000 such
 * messages wait per connection while the sender thread is idle (ZeroMQ's ZMQ_RCVHWM). Not
 * bounded (ZeroMQ 4.3 has no option for them): the number of frames of one unfinished
 * multipart message, and the number of distinct subscriptions a peer makes (ZeroMQ keeps
 * each in a trie, about 32 bytes per prefix byte, until the peer disconnects): keep the PUB
 * endpoint reachable only by the consumers that need it.
 *
 * Thread-safety: configure, start, stop and free from one thread (or with your own locking);
 * kvreg_publisher_stat() may be called from any thread at any time before the free, and
 * kvreg_publisher_endpoint() from any thread while the publisher runs. Lifetime: the registry is borrowed and must outlive the publisher. */
typedef struct kvreg_publisher kvreg_publisher;

/* The topic frame of the replay end markers that are not vLLM's plain one (see "replay" at
 * the top): compare the frame's bytes (no NUL is sent) with these. */
#define KVREG_PUB_REPLAY_BUSY "kvreg-replay-busy"
#define KVREG_PUB_REPLAY_GONE "kvreg-replay-gone"

/* KVREG_EINVAL: out or reg NULL, or reg not in KVREG_DELIVERY_POLL mode. KVREG_EBUSY: another
 * publisher (ZeroMQ or NATS) takes reg's events. Nothing is opened and no thread starts until
 * kvreg_publisher_start(). */
KVREG_API int kvreg_publisher_new(kvreg_publisher **out, kvreg_registry *reg) KVREG_NOEXCEPT;
/* Stops it if it runs (kvreg_publisher_stop) and frees it. NULL-safe. */
KVREG_API void kvreg_publisher_free(kvreg_publisher *pub) KVREG_NOEXCEPT;

/* Options (values are uint64_t). KVREG_EINVAL for an unknown option or a value out of range,
 * KVREG_ESTATE once started. */
#define KVREG_PUB_OPT_HWM 1u             /* PUB send high-water mark in batches (default 100000,
                                            vLLM's; 0 = no limit) */
#define KVREG_PUB_OPT_DP_RANK 2u         /* data-parallel rank: in every batch, and the port
                                            offset of both endpoints (default 0, <= 65535) */
#define KVREG_PUB_OPT_BUFFER_STEPS 3u    /* batches the replay ring keeps (default 10000,
                                            1 .. 2^24; kept only with a replay endpoint) */
#define KVREG_PUB_OPT_LINGER_MS 4u       /* shutdown bound: how long stop may spend sending
                                            what is queued (default 2000, <= 3600000) */
#define KVREG_PUB_OPT_REPLAY_LINGER_MS 5u /* after the last batch, keep answering replay
                                            requests this long before stop returns (default 0) */
#define KVREG_PUB_OPT_MAX_EVENTS 6u      /* most kvreg events per batch (default 1024, >= 1) */
#define KVREG_PUB_OPT_FORMAT 7u          /* KVREG_WIRE_VLLM (default) or KVREG_WIRE_VLLM_LEGACY */
#define KVREG_PUB_OPT_REPLAY_POLL_MS 8u  /* idle check interval for replay requests (default 5,
                                            1 .. 1000; unused without a replay endpoint) */
#define KVREG_PUB_OPT_BLOCK_SIZE 9u      /* tokens per block every Register must have (default 0:
                                            not checked); see KVREG_WIRE_OPT_BLOCK_SIZE */
#define KVREG_PUB_OPT_BATCH_US 10u       /* after draining the queue, let events gather this many
                                            microseconds before the next batch (default 1000,
                                            <= 1000000; 0: send as soon as events come). vLLM
                                            sends one batch per engine step; an event after a
                                            quiet spell is still sent at once */
#define KVREG_PUB_OPT_TOPIC_INSTANCE 11u /* 1: live and replayed topics end with
                                            "|kvreg-instance=<16 hex>" (see "Publisher
                                            instance"); default 0: topic as set */
#define KVREG_PUB_OPT_REPLAY_MAX 20u     /* replays in flight (default 8, 1 .. 1024): past it a
                                            request gets the busy end marker. A replay is in
                                            flight until its answer left the publisher */
#define KVREG_PUB_OPT_REPLAY_MAX_BYTES 21u /* bytes of replay answers queued in ZeroMQ, all
                                            replays together (default 32 MiB, 64 KiB .. 2^40);
                                            each replay may queue REPLAY_MAX_BYTES / REPLAY_MAX
                                            (at least one batch), then waits for its reader */
KVREG_API int kvreg_publisher_set(kvreg_publisher *pub, uint32_t option,
                                  uint64_t value) KVREG_NOEXCEPT;

/* String options; the value is copied. KVREG_ESTATE once started. */
#define KVREG_PUB_ENDPOINT 1u        /* PUB endpoint (default vLLM's: tcp, host '*', port 5557,
                                        i.e. bind every interface) */
#define KVREG_PUB_REPLAY_ENDPOINT 2u /* replay ROUTER endpoint (default NULL: no replay) */
#define KVREG_PUB_TOPIC 3u           /* first frame of every batch (default "", vLLM's); llm-d
                                        reads "kv@<pod>@<model>" */
#define KVREG_PUB_LORA_NAME 4u       /* lora_name of stored events (default NULL: nil; UTF-8) */
KVREG_API int kvreg_publisher_set_string(kvreg_publisher *pub, uint32_t option,
                                         const char *value) KVREG_NOEXCEPT;
/* The value in effect of an option above (0.6; the getters' rules are in kvreg.h, "One
 * configuration pattern"): the default until set; after start, what the publisher uses, for
 * KVREG_PUB_TOPIC with TOPIC_INSTANCE 1 the topic with its "|kvreg-instance=<16 hex>" suffix.
 * _get_string: KVREG_ENOENT while REPLAY_ENDPOINT or LORA_NAME is NULL; ENDPOINT is the one
 * given (kvreg_publisher_endpoint has the one in use). Any thread, also while the publisher
 * runs: they never wait for its sender thread. */
KVREG_API int kvreg_publisher_get(const kvreg_publisher *pub, uint32_t option,
                                  uint64_t *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_publisher_get_string(const kvreg_publisher *pub, uint32_t option, char *buf,
                                         size_t cap, size_t *len) KVREG_NOEXCEPT;

/* Open the sockets (bind or connect by the rule above, after the DP offset) and start the
 * sender thread. KVREG_ESTATE if already started (a stopped publisher cannot restart: make a
 * new one; its seq restarts at 0 as a restarted vLLM's does). KVREG_EINVAL: an endpoint
 * ZeroMQ refuses (bad syntax, port in use, unknown host); nothing is left open then.
 * KVREG_ENOMEM. */
KVREG_API int kvreg_publisher_start(kvreg_publisher *pub) KVREG_NOEXCEPT;

/* The endpoint a started publisher actually uses, NUL-terminated into buf[0..cap): for a bound
 * socket the one ZeroMQ reports (ZMQ_LAST_ENDPOINT: "tcp://127.0.0.1:*" becomes
 * "tcp://127.0.0.1:41234"), for a connected one the endpoint after the DP offset. *len (may
 * be NULL) gets the length without the NUL, also on KVREG_ERANGE (buf too small).
 * which: KVREG_PUB_ENDPOINT or KVREG_PUB_REPLAY_ENDPOINT. KVREG_ESTATE before start,
 * KVREG_ENOENT for the replay endpoint of a publisher without one. */
KVREG_API int kvreg_publisher_endpoint(const kvreg_publisher *pub, uint32_t which, char *buf,
                                       size_t cap, size_t *len) KVREG_NOEXCEPT;

/* Clean shutdown: wait until every event emitted before the call is queued
 * (kvreg_registry_flush), then let the sender thread send everything queued, for at most
 * KVREG_PUB_OPT_LINGER_MS; events still queued then stay in the registry's queue and are
 * counted in KVREG_PUB_STAT_EVENTS_UNSENT. Then the replay ring answers requests for
 * KVREG_PUB_OPT_REPLAY_LINGER_MS, the sockets close (ZeroMQ may spend up to LINGER_MS more
 * handing the last frames to the kernel) and the thread is joined. Stats stay readable.
 * KVREG_OK also when the publisher was never started or is already stopped. */
KVREG_API int kvreg_publisher_stop(kvreg_publisher *pub) KVREG_NOEXCEPT;

#define KVREG_PUB_STAT_BATCHES_SENT 1u    /* batches handed to the PUB socket */
#define KVREG_PUB_STAT_BATCHES_DROPPED 2u /* batches the PUB socket refused (their seqs were
                                             used: a gap downstream). Stays 0: at a
                                             subscriber's high-water mark libzmq drops the
                                             batch for that subscriber alone and does not
                                             tell the sender (the subscriber replays it) */
#define KVREG_PUB_STAT_EVENTS_SENT 3u     /* kvreg events in the batches sent */
#define KVREG_PUB_STAT_REPLAYS_SERVED 4u  /* replay answers sent whole (to the plain end marker;
                                             counted once it is queued: it can arrive first) */
#define KVREG_PUB_STAT_REPLAY_BATCHES 5u  /* batches sent in replay answers */
#define KVREG_PUB_STAT_BAD_REQUESTS 6u    /* replay requests ignored (not [id, "", start8]) */
#define KVREG_PUB_STAT_NEXT_SEQ 7u        /* seq the next batch gets (= batches made) */
#define KVREG_PUB_STAT_EVENTS_LOST 8u     /* events the registry's poll queue dropped since
                                             start (KVREG_STAT_EVENTS_DROPPED growth) */
#define KVREG_PUB_STAT_EVENTS_UNSENT 9u   /* events left queued when stop's bound ran out */
#define KVREG_PUB_STAT_SEND_ERRORS 10u    /* batches lost to another send or encode error */
#define KVREG_PUB_STAT_EVENTS_SKIPPED 11u /* events the format cannot carry, not sent (vLLM:
                                             a Register without tokens, i.e. by hash only, or
                                             of another block size; see kvreg_wire_encode) */
#define KVREG_PUB_STAT_EVENTS_HANDLED 12u /* events taken from the registry's queue and done
                                             with: in a batch sent or dropped, skipped, or lost
                                             to an error. Everything emitted so far has gone
                                             out when, after kvreg_registry_flush(), it equals
                                             the registry's Register + Remove + Cleared events
                                             less KVREG_STAT_EVENTS_DROPPED (a queue emptied
                                             and every seq sent is not enough: events are
                                             between the two while their batch is made) */
#define KVREG_PUB_STAT_INSTANCE 13u       /* this start's instance id (0 before start) */
#define KVREG_PUB_STAT_REPLAYS_BUSY 20u   /* replay requests answered busy (REPLAY_MAX) */
#define KVREG_PUB_STAT_REPLAYS_GONE 21u   /* replay answers ended gone (reader behind the ring) */
#define KVREG_PUB_STAT_REPLAYS_ACTIVE 22u /* replays in flight now (<= REPLAY_MAX) */
#define KVREG_PUB_STAT_REPLAY_QUEUED_BYTES 23u /* bytes of replayed batches ZeroMQ holds now
                                             (<= REPLAY_MAX_BYTES, see the option) */
/* KVREG_EINVAL for an unknown stat. Each value is read atomically; not all at one instant. */
KVREG_API int kvreg_publisher_stat(const kvreg_publisher *pub, uint32_t stat,
                                   uint64_t *value) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Subscriber (router side)                                                                    */
/* ------------------------------------------------------------------------------------------ */
/* A subscriber reads many publishers. It has no thread: kvreg_subscriber_run() does the work
 * on the caller's thread and calls the callbacks there, so a router decides where decoding
 * happens. Each endpoint gets its own SUB socket (and, while a replay or probe of it is in
 * flight, a DEALER connected to its replay endpoint: a new connection per request), so
 * every batch is attributed to the publisher it came from. A publisher is an (endpoint,
 * topic) pair: several engines connecting to one bound SUB endpoint are told apart by topic.
 *
 * Per publisher, batches reach the batch callback in seq order, each seq at most once:
 *  - first batch with seq > 0 (a late join), or seq > expected (a gap, e.g. the publisher's
 *    high-water mark): a GAP notice, then, when the endpoint has a replay endpoint, a replay
 *    request from the first missing seq; live batches that arrive meanwhile wait in memory.
 *    Replayed batches are delivered (replayed = 1), then the waiting ones. Seqs the replay
 *    cannot give (it starts later than asked, ends early, or does not answer within
 *    KVREG_SUB_OPT_REPLAY_TIMEOUT_MS) get a LOSS notice before delivery goes on. Without a
 *    replay endpoint a gap is a LOSS at once.
 *  - a restarted publisher (see "Publisher instance" below for how it is seen): a RESET
 *    notice, then the stream starts again (a late join: replayed from the new process's
 *    first kept seq when there is a replay endpoint). Consumers must drop what they know of
 *    that worker on RESET (examples/router.c: kvreg_index_clear_worker). A live seq that is
 *    only lower than expected was already delivered, by a replay whose answer overtook the
 *    live copy: counted in KVREG_SUB_STAT_DUPLICATES and skipped.
 *  - a replay answer that starts after live batches held meanwhile (the ring moved on): the
 *    held ones are delivered first; only seqs neither held nor answered are a LOSS. A live batch
 *    still in flight on the SUB connection when such an answer is read (the two connections
 *    have no order between them) is not held yet: it is named lost, and counted as a
 *    duplicate when it comes.
 *  - frames that are not [topic, 8-byte seq, payload] (or whose topic is longer than
 *    KVREG_SUB_MAX_TOPIC_LEN), or payloads the decoder rejects: a MALFORMED notice, counted
 *    and skipped (a rejected payload still uses its seq: no replay).
 *    A malformed live message also pauses reading its endpoint (OPT_MALFORMED_PAUSE_MS):
 *    nothing is dropped for it, the endpoint's next messages are read after the pause.
 * Nothing is lost silently: every seq is delivered or named in a LOSS notice.
 *
 * Publisher instance. Each kvreg_publisher_start() draws a random 64-bit instance id
 * (KVREG_PUB_STAT_INSTANCE). It travels where no upstream consumer reads:
 *   - the topic frame of the replay end marker: [id, "", "kvreg-instance=<16 hex>", ff x 8, ""]
 *     (vLLM's marker has "" there; vLLM's example client ends on the empty payload, llm-d on
 *     the empty third frame, neither reads the topic frame);
 *   - with KVREG_PUB_OPT_TOPIC_INSTANCE only, the topic of every live and replayed batch:
 *     "<topic>|kvreg-instance=<16 hex>". vLLM's and Dynamo's consumers only prefix-match the
 *     topic, so their subscriptions still match; llm-d parses pod and model out of
 *     "kv@<pod>@<model>" and would read a wrong model name: leave it off for llm-d.
 *   Not carried: in the live seq frame (Dynamo requires exactly 8 bytes), in the payload
 *   (the batch must stay a 3-element array for Dynamo and llm-d), in Dynamo-format event ids
 *   (they are the registry's event ids, which Dynamo's consumers expect contiguous per worker).
 * The subscriber strips the suffix from batch->topic and learns the id from end markers: it
 * sends a probe (a replay request from the next seq, normally answered by the end marker
 * alone; no REPLAY_DONE notice, not in KVREG_SUB_STAT_REPLAYS) when a stream starts without
 * a replay, and again each time its SUB socket (re)connects after its first connection: a
 * restarted process always comes back on a new connection. While a probe is out, a stream
 * that knows no id yet delivers its batches in order as they come (the answer can only teach
 * the id); one that knows an id holds them until the answer. A restart is a RESET when:
 *   - the live seq is at or below the previous live seq (any publisher); if the held bounds
 *     refuse that batch, the next live batch carries the restart, or
 *   - a live topic names another instance (TOPIC_INSTANCE), whatever the seq, or
 *   - a replayed batch's topic names another instance than the one known: the answer ends
 *     there, none of it applied, or
 *   - an end marker names another instance than the one known, whatever the seq. The RESET
 *     then comes after the batches of that answer (untagged, they were read before the
 *     marker named their process), and a replay from 0 follows: a consumer that drops the
 *     worker on RESET ends with exactly the new process's state.
 * What cannot be detected: a publisher that carries no id (vLLM, SGLang, or a kvreg
 * publisher without a replay endpoint and without TOPIC_INSTANCE) that comes back with a
 * first seq equal to or above the one expected looks like the same process: equal continues
 * the stream, above is a gap that is replayed (from the new process's ring) or reported
 * lost. Only a seq at or below the previous live one shows such a restart.
 *
 * Limits (what a peer can make the subscriber hold or spend; docs/limits.md, "Subscriber"):
 *   what                        default      option                 past it
 *   one frame (a payload)       16 MiB       OPT_MAX_MSG_SIZE       libzmq closes the
 *                                                                   connection before reading
 *                                                                   it: DISCONNECTED notice
 *   libzmq receive queue        64 MiB:      OPT_RCV_BYTES,         libzmq stops reading the
 *     per connection, while     RCVHWM =     OPT_RCVHWM             connection; the backlog
 *     run() is not reading      min(RCVHWM,                         waits at the publisher
 *                               RCV_BYTES /                         (its HWM drops past it:
 *                               MAX_MSG_SIZE)                       a GAP, replayed or LOSS)
 *                               once the endpoint
 *                               is trusted; 1
 *                               message before
 *   malformed live messages     10 ms pause, OPT_MALFORMED_PAUSE_MS  MALFORMED notice; the
 *     from one endpoint         x2 in a row                         endpoint's SUB socket is
 *                               (<= 64x; 64x                        not read for the pause
 *                               from the first                      (STAT_MALFORMED_PAUSES):
 *                               when no batch                       one message per pause
 *                               of it ever
 *                               decoded)
 *   replay batch of another     none applied —                      MALFORMED notice; the
 *     topic than the asking one                                     replay fails: LOSS
 *   busy replay answers         back-off     (REPLAY_TIMEOUT_MS)    5 ms x 2^n, <= timeout/4,
 *                                                                   jittered; STAT_REPLAYS_
 *                                                                   BUSY; at the deadline
 *                                                                   REPLAY_DONE and LOSS
 *   live batches held for       256 MiB      OPT_MAX_HELD_BYTES,    not held (STAT_HELD_
 *     replays, all publishers;  (a quarter   OPT_MAX_HELD_BYTES_    DROPPED): the next replay
 *     one endpoint's share      of it),      PUBLISHER,             fetches them or LOSS; an
 *     (all its topics);         100000       OPT_MAX_WAITING        endpoint whose streams all
 *     batches per publisher                                         wait for replays is then
 *                                                                   not read until one ends
 *                                                                   (STAT_LIVE_PAUSES)
 *   a topic (without its        1024 bytes   fixed (KVREG_SUB_      MALFORMED notice, as a
 *     instance suffix)                       MAX_TOPIC_LEN)         malformed message of its
 *                                                                   endpoint: no stream made
 *   publishers tracked          10000        OPT_MAX_PUBLISHERS     least recently active one
 *                                                                   dropped: EVICTED notice
 *   publisher without messages  10 min       OPT_IDLE_MS            dropped when a new one
 *                                                                   comes: EVICTED notice
 *   a replay's silence          2000 ms      OPT_REPLAY_TIMEOUT_MS  from the request; only a
 *                                                                   new seq moves it (not
 *                                                                   duplicates), plus one
 *                                                                   grace when answers wait
 *                                                                   unread: REPLAY_DONE
 *                                                                   "timed out", LOSS
 *   a replay's whole time       8 timeouts   fixed (KVREG_SUB_      from the request, however
 *                               (16 s)       REPLAY_CAP_TIMEOUTS)   it progresses: REPLAY_DONE
 *                                                                   "given up", LOSS
 *   the replay DEALER's         the answer   fixed (no receive      the DEALER exists only
 *     receive queue             in flight    limit: a foreign       while its request is in
 *                                            ROUTER drops what      flight (closed at the end
 *                                            it cannot send)        marker, deadline or cap):
 *                                                                   between requests a ROUTER
 *                                                                   has nobody to send to.
 *                                                                   While one is in flight and
 *                                                                   run() is not reading, a
 *                                                                   hostile ROUTER is bounded
 *                                                                   only by MAX_MSG_SIZE per
 *                                                                   message
 *   kvreg_subscriber_run(t)     t ms         (argument)             returns after the message
 *                                                                   in hand (one decode of at
 *                                                                   most MAX_MSG_SIZE), or after
 *                                                                   delivering the held batches
 *                                                                   of a replay that ends (at
 *                                                                   most the endpoint's share
 *                                                                   of MAX_HELD_BYTES)
 * Not bounded: the frames of one message. MAX_MSG_SIZE bounds each frame, and libzmq hands
 * a multipart message over only once its last frame has arrived, holding all of them until
 * then (a peer that never sends the last frame keeps them held, with no notice, until the
 * connection closes). The subscriber adds nothing to it: a message of more than 4 frames is
 * read a frame at a time, none kept, and reported MALFORMED (docs/limits.md).
 * libzmq counts its queue in messages, not bytes: hence the RCVHWM derived from RCV_BYTES
 * (docs/limits.md says what is bounded where). An endpoint is trusted from its first live or
 * replayed batch that decodes until its next malformed live message; until then libzmq reads
 * it one message ahead, so that a peer whose first messages are large garbage is read one
 * at a time, paused between them, rather than RCV_BYTES' worth at once. The price of the
 * default 4-message read-ahead is a thread wake-up every 2 messages: small batches sent as
 * fast as possible move at about a quarter of the rate with no byte bound (docs/limits.md:
 * "What the byte bound costs"; raise RCV_BYTES or lower MAX_MSG_SIZE for such peers).
 *
 * A bound SUB socket: libzmq gives a publisher that connects our subscription only when the
 * caller's thread next touches the socket (kvreg_subscriber_add touches it once, and every
 * run does). What a publisher sends between connecting and that moment is dropped by its
 * own PUB socket: the first seq the subscriber sees is then > 0, a late join, replayed from
 * 0 when the endpoint has a replay endpoint (nothing lost), else named in a LOSS notice.
 *
 * Thread-safety: one thread at a time per subscriber (it may change between runs).
 * kvreg_subscriber_stop() may be called from a callback (or from another thread). */
typedef struct kvreg_subscriber kvreg_subscriber;

/* The longest topic a subscriber accepts, in bytes, not counting a "|kvreg-instance=<16 hex>"
 * suffix (see "Publisher instance"). Real topics are short ("kv@<pod>@<model>"), and each
 * publisher keeps its topic for as long as it is tracked (its lookup key, batch->topic and
 * batch->pod), up to OPT_MAX_PUBLISHERS of them: a live message with a longer topic is
 * malformed (a MALFORMED notice with topic "", the endpoint's malformed pause; no publisher
 * is made for it), and a replayed batch with one fails its answer as another topic's does. */
#define KVREG_SUB_MAX_TOPIC_LEN 1024u

KVREG_API int kvreg_subscriber_new(kvreg_subscriber **out) KVREG_NOEXCEPT;
KVREG_API void kvreg_subscriber_free(kvreg_subscriber *sub) KVREG_NOEXCEPT; /* NULL-safe */

/* Options (values are uint64_t); KVREG_ESTATE once an endpoint was added. */
#define KVREG_SUB_OPT_FORMAT 1u            /* decoder format (kvreg_wire_decoder_new; default
                                              KVREG_WIRE_VLLM) */
#define KVREG_SUB_OPT_FROM_SEQ 2u          /* ask each publisher with a replay endpoint for the
                                              batches from this seq on at the first run (default
                                              UINT64_MAX: only what arrives live, plus replays
                                              of gaps and late joins) */
#define KVREG_SUB_OPT_REPLAY_TIMEOUT_MS 3u /* silence after which a replay is given up (default
                                              2000, 1 .. 3600000): its deadline runs from the
                                              request, and a new seq answered moves it to this
                                              long after that answer, but never past
                                              KVREG_SUB_REPLAY_CAP_TIMEOUTS times it from the
                                              request */
/* The cap on a replay's time, in REPLAY_TIMEOUT_MS: whatever keeps arriving, a replay (or
 * probe) ends at most this many timeouts after its request (16 s with the defaults), as a
 * timeout does: REPLAY_DONE, LOSS for the seqs it did not give, the held batches delivered.
 * A peer answering one new seq per timeout could otherwise keep a gap open for ever. */
#define KVREG_SUB_REPLAY_CAP_TIMEOUTS 8u
#define KVREG_SUB_OPT_RCVHWM 4u            /* SUB receive high-water mark in batches (default
                                              100000; 0 = no limit) */
#define KVREG_SUB_OPT_MAX_WAITING 5u       /* live batches kept per publisher while its replay
                                              runs (default 100000, >= 1); beyond, the newest
                                              are dropped and fetched by the next replay */
#define KVREG_SUB_OPT_MAX_MSG_SIZE 6u      /* largest frame read (a payload), in bytes
                                              (default 16 MiB; 0 = no limit). libzmq closes a
                                              connection whose frame is larger from its size
                                              header, before reading it: a DISCONNECTED notice */
#define KVREG_SUB_OPT_MAX_PUBLISHERS 7u    /* publishers ((endpoint, topic) streams) kept
                                              (default 10000, >= 1); past it the least recently
                                              active is dropped (EVICTED notice) */
#define KVREG_SUB_OPT_IDLE_MS 8u           /* a publisher without a message this long is
                                              dropped when a new one comes (default 600000;
                                              0 = never) */
/* A held batch counts its payload's bytes and KVREG_SUB_HELD_OVERHEAD more (its entry, its
 * buffer's header) against MAX_HELD_BYTES, MAX_HELD_BYTES_PUBLISHER and STAT_HELD_BYTES: the
 * bytes it holds. */
#define KVREG_SUB_HELD_OVERHEAD 128u
#define KVREG_SUB_OPT_MAX_HELD_BYTES 9u    /* bytes of live batches held for replays,
                                              all publishers together (default 256 MiB; one
                                              endpoint at most MAX_HELD_BYTES_PUBLISHER);
                                              past it newer ones are not kept (the next replay
                                              fetches them; KVREG_SUB_STAT_HELD_DROPPED), and
                                              an endpoint whose streams all wait for replays
                                              is not read until one ends (STAT_LIVE_PAUSES) */
#define KVREG_SUB_OPT_RCV_BYTES 10u        /* bytes libzmq may queue per SUB connection while
                                              run() is not reading (default 64 MiB; 0 = no
                                              byte bound). libzmq counts messages, so its
                                              high-water mark becomes min(RCVHWM,
                                              RCV_BYTES / MAX_MSG_SIZE) (at least 1) once
                                              the endpoint is trusted (1 before: see
                                              "Limits"); past it libzmq stops reading that
                                              connection and the backlog waits at the
                                              publisher (its own HWM) */
#define KVREG_SUB_OPT_MALFORMED_PAUSE_MS 11u /* after a malformed live message (frames or
                                              payload) its endpoint's SUB socket is not read
                                              for this long, doubled for each further one in a
                                              row up to 64x (64x from the first when no batch
                                              of that endpoint ever decoded); a well-formed
                                              one ends the run (default 10, 0 = never pause,
                                              <= 60000).
                                              Other endpoints are read meanwhile; what the
                                              paused one sends waits as past RCV_BYTES */
#define KVREG_SUB_OPT_MAX_HELD_BYTES_PUBLISHER 12u /* bytes of live batches held for
                                              the publishers of one endpoint, all its topics
                                              together, of MAX_HELD_BYTES (default 0: a
                                              quarter of MAX_HELD_BYTES, as set). A peer that
                                              opens gaps its replay never fills, under as
                                              many topics as it likes, cannot take the room
                                              every other endpoint's gaps need; past it as
                                              past MAX_HELD_BYTES. Publishers sharing a bound
                                              endpoint share this too */
KVREG_API int kvreg_subscriber_set(kvreg_subscriber *sub, uint32_t option,
                                   uint64_t value) KVREG_NOEXCEPT;
#define KVREG_SUB_TOPIC 1u /* subscription prefix (default "": every topic); copied */
KVREG_API int kvreg_subscriber_set_string(kvreg_subscriber *sub, uint32_t option,
                                          const char *value) KVREG_NOEXCEPT;
/* The value in effect of an option above (0.6; rules in kvreg.h, "One configuration
 * pattern"): the default until set (KVREG_SUB_OPT_MAX_MSG_SIZE 0 for "no limit", as set).
 * Unlike the rest of the subscriber, any thread, also during kvreg_subscriber_run() and from
 * its callbacks. */
KVREG_API int kvreg_subscriber_get(const kvreg_subscriber *sub, uint32_t option,
                                   uint64_t *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_subscriber_get_string(const kvreg_subscriber *sub, uint32_t option, char *buf,
                                          size_t cap, size_t *len) KVREG_NOEXCEPT;

/* Subscribe to endpoint (bind or connect by the rule at the top: a router can bind
 * a '*' host, as llm-d's centralised mode does, and let engines connect); replay_endpoint (may be NULL) is the publisher's
 * replay ROUTER, always connected. Both are copied. *index (may be NULL) gets the endpoint's
 * index (0, 1, ... in the order of the calls), the `publisher` of its batches and notices.
 * KVREG_EINVAL: NULL endpoint or one ZeroMQ refuses. KVREG_EBUSY from a callback. */
KVREG_API int kvreg_subscriber_add(kvreg_subscriber *sub, const char *endpoint,
                                   const char *replay_endpoint, uint32_t *index) KVREG_NOEXCEPT;

/* The endpoint the subscriber's socket for `index` uses: for a bound one the one ZeroMQ reports
 * ("tcp://127.0.0.1:*" becomes the port it picked), else the endpoint as given. Output as
 * kvreg_publisher_endpoint(). KVREG_ERANGE for an index not added (or buf too small). */
KVREG_API int kvreg_subscriber_endpoint(const kvreg_subscriber *sub, uint32_t index, char *buf,
                                        size_t cap, size_t *len) KVREG_NOEXCEPT;

/* One decoded batch. Pointers are borrowed for the duration of the callback. */
typedef struct kvreg_sub_batch {
    uint32_t publisher;   /* index from kvreg_subscriber_add */
    uint32_t replayed;    /* 1: it came from a replay, 0: live */
    const char *endpoint; /* as given to kvreg_subscriber_add */
    const char *topic;    /* NUL-terminated copy of the topic frame */
    const char *pod;      /* llm-d's reading of "kv@<pod>@<model>": with exactly three '@'-parts */
    const char *model;    /* pod and model are the 2nd and 3rd; otherwise pod = topic, model = "" */
    uint64_t seq;
    double ts;            /* batch timestamp (0 when it has no events) */
    int64_t dp_rank;      /* valid when has_dp_rank */
    uint32_t has_dp_rank;
    uint32_t reserved32;
    const kvreg_wire_event *events;
    size_t n_events;
    uint64_t reserved[4];
} kvreg_sub_batch;
typedef void (*kvreg_sub_batch_fn)(const kvreg_sub_batch *batch, void *user_data);

#define KVREG_SUB_GAP 1u          /* seqs [first, last] missing (count of them); replay asked
                                     when the endpoint has one (replay_requested = 1) */
#define KVREG_SUB_LOSS 2u         /* seqs [first, last] will never be delivered */
#define KVREG_SUB_RESET 3u        /* seq went back: first = seq expected, last = seq received */
#define KVREG_SUB_REPLAY_DONE 4u  /* a replay ended: count = batches it delivered */
#define KVREG_SUB_MALFORMED 5u    /* a message was skipped: message says why; first = its seq
                                     when it had one (has_seq) */
#define KVREG_SUB_DISCONNECTED 6u /* a SUB connection closed: the publisher went away or sent a
                                     message over KVREG_SUB_OPT_MAX_MSG_SIZE (libzmq tells
                                     them apart to nobody); a connecting SUB reconnects */
#define KVREG_SUB_EVICTED 7u      /* a publisher's state was dropped (idle, or over
                                     KVREG_SUB_OPT_MAX_PUBLISHERS), or a new one's message was
                                     (topic ""): if it sends again it is a new stream */
typedef struct kvreg_sub_notice {
    uint32_t kind;            /* KVREG_SUB_* */
    uint32_t publisher;
    const char *endpoint;
    const char *topic;        /* "" when unknown (malformed frames) */
    uint64_t first;
    uint64_t last;
    uint64_t count;
    uint32_t replay_requested;
    uint32_t has_seq;
    const char *message;      /* a short English description, never NULL */
    uint64_t reserved[2];
} kvreg_sub_notice;
typedef void (*kvreg_sub_notice_fn)(const kvreg_sub_notice *notice, void *user_data);
/* The regular names (0.6) of the four types above; kvreg_sub_* are the 0.x names, kept as
 * the same types (a typedef cannot be deprecated without breaking code that names the struct). */
typedef kvreg_sub_batch kvreg_subscriber_batch;
typedef kvreg_sub_notice kvreg_subscriber_notice;
typedef kvreg_sub_batch_fn kvreg_subscriber_batch_fn;
typedef kvreg_sub_notice_fn kvreg_subscriber_notice_fn;

/* Callbacks run on the thread in kvreg_subscriber_run(). fn NULL: batches are counted and
 * dropped / notices only counted. user_data is borrowed. KVREG_EBUSY from a callback. A
 * callback may call kvreg_subscriber_stop() and kvreg_subscriber_stat(), and must not free
 * the subscriber. */
KVREG_API KVREG_DEPRECATED("use kvreg_subscriber_set_batch_cb") int kvreg_subscriber_set_batch_fn(kvreg_subscriber *sub, kvreg_sub_batch_fn fn,
                                            void *user_data) KVREG_NOEXCEPT;
KVREG_API KVREG_DEPRECATED("use kvreg_subscriber_set_notice_cb") int kvreg_subscriber_set_notice_fn(kvreg_subscriber *sub, kvreg_sub_notice_fn fn,
                                             void *user_data) KVREG_NOEXCEPT;
/* As the two above, and the subscriber owns user_data: destroy (may be NULL) runs exactly once,
 * when the callback is replaced (by any of these four calls) or in kvreg_subscriber_free()
 * (after the last callback returned). On an error the caller keeps user_data. */
KVREG_API int kvreg_subscriber_set_batch_cb(kvreg_subscriber *sub, kvreg_subscriber_batch_fn fn,
                                            void *user_data, kvreg_destroy_fn destroy) KVREG_NOEXCEPT;
KVREG_API int kvreg_subscriber_set_notice_cb(kvreg_subscriber *sub, kvreg_subscriber_notice_fn fn,
                                             void *user_data, kvreg_destroy_fn destroy) KVREG_NOEXCEPT;

/* Receive, order, replay and deliver for timeout_ms milliseconds (-1: until stopped; 0: what
 * is ready now), or until kvreg_subscriber_stop(). KVREG_OK; KVREG_EBUSY from a callback;
 * KVREG_EINVAL for timeout_ms < -1. */
KVREG_API int kvreg_subscriber_run(kvreg_subscriber *sub, int timeout_ms) KVREG_NOEXCEPT;
/* Make the current (or, if none runs, the next) kvreg_subscriber_run() return soon: after the
 * callback in progress when called from one, within a few milliseconds from another thread.
 * Safe from any thread. */
KVREG_API int kvreg_subscriber_stop(kvreg_subscriber *sub) KVREG_NOEXCEPT;

/* The instance id (see "Publisher instance") of the publisher (endpoint index, topic as in
 * kvreg_sub_batch.topic) into *instance: 0 while not known (a foreign publisher, or no end
 * marker read yet). KVREG_ENOENT: no such publisher is tracked (never seen, or evicted).
 * KVREG_EINVAL: NULL argument. Same thread rules as run (callbacks may call it). */
KVREG_API int kvreg_subscriber_instance(const kvreg_subscriber *sub, uint32_t publisher,
                                        const char *topic, uint64_t *instance) KVREG_NOEXCEPT;

#define KVREG_SUB_STAT_BATCHES 1u     /* batches delivered (live and replayed) */
#define KVREG_SUB_STAT_EVENTS 2u      /* decoded events delivered */
#define KVREG_SUB_STAT_REPLAYED 3u    /* batches delivered from replays */
#define KVREG_SUB_STAT_GAPS 4u        /* GAP notices */
#define KVREG_SUB_STAT_REPLAYS 5u     /* replay requests sent */
#define KVREG_SUB_STAT_LOST 6u        /* seqs named in LOSS notices */
#define KVREG_SUB_STAT_RESETS 7u      /* RESET notices */
#define KVREG_SUB_STAT_MALFORMED 8u   /* messages skipped as malformed */
#define KVREG_SUB_STAT_DUPLICATES 9u  /* batches received twice (replay overlapping live) */
#define KVREG_SUB_STAT_HELD_BATCHES 10u /* live batches held now, waiting for a replay (a
                                         gauge) */
#define KVREG_SUB_STAT_HELD_BYTES 11u   /* their bytes, each its payload and
                                         KVREG_SUB_HELD_OVERHEAD (a gauge) */
#define KVREG_SUB_STAT_DISCONNECTS 12u  /* connections of the SUB sockets that closed: a
                                         publisher went away, or libzmq cut one whose message
                                         was over KVREG_SUB_OPT_MAX_MSG_SIZE */
#define KVREG_SUB_STAT_PUBLISHERS 13u   /* publishers tracked now (a gauge) */
#define KVREG_SUB_STAT_EVICTED 14u      /* publishers dropped (EVICTED notices with a topic) */
#define KVREG_SUB_STAT_HELD_DROPPED 15u /* live batches not held: over MAX_WAITING,
                                         MAX_HELD_BYTES or its endpoint's share of it
                                         (fetched by the next replay) */
#define KVREG_SUB_STAT_LIVE_READ 16u    /* messages read from the SUB sockets */
#define KVREG_SUB_STAT_REPLAYS_BUSY 17u /* replay answers that were the publisher's busy marker
                                         (KVREG_PUB_REPLAY_BUSY): the request is sent again
                                         after a back-off, until the replay's deadline */
#define KVREG_SUB_STAT_LIVE_PAUSES 18u  /* times a SUB socket stopped being read because every
                                         stream on it waits for a replay and the held bounds
                                         (MAX_HELD_BYTES, its endpoint's share,
                                         MAX_WAITING) were reached: libzmq,
                                         the kernel and the publisher keep the rest (see
                                         "Limits"); read again when one replay ends */
#define KVREG_SUB_STAT_MALFORMED_PAUSES 19u /* times a SUB socket stopped being read for
                                         KVREG_SUB_OPT_MALFORMED_PAUSE_MS after a malformed
                                         live message */
KVREG_API int kvreg_subscriber_stat(const kvreg_subscriber *sub, uint32_t stat,
                                    uint64_t *value) KVREG_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVREG_NET_H */
