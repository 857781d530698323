#include "report.h"

#include <time.h>
#include <unistd.h>

#include <kvreg.h>

static double ratio(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* 12345678 -> "12,345,678": long counts are read, not parsed, in the text report. */
static const char *grouped(uint64_t v, char buf[32])
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    int i, o = 0;
    for (i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

/* "1 bad line", "2 bad lines": the count, grouped, and the noun in the right number. */
static const char *counted(uint64_t n, const char *one, const char *many, char buf[64])
{
    char num[32];
    snprintf(buf, 64, "%s %s", grouped(n, num), n == 1 ? one : many);
    return buf;
}

static const char *capacity(uint64_t blocks, char buf[32])
{
    if (blocks == CACHE_UNLIMITED)
        return "unlimited";
    grouped(blocks, buf);
    return buf;
}

void report_text(FILE *out, const report *r)
{
    const cache_stats *s = &r->st;
    uint64_t hit_b = s->hit_blocks_g1 + s->hit_blocks_g2;
    uint64_t hit_t = s->hit_tokens_g1 + s->hit_tokens_g2;
    char a[32], b[32], c[32], d[32], w[64];
    double secs = r->elapsed_s > 0 ? r->elapsed_s : 1e-9;
    uint64_t events = r->registers + r->removes;

    fprintf(out, "kvreg-replay (libkvreg %s)\n", kvreg_version_string());
    if (r->source)
        fprintf(out, "workload    trace %s", r->source);
    else
        fprintf(out, "workload    synthetic chats (seed %llu, %u conversations)",
                (unsigned long long)r->seed, r->conversations);
    if (r->bad_lines)
        fprintf(out, ", %s skipped", counted(r->bad_lines, "bad line", "bad lines", w));
    fprintf(out, "\n");
    fprintf(out, "            %s requests, %s blocks of %u tokens, %s prompt tokens\n",
            grouped(s->requests, a), grouped(s->blocks, b), r->cfg.block_tokens,
            grouped(s->prompt_tokens, c));
    fprintf(out, "model       G1 %s blocks, G2 %s, %u requests in flight, salt %llu\n",
            capacity(r->cfg.g1_blocks, a),
            r->cfg.g2_blocks ? capacity(r->cfg.g2_blocks, b) : "off", r->cfg.inflight,
            (unsigned long long)r->salt);
    if (r->g1_default || r->g2_default)
        fprintf(out, "            (%s: small tiers on purpose, so blocks are evicted and move\n"
                     "            between them; --g1-blocks unlimited --g2-blocks 0 shows the "
                     "maximum)\n",
                r->g1_default && r->g2_default ? "the default capacities"
                : r->g1_default ? "G1 at its default capacity" : "G2 at its default capacity");
    fprintf(out, "\nhit rate          by blocks              by tokens\n");
    fprintf(out, "  G1        %12s %6.2f%%  %14s %6.2f%%\n", grouped(s->hit_blocks_g1, a),
            100 * ratio(s->hit_blocks_g1, s->blocks), grouped(s->hit_tokens_g1, b),
            100 * ratio(s->hit_tokens_g1, s->prompt_tokens));
    fprintf(out, "  G2        %12s %6.2f%%  %14s %6.2f%%\n", grouped(s->hit_blocks_g2, a),
            100 * ratio(s->hit_blocks_g2, s->blocks), grouped(s->hit_tokens_g2, b),
            100 * ratio(s->hit_tokens_g2, s->prompt_tokens));
    fprintf(out, "  total     %12s %6.2f%%  %14s %6.2f%%\n", grouped(hit_b, a),
            100 * ratio(hit_b, s->blocks), grouped(hit_t, b), 100 * ratio(hit_t, s->prompt_tokens));
    fprintf(out, "  max       %12s %6.2f%%  %14s %6.2f%%   (every block seen before hits)\n",
            grouped(r->max_hit_blocks, a), 100 * ratio(r->max_hit_blocks, s->blocks),
            grouped(r->max_hit_tokens, b), 100 * ratio(r->max_hit_tokens, s->prompt_tokens));
    fprintf(out, "\ncache       G1 evictions %s (stored in G2 %s), G2 evictions %s, onboarded %s\n",
            grouped(s->g1_evictions, a), grouped(s->g2_stores, b), grouped(s->g2_evictions, c),
            grouped(s->onboards, d));
    if (s->early_finishes)
        fprintf(out, "            %s finished early: every G1 block was in use by a running "
                     "request,\n            so the oldest one was finished to make room\n",
                counted(s->early_finishes, "request", "requests", w));
    if (s->over_capacity)
        fprintf(out, "            %s over capacity: a request needed more blocks than G1 "
                     "holds;\n            they were registered anyway and G1 was trimmed back "
                     "when it finished\n",
                counted(s->over_capacity, "G1 block", "G1 blocks", w));
    fprintf(out, "            at the end: G1 holds %s, G2 holds %s, registry %s hashes\n",
            grouped(r->g1_size, a), grouped(r->g2_size, b), grouped(r->registry_hashes, c));
    fprintf(out, "events      Register %s, Remove %s: %s events/s, what a router fed by this "
                 "engine\n            would absorb at replay speed\n",
            grouped(r->registers, a), grouped(r->removes, b),
            grouped((uint64_t)((double)events / secs), c));
    fprintf(out, "speed       %.3f s on one thread for everything: reading the input, naming "
                 "blocks,\n            the cache model and the libkvreg calls (timestamps are "
                 "ignored):\n            %s requests/s, %s blocks/s, %s libkvreg calls/s\n",
            r->elapsed_s, grouped((uint64_t)((double)s->requests / secs), a),
            grouped((uint64_t)((double)s->blocks / secs), b),
            grouped((uint64_t)((double)s->api_calls / secs), c));
    fprintf(out, "memory      peak RSS %.1f MiB\n", (double)r->peak_rss_kib / 1024.0);
    if (r->verify)
        fprintf(out, "verify      %s at %llu checkpoints (event stream vs registry)\n",
                r->verify_ok ? "passed" : "FAILED", (unsigned long long)r->checkpoints);
    if (r->wire_format)
        fprintf(out, "wire        %llu %s payloads written%s\n",
                (unsigned long long)r->wire_batches, r->wire_format,
                r->wire_errors ? " (with errors, see above)" : "");
}

void json_string(FILE *out, const char *str)
{
    const unsigned char *p = (const unsigned char *)str;
    fputc('"', out);
    for (; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void json_capacity(FILE *out, uint64_t blocks)
{
    if (blocks == CACHE_UNLIMITED)
        fputs("null", out);
    else
        fprintf(out, "%llu", (unsigned long long)blocks);
}

void report_json(FILE *out, const report *r)
{
    const cache_stats *s = &r->st;
    uint64_t hit_b = s->hit_blocks_g1 + s->hit_blocks_g2;
    uint64_t hit_t = s->hit_tokens_g1 + s->hit_tokens_g2;
    double secs = r->elapsed_s > 0 ? r->elapsed_s : 1e-9;

#define U(x) ((unsigned long long)(x))
    fprintf(out, "{\"tool\":\"kvreg-replay\",\"libkvreg\":");
    json_string(out, kvreg_version_string());
    fprintf(out, ",\"source\":");
    if (r->source)
        json_string(out, r->source);
    else
        fputs("\"synthetic\"", out);
    if (r->source) /* seed and size only describe the synthetic workload */
        fputs(",\"seed\":null,\"conversations\":null", out);
    else
        fprintf(out, ",\"seed\":%llu,\"conversations\":%u", U(r->seed), r->conversations);
    fprintf(out, ",\"block_tokens\":%u,\"salt\":%llu,\"inflight\":%u,\"g1_capacity_blocks\":",
            r->cfg.block_tokens, U(r->salt), r->cfg.inflight);
    json_capacity(out, r->cfg.g1_blocks);
    fprintf(out, ",\"capacity_defaults\":{\"g1\":%s,\"g2\":%s}", r->g1_default ? "true" : "false",
            r->g2_default ? "true" : "false");
    fprintf(out, ",\"g2_enabled\":%s,\"g2_capacity_blocks\":", r->cfg.g2_blocks ? "true" : "false");
    if (r->cfg.g2_blocks)
        json_capacity(out, r->cfg.g2_blocks);
    else
        fputs("0", out);
    fprintf(out, ",\"requests\":%llu,\"bad_lines\":%llu,\"blocks\":%llu,\"prompt_tokens\":%llu"
                 ",\"output_tokens\":%llu,\"unique_blocks\":%llu",
            U(s->requests), U(r->bad_lines), U(s->blocks), U(s->prompt_tokens),
            U(s->output_tokens), U(r->unique_blocks));
    fprintf(out, ",\"hit_blocks\":{\"g1\":%llu,\"g2\":%llu,\"total\":%llu,\"max\":%llu}",
            U(s->hit_blocks_g1), U(s->hit_blocks_g2), U(hit_b), U(r->max_hit_blocks));
    fprintf(out, ",\"hit_tokens\":{\"g1\":%llu,\"g2\":%llu,\"total\":%llu,\"max\":%llu}",
            U(s->hit_tokens_g1), U(s->hit_tokens_g2), U(hit_t), U(r->max_hit_tokens));
    fprintf(out, ",\"hit_rate_blocks\":{\"g1\":%.6f,\"g2\":%.6f,\"total\":%.6f,\"max\":%.6f}",
            ratio(s->hit_blocks_g1, s->blocks), ratio(s->hit_blocks_g2, s->blocks),
            ratio(hit_b, s->blocks), ratio(r->max_hit_blocks, s->blocks));
    fprintf(out, ",\"hit_rate_tokens\":{\"g1\":%.6f,\"g2\":%.6f,\"total\":%.6f,\"max\":%.6f}",
            ratio(s->hit_tokens_g1, s->prompt_tokens), ratio(s->hit_tokens_g2, s->prompt_tokens),
            ratio(hit_t, s->prompt_tokens), ratio(r->max_hit_tokens, s->prompt_tokens));
    fprintf(out, ",\"g1_evictions\":%llu,\"g2_stores\":%llu,\"g2_evictions\":%llu,\"onboards\":%llu"
                 ",\"early_finishes\":%llu,\"over_capacity\":%llu",
            U(s->g1_evictions), U(s->g2_stores), U(s->g2_evictions), U(s->onboards),
            U(s->early_finishes), U(s->over_capacity));
    fprintf(out, ",\"events\":{\"register\":%llu,\"remove\":%llu}", U(r->registers), U(r->removes));
    fprintf(out, ",\"final\":{\"g1_blocks\":%llu,\"g2_blocks\":%llu,\"registry_hashes\":%llu}",
            U(r->g1_size), U(r->g2_size), U(r->registry_hashes));
    fprintf(out, ",\"verify\":{\"enabled\":%s,\"ok\":%s,\"checkpoints\":%llu}",
            r->verify ? "true" : "false", r->verify ? (r->verify_ok ? "true" : "false") : "null",
            U(r->checkpoints));
    if (r->wire_format) {
        fputs(",\"wire\":{\"format\":", out);
        json_string(out, r->wire_format);
        fprintf(out, ",\"batches\":%llu,\"errors\":%llu}", U(r->wire_batches), U(r->wire_errors));
    } else {
        fputs(",\"wire\":null", out);
    }
    fprintf(out, ",\"api_calls\":%llu,\"elapsed_s\":%.6f,\"requests_per_s\":%.1f"
                 ",\"blocks_per_s\":%.1f,\"api_calls_per_s\":%.1f,\"events_per_s\":%.1f"
                 ",\"peak_rss_kib\":%ld}\n",
            U(s->api_calls), r->elapsed_s, (double)s->requests / secs, (double)s->blocks / secs,
            (double)s->api_calls / secs, (double)(r->registers + r->removes) / secs,
            r->peak_rss_kib);
#undef U
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_start(progress *p, int long_input)
{
    p->enabled = long_input && isatty(STDERR_FILENO);
    p->shown_permille = -1000; /* nothing drawn yet */
    p->started_s = mono_s();
}

void progress_update(progress *p, double fraction)
{
    progress_tick(p, fraction, 0);
}

void progress_tick(progress *p, double fraction, uint64_t requests)
{
    enum { WIDTH = 30 };
    char bar[WIDTH + 1], count[32], left[32] = "";
    int permille, i, filled;
    double spent;
    if (!p->enabled)
        return;
    if (fraction < 0)
        fraction = 0;
    if (fraction > 1)
        fraction = 1;
    permille = (int)(fraction * 1000);
    if (permille / 5 == p->shown_permille / 5) /* redraw every half percent at most */
        return;
    p->shown_permille = permille;
    filled = permille * WIDTH / 1000;
    for (i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    spent = mono_s() - p->started_s;
    if (fraction > 0.01 && spent > 0) {
        double rest = spent * (1 - fraction) / fraction;
        snprintf(left, sizeof left, ", %d:%02d left", (int)rest / 60, (int)rest % 60);
    }
    if (requests)
        fprintf(stderr, "\r[%s] %5.1f%%  %s requests, %s/s%s   ", bar, permille / 10.0,
                grouped(requests, count), spent > 0 ? grouped((uint64_t)((double)requests / spent),
                                                               (char[32]){0}) : "-", left);
    else
        fprintf(stderr, "\r[%s] %5.1f%%%s   ", bar, permille / 10.0, left);
    fflush(stderr);
}

void progress_finish(progress *p)
{
    if (p->enabled && p->shown_permille >= 0)
        fprintf(stderr, "\r%79s\r", "");
}
