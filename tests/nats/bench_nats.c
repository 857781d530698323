/* nats-bench: events/s of publish-then-consume through libkvreg's NATS path (registry ->
 * kvreg_nats_publisher -> JetStream -> kvreg_nats_consumer -> kvreg_index) against raw libnats
 * doing the same with messages of the same count and sizes (async publish with a Nats-Msg-Id,
 * then a durable pull consumer acking each), in one run, one process, one nats-server it
 * starts itself (nats_fixture.h).
 *
 *   nats-bench [EVENTS]   (default 200000: 16-token blocks in chains of 16, vLLM format)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>

#include "nats_fixture.h"

#define CHAIN 16
#define BS 16

#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "nats-bench: %s failed at line %d\n", #c, __LINE__);                \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static double secs(int64_t a, int64_t b) { return (double)(b - a) / 1000.0; }

int main(int argc, char **argv) {
    const size_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    const size_t chains = (events + CHAIN - 1) / CHAIN;
    if (!kvreg_nats_available()) {
        fprintf(stderr, "nats-bench: libkvreg built without NATS\n");
        return 77;
    }
    nats_server srv;
    nats_server_start(&srv);

    /* ---- libkvreg path */
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_nats_publisher *pub = NULL;
    CHECK(kvreg_config_new(&cfg) == KVREG_OK);
    CHECK(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL) == KVREG_OK);
    CHECK(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, (uint64_t)events * 2) == KVREG_OK);
    CHECK(kvreg_registry_new(&reg, cfg) == KVREG_OK);
    kvreg_config_free(cfg);
    CHECK(kvreg_pool_new(&pool, reg, "gpu") == KVREG_OK);
    CHECK(kvreg_nats_publisher_new(&pub, reg) == KVREG_OK);
    CHECK(kvreg_nats_publisher_set_string(pub, KVREG_NATS_URL, srv.url) == KVREG_OK);
    CHECK(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_BLOCK_SIZE, BS) == KVREG_OK);
    CHECK(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_LINGER_MS, 600000) == KVREG_OK);
    CHECK(kvreg_nats_publisher_start(pub) == KVREG_OK);

    uint32_t tokens[CHAIN * BS];
    kvreg_block_info info[CHAIN];
    kvreg_block_desc descs[CHAIN];
    kvreg_block handles[CHAIN];
    const int64_t t0 = nats_now_ms();
    for (size_t c = 0; c < chains; c++) {
        for (size_t i = 0; i < CHAIN * BS; i++) tokens[i] = (uint32_t)(c * 7919 + i);
        size_t nb = 0;
        CHECK(kvreg_hash_blocks(tokens, CHAIN * BS, BS, KVREG_ROUTER_SALT, info, CHAIN, &nb) == KVREG_OK);
        for (size_t b = 0; b < CHAIN; b++) {
            memset(&descs[b], 0, sizeof descs[b]);
            descs[b].sequence_hash = info[b].sequence_hash;
            descs[b].block_hash = info[b].block_hash;
            descs[b].parent_sequence_hash = info[b].parent_sequence_hash;
            descs[b].has_parent = info[b].has_parent;
            descs[b].block_size = BS;
            descs[b].tokens = tokens + b * BS;
            descs[b].n_tokens = BS;
        }
        CHECK(kvreg_register_batch(pool, descs, CHAIN, handles, NULL, NULL) == KVREG_OK);
    }
    CHECK(kvreg_nats_publisher_stop(pub) == KVREG_OK);
    const int64_t t1 = nats_now_ms();
    uint64_t batches = 0, sent = 0, unacked = 0;
    kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_BATCHES, &batches);
    kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_EVENTS_SENT, &sent);
    kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_BATCHES_UNACKED, &unacked);
    CHECK(unacked == 0 && sent == chains * CHAIN);

    /* Message sizes, from the stream itself. */
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    CHECK(natsConnection_ConnectTo(&nc, srv.url) == NATS_OK);
    CHECK(natsConnection_JetStream(&js, nc, NULL) == NATS_OK);
    CHECK(js_GetStreamInfo(&si, js, "KVREG_EVENTS", NULL, NULL) == NATS_OK);
    CHECK(si->State.Msgs == batches);
    const size_t avg = (size_t)(si->State.Bytes / batches);
    jsStreamInfo_Destroy(si);

    kvreg_index *idx = NULL;
    kvreg_nats_consumer *con = NULL;
    CHECK(kvreg_index_new(&idx, NULL) == KVREG_OK);
    CHECK(kvreg_nats_consumer_new(&con, idx) == KVREG_OK);
    CHECK(kvreg_nats_consumer_set_string(con, KVREG_NATS_URL, srv.url) == KVREG_OK);
    CHECK(kvreg_nats_consumer_start(con) == KVREG_OK);
    const int64_t t2 = nats_now_ms();
    uint64_t applied = 0;
    while (applied < batches) {
        CHECK(nats_now_ms() - t2 < 600000);
        kvreg_nats_consumer_run(con, 100);
        kvreg_nats_consumer_stat(con, KVREG_NATS_CON_STAT_BATCHES, &applied);
    }
    const int64_t t3 = nats_now_ms();
    uint64_t entries = 0;
    kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &entries);
    CHECK(entries == chains * CHAIN);
    kvreg_nats_consumer_free(con);
    kvreg_index_free(idx);
    kvreg_nats_publisher_free(pub);
    kvreg_registry_free(reg);

    /* ---- raw libnats: the same number of messages of the stream's average size */
    const char *subj[1] = {"raw.x"};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = "RAW";
    sc.Subjects = subj;
    sc.SubjectsLen = 1;
    sc.Storage = js_FileStorage;
    CHECK(js_AddStream(&si, js, &sc, NULL, NULL) == NATS_OK);
    jsStreamInfo_Destroy(si);
    jsCtx *jsa = NULL;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 256;
    CHECK(natsConnection_JetStream(&jsa, nc, &jo) == NATS_OK);
    char *payload = malloc(avg);
    CHECK(payload != NULL);
    memset(payload, 0x5a, avg);
    const int64_t r0 = nats_now_ms();
    for (uint64_t i = 0; i < batches; i++) {
        natsMsg *m = NULL;
        char id[64];
        snprintf(id, sizeof id, "raw-%llu", (unsigned long long)i);
        CHECK(natsMsg_Create(&m, "raw.x", NULL, payload, (int)avg) == NATS_OK);
        CHECK(natsMsgHeader_Set(m, "Nats-Msg-Id", id) == NATS_OK);
        CHECK(js_PublishMsgAsync(jsa, &m, NULL) == NATS_OK);
        natsMsg_Destroy(m);
    }
    CHECK(js_PublishAsyncComplete(jsa, NULL) == NATS_OK);
    const int64_t r1 = nats_now_ms();
    natsSubscription *sub = NULL;
    CHECK(js_PullSubscribe(&sub, js, "raw.x", "rawdur", NULL, NULL, NULL) == NATS_OK);
    uint64_t got = 0;
    while (got < batches) {
        natsMsgList list = {NULL, 0};
        natsStatus s = natsSubscription_Fetch(&list, sub, 256, 100, NULL);
        if (s == NATS_OK)
            for (int i = 0; i < list.Count; i++, got++) natsMsg_Ack(list.Msgs[i], NULL);
        natsMsgList_Destroy(&list);
        CHECK(nats_now_ms() - r1 < 600000);
    }
    const int64_t r2 = nats_now_ms();
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(jsa);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(payload);
    nats_server_destroy(&srv);

    const double ev = (double)(chains * CHAIN);
    const double k_s = secs(t0, t1) + secs(t2, t3), r_s = secs(r0, r1) + secs(r1, r2);
    printf("events %zu in %llu messages of %zu bytes on average (vLLM KVEventBatch)\n",
           (size_t)(chains * CHAIN), (unsigned long long)batches, avg);
    printf("libkvreg NATS: publish %.3f s + consume into kvreg_index %.3f s = %.0f events/s\n",
           secs(t0, t1), secs(t2, t3), ev / k_s);
    printf("raw libnats:   publish %.3f s + consume (ack only)       %.3f s = %.0f events/s\n",
           secs(r0, r1), secs(r1, r2), ev / r_s);
    printf("ratio libkvreg / raw: %.2f\n", r_s / k_s);
    nats_Close();
    return 0;
}
