// TokenStore (src/core/token_store.hpp), KVREG_OPT_KEEP_TOKENS' storage, internal:
//   * size classes: exact up to 512 words, then eighths of each power of two; the rooms below
//     are worked out by hand from that rule, the properties checked over every size to 2^20
//     and at the edges up to 2^32 words;
//   * a random workload of stores and releases of mixed counts (the common block sizes, any
//     count up to 3,000, and a few bigger than a chunk) against a model: every live copy
//     reads back what was stored, and bytes() is the model's sum;
//   * what stays held after one block of each of 5,000 counts is stored and released, twice:
//     at most each class's room (about 0.8 MB), where one free list per exact count held a
//     copy of every count (50 MB; 1.1 GB for 20,000 counts), none of it live.
// Links the static library.
#include <csetjmp>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "core/token_store.hpp"

extern "C" {
#include <cmocka.h> // last: its fail() macro; C linkage (cmocka 1.1's header does not say)
}

namespace {

using kvreg::TokenStore;

void test_size_classes(void **) {
    // By hand: exact to 512; 513..1024 in steps of 64; 1025..2048 in steps of 128; ...
    const struct {
        uint64_t words, room;
    } cases[] = {{1, 1}, {2, 2}, {17, 17}, {511, 511}, {512, 512}, {513, 576}, {576, 576},
                 {577, 640}, {1024, 1024}, {1025, 1152}, {2048, 2048}, {2049, 2304},
                 {65537, 73728}, {uint64_t{1} << 32, uint64_t{1} << 32}};
    for (const auto &c : cases) assert_int_equal(TokenStore::size_class(c.words).room, c.room);
    assert_int_equal(TokenStore::size_class(1).index, 1);
    assert_int_equal(TokenStore::size_class(513).index, 513);
    assert_int_equal(TokenStore::size_class(uint64_t{1} << 32).index, TokenStore::kClasses - 1);
    // Every size to 2^20 and the largest ones: room fits, wastes at most an eighth, one room
    // per class, classes ascending and contiguous.
    std::map<uint32_t, uint64_t> room_of;
    uint32_t last = 0;
    const auto check = [&](uint64_t w) {
        const TokenStore::SizeClass c = TokenStore::size_class(w);
        assert_true(c.room >= w);
        assert_true((c.room - w) * 8 <= c.room);
        assert_true(c.index < TokenStore::kClasses);
        assert_true(c.index == last || c.index == last + 1);
        last = c.index;
        const auto [it, fresh] = room_of.emplace(c.index, c.room);
        assert_true(fresh || it->second == c.room);
    };
    for (uint64_t w = 1; w <= (uint64_t{1} << 20); w++) check(w);
    last = TokenStore::size_class((uint64_t{1} << 32) - 5).index;
    for (uint64_t w = (uint64_t{1} << 32) - 5; w <= (uint64_t{1} << 32); w++) check(w);
}

void test_random_against_model(void **) {
    TokenStore st;
    std::mt19937_64 r(7);
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> live; // ref, tokens
    uint64_t bytes = 0;
    for (int step = 0; step < 20000; step++) {
        if (live.empty() || r() % 3 != 0) {
            uint32_t n;
            switch (r() % 8) {
            case 0: n = static_cast<uint32_t>(r() % 3001); break;
            case 1: n = r() % 50 == 0 ? 70000 + static_cast<uint32_t>(r() % 9000) : 64; break;
            case 2: n = 32; break;
            default: n = 16; break;
            }
            std::vector<uint32_t> t(n);
            for (auto &x : t) x = static_cast<uint32_t>(r());
            live.emplace_back(st.store(t.data(), n), std::move(t));
            bytes += uint64_t{n} * 4;
        } else {
            const size_t i = r() % live.size();
            st.release(live[i].first);
            bytes -= live[i].second.size() * 4;
            live[i] = std::move(live.back());
            live.pop_back();
        }
        assert_int_equal(st.bytes(), bytes);
        if (step % 500 == 0)
            for (const auto &[ref, t] : live) {
                assert_int_equal(st.size(ref), t.size());
                for (size_t k = 0; k < t.size(); k++) assert_int_equal(st.tokens(ref)[k], t[k]);
            }
    }
}

void test_held_after_many_counts(void **) {
    TokenStore st;
    std::vector<uint32_t> t(5001, 9);
    for (int round = 0; round < 2; round++)
        for (uint32_t n = 1; n <= 5000; n++) st.release(st.store(t.data(), n));
    assert_int_equal(st.bytes(), 0);
    assert_true(st.held_bytes() <= (uint64_t{2} << 20));
}

} // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_held_after_many_counts),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
