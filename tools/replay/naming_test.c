/*
 * naming_test: the id -> name mapping documented in naming.h holds.
 *   1. Tokens of an id match an independent Python reimplementation of the documented
 *      formula (values pasted below; script in the comment).
 *   2. A request's chained names equal kvreg_hash_blocks over its blocks' tokens laid end
 *      to end, i.e. what an engine holding those tokens would compute.
 *   3. Equal id prefixes give equal sequence hashes; a different id changes the rest.
 *
 * Expected tokens come from (Python 3):
 *   M = 2**64 - 1
 *   def mix(z):
 *       z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
 *       z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
 *       return z ^ (z >> 31)
 *   def tokens(k, n):
 *       s, out = mix(k), []
 *       for _ in range(n):
 *           s = (s + 0x9e3779b97f4a7c15) & M
 *           out.append(mix(s) % 128000)
 *       return out
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg.h>

#include "naming.h"

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

#define BT 512

static const struct {
    uint64_t id;
    uint32_t first[4];
    uint32_t last; /* token 511 */
} expected_tokens[] = {
    {0, {47535, 51700, 57679, 126444}, 111064},
    {1, {89970, 90695, 15527, 73004}, 7083},
    {182789, {41462, 33645, 2237, 20725}, 19634},
    {UINT64_C(1099511627779), {1303, 3612, 33172, 61240}, 108564},
};

int main(void)
{
    static uint32_t tokens[3 * BT];
    const uint64_t ids[3] = {5, 9, 2}, other[3] = {5, 9, 7};
    uint64_t bh[3], sh[3], bh2[3], sh2[3];
    kvreg_block_info info[3];
    size_t i, n;
    namer nm;

    CHECK(namer_init(&nm, BT, KVREG_ROUTER_SALT) == 0);

    for (i = 0; i < sizeof expected_tokens / sizeof expected_tokens[0]; i++) {
        namer_tokens(&nm, expected_tokens[i].id, tokens);
        CHECK(memcmp(tokens, expected_tokens[i].first, sizeof expected_tokens[i].first) == 0);
        CHECK(tokens[BT - 1] == expected_tokens[i].last);
    }

    CHECK(namer_chain(&nm, ids, 3, bh, sh) == 0);
    for (i = 0; i < 3; i++)
        namer_tokens(&nm, ids[i], tokens + i * BT);
    CHECK(kvreg_hash_blocks(tokens, 3 * BT, BT, KVREG_ROUTER_SALT, info, 3, &n) == KVREG_OK);
    CHECK(n == 3);
    for (i = 0; i < 3; i++) {
        CHECK(info[i].block_hash == bh[i]);
        CHECK(info[i].sequence_hash == sh[i]);
    }

    CHECK(namer_chain(&nm, other, 3, bh2, sh2) == 0); /* ids 5 and 9 now come from the memo */
    CHECK(sh2[0] == sh[0] && sh2[1] == sh[1] && bh2[1] == bh[1]);
    CHECK(sh2[2] != sh[2]);
    CHECK(sh[1] != bh[1]); /* chained: position matters, not only content */

    namer_free(&nm);
    printf("naming: ids map to Dynamo names as documented\n");
    return 0;
}
