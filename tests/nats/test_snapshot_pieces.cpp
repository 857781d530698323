// The snapshot body read in pieces (src/nats/snapshot.cpp, SnapshotLoader), as a restoring
// replica gets it chunk by chunk: every piece size, so the position (48 bytes and 32 per
// worker) and the dump after it are cut everywhere, gives the position written and the index
// dumped; a body that names another stream sequence, has another magic, is cut short or is
// abandoned half-way leaves the index empty. Version 2 checks its position itself (a changed
// byte anywhere in it is rejected, and only then may the object's digest be skipped:
// self_checked()); a version 1 body (no position checksum, written until 0.6) still loads and
// needs the digest. No server: the chunks are slices of the body.
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

// Where the position ends: 32 fixed bytes, 32 per worker, the dump's length, its checksum.
constexpr size_t kHeadLen = 32 + 9 * 32 + 8 + 8;

uint64_t get64(const std::string &b, size_t at) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) v |= uint64_t(static_cast<uint8_t>(b[at + i])) << (8 * i);
    return v;
}

void test_version_2_checks_its_position(void **) {
    Sample s;
    // The layout written: version 2, the dump's length right before the checksum.
    assert_int_equal(static_cast<uint8_t>(s.body[8]), 2);
    assert_int_equal(get64(s.body, kHeadLen - 16), s.body.size() - kHeadLen);
    {
        kvreg_index *idx = new_index();
        SnapshotLoader ld(idx, s.body.size(), 777);
        assert_true(feed_in_pieces(ld, s.body, 5, kHeadLen - 1));
        assert_false(ld.self_checked()); // the checksum not yet read
        assert_true(ld.feed(s.body.data() + kHeadLen - 1, 1));
        assert_true(ld.self_checked());
        assert_true(feed_in_pieces(ld, s.body.substr(kHeadLen), 1000, s.body.size() - kHeadLen));
        SnapPosition got;
        assert_int_equal(ld.finish(got), KVREG_OK);
        assert_true(digest(idx) == digest(s.src));
        kvreg_index_free(idx);
    }
    // Any byte of the position changed (past the magic and version, which are checked as
    // such): rejected by the checksum, nothing loaded, and not self-checked (the caller's
    // digest then names the damage).
    kvreg_index *idx = new_index();
    for (size_t at = 16; at < kHeadLen; at += 7) {
        if (at >= 24 && at < 32) continue; // the worker count: the length no longer adds up
        std::string bad = s.body;
        bad[at] = static_cast<char>(bad[at] ^ 0x10);
        SnapshotLoader ld(idx, bad.size(), 777);
        SnapPosition got;
        assert_false(feed_in_pieces(ld, bad, 64, bad.size()));
        assert_false(ld.self_checked());
        assert_int_equal(ld.finish(got), KVREG_EPROTO);
        assert_non_null(std::strstr(ld.why().c_str(), "position does not match its checksum"));
        assert_int_equal(workers(idx), 0);
    }
    {
        // Damage past the position (the dump's magic): refused by the load, as a self-checked
        // body, so a restore reads no more of it; refused before its position checked, it is
        // not (the digest must then name the damage).
        std::string bad = s.body;
        bad[kHeadLen] = 'X';
        SnapshotLoader ld(idx, bad.size(), 777);
        assert_false(feed_in_pieces(ld, bad, 400, bad.size()));
        assert_true(ld.self_checked());
        assert_true(ld.refused_self_checked());
        assert_non_null(std::strstr(ld.why().c_str(), "does not load"));
        assert_int_equal(workers(idx), 0);
        std::string bad_head = s.body;
        bad_head[40] = static_cast<char>(bad_head[40] ^ 1);
        SnapshotLoader ld2(idx, bad_head.size(), 777);
        assert_false(feed_in_pieces(ld2, bad_head, 400, bad_head.size()));
        assert_false(ld2.refused_self_checked());
    }
    {
        std::string bad = s.body;
        bad[8] = 3;
        SnapshotLoader ld(idx, bad.size(), 777);
        assert_false(feed_in_pieces(ld, bad, 64, bad.size()));
        assert_non_null(std::strstr(ld.why().c_str(), "version 3 is not 1 or 2"));
    }
    kvreg_index_free(idx);
}

void test_version_1_still_loads(void **) {
    Sample s;
    // The same body as 0.6 wrote it: version 1, no checksum after the dump's length.
    std::string v1 = s.body.substr(0, kHeadLen - 8) + s.body.substr(kHeadLen);
    v1[8] = 1;
    const size_t pieces[] = {1, 33, 4096, v1.size()};
    for (const size_t piece : pieces) {
        kvreg_index *idx = new_index();
        SnapshotLoader ld(idx, v1.size(), 777);
        assert_true(feed_in_pieces(ld, v1, piece, v1.size()));
        assert_false(ld.self_checked()); // the object's digest must check it
        assert_false(ld.refused_self_checked());
        SnapPosition got;
        assert_int_equal(ld.finish(got), KVREG_OK);
        assert_int_equal(got.workers.size(), 9);
        assert_int_equal(got.workers[8].next, s.pos.workers[8].next);
        assert_true(digest(idx) == digest(s.src));
        kvreg_index_free(idx);
    }
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pieces), cmocka_unit_test(test_rejected),
                                       cmocka_unit_test(test_version_2_checks_its_position),
                                       cmocka_unit_test(test_version_1_still_loads)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
