#include "trace.h"

#include <stdio.h>

#if REPLAY_HAVE_JANSSON

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"

typedef struct trace_reader {
    workload base;
    line_reader *in; /* plain or gzip-compressed */
    const char *path;
    int skip_bad;
    uint64_t line_no;
    uint64_t *ids;
    size_t ids_cap;
} trace_reader;

/* Progress bars only pay off on inputs that take more than a moment (a compressed file
 * holds about 4 times its size in text). */
#define LONG_TRACE_BYTES (256L * 1024L)

/* jansson parses one line at a time, so its "end of file" means the end of this line: say
 * so, or a line cut short in the middle of a file reads as if the file ended there. */
static void replace_all(char *text, size_t cap, const char *from, const char *to)
{
    char *at = text;
    while ((at = strstr(at, from)) != NULL) {
        char rest[JSON_ERROR_TEXT_LENGTH];
        snprintf(rest, sizeof rest, "%s", at + strlen(from));
        size_t step = strlen(to), left;
        snprintf(at, cap - (size_t)(at - text), "%s%s", to, rest);
        left = strlen(at); /* less than step when the buffer cut the replacement short */
        at += step < left ? step : left;
    }
}

static void say_end_of_line(char *text, size_t cap)
{
    /* "end of file expected": bytes after a complete value (the line goes on). */
    replace_all(text, cap, "end of file expected", "bytes after the JSON value");
    replace_all(text, cap, "end of file", "end of the line");
}

static void bad_line(const trace_reader *t, const char *what, const char *detail)
{
    fprintf(stderr, "kvreg-replay: %s:%llu: %s%s%s\n", t->path, (unsigned long long)t->line_no,
            what, detail ? ": " : "", detail ? detail : "");
}

/* A field that must be a non-negative JSON integer. */
static int get_count(const trace_reader *t, json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    char msg[96];
    if (!v || !json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(msg, sizeof msg, "field \"%s\" is missing or not a non-negative integer", key);
        bad_line(t, msg, NULL);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Validate one parsed line and copy it into req. Returns 0, or -1 after printing why. */
static int decode(trace_reader *t, json_t *root, replay_request *req)
{
    json_t *ts, *ids;
    size_t i, n;

    if (!json_is_object(root)) {
        bad_line(t, "expected a JSON object", NULL);
        return -1;
    }
    ts = json_object_get(root, "timestamp");
    if (!ts || !json_is_number(ts)) {
        bad_line(t, "field \"timestamp\" is missing or not a number", NULL);
        return -1;
    }
    if (get_count(t, root, "input_length", &req->input_length) != 0 ||
        get_count(t, root, "output_length", &req->output_length) != 0)
        return -1;
    ids = json_object_get(root, "hash_ids");
    if (!ids || !json_is_array(ids)) {
        bad_line(t, "field \"hash_ids\" is missing or not an array", NULL);
        return -1;
    }
    n = json_array_size(ids);
    if (n > t->ids_cap) {
        uint64_t *grown = realloc(t->ids, n * sizeof *grown);
        if (!grown) {
            bad_line(t, "out of memory for hash_ids", NULL);
            return -1;
        }
        t->ids = grown;
        t->ids_cap = n;
    }
    for (i = 0; i < n; i++) {
        json_t *id = json_array_get(ids, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0) {
            char msg[80];
            snprintf(msg, sizeof msg, "hash_ids[%zu] is not a non-negative integer", i);
            bad_line(t, msg, NULL);
            return -1;
        }
        t->ids[i] = (uint64_t)json_integer_value(id);
    }
    req->timestamp_ms = json_number_value(ts);
    req->ids = t->ids;
    req->n_ids = n;
    return 0;
}

static int trace_next(workload *w, replay_request *req)
{
    trace_reader *t = (trace_reader *)w;
    for (;;) {
        char *line;
        size_t len, k;
        json_error_t err;
        json_t *root;
        int ok, rc = lines_next(t->in, &line, &len);

        if (rc < 0)
            return -2;
        if (rc == 0)
            return 0;
        t->line_no++;
        /* Blank lines (e.g. a trailing newline pair) carry no request; they are not errors. */
        for (k = 0; k < len && strchr(" \t\r\n", line[k]) && line[k]; k++)
            ;
        if (k == len)
            continue;

        root = json_loadb(line, len, 0, &err);
        if (!root) {
            char detail[JSON_ERROR_TEXT_LENGTH + 32];
            say_end_of_line(err.text, sizeof err.text);
            snprintf(detail, sizeof detail, "%s (column %d)", err.text, err.column);
            bad_line(t, "invalid JSON", detail);
            ok = 0;
        } else {
            ok = decode(t, root, req) == 0;
            json_decref(root);
        }
        if (ok)
            return 1;
        if (!t->skip_bad)
            return -2;
        t->base.bad_lines++;
    }
}

static double trace_progress(const workload *w)
{
    const trace_reader *t = (const trace_reader *)w;
    return lines_progress(t->in);
}

static void trace_close(workload *w)
{
    trace_reader *t = (trace_reader *)w;
    lines_close(t->in);
    free(t->ids);
    free(t);
}

int trace_input_available(void)
{
    return 1;
}

workload *trace_open(const char *path, int skip_bad)
{
    trace_reader *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return NULL;
    }
    t->path = path;
    t->skip_bad = skip_bad;
    t->in = lines_open(path);
    if (!t->in) {
        free(t);
        return NULL;
    }
    t->base.next = trace_next;
    t->base.progress = trace_progress;
    t->base.close = trace_close;
    t->base.long_input = lines_size(t->in) >= LONG_TRACE_BYTES;
    return &t->base;
}

#else /* !REPLAY_HAVE_JANSSON */

int trace_input_available(void)
{
    return 0;
}

workload *trace_open(const char *path, int skip_bad)
{
    (void)skip_bad;
    fprintf(stderr,
            "kvreg-replay: cannot read %s: this build has trace input disabled "
            "(jansson was not found when it was configured; install libjansson-dev and "
            "reconfigure). Run without a trace for the built-in workload.\n",
            path);
    return NULL;
}

#endif
