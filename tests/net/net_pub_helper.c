/* A libkvreg publisher driven from stdin, for the independent Python consumer
 * (vllm_consumer.py). It binds PUB and replay ROUTER on 127.0.0.1 ephemeral ports and prints
 *   ENDPOINT <pub endpoint>
 *   REPLAY <replay endpoint>
 * then reads commands, one per line, and answers each with one line once the publisher has
 * sent everything it caused:
 *   store N   register one sequence of N blocks of 4 tokens (tokens 100*k + i, k counting
 *             the store commands) -> "SENT <next seq> <hash>..." (the sequence hashes)
 *   release   release every block held -> "SENT <next seq>"
 *   quit      stop the publisher and exit 0 */
#define _POSIX_C_SOURCE 200809L
#include <kvreg.h>
#include <kvreg_net.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char *what, int rc) {
    fprintf(stderr, "net_pub_helper: %s: %s\n", what, kvreg_strerror(rc));
    exit(1);
}

/* Wait (bounded) until every queued event went out in a batch. */
static uint64_t settle(kvreg_registry *reg, kvreg_publisher *pub) {
    kvreg_registry_flush(reg);
    /* Done when every emitted event is handled (an empty queue is not enough: the sender
     * thread holds events while it makes their batch) and every batch made went out. */
    uint64_t regs = 0, rems = 0;
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REGISTER, &regs);
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REMOVE, &rems);
    for (int i = 0; i < 20000; i++) {
        uint64_t handled = 0, next = 0, sent = 0, dropped = 0;
        kvreg_publisher_stat(pub, KVREG_PUB_STAT_EVENTS_HANDLED, &handled);
        kvreg_publisher_stat(pub, KVREG_PUB_STAT_NEXT_SEQ, &next);
        kvreg_publisher_stat(pub, KVREG_PUB_STAT_BATCHES_SENT, &sent);
        kvreg_publisher_stat(pub, KVREG_PUB_STAT_BATCHES_DROPPED, &dropped);
        if (handled == regs + rems && sent + dropped == next) return next;
        struct timespec ts = {0, 1000000}; /* polling the counters */
        nanosleep(&ts, NULL);
    }
    die("publisher did not send", KVREG_ESTATE);
    return 0;
}

int main(void) {
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_publisher *pub = NULL;
    int rc = kvreg_config_new(&cfg);
    if (rc == KVREG_OK) rc = kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL);
    if (rc == KVREG_OK) rc = kvreg_registry_new(&reg, cfg);
    kvreg_config_free(cfg);
    if (rc == KVREG_OK) rc = kvreg_pool_new(&pool, reg, "gpu");
    if (rc == KVREG_OK) rc = kvreg_publisher_new(&pub, reg);
    if (rc == KVREG_OK) rc = kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*");
    if (rc == KVREG_OK) rc = kvreg_publisher_set_string(pub, KVREG_PUB_REPLAY_ENDPOINT, "tcp://127.0.0.1:*");
    if (rc == KVREG_OK) rc = kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, "kv@pod-py@model-py");
    if (rc == KVREG_OK) rc = kvreg_publisher_start(pub);
    if (rc != KVREG_OK) die("setup", rc);
    char ep[256];
    kvreg_publisher_endpoint(pub, KVREG_PUB_ENDPOINT, ep, sizeof ep, NULL);
    printf("ENDPOINT %s\n", ep);
    kvreg_publisher_endpoint(pub, KVREG_PUB_REPLAY_ENDPOINT, ep, sizeof ep, NULL);
    printf("REPLAY %s\n", ep);
    fflush(stdout);

    kvreg_block held[4096];
    size_t n_held = 0;
    unsigned stores = 0;
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        unsigned n = 0;
        if (sscanf(line, "store %u", &n) == 1 && n > 0 && n <= 64 && n_held + n <= 4096) {
            uint32_t tokens[64 * 4];
            kvreg_block_info info[64];
            size_t nb = 0;
            for (unsigned i = 0; i < n * 4; i++) tokens[i] = 100u * stores + i;
            stores++;
            rc = kvreg_hash_blocks(tokens, n * 4, 4, KVREG_ROUTER_SALT, info, 64, &nb);
            if (rc != KVREG_OK) die("hash", rc);
            kvreg_block_desc d[64];
            for (size_t i = 0; i < nb; i++) {
                memset(&d[i], 0, sizeof d[i]);
                d[i].sequence_hash = info[i].sequence_hash;
                d[i].block_hash = info[i].block_hash;
                d[i].parent_sequence_hash = info[i].parent_sequence_hash;
                d[i].has_parent = info[i].has_parent;
                d[i].block_size = 4;
                d[i].tokens = tokens + 4 * i;
                d[i].n_tokens = 4;
            }
            rc = kvreg_register_batch(pool, d, nb, held + n_held, NULL, NULL);
            if (rc != KVREG_OK) die("register", rc);
            n_held += nb;
            printf("SENT %llu", (unsigned long long)settle(reg, pub));
            for (size_t i = 0; i < nb; i++) printf(" %llu", (unsigned long long)info[i].sequence_hash);
            printf("\n");
        } else if (strncmp(line, "release", 7) == 0) {
            rc = kvreg_release_batch(pool, held, n_held, NULL, NULL);
            if (rc != KVREG_OK) die("release", rc);
            n_held = 0;
            printf("SENT %llu\n", (unsigned long long)settle(reg, pub));
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            fprintf(stderr, "net_pub_helper: bad command: %s", line);
            return 2;
        }
        fflush(stdout);
    }
    kvreg_publisher_free(pub);
    kvreg_registry_free(reg);
    return 0;
}
