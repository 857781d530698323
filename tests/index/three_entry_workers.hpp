// Shared by the C++ index tests: workers 1 .. n, each holding three entries (hashes w*10 + 1,
// + 2, + 3, GPU tier) from one batch with seq `seq`, so that each expects seq + 1 next. OWN
// mode (the hashes are the index's own). Include after cmocka.h (its assertions).
#pragma once

#include <cstdint>
#include <cstring>

#include "kvreg_index.h"

inline void fill_three_entry_workers(kvreg_index *idx, uint64_t n, uint64_t seq) {
    for (uint64_t w = 1; w <= n; w++) {
        const uint64_t h[3] = {w * 10 + 1, w * 10 + 2, w * 10 + 3};
        kvreg_wire_event ev;
        std::memset(&ev, 0, sizeof ev);
        ev.type = KVREG_WIRE_STORED;
        ev.medium = KVREG_MEDIUM_GPU;
        ev.block_hashes = h;
        ev.n_block_hashes = 3;
        assert_int_equal(kvreg_index_clear_worker(idx, w, 0, seq), KVREG_OK);
        assert_int_equal(kvreg_index_apply(idx, w, 0, seq, &ev, 1, nullptr), KVREG_OK);
    }
}
