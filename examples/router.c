/*
 * router: the router side of KV-aware routing. A subscriber receives engines' KV events over
 * ZeroMQ (vLLM's KVEventBatch, from engine.c or from a vLLM or SGLang engine), asks each
 * engine's replay endpoint for what it missed, and hands every decoded batch, in order, to a
 * libkvreg index; the index then answers "which engine holds the longest prefix of this
 * prompt", the question a KV-aware router asks before it sends a request.
 *
 *   router ENDPOINT REPLAY_ENDPOINT BLOCKS [TIMEOUT_SECONDS]
 *
 * It subscribes to one engine (the endpoints engine.c printed), applies batches until BLOCKS
 * blocks have been stored or removed (engine.c printed how many Register and Remove events
 * it published, one per block; vLLM groups them into fewer wire events; default timeout
 * 20 s), then
 * routes four prompts and checks what the index says against what engine.c did: request 1
 * is cached whole, request 0 only up to its system prompt (its question was evicted), a new
 * question shares the system prompt, and an unrelated prompt matches nothing.
 *
 *   router --nats URL BATCHES [TIMEOUT_SECONDS]
 *
 * The same router as one replica of a NATS JetStream event plane (docs/nats.md): a durable
 * consumer of the stream KVREG_EVENTS (engine --nats publishes there) applies worker 0's
 * batches, in order, until it has applied BATCHES of them (engine --nats printed how many),
 * then routes the same four prompts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kvreg_net.h and kvreg_index.h are the experimental tier (README, "API stability"): this
 * program accepts that they may change between 0.x releases. */
#define KVREG_EXPERIMENTAL
#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>
#include <kvreg_net.h>

#include "check.h"
#include "demo_prompts.h"

typedef struct router {
    kvreg_index *index;
    kvreg_subscriber *sub;
    uint64_t blocks, wanted; /* block hashes stored or removed so far, and the goal */
    int failed;
} router;

/* Every batch, live or replayed, in each engine's order. The engine's id is the subscriber's
 * index of its endpoint (a real router would use the pod from the topic, batch->pod). */
static void on_batch(const kvreg_subscriber_batch *batch, void *user_data)
{
    router *r = user_data;
    kvreg_index_apply_info info = {0};
    const uint32_t rank = batch->has_dp_rank ? (uint32_t)batch->dp_rank : 0;
    int rc = kvreg_index_apply(r->index, batch->publisher, rank, batch->seq, batch->events,
                               batch->n_events, &info);
    if (rc != KVREG_OK) {
        fprintf(stderr, "router: applying batch %llu: %s\n", (unsigned long long)batch->seq,
                kvreg_strerror(rc));
        r->failed = 1;
    }
    if (info.flags & (KVREG_INDEX_F_GAP | KVREG_INDEX_F_RESET))
        fprintf(stderr, "router: batch %llu: events were lost before it (resync the engine)\n",
                (unsigned long long)batch->seq);
    for (size_t i = 0; i < batch->n_events; i++)
        r->blocks += batch->events[i].n_block_hashes;
    printf("router: batch %llu from %s (%s): %zu events, %llu blocks stored, %llu removed\n",
           (unsigned long long)batch->seq, batch->pod, batch->replayed ? "replayed" : "live",
           batch->n_events, (unsigned long long)info.blocks_stored,
           (unsigned long long)info.blocks_removed);
    if (r->failed || r->blocks >= r->wanted)
        kvreg_subscriber_stop(r->sub);
}

/* Gaps, replays, resets and malformed messages: never silent. A RESET is a restarted engine
 * (its seq went back or its instance id changed): what the index holds for it is the old
 * process's, so drop it; the subscriber resyncs the new one by replay from its start. */
static void on_notice(const kvreg_subscriber_notice *notice, void *user_data)
{
    router *r = user_data;
    fprintf(stderr, "router: %s: %s\n", notice->endpoint, notice->message);
    if (notice->kind == KVREG_SUB_RESET &&
        kvreg_index_clear_worker(r->index, notice->publisher, 0, KVREG_INDEX_SEQ_NONE) != KVREG_OK)
        r->failed = 1;
}

/* Route one prompt: the best engine and how much of the prompt it holds (0 if none). The
 * ranked query weighs tiers; a router that scores engines itself (as Dynamo's does) asks for
 * every engine's depth instead, unsorted and cheaper: both must agree on the best engine. */
static uint32_t route(const router *r, const char *what, const uint32_t *tokens)
{
    kvreg_index_match best;
    kvreg_index_depth depths[4];
    size_t n = 0, n_depths = 0, i;
    CHECK_OK(kvreg_index_query_tokens(r->index, tokens, DEMO_PROMPT_TOKENS, 1, &best, 1, &n));
    CHECK_OK(kvreg_index_query_depths_tokens(r->index, tokens, DEMO_PROMPT_TOKENS, depths, 4, &n_depths));
    CHECK(n_depths == n); /* one engine here: the top-1 answer is the whole answer */
    if (n == 0) {
        printf("router: %-28s no engine holds its first block\n", what);
        return 0;
    }
    for (i = 0; i < n_depths; i++)
        if (depths[i].worker_id == best.worker_id) CHECK(depths[i].depth == best.depth);
    printf("router: %-28s engine %llu holds %u of %d blocks (%u on GPU)\n", what,
           (unsigned long long)best.worker_id, best.depth, DEMO_PROMPT_BLOCKS,
           best.blocks[KVREG_MEDIUM_GPU]);
    return best.depth;
}

/* The consumer's notices (losses, restarts, malformed messages): never silent. */
static void on_nats_notice(const kvreg_nats_notice *notice, void *user_data)
{
    (void)user_data;
    fprintf(stderr, "router: worker %llu: %s\n", (unsigned long long)notice->worker_id, notice->message);
}

/* One replica: a durable consumer applies the stream's batches to the index on this thread,
 * acknowledging each once applied. 0 once worker 0's next seq is `batches`. */
static int receive_nats(kvreg_index *index, const char *url, uint64_t batches, long timeout_s)
{
    kvreg_nats_consumer *con;
    uint64_t instance = 0, next = 0, applied = 0, events = 0;
    long waited_ms;
    int rc;

    if (!kvreg_nats_available()) {
        fprintf(stderr, "router: this libkvreg was built without NATS (libnats-dev)\n");
        return 2;
    }
    CHECK_OK(kvreg_nats_consumer_new(&con, index));
    CHECK_OK(kvreg_nats_consumer_set_string(con, KVREG_NATS_URL, url));
    CHECK_OK(kvreg_nats_consumer_set_string(con, KVREG_NATS_DURABLE, "example-router"));
    /* Worker 0's subject only (engine --nats's: prefix, namespace, component, worker, rank), so
     * that other engines publishing to the same stream are not this demo's. */
    CHECK_OK(kvreg_nats_consumer_set_string(con, KVREG_NATS_FILTER, "kvreg.events.default.backend.0.0"));
    CHECK_OK(kvreg_nats_consumer_set_notice_cb(con, on_nats_notice, NULL, NULL));
    rc = kvreg_nats_consumer_start(con); /* connects, finds the stream, makes the durable */
    if (rc != KVREG_OK) {
        fprintf(stderr, "router: cannot consume from %s: %s\n", url, kvreg_strerror(rc));
        kvreg_nats_consumer_free(con);
        return 1;
    }
    for (waited_ms = 0; waited_ms < timeout_s * 1000; waited_ms += 100) {
        CHECK_OK(kvreg_nats_consumer_run(con, 100));
        if (kvreg_nats_consumer_worker(con, 0, 0, &instance, &next) == KVREG_OK && next >= batches)
            break;
    }
    CHECK_OK(kvreg_nats_consumer_stat(con, KVREG_NATS_CON_STAT_BATCHES, &applied));
    CHECK_OK(kvreg_nats_consumer_stat(con, KVREG_NATS_CON_STAT_EVENTS, &events));
    printf("router: applied %llu batches (%llu events) of worker 0\n", (unsigned long long)applied,
           (unsigned long long)events);
    kvreg_nats_consumer_free(con);
    if (next < batches) {
        fprintf(stderr, "router: %llu of %llu batches arrived in %ld s\n", (unsigned long long)next,
                (unsigned long long)batches, timeout_s);
        return 1;
    }
    return 0;
}

/* One engine over ZeroMQ: every event from seq 0 on (replayed, then live), until `wanted`
 * blocks were stored or removed. */
static int receive_zmq(router *r, const char *endpoint, const char *replay, long timeout_s)
{
    int rc;

    if (!(kvreg_features() & KVREG_FEATURE_ZMQ)) {
        fprintf(stderr, "router: this libkvreg was built without ZeroMQ (libzmq3-dev)\n");
        return 2;
    }
    CHECK_OK(kvreg_subscriber_new(&r->sub));
    CHECK_OK(kvreg_subscriber_set(r->sub, KVREG_SUB_OPT_FROM_SEQ, 0)); /* everything, via replay */
    CHECK_OK(kvreg_subscriber_set_string(r->sub, KVREG_SUB_TOPIC, "kv@"));
    CHECK_OK(kvreg_subscriber_set_batch_cb(r->sub, on_batch, r, NULL));
    CHECK_OK(kvreg_subscriber_set_notice_cb(r->sub, on_notice, r, NULL));
    rc = kvreg_subscriber_add(r->sub, endpoint, replay, NULL);
    if (rc != KVREG_OK) {
        fprintf(stderr, "router: cannot subscribe to %s / %s: %s\n", endpoint, replay,
                kvreg_strerror(rc));
        kvreg_subscriber_free(r->sub);
        r->sub = NULL;
        return 1;
    }
    /* Receive until on_batch stops us (all events in) or the timeout. */
    CHECK_OK(kvreg_subscriber_run(r->sub, (int)(timeout_s * 1000)));
    kvreg_subscriber_free(r->sub);
    r->sub = NULL;
    if (r->failed || r->blocks < r->wanted) {
        fprintf(stderr, "router: %llu of %llu blocks arrived in %ld s\n",
                (unsigned long long)r->blocks, (unsigned long long)r->wanted, timeout_s);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    router r;
    kvreg_index_config *cfg;
    uint32_t tokens[DEMO_PROMPT_TOKENS];
    const int nats = argc > 1 && strcmp(argv[1], "--nats") == 0;
    long timeout_s;
    int rc;

    memset(&r, 0, sizeof r);
    if (argc >= 4) r.wanted = strtoull(argv[3], NULL, 10);
    timeout_s = argc > 4 ? strtol(argv[4], NULL, 10) : 20;
    if (argc < 4 || argc > 5 || r.wanted == 0 || timeout_s < 1) {
        fprintf(stderr, "usage: router ENDPOINT REPLAY_ENDPOINT BLOCKS [TIMEOUT_SECONDS]\n"
                        "       router --nats URL BATCHES [TIMEOUT_SECONDS]\n"
                        "(BLOCKS, BATCHES and TIMEOUT_SECONDS at least 1)\n");
        return 2;
    }

    /* The index's defaults match vLLM's engines: 16-token blocks, Dynamo's hashing with salt
     * 1337 computed from each stored block's tokens (engines name blocks their own way). Its
     * table is sized for what the router expects to hold (engines x blocks each caches; the
     * demo's engine holds 10, a real one thousands), so that applying never stops to grow it. */
    CHECK_OK(kvreg_index_config_new(&cfg));
    CHECK_OK(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, 4096));
    CHECK_OK(kvreg_index_new(&r.index, cfg));
    kvreg_index_config_free(cfg);
    rc = nats ? receive_nats(r.index, argv[2], r.wanted, timeout_s) : receive_zmq(&r, argv[1], argv[2], timeout_s);
    if (rc != 0) {
        kvreg_index_free(r.index);
        return rc;
    }

    demo_prompt(1, tokens);
    CHECK(route(&r, "request 1 again:", tokens) == DEMO_PROMPT_BLOCKS);
    demo_prompt(0, tokens);
    CHECK(route(&r, "request 0 again (evicted):", tokens) == DEMO_SYSTEM_BLOCKS);
    demo_prompt(7, tokens);
    CHECK(route(&r, "a new question:", tokens) == DEMO_SYSTEM_BLOCKS);
    demo_prompt(7, tokens);
    tokens[0] = 999999; /* another system prompt: nothing in common from the first block on */
    CHECK(route(&r, "another system prompt:", tokens) == 0);

    kvreg_index_free(r.index);
    return 0;
}
