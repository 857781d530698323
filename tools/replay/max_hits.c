#include "max_hits.h"

int count_max_hits(hmap *seen, const replay_request *req, uint32_t block_tokens, report *r)
{
    size_t i;
    for (i = 0; i < req->n_ids; i++) {
        int inserted;
        if (hmap_put(seen, req->ids[i], 1, &inserted) != 0)
            return -1;
        if (!inserted) {
            r->max_hit_blocks++;
            r->max_hit_tokens += request_block_tokens(req, i, block_tokens);
        }
    }
    return 0;
}
