#include "synth.h"

#include <stdio.h>
#include <stdlib.h>

/* Shape of the workload. Lengths in tokens; ranges are uniform. */
#define N_SYSTEM_PROMPTS 8
#define SYSTEM_MIN 600
#define SYSTEM_MAX 3000
#define ACTIVE_CONVERSATIONS 256 /* conversations interleaved at any time */
#define TURNS_MAX 8
#define USER_MIN 30
#define USER_MAX 600
#define ANSWER_MIN 40
#define ANSWER_MAX 700

typedef struct id_list {
    uint64_t *v;
    size_t n, cap;
} id_list;

typedef struct conversation {
    id_list full;           /* ids of the history's full blocks (prefix of every later turn) */
    uint64_t tokens;        /* history length */
    uint64_t pending_answer; /* previous turn's answer, appended before the next question */
    uint32_t turns_left;
} conversation;

typedef struct synth {
    workload base;
    synth_params p;
    uint64_t rng;
    uint64_t next_id;
    id_list system_ids[N_SYSTEM_PROMPTS];
    uint64_t system_tokens[N_SYSTEM_PROMPTS];
    conversation active[ACTIVE_CONVERSATIONS];
    size_t n_active;
    uint32_t started;
    id_list out; /* ids of the request being returned */
} synth;

/* splitmix64: tiny, deterministic everywhere, good enough to pick lengths. */
static uint64_t rnd(synth *s)
{
    uint64_t z = (s->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t uniform(synth *s, uint64_t lo, uint64_t hi)
{
    return lo + rnd(s) % (hi - lo + 1);
}

static int push(id_list *l, uint64_t id)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uint64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return 0;
}

/* Give every block that became full a fresh id: its content (the whole prefix up to it) is
 * new, because it contains this conversation's own text. */
static int complete_blocks(synth *s, id_list *full, uint64_t tokens)
{
    while (full->n < tokens / s->p.block_tokens) {
        if (push(full, s->next_id++) != 0)
            return -1;
    }
    return 0;
}

static int start_conversation(synth *s, conversation *c)
{
    /* Minimum of two draws: low-numbered system prompts are the popular ones. */
    uint64_t a = uniform(s, 0, N_SYSTEM_PROMPTS - 1), b = uniform(s, 0, N_SYSTEM_PROMPTS - 1);
    size_t sys = (size_t)(a < b ? a : b);
    size_t i;

    c->full.n = 0;
    for (i = 0; i < s->system_ids[sys].n; i++) {
        if (push(&c->full, s->system_ids[sys].v[i]) != 0)
            return -1;
    }
    c->tokens = s->system_tokens[sys];
    c->pending_answer = 0;
    c->turns_left = (uint32_t)uniform(s, 1, TURNS_MAX);
    s->started++;
    return 0;
}

static int synth_next(workload *w, replay_request *req)
{
    synth *s = (synth *)w;
    conversation *c;
    size_t slot, i;

    if (s->n_active == 0)
        return 0;
    slot = (size_t)uniform(s, 0, s->n_active - 1);
    c = &s->active[slot];

    c->tokens += c->pending_answer + uniform(s, USER_MIN, USER_MAX);
    if (complete_blocks(s, &c->full, c->tokens) != 0)
        goto oom;
    s->out.n = 0;
    for (i = 0; i < c->full.n; i++) {
        if (push(&s->out, c->full.v[i]) != 0)
            goto oom;
    }
    /* The partial last block is named too (as in Mooncake traces); its content is new. */
    if (c->tokens % s->p.block_tokens != 0 && push(&s->out, s->next_id++) != 0)
        goto oom;

    req->timestamp_ms = 0.0;
    req->input_length = c->tokens;
    req->output_length = uniform(s, ANSWER_MIN, ANSWER_MAX);
    req->ids = s->out.v;
    req->n_ids = s->out.n;
    c->pending_answer = req->output_length;

    if (--c->turns_left == 0) {
        if (s->started < s->p.conversations) {
            if (start_conversation(s, c) != 0)
                goto oom;
        } else {
            /* Retire the slot: swap the last active conversation into it. */
            conversation done = *c;
            *c = s->active[--s->n_active];
            s->active[s->n_active] = done;
        }
    }
    return 1;
oom:
    fprintf(stderr, "kvreg-replay: out of memory in the synthetic workload\n");
    return -2;
}

static double synth_progress(const workload *w)
{
    const synth *s = (const synth *)w;
    return s->p.conversations ? (double)(s->started - s->n_active) / s->p.conversations : 1.0;
}

static void synth_close(workload *w)
{
    synth *s = (synth *)w;
    size_t i;
    for (i = 0; i < N_SYSTEM_PROMPTS; i++)
        free(s->system_ids[i].v);
    for (i = 0; i < ACTIVE_CONVERSATIONS; i++)
        free(s->active[i].full.v);
    free(s->out.v);
    free(s);
}

workload *synth_open(const synth_params *p)
{
    size_t i;
    synth *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->base.next = synth_next;
    s->base.progress = synth_progress;
    s->base.close = synth_close;
    s->p = *p;
    s->rng = p->seed;
    s->base.long_input = p->conversations >= 20000;

    for (i = 0; i < N_SYSTEM_PROMPTS; i++) {
        s->system_tokens[i] = uniform(s, SYSTEM_MIN, SYSTEM_MAX);
        if (complete_blocks(s, &s->system_ids[i], s->system_tokens[i]) != 0)
            goto oom;
    }
    while (s->n_active < ACTIVE_CONVERSATIONS && s->started < p->conversations) {
        if (start_conversation(s, &s->active[s->n_active]) != 0)
            goto oom;
        s->n_active++;
    }
    return &s->base;
oom:
    fprintf(stderr, "kvreg-replay: out of memory in the synthetic workload\n");
    if (s)
        synth_close(&s->base);
    return NULL;
}
