/* An out-of-tree program built only from what `meson install` put in place (kvreg.pc, the
 * headers, the library): hashes the seed vector, registers its blocks and checks the events.
 * Expected values: tests/vectors/public.json, case "seed vector from registry.rs". */
#include <kvreg.h>

#include <stdio.h>

static unsigned n_events;
static uint64_t last_seq;

static void on_events(const kvreg_event *ev, size_t n, void *ud)
{
    (void)ud;
    n_events += (unsigned)n;
    last_seq = ev[n - 1].sequence_hash;
}

int main(void)
{
    const uint32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    kvreg_block_info info[2];
    size_t n = 0;
    kvreg_registry *reg = NULL;
    kvreg_config *cfg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_sequence *seq = NULL;
    kvreg_block out[2];
    if (kvreg_version_number() != KVREG_VERSION_NUMBER) {
        printf("runtime version %s, header %s\n", kvreg_version_string(), KVREG_VERSION_STRING);
        return 1;
    }
    if (kvreg_hash_blocks(tokens, 10, 4, KVREG_ROUTER_SALT, info, 2, &n) != KVREG_OK || n != 2 ||
        info[0].sequence_hash != UINT64_C(14643705804678351452) ||
        info[1].sequence_hash != UINT64_C(4945711292740353085)) {
        printf("hashes differ from the vectors\n");
        return 1;
    }
    if (kvreg_config_new(&cfg) || kvreg_config_set_event_fn(cfg, on_events, NULL, NULL) ||
        kvreg_registry_new(&reg, cfg) || kvreg_pool_new(&pool, reg, "gpu") ||
        kvreg_sequence_new(&seq, 4, KVREG_ROUTER_SALT) ||
        kvreg_sequence_extend(seq, tokens, 10, NULL) ||
        kvreg_pool_register_sequence(pool, seq, 0, 2, out, NULL, &n) || n != 2) {
        printf("registering failed\n");
        return 1;
    }
    kvreg_config_free(cfg);
    kvreg_sequence_free(seq);
    if (n_events != 2 || last_seq != UINT64_C(4945711292740353085)) {
        printf("events: %u, last hash %llu\n", n_events, (unsigned long long)last_seq);
        return 1;
    }
    kvreg_registry_free(reg);
    printf("installed libkvreg %s works\n", kvreg_version_string());
    return 0;
}
