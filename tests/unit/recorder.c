#include "recorder.h"

#include <stdlib.h>
#include <string.h>

void recorder_fn(const kvreg_event *events, size_t n, void *ud) {
    recorder *r = ud;
    if (r->calls < REC_MAX) r->call_sizes[r->calls] = n;
    r->calls++;
    for (size_t i = 0; i < n && r->n < REC_MAX; i++, r->n++) {
        r->events[r->n] = events[i];
        memset(r->tokens[r->n], 0, sizeof r->tokens[r->n]);
        for (uint32_t t = 0; t < events[i].n_tokens && t < 4; t++) r->tokens[r->n][t] = events[i].tokens[t];
        r->events[r->n].tokens = NULL; /* borrowed: never keep the pointer */
    }
}

void recorder_destroy(void *ud) { ((recorder *)ud)->destroyed++; }

kvreg_registry *recorder_registry(recorder *r, int keep_tokens) {
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    if (kvreg_config_new(&cfg) != KVREG_OK) abort();
    if (kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, keep_tokens ? 1 : 0) != KVREG_OK) abort();
    if (kvreg_config_set_event_fn(cfg, recorder_fn, r, recorder_destroy) != KVREG_OK) abort();
    if (kvreg_registry_new(&reg, cfg) != KVREG_OK) abort();
    kvreg_config_free(cfg);
    return reg;
}

kvreg_registry *poll_registry(uint64_t capacity) {
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    if (kvreg_config_new(&cfg) != KVREG_OK) abort();
    if (kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL) != KVREG_OK) abort();
    if (kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, capacity) != KVREG_OK) abort();
    if (kvreg_registry_new(&reg, cfg) != KVREG_OK) abort();
    kvreg_config_free(cfg);
    return reg;
}

kvreg_block_desc seq_desc(const kvreg_sequence *seq, size_t i) {
    kvreg_block_info info;
    kvreg_block_desc d;
    const uint32_t *toks = NULL;
    size_t nt = 0;
    memset(&d, 0, sizeof d);
    if (kvreg_sequence_block(seq, i, &info) != KVREG_OK) abort();
    if (kvreg_sequence_block_tokens(seq, i, &toks, &nt) != KVREG_OK) abort();
    d.sequence_hash = info.sequence_hash;
    d.block_hash = info.block_hash;
    d.parent_sequence_hash = info.parent_sequence_hash;
    d.has_parent = info.has_parent;
    d.block_size = kvreg_sequence_block_size(seq);
    d.tokens = toks;
    d.n_tokens = nt;
    return d;
}

kvreg_block_desc hash_desc(uint64_t seq_hash, uint64_t block_hash, int has_parent, uint64_t parent) {
    kvreg_block_desc d;
    memset(&d, 0, sizeof d);
    d.sequence_hash = seq_hash;
    d.block_hash = block_hash;
    d.has_parent = has_parent ? 1u : 0u;
    d.parent_sequence_hash = parent;
    return d;
}
