/*
 * synth: the built-in workload kvreg-replay runs when it is given no trace. Deterministic
 * multi-turn chats: a few shared system prompts (popular ones more often), each conversation
 * re-sending its whole history every turn, several conversations interleaved. So prefixes are
 * reused both across conversations (system prompts) and within one (earlier turns).
 * It produces Mooncake-style requests (prefix-chained block ids), exactly as a trace would.
 */
#ifndef KVREG_REPLAY_SYNTH_H
#define KVREG_REPLAY_SYNTH_H

#include "workload.h"

typedef struct synth_params {
    uint64_t seed;          /* same seed, same workload, on every machine */
    uint32_t conversations; /* total conversations started */
    uint32_t block_tokens;  /* tokens per block id */
} synth_params;

#define SYNTH_DEFAULT_SEED 42u
#define SYNTH_DEFAULT_CONVERSATIONS 5000u

/* NULL when memory runs out (message printed). */
workload *synth_open(const synth_params *p);

#endif
