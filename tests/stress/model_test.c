/* Model-based test: long random single-threaded operation sequences, every call checked
 * against the reference model in kvh_*.c (return codes, outputs, queries, stats, exact events).
 *
 * Usage: kvreg-model-test [seed [ops]]  replays one seed (printed on failure).
 * Env:   KVREG_MODEL_SEEDS (default 150), KVREG_MODEL_OPS per seed (default 3000). */
#include <stdio.h>
#include <stdlib.h>

#include "kvh.h"

static unsigned long env_or(const char *name, unsigned long def)
{
    const char *v = getenv(name);
    return v && *v ? strtoul(v, NULL, 10) : def;
}

static void run(unsigned long seed, unsigned long ops, unsigned long long *n_ops,
                unsigned long long *n_events)
{
    char ctx[64];
    kvh_src src = {0};
    src.rng = seed;
    snprintf(ctx, sizeof ctx, "model seed=%lu ops=%lu", seed, ops);
    kvh *h = kvh_new(&src, ctx);
    for (unsigned long i = 0; h && i < ops; i++)
        kvh_step(h);
    if (h) {
        *n_ops += kvh_ops(h);
        *n_events += kvh_events(h);
        kvh_free(h);
    }
}

int main(int argc, char **argv)
{
    unsigned long long n_ops = 0, n_events = 0;
    unsigned long seeds = env_or("KVREG_MODEL_SEEDS", 150);
    unsigned long ops = env_or("KVREG_MODEL_OPS", 3000);
    if (argc > 1) {
        if (argc > 2)
            ops = strtoul(argv[2], NULL, 10);
        run(strtoul(argv[1], NULL, 10), ops, &n_ops, &n_events);
    } else {
        for (unsigned long seed = 1; seed <= seeds; seed++)
            run(seed, ops, &n_ops, &n_events);
    }
    printf("model: %llu operations and %llu events checked against the model\n", n_ops, n_events);
    return 0;
}
