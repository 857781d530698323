#include "cluster_report.h"

#include "nats_cluster.h"

static void nats_json(FILE *out, const nats_cluster_stats *n);

#include <stdlib.h>
#include <string.h>

static double ratio(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values, in microseconds. */
static double pct_us(const double *sorted, uint64_t n, double p)
{
    uint64_t k;
    if (!n)
        return 0.0;
    k = (uint64_t)(p * (double)n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return sorted[k - 1] / 1000.0;
}

typedef struct derived {
    double imbalance, hit, shared_hit, p50, p99, mean_us, applied_per_s;
} derived;

static derived derive(const report *r, cluster_report *c)
{
    derived d;
    uint64_t max = 0, sum = 0, i;
    double total_ns = 0;
    memset(&d, 0, sizeof d);
    for (i = 0; i < c->workers; i++) {
        sum += c->requests_per_worker[i];
        if (c->requests_per_worker[i] > max)
            max = c->requests_per_worker[i];
    }
    d.imbalance = sum ? (double)max / ((double)sum / c->workers) : 0.0;
    d.hit = ratio(r->st.hit_blocks_g1 + r->st.hit_blocks_g2, r->st.blocks);
    d.shared_hit = ratio(c->shared.hit_blocks_g1 + c->shared.hit_blocks_g2, c->shared.blocks);
    qsort(c->query_ns, c->n_queries, sizeof *c->query_ns, by_value);
    for (i = 0; i < c->n_queries; i++)
        total_ns += c->query_ns[i];
    d.p50 = pct_us(c->query_ns, c->n_queries, 0.50);
    d.p99 = pct_us(c->query_ns, c->n_queries, 0.99);
    d.mean_us = c->n_queries ? total_ns / (double)c->n_queries / 1000.0 : 0.0;
    d.applied_per_s = c->feed.apply_s > 0 ? (double)c->feed.wire_events / c->feed.apply_s : 0.0;
    return d;
}

static void json(FILE *out, const report *r, cluster_report *c, const derived *d)
{
    char *buf = NULL;
    size_t len = 0, i;
    FILE *mem = open_memstream(&buf, &len);
#define U(x) ((unsigned long long)(x))
    /* the single-engine object with the cluster's totals, its closing brace replaced */
    if (mem) {
        report_json(mem, r);
        fclose(mem);
    }
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    if (len > 0 && buf[len - 1] == '}')
        len--;
    fwrite(buf, 1, len, out);
    free(buf);
    fprintf(out, ",\"cluster\":{\"workers\":%u,\"router\":\"%s\",\"transport\":\"%s\"",
            c->workers, c->router, c->transport);
    fprintf(out, ",\"requests_per_worker\":[");
    for (i = 0; i < c->workers; i++)
        fprintf(out, "%s%llu", i ? "," : "", U(c->requests_per_worker[i]));
    fprintf(out, "],\"load_imbalance\":%.6f", d->imbalance);
    fprintf(out, ",\"hit_rate_blocks\":{\"g1\":%.6f,\"g2\":%.6f,\"total\":%.6f}",
            ratio(r->st.hit_blocks_g1, r->st.blocks), ratio(r->st.hit_blocks_g2, r->st.blocks), d->hit);
    fprintf(out, ",\"shared_cache\":{\"g1_capacity_blocks\":");
    if (c->shared_g1 == CACHE_UNLIMITED)
        fputs("null", out);
    else
        fprintf(out, "%llu", U(c->shared_g1));
    fprintf(out, ",\"g2_capacity_blocks\":");
    if (c->shared_g2 == CACHE_UNLIMITED)
        fputs("null", out);
    else
        fprintf(out, "%llu", U(c->shared_g2));
    fprintf(out, ",\"inflight\":%u,\"hit_blocks\":{\"g1\":%llu,\"g2\":%llu}"
                 ",\"hit_rate_blocks\":{\"g1\":%.6f,\"g2\":%.6f,\"total\":%.6f}}",
            r->cfg.inflight * c->workers, U(c->shared.hit_blocks_g1), U(c->shared.hit_blocks_g2),
            ratio(c->shared.hit_blocks_g1, c->shared.blocks),
            ratio(c->shared.hit_blocks_g2, c->shared.blocks), d->shared_hit);
    fprintf(out, ",\"hit_rate_lost_vs_shared\":%.6f", d->shared_hit - d->hit);
    fprintf(out, ",\"index\":{\"agrees_with_workers\":%s,\"entries\":%llu,\"workers\":%llu,\"memory_bytes\":%llu"
                 ",\"bytes_per_entry\":%llu}",
            c->index_agrees ? "true" : "false", U(c->index_entries), U(c->index_workers), U(c->index_memory),
            U(c->index_bytes_per_entry));
    fprintf(out, ",\"query_latency_us\":{\"count\":%llu,\"p50\":%.3f,\"p99\":%.3f,\"mean\":%.3f}",
            U(c->n_queries), d->p50, d->p99, d->mean_us);
    fprintf(out, ",\"feed\":{\"registry_events\":%llu,\"payloads\":%llu,\"payload_bytes\":%llu"
                 ",\"wire_events\":%llu,\"flagged_batches\":%llu,\"encode_s\":%.6f"
                 ",\"decode_s\":%.6f,\"apply_s\":%.6f,\"events_applied_per_s\":%.1f"
                 ",\"registry_events_per_s\":%.1f}",
            U(c->feed.events), U(c->feed.payloads), U(c->feed.payload_bytes),
            U(c->feed.wire_events), U(c->feed.flagged), c->feed.encode_s, c->feed.decode_s,
            c->feed.apply_s, d->applied_per_s,
            r->elapsed_s > 0 ? (double)c->feed.events / r->elapsed_s : 0.0);
    if (c->zmq)
        fprintf(out, ",\"zmq\":{\"publishers\":%u,\"batches_received\":%llu"
                     ",\"batches_replayed\":%llu,\"gaps\":%llu,\"probes\":%llu,\"syncs\":%llu}",
                c->zmq->publishers, U(c->zmq->batches), U(c->zmq->replayed), U(c->zmq->gaps),
                U(c->zmq->probes), U(c->zmq->syncs));
    if (c->nats)
        nats_json(out, c->nats);
    fputs("}}\n", out);
#undef U
}

/* --transport nats: the replicas' digests and the routing against the in-process run. */
static void nats_json(FILE *out, const nats_cluster_stats *n)
{
    uint32_t k;
#define U(x) ((unsigned long long)(x))
    fprintf(out, ",\"nats\":{\"own_server\":%s,\"stream\":\"%s\",\"routers\":%u,"
                 "\"publishers\":%u,\"batches_published\":%llu,\"batches_acked\":%llu,"
                 "\"publish_retries\":%llu,\"publish_duplicates\":%llu,\"messages\":%llu,"
                 "\"batches_applied\":%llu,\"syncs\":%llu,\"digests\":[",
            n->own_server ? "true" : "false", n->stream, n->routers, n->publishers,
            U(n->batches_published), U(n->batches_acked), U(n->publish_retries),
            U(n->publish_duplicates), U(n->messages), U(n->batches_applied), U(n->syncs));
    for (k = 0; k < n->routers; k++)
        fprintf(out, "%s\"%016llx\"", k ? "," : "", U(n->digest[k]));
    fprintf(out, "],\"digests_equal\":%s,\"requests_compared\":%llu,\"routing_differs\":%llu",
            n->digests_equal ? "true" : "false", U(n->compared), U(n->routing_differs));
    if (n->killed >= 0)
        fprintf(out, ",\"kill_router\":{\"replica\":%d,\"killed_at_request\":%llu,"
                     "\"restored_at_request\":%llu,\"restored_from\":\"%s\","
                     "\"snapshot_stream_seq\":%llu,\"restore_s\":%.6f,\"restore_batches\":%llu,"
                     "\"digest_equal\":%s}",
                n->killed, U(n->kill_at), U(n->restore_at), n->restored ? "snapshot" : "stream",
                U(n->snapshot_seq), n->restore_s, U(n->restore_batches),
                n->restore_digest_equal ? "true" : "false");
    fputc('}', out);
#undef U
}

static void text(FILE *out, const report *r, cluster_report *c, const derived *d)
{
    uint32_t i;
    report_text(out, r);
    fprintf(out, "\ncluster     %u workers, router %s, transport %s (summed above; G1/G2 sizes "
                 "are per worker)\n", c->workers, c->router, c->transport);
    fprintf(out, "  requests per worker");
    for (i = 0; i < c->workers; i++)
        fprintf(out, " %llu", (unsigned long long)c->requests_per_worker[i]);
    fprintf(out, "\n  load imbalance (max / mean requests)  %.3f\n", d->imbalance);
    fprintf(out, "  hit rate  cluster %6.2f%% (G1 %.2f%%, G2 %.2f%%)   one shared cache of the "
                 "same total size %6.2f%%   lost %.2f points\n",
            100 * d->hit, 100 * ratio(r->st.hit_blocks_g1, r->st.blocks),
            100 * ratio(r->st.hit_blocks_g2, r->st.blocks), 100 * d->shared_hit,
            100 * (d->shared_hit - d->hit));
    fprintf(out, "  index     %llu entries for %llu workers, %.1f MiB (%llu bytes per entry), %s\n",
            (unsigned long long)c->index_entries, (unsigned long long)c->index_workers,
            (double)c->index_memory / (1024.0 * 1024.0),
            (unsigned long long)c->index_bytes_per_entry,
            c->index_agrees ? "equal to the workers' tiers" : "DIFFERS from the workers' tiers");
    fprintf(out, "  queries   %llu, latency p50 %.2f us, p99 %.2f us\n",
            (unsigned long long)c->n_queries, d->p50, d->p99);
    fprintf(out, "  events    %llu registry events in %llu vLLM payloads",
            (unsigned long long)c->feed.events, (unsigned long long)c->feed.payloads);
    if (!c->zmq) /* the subscriber hands over decoded batches, not their size */
        fprintf(out, " (%llu bytes)", (unsigned long long)c->feed.payload_bytes);
    fprintf(out, ", %llu decoded events applied at %.0f/s\n",
            (unsigned long long)c->feed.wire_events, d->applied_per_s);
    if (c->zmq)
        fprintf(out, "  zmq       %u publishers on 127.0.0.1 (a G1 and a G2 stream per worker), "
                     "%llu batches received (%llu replayed, %llu gaps), the index caught up "
                     "%llu times\n",
                c->zmq->publishers, (unsigned long long)c->zmq->batches,
                (unsigned long long)c->zmq->replayed, (unsigned long long)c->zmq->gaps,
                (unsigned long long)c->zmq->syncs);
    if (c->nats) {
        const nats_cluster_stats *n = c->nats;
        fprintf(out, "  nats      %u publishers into stream %s on %s%s, %llu batches; %u router "
                     "replicas, digests %s (replica 0: %016llx); %llu of %llu requests routed "
                     "otherwise than in-process\n",
                n->publishers, n->stream, n->url, n->own_server ? " (started here)" : "",
                (unsigned long long)n->batches_published, n->routers,
                n->digests_equal ? "equal" : "DIFFER", (unsigned long long)n->digest[0],
                (unsigned long long)n->routing_differs, (unsigned long long)n->compared);
        if (n->killed >= 0)
            fprintf(out, "  kill      replica %d killed at request %llu, restored from %s at "
                         "request %llu (then %llu batches; %.3f s), digest %s\n",
                    n->killed, (unsigned long long)n->kill_at,
                    n->restored ? "replica 0's snapshot" : "the stream",
                    (unsigned long long)n->restore_at,
                    (unsigned long long)n->restore_batches, n->restore_s,
                    n->restore_digest_equal ? "equal" : "DIFFERENT");
    }
}

void cluster_report_print(FILE *out, int json_out, const report *r, cluster_report *c)
{
    derived d = derive(r, c);
    if (json_out)
        json(out, r, c, &d);
    else
        text(out, r, c, &d);
}
