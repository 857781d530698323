// The lock of one registry shard. Critical sections are a few hundred nanoseconds (one hash's
// records), so a waiter first spins briefly (the holder is usually running on another core and
// about to let go), then sleeps in the kernel (std::atomic::wait, a futex on Linux): with more
// threads than cores the holder may have been preempted, and spinning then only burns the
// core it needs. std::mutex sleeps at the first conflict, and every conflict then costs two
// system calls and a context switch. Unlock wakes a sleeper only when one announced itself.
#pragma once

#include "util/cpu_relax.hpp"
#include <atomic>
#include <cstdint>

namespace kvreg {

class ShardLock {
public:
    void lock() noexcept {
        uint32_t expected = kFree;
        if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                           std::memory_order_relaxed)) [[likely]]
            return;
        lock_contended();
    }
    bool try_lock() noexcept {
        uint32_t expected = kFree;
        return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }
    void unlock() noexcept {
        if (state_.exchange(kFree, std::memory_order_release) == kSleepers) [[unlikely]]
            state_.notify_one();
    }
    // Tests only: whether a waiter has said it is going to sleep (it may be asleep already).
    bool sleeper_announced() const noexcept { return state_.load(std::memory_order_relaxed) == kSleepers; }

private:
    // kLocked: held, nobody asleep; kSleepers: held, and a waiter may be asleep (it set this
    // before sleeping, so the unlock that follows wakes one).
    static constexpr uint32_t kFree = 0, kLocked = 1, kSleepers = 2;
    static constexpr int kSpins = 64;

    void lock_contended() noexcept {
        for (int i = 0; i < kSpins; i++) {
            kvreg::cpu_relax();
            uint32_t expected = kFree;
            if (state_.load(std::memory_order_relaxed) == kFree &&
                state_.compare_exchange_weak(expected, kLocked, std::memory_order_acquire,
                                             std::memory_order_relaxed))
                return;
        }
        // Take the lock as kSleepers from here on: we cannot know whether other sleepers
        // remain, so the next unlock must wake one (a spurious wake costs one system call).
        while (state_.exchange(kSleepers, std::memory_order_acquire) != kFree)
            state_.wait(kSleepers, std::memory_order_relaxed);
    }

    std::atomic<uint32_t> state_{kFree};
};

} // namespace kvreg
