// The snapshot body read in pieces (src/nats/snapshot.cpp, SnapshotLoader), as a restoring
// replica gets it chunk by chunk: every piece size, so the position (40 bytes and 32 per
// worker) and the dump after it are cut everywhere, gives the position written and the index
// dumped; a body that names another stream sequence, has another magic, is cut short or is
// abandoned half-way leaves the index empty. No server: the chunks are slices of the body.
// Internal: links the static library.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cstring>
#include <string>

#include "kvreg_index.h"
#include "nats/snapshot.hpp"

extern "C" {
#include <cmocka.h> // last: its fail() macro; C linkage (cmocka 1.1's header does not say)
}

namespace {

using kvreg::nats::SnapPosition;
using kvreg::nats::SnapshotLoader;

kvreg_index *new_index() {
    kvreg_index *idx = nullptr;
    kvreg_index_config *cfg = nullptr;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

uint64_t digest(const kvreg_index *idx) {
    uint64_t d = 0;
    assert_int_equal(kvreg_index_digest(idx, &d), KVREG_OK);
    return d;
}

uint64_t workers(const kvreg_index *idx) {
    uint64_t n = 1;
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_WORKERS, &n), KVREG_OK);
    return n;
}

// Nine workers (a position of 40 + 9 x 32 bytes, more than the smallest chunk) with a few
// hundred blocks each, and the body a replica would write for them at stream sequence 777.
struct Sample {
    kvreg_index *src = nullptr;
    SnapPosition pos;
    std::string body;
    Sample() {
        src = new_index();
        uint64_t hashes[300];
        for (uint64_t w = 1; w <= 9; w++) {
            for (uint64_t i = 0; i < 300; i++) hashes[i] = 1000 * w + 3 * i;
            kvreg_wire_event ev;
            std::memset(&ev, 0, sizeof ev);
            ev.type = KVREG_WIRE_STORED;
            ev.medium = w % 2 ? KVREG_MEDIUM_GPU : KVREG_MEDIUM_CPU;
            ev.block_hashes = hashes;
            ev.n_block_hashes = 100 + 20 * w;
            assert_int_equal(kvreg_index_apply(src, w, 0, 0, &ev, 1, nullptr), KVREG_OK);
            pos.workers.push_back({w, 50 + w, w + 1, 0});
        }
        pos.stream_seq = 777;
        assert_int_equal(kvreg::nats::encode_snapshot(pos, src, body), KVREG_OK);
    }
    ~Sample() { kvreg_index_free(src); }
};

// Feeds body in pieces of `piece` bytes; false as soon as a piece is refused.
bool feed_in_pieces(SnapshotLoader &ld, const std::string &body, size_t piece, size_t upto) {
    for (size_t at = 0; at < upto; at += piece)
        if (!ld.feed(body.data() + at, std::min(piece, upto - at))) return false;
    return true;
}

void test_pieces(void **) {
    Sample s;
    const size_t pieces[] = {1, 2, 5, 31, 32, 33, 39, 41, 200, 4096, s.body.size()};
    for (const size_t piece : pieces) {
        kvreg_index *idx = new_index();
        SnapshotLoader ld(idx, s.body.size(), 777);
        assert_true(feed_in_pieces(ld, s.body, piece, s.body.size()));
        SnapPosition got;
        assert_int_equal(ld.finish(got), KVREG_OK);
        assert_int_equal(got.stream_seq, 777);
        assert_int_equal(got.workers.size(), 9);
        for (size_t i = 0; i < 9; i++) {
            assert_int_equal(got.workers[i].worker, s.pos.workers[i].worker);
            assert_int_equal(got.workers[i].instance, s.pos.workers[i].instance);
            assert_int_equal(got.workers[i].next, s.pos.workers[i].next);
        }
        assert_true(digest(idx) == digest(s.src));
        kvreg_index_free(idx);
    }
}

void test_rejected(void **) {
    Sample s;
    kvreg_index *idx = new_index();
    SnapPosition got;
    {
        // The object's info names another sequence than the body.
        SnapshotLoader ld(idx, s.body.size(), 778);
        assert_false(feed_in_pieces(ld, s.body, 7, s.body.size()));
        assert_int_equal(ld.finish(got), KVREG_EPROTO);
        assert_non_null(std::strstr(ld.why().c_str(), "different stream sequences"));
    }
    {
        std::string bad = s.body;
        bad[0] = 'X';
        SnapshotLoader ld(idx, bad.size(), 777);
        assert_false(feed_in_pieces(ld, bad, 7, bad.size()));
        assert_non_null(std::strstr(ld.why().c_str(), "magic"));
    }
    {
        // Cut short in the dump: all fed but the last 100 bytes, then finish.
        SnapshotLoader ld(idx, s.body.size(), 777);
        assert_true(feed_in_pieces(ld, s.body, 64, s.body.size() - 100));
        assert_int_equal(workers(idx), 9); // loaded as it came
        assert_int_equal(ld.finish(got), KVREG_EPROTO);
        assert_int_equal(workers(idx), 0);
    }
    {
        // Cut short in the position.
        SnapshotLoader ld(idx, s.body.size(), 777);
        assert_true(feed_in_pieces(ld, s.body, 16, 100));
        assert_int_equal(ld.finish(got), KVREG_EPROTO);
        assert_int_equal(workers(idx), 0);
    }
    {
        // The object's digest did not match: everything fed, then abandoned.
        SnapshotLoader ld(idx, s.body.size(), 777);
        assert_true(feed_in_pieces(ld, s.body, 1000, s.body.size()));
        ld.abandon();
        assert_int_equal(workers(idx), 0);
    }
    {
        // Destroyed half-way (the server went away): nothing stays.
        SnapshotLoader ld(idx, s.body.size(), 777);
        assert_true(feed_in_pieces(ld, s.body, 1000, s.body.size() / 2));
    }
    assert_int_equal(workers(idx), 0);
    kvreg_index_free(idx);
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pieces), cmocka_unit_test(test_rejected)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
