#include "nats_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nats_cluster.h"

const char nats_usage[] =
"  --transport nats          through NATS JetStream: a publisher per worker into one stream,\n"
"                            read by --routers replicas, each into its own index; checks\n"
"                            that every replica reaches the same digest and routes as the\n"
"                            in-process run (exit status 1 otherwise)\n"
"  --routers R               router replicas for --transport nats (default 1)\n"
"  --nats-url URL            the server to use (default: start nats-server, found in PATH,\n"
"                            /usr/sbin or /usr/local/sbin, on 127.0.0.1 with a temporary\n"
"                            store removed at exit)\n"
"  --kill-router             kill the last replica a third into the run (replica 0 writes a\n"
"                            snapshot then) and restore it from the snapshot and the stream\n"
"                            after it at two thirds, then check it again\n"
"  --corrupt-restored        testing aid: the restored replica then drops worker 0's blocks,\n"
"                            so the digest and index checks must fail (exit status 1)\n";

int nats_is_option(const char *name, int *takes_value)
{
    if (strcmp(name, "--kill-router") == 0 || strcmp(name, "--corrupt-restored") == 0) {
        *takes_value = 0;
        return 1;
    }
    *takes_value = 1;
    return strcmp(name, "--routers") == 0 || strcmp(name, "--nats-url") == 0;
}

int nats_set_option(nats_options *n, const char *name, const char *val)
{
    n->given = 1;
    if (strcmp(name, "--kill-router") == 0) {
        n->kill_router = 1;
    } else if (strcmp(name, "--corrupt-restored") == 0) {
        n->corrupt_restored = 1;
    } else if (strcmp(name, "--nats-url") == 0) {
        if (!*val) {
            fprintf(stderr, "kvreg-replay: --nats-url: empty\n");
            return -1;
        }
        n->url = val;
    } else {
        char *end;
        unsigned long long v;
        errno = 0;
        v = strtoull(val, &end, 10);
        if (val[0] < '0' || val[0] > '9' || *end || errno || v < 1 ||
            v > NATS_CLUSTER_MAX_ROUTERS) {
            fprintf(stderr, "kvreg-replay: --routers: expected a whole number from 1 to %d, "
                            "got '%s'\n", NATS_CLUSTER_MAX_ROUTERS, val);
            return -1;
        }
        n->routers = (uint32_t)v;
    }
    return 0;
}
