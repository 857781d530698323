// The index when memory runs out (every allocation through operator new made to fail from a
// chosen point): removing a worker still removes it (its slot is then never reused), and a
// load that fails part-way leaves the index empty and usable. Both used to go wrong: a remove
// returned KVREG_ENOMEM after it had dropped the worker from the directory (the worker count
// then never came back to 0, and every later load returned KVREG_ESTATE), and a load's undo,
// which cannot fail, ended the process (std::terminate) when a remove inside it threw.
#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "kvreg_index.h"

extern "C" {
#include <cmocka.h> // last: its fail() macro; C linkage (cmocka 1.1's header does not say)
}

#include "three_entry_workers.hpp"

namespace {
std::atomic<long> g_allow{-1}; // allocations left before they fail; -1: never fail
} // namespace

void *operator new(size_t n) {
    const long left = g_allow.load();
    if (left == 0) throw std::bad_alloc();
    if (left > 0) g_allow.store(left - 1);
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void *operator new[](size_t n) { return operator new(n); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }

namespace {

kvreg_index *new_index() {
    kvreg_index *idx = nullptr;
    kvreg_index_config *cfg = nullptr;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, 4), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

uint64_t stat(const kvreg_index *idx, uint32_t which) {
    uint64_t v = 0;
    assert_int_equal(kvreg_index_stat(idx, which, &v), KVREG_OK);
    return v;
}

// n workers, each with next seq 5 and three entries.
void fill(kvreg_index *idx, uint64_t n) { fill_three_entry_workers(idx, n, 4); }

void test_remove_without_memory(void **) {
    kvreg_index *idx = new_index();
    fill(idx, 300); // enough removals that the free list must grow while allocations fail
    for (uint64_t w = 1; w <= 300; w++) {
        g_allow.store(0);
        const int rc = kvreg_index_remove_worker(idx, w, 0);
        g_allow.store(-1);
        assert_int_equal(rc, KVREG_OK);
    }
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_WORKERS), 0);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), 0);
    // Usable: a dump loads into it.
    kvreg_index *src = new_index();
    fill(src, 3);
    void *d = nullptr;
    size_t len = 0;
    assert_int_equal(kvreg_index_dump_alloc(src, &d, &len), KVREG_OK);
    assert_int_equal(kvreg_index_load(idx, d, len), KVREG_OK);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_WORKERS), 3);
    std::free(d);
    kvreg_index_free(src);
    kvreg_index_free(idx);
}

void test_load_without_memory(void **) {
    kvreg_index *src = new_index();
    fill(src, 1000);
    void *d = nullptr;
    size_t len = 0;
    assert_int_equal(kvreg_index_dump_alloc(src, &d, &len), KVREG_OK);
    uint64_t digest = 0;
    assert_int_equal(kvreg_index_digest(src, &digest), KVREG_OK);
    // Fail after more and more allocations: every point of the load fails once.
    size_t failed = 0;
    for (long allow = 0; allow < 4000; allow += 31) {
        kvreg_index *idx = new_index();
        g_allow.store(allow);
        const int rc = kvreg_index_load(idx, d, len);
        g_allow.store(-1);
        if (rc != KVREG_OK) {
            assert_int_equal(rc, KVREG_ENOMEM);
            failed++;
            assert_int_equal(stat(idx, KVREG_INDEX_STAT_WORKERS), 0);
            assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), 0);
            assert_int_equal(kvreg_index_load(idx, d, len), KVREG_OK); // and usable
        }
        uint64_t got = 0;
        assert_int_equal(kvreg_index_digest(idx, &got), KVREG_OK);
        assert_true(got == digest);
        kvreg_index_free(idx);
    }
    assert_true(failed > 0);
    std::free(d);
    kvreg_index_free(src);
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_without_memory),
        cmocka_unit_test(test_load_without_memory),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
