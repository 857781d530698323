/*
 * kvreg-events: command-line tools for KV-cache event streams (vLLM KVEventBatch, SGLang,
 * Dynamo RouterEvent). Subcommands are listed in one table; each lives in its own file.
 */
#include <stdio.h>
#include <string.h>

#include <kvreg.h>

#include "commands.h"

static const events_command commands[] = {
    {"decode", "decode payload files (vLLM, SGLang, Dynamo) to JSON lines", events_decode},
    {"sub", "subscribe to ZeroMQ publishers (libkvreg, vLLM, SGLang), JSON lines", events_sub},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: kvreg-events COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`kvreg-events COMMAND --help` describes one command.\n"
               "Exit status: 0 success, 1 input rejected, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EVENTS_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return EVENTS_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("kvreg-events (libkvreg %s)\n", kvreg_version_string());
        return EVENTS_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kvreg-events: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EVENTS_EXIT_USAGE;
}
