/*
 * engine: the engine side of KV-aware routing. The engine registers the KV-cache blocks it
 * computes in a libkvreg registry; a publisher sends the registry's events over ZeroMQ as
 * vLLM KVEventBatch messages (the format vLLM and SGLang publish and Dynamo's and llm-d's
 * routers read), numbering the batches and keeping the last ones for replay. router.c is the
 * other side.
 *
 *   engine [ENDPOINT [REPLAY_ENDPOINT [LINGER_SECONDS]]]
 *     defaults: tcp://127.0.0.1:* (a free port), tcp://127.0.0.1:*, 30
 *   engine --nats URL
 *
 * It prints the endpoints it bound, serves three requests that share a system prompt (the
 * second and third find the prompt's blocks cached and register only their own question),
 * evicts the first request's question, prints how many events it published, then keeps
 * answering replay requests for LINGER_SECONDS, so a router started later still gets every
 * event from the first one on.
 *
 * With --nats, the same events go to the JetStream stream KVREG_EVENTS on the nats-server at
 * URL (docs/nats.md), as worker 0; the stream keeps them, so there is nothing to linger for:
 * the engine stops once the server has acknowledged every batch and prints how many there
 * were (router --nats waits for that many).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kvreg_net.h and kvreg_index.h are the experimental tier (README, "API stability"): this
 * program accepts that they may change between 0.x releases. */
#define KVREG_EXPERIMENTAL
#include <kvreg.h>
#include <kvreg_nats.h>
#include <kvreg_net.h>

#include "check.h"
#include "demo_prompts.h"

#define REQUESTS 3

/* Serve one request: reuse the cached prefix, register the rest. handles[] gets the request's
 * DEMO_PROMPT_BLOCKS references (the engine holds them while the request runs). */
static void serve(kvreg_pool *gpu, uint32_t question, kvreg_block handles[DEMO_PROMPT_BLOCKS])
{
    uint32_t tokens[DEMO_PROMPT_TOKENS];
    kvreg_block_info info[DEMO_PROMPT_BLOCKS];
    uint64_t hashes[DEMO_PROMPT_BLOCKS];
    kvreg_pool_block_desc descs[DEMO_PROMPT_BLOCKS];
    size_t n = 0, cached = 0, i;

    demo_prompt(question, tokens);
    CHECK_OK(kvreg_hash_blocks(tokens, DEMO_PROMPT_TOKENS, DEMO_BLOCK, KVREG_ROUTER_SALT, info,
                               DEMO_PROMPT_BLOCKS, &n));
    CHECK(n == DEMO_PROMPT_BLOCKS);
    for (i = 0; i < n; i++)
        hashes[i] = info[i].sequence_hash;
    CHECK_OK(kvreg_pool_acquire_prefix(gpu, hashes, n, handles, &cached));
    /* The blocks after the cached prefix are computed, then registered with their tokens
     * (vLLM's BlockStored carries them; a router hashes them itself). */
    for (i = cached; i < n; i++) {
        memset(&descs[i], 0, sizeof descs[i]);
        descs[i].size = sizeof descs[i]; /* the struct this program was compiled with */
        descs[i].sequence_hash = info[i].sequence_hash;
        descs[i].block_hash = info[i].block_hash;
        descs[i].parent_sequence_hash = info[i].parent_sequence_hash;
        descs[i].has_parent = info[i].has_parent;
        descs[i].block_size = DEMO_BLOCK;
        descs[i].tokens = tokens + i * DEMO_BLOCK;
        descs[i].n_tokens = DEMO_BLOCK;
    }
    CHECK_OK(kvreg_pool_register_batch(gpu, descs + cached, n - cached, handles + cached, NULL, NULL));
    printf("engine: request %u: %zu blocks cached, %zu registered\n", question, cached, n - cached);
}

/* The three requests and the eviction, into a registry whose events a publisher takes. */
static void serve_all(kvreg_pool *gpu)
{
    kvreg_block held[REQUESTS][DEMO_PROMPT_BLOCKS];
    uint32_t q;
    for (q = 0; q < REQUESTS; q++)
        serve(gpu, q, held[q]);
    /* The first request is done and its question evicted: one Remove per block nobody else
     * holds (the system prompt stays, held by the other requests). */
    CHECK_OK(kvreg_pool_release_batch(gpu, held[0], DEMO_PROMPT_BLOCKS, NULL, NULL));
    printf("engine: request 0 finished, its blocks released\n");
}

static void print_published(kvreg_registry *reg)
{
    uint64_t registers = 0, removes = 0;
    CHECK_OK(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REGISTER, &registers));
    CHECK_OK(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REMOVE, &removes));
    printf("engine: published %llu events (%llu Register, %llu Remove)\n",
           (unsigned long long)(registers + removes), (unsigned long long)registers,
           (unsigned long long)removes);
    fflush(stdout);
}

/* A registry whose events wait in a POLL queue for a publisher, which takes them on its own
 * thread: the engine's threads never wait for the network. */
static kvreg_registry *new_registry(void)
{
    kvreg_config *cfg;
    kvreg_registry *reg;
    CHECK_OK(kvreg_config_new(&cfg));
    CHECK_OK(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL));
    CHECK_OK(kvreg_registry_new(&reg, cfg));
    kvreg_config_free(cfg);
    return reg;
}

/* engine --nats URL: the same engine, publishing to a JetStream stream. */
static int main_nats(const char *url)
{
    kvreg_registry *reg;
    kvreg_pool *gpu;
    kvreg_nats_publisher *pub;
    uint64_t batches = 0, acked = 0;
    int rc;

    if (!kvreg_nats_available()) {
        fprintf(stderr, "engine: this libkvreg was built without NATS (libnats-dev)\n");
        return 2;
    }
    reg = new_registry();
    CHECK_OK(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU));
    CHECK_OK(kvreg_nats_publisher_new(&pub, reg));
    CHECK_OK(kvreg_nats_publisher_set_string(pub, KVREG_NATS_URL, url));
    CHECK_OK(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_BLOCK_SIZE, DEMO_BLOCK));
    rc = kvreg_nats_publisher_start(pub); /* connects; makes the stream if it is missing */
    if (rc != KVREG_OK) {
        fprintf(stderr, "engine: cannot publish to %s: %s\n", url, kvreg_strerror(rc));
    } else {
        printf("engine: publishing to %s, stream KVREG_EVENTS, worker 0\n", url);
        serve_all(gpu);
        print_published(reg);
        /* stop: everything emitted is published and acknowledged (or its bound runs out). */
        CHECK_OK(kvreg_nats_publisher_stop(pub));
        CHECK_OK(kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_BATCHES, &batches));
        CHECK_OK(kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_ACKED, &acked));
        CHECK(acked == batches);
        printf("engine: stopped after %llu batches, all acknowledged\n", (unsigned long long)batches);
    }
    kvreg_nats_publisher_free(pub);
    kvreg_pool_free(gpu);
    kvreg_registry_free(reg);
    return rc == KVREG_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:*";
    const char *replay = argc > 2 ? argv[2] : "tcp://127.0.0.1:*";
    const long linger_s = argc > 3 ? strtol(argv[3], NULL, 10) : 30;
    kvreg_registry *reg;
    kvreg_pool *gpu;
    kvreg_publisher *pub;
    char bound[256], bound_replay[256];
    uint64_t batches = 0;
    int rc;

    if (argc > 1 && strcmp(argv[1], "--nats") == 0) {
        if (argc != 3) {
            fprintf(stderr, "usage: engine --nats URL\n");
            return 2;
        }
        return main_nats(argv[2]);
    }
    if (argc > 4 || linger_s < 0) {
        fprintf(stderr, "usage: engine [ENDPOINT [REPLAY_ENDPOINT [LINGER_SECONDS]]] | engine --nats URL\n");
        return 2;
    }
    if (!(kvreg_features() & KVREG_FEATURE_ZMQ)) {
        fprintf(stderr, "engine: this libkvreg was built without ZeroMQ (libzmq3-dev)\n");
        return 2;
    }
    reg = new_registry();
    CHECK_OK(kvreg_pool_new_medium(&gpu, reg, "gpu", KVREG_MEDIUM_GPU));

    CHECK_OK(kvreg_publisher_new(&pub, reg));
    CHECK_OK(kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, endpoint));
    CHECK_OK(kvreg_publisher_set_string(pub, KVREG_PUB_REPLAY_ENDPOINT, replay));
    CHECK_OK(kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, "kv@engine-0@demo-model"));
    CHECK_OK(kvreg_publisher_set(pub, KVREG_PUB_OPT_REPLAY_LINGER_MS, (uint64_t)linger_s * 1000));
    rc = kvreg_publisher_start(pub);
    if (rc != KVREG_OK) {
        fprintf(stderr, "engine: cannot bind %s / %s: %s\n", endpoint, replay, kvreg_strerror(rc));
        kvreg_publisher_free(pub);
        kvreg_pool_free(gpu);
        kvreg_registry_free(reg);
        return 1;
    }
    CHECK_OK(kvreg_publisher_endpoint(pub, KVREG_PUB_ENDPOINT, bound, sizeof bound, NULL));
    CHECK_OK(kvreg_publisher_endpoint(pub, KVREG_PUB_REPLAY_ENDPOINT, bound_replay,
                                      sizeof bound_replay, NULL));
    printf("engine: publishing on %s, replay on %s\n", bound, bound_replay);
    fflush(stdout);

    serve_all(gpu);
    print_published(reg);
    printf("engine: answering replays for %ld s\n", linger_s);
    fflush(stdout);

    /* stop: everything emitted is sent, then replay requests are answered for the linger. */
    CHECK_OK(kvreg_publisher_stop(pub));
    CHECK_OK(kvreg_publisher_stat(pub, KVREG_PUB_STAT_BATCHES_SENT, &batches));
    printf("engine: stopped after %llu batches\n", (unsigned long long)batches);

    kvreg_publisher_free(pub);
    kvreg_pool_free(gpu);
    kvreg_registry_free(reg);
    return 0;
}
