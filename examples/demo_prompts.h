/*
 * demo_prompts.h: the prompts engine.c serves and router.c routes, shared so that both sides
 * see the same tokens (in a real deployment the router gets them from the request it routes).
 * Every prompt is a 4-block system prompt followed by a 2-block question; blocks are 16 tokens,
 * the block size of vLLM's default and of the index's default.
 */
#ifndef KVREG_EXAMPLES_DEMO_PROMPTS_H
#define KVREG_EXAMPLES_DEMO_PROMPTS_H

#include <stdint.h>

#define DEMO_BLOCK 16
#define DEMO_SYSTEM_BLOCKS 4
#define DEMO_QUESTION_BLOCKS 2
#define DEMO_PROMPT_BLOCKS (DEMO_SYSTEM_BLOCKS + DEMO_QUESTION_BLOCKS)
#define DEMO_PROMPT_TOKENS (DEMO_PROMPT_BLOCKS * DEMO_BLOCK)

/* Question q's prompt: the shared system prompt (tokens 1, 2, 3 ...), then q's own tokens. */
static void demo_prompt(uint32_t question, uint32_t tokens[DEMO_PROMPT_TOKENS])
{
    uint32_t i;
    for (i = 0; i < DEMO_SYSTEM_BLOCKS * DEMO_BLOCK; i++)
        tokens[i] = 1 + i;
    for (; i < DEMO_PROMPT_TOKENS; i++)
        tokens[i] = 100000 * (question + 1) + i;
}

#endif
