// kvreg::ShardLock (src/shard_lock.hpp), the registry's per-shard lock: a short spin, then a
// sleep in the kernel.
//
//   * exclusion: more threads than cores increment a plain counter under the lock, and note
//     when they find someone else inside; the count must come out exact, with nobody seen;
//   * the wake-up: a waiter that has announced it will sleep is woken by the next unlock (an
//     unlock that forgot to wake it leaves this test hanging until meson's timeout);
//   * try_lock fails while the lock is held and succeeds once it is free.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "internal_check.hpp"
#include "util/shard_lock.hpp"

namespace {

void exclusion() {
    constexpr int kThreads = 8, kRounds = 200000;
    kvreg::ShardLock lock;
    uint64_t counter = 0; // written only under the lock
    int inside = 0;       // likewise: someone finding it nonzero has found a second holder
    std::atomic<int> overlaps{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
        ts.emplace_back([&] {
            for (int i = 0; i < kRounds; i++) {
                lock.lock();
                if (inside++ != 0) overlaps.fetch_add(1, std::memory_order_relaxed);
                counter++;
                inside--;
                lock.unlock();
            }
        });
    for (auto &t : ts) t.join();
    CHECK(counter == uint64_t{kThreads} * kRounds);
    CHECK(overlaps.load() == 0);
}

void sleeper_is_woken() {
    kvreg::ShardLock lock;
    std::atomic<bool> got{false};
    lock.lock();
    std::thread waiter([&] {
        lock.lock(); // spins, announces itself, sleeps until the unlock below
        got.store(true);
        lock.unlock();
    });
    // Wait for the announcement, not for time to pass: from here on the unlock must wake it.
    while (!lock.sleeper_announced()) std::this_thread::yield();
    CHECK(!got.load());
    lock.unlock();
    waiter.join();
    CHECK(got.load());
    CHECK(!lock.sleeper_announced());
    CHECK(lock.try_lock()); // free again once the waiter let go
    lock.unlock();
}

void try_lock_respects_the_holder() {
    kvreg::ShardLock lock;
    CHECK(lock.try_lock());
    bool other = true;
    std::thread([&] { other = lock.try_lock(); }).join();
    CHECK(!other);
    lock.unlock();
    std::thread([&] {
        other = lock.try_lock();
        if (other) lock.unlock();
    }).join();
    CHECK(other);
}

} // namespace

int main() {
    exclusion();
    sleeper_is_woken();
    try_lock_respects_the_holder();
    if (check_failures() == 0) std::puts("shard_lock: ok");
    return check_failures() != 0;
}
