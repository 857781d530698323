/*
 * kvreg-events subcommands. Each takes the arguments after its name and returns the process
 * exit status: 0 success, 1 some input was rejected or a library call failed, 2 bad usage.
 */
#ifndef KVREG_EVENTS_COMMANDS_H
#define KVREG_EVENTS_COMMANDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EVENTS_EXIT_OK 0
#define EVENTS_EXIT_REJECTED 1
#define EVENTS_EXIT_USAGE 2

typedef struct events_command {
    const char *name;
    const char *summary; /* one line for `kvreg-events --help` */
    int (*run)(int argc, char **argv);
} events_command;

/* decode.c: payload files to one JSON object per event per line. */
int events_decode(int argc, char **argv);

/* sub.c: subscribe to ZeroMQ publishers, print their events as JSON lines. */
int events_sub(int argc, char **argv);

/* sub_nats.c: sub --nats URL: a JetStream stream's batches as JSON lines. format NULL: vllm
 * for messages without a Kvreg-Batch header. timeout_s < 0: none. */
int events_sub_nats(const char *url, const char *stream, const char *subject,
                    unsigned long long count, double timeout_s, const char *format);
void events_sub_nats_usage(FILE *f);

struct kvreg_wire_event;
struct kvreg_wire_decoder;
/* decode.c: one decoded event as one JSON line; head (may be NULL) is written right after
 * the opening brace (extra members ending with a comma). */
void events_print_event(const struct kvreg_wire_event *e, int dynamo, const char *head);
/* decode.c: the n events dec just decoded (ev), one JSON line each; format: the KVREG_WIRE_*
 * it decoded them as; all: --all-fields (the kvreg_wire_event_ext fields too). */
void events_print_events(const struct kvreg_wire_decoder *dec, const struct kvreg_wire_event *ev,
                         size_t n, uint32_t format, int all);
/* decode.c: the bytes s[0..len) as JSON string text (with the quotes when quoted): valid UTF-8
 * as is, each invalid sequence as \ufffd, '"' and '\\' escaped, control characters (C0, C1),
 * DEL, NUL, U+2028 and U+2029 as \uXXXX. Every string the tool prints goes through it. */
void events_json_write(FILE *f, const char *s, size_t len, int quoted);

#endif
