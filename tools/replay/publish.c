#include "publish.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char publish_usage[] =
"Publishing (ZeroMQ, vLLM's KV-event wire format):\n"
"  --publish ENDPOINT        send the run's events live, [topic, seq, KVEventBatch] frames on\n"
"                            a PUB socket (binds for '*' hosts, ipc and inproc, else connects)\n"
"  --replay-endpoint EP      also answer vLLM replay requests on a ROUTER bound to EP\n"
"  --topic T                 first frame of every batch (default \"\"; llm-d: kv@POD@MODEL)\n"
"  --linger SECONDS          keep answering replay requests this long after the run\n";

static const char *const names[] = {"--publish", "--replay-endpoint", "--topic", "--linger"};

int publish_is_option(const char *name)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

int publish_set_option(publish_options *p, const char *name, const char *val)
{
    if (strcmp(name, "--publish") == 0) {
        p->endpoint = val;
    } else if (strcmp(name, "--replay-endpoint") == 0) {
        p->replay_endpoint = val;
    } else if (strcmp(name, "--topic") == 0) {
        p->topic = val;
    } else {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (val[0] < '0' || val[0] > '9' || *end || errno || v > 86400) {
            fprintf(stderr, "kvreg-replay: --linger: expected seconds from 0 to 86400, got '%s'\n", val);
            return -1;
        }
        p->linger_s = v;
    }
    return 0;
}

int publish_configure(kvreg_config *cfg)
{
    int rc = kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL);
    return rc == KVREG_OK ? kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 1u << 22) : rc;
}

int publish_start(kvreg_publisher **out, kvreg_registry *reg, const publish_options *p,
                  uint32_t block_tokens)
{
    kvreg_publisher *pub = NULL;
    char ep[512];
    int rc = kvreg_publisher_new(&pub, reg);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, p->endpoint);
    if (rc == KVREG_OK && p->replay_endpoint)
        rc = kvreg_publisher_set_string(pub, KVREG_PUB_REPLAY_ENDPOINT, p->replay_endpoint);
    if (rc == KVREG_OK && p->topic)
        rc = kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, p->topic);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set(pub, KVREG_PUB_OPT_REPLAY_LINGER_MS, p->linger_s * 1000);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set(pub, KVREG_PUB_OPT_BLOCK_SIZE, block_tokens);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_start(pub);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: cannot publish on %s%s%s: %s\n", p->endpoint,
                p->replay_endpoint ? " / " : "", p->replay_endpoint ? p->replay_endpoint : "",
                kvreg_strerror(rc));
        kvreg_publisher_free(pub);
        return -1;
    }
    if (kvreg_publisher_endpoint(pub, KVREG_PUB_ENDPOINT, ep, sizeof ep, NULL) == KVREG_OK)
        fprintf(stderr, "kvreg-replay: publishing on %s\n", ep);
    if (p->replay_endpoint &&
        kvreg_publisher_endpoint(pub, KVREG_PUB_REPLAY_ENDPOINT, ep, sizeof ep, NULL) == KVREG_OK)
        fprintf(stderr, "kvreg-replay: replay on %s\n", ep);
    fflush(stderr);
    *out = pub;
    return 0;
}

int publish_finish(kvreg_publisher *pub)
{
    static const struct { uint32_t stat; const char *name; } stats[] = {
        {KVREG_PUB_STAT_NEXT_SEQ, "batches"},
        {KVREG_PUB_STAT_BATCHES_SENT, "sent"},
        {KVREG_PUB_STAT_BATCHES_DROPPED, "dropped_at_hwm"},
        {KVREG_PUB_STAT_EVENTS_SENT, "events_sent"},
        {KVREG_PUB_STAT_EVENTS_LOST, "events_lost"},
        {KVREG_PUB_STAT_EVENTS_UNSENT, "events_unsent"},
        {KVREG_PUB_STAT_EVENTS_SKIPPED, "events_skipped"},
        {KVREG_PUB_STAT_REPLAYS_SERVED, "replays_served"},
    };
    uint64_t v[sizeof stats / sizeof stats[0]];
    if (!pub)
        return 0;
    fflush(stdout); /* the report is out before the linger, even on a pipe */
    kvreg_publisher_stop(pub);
    fprintf(stderr, "kvreg-replay: published");
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
        v[i] = 0;
        kvreg_publisher_stat(pub, stats[i].stat, &v[i]);
        fprintf(stderr, " %s=%llu", stats[i].name, (unsigned long long)v[i]);
    }
    fputc('\n', stderr);
    kvreg_publisher_free(pub);
    return v[4] || v[5] || v[6] ? -1 : 0; /* lost, unsent or skipped */
}
