// A stale pool pointer used while its slot is being reused (run under TSan in CI).
// kvreg.h: calls with a freed pool's pointer return KVREG_ESTALE "until a new pool reuses the
// slot" ("the first 1024 pools get fresh slots; after that freed slots are reused
// least-recently first"), and pools are thread-safe. So one thread (the user) may keep calling
// with an old pointer while the main thread frees pools and creates new ones until that very
// slot comes back as a live pool.
//
// What each call must return depends on the slot's state during the call. The main thread
// publishes that state in g_epoch, (counter << 2) | phase, around every change:
//   kChanging  a kvreg_pool_new or kvreg_pool_free is about to run or running;
//   kFreed     the stale slot is not a live pool (stable until the next kChanging);
//   kLive      the stale slot is live again, as the pool the main thread just created.
// The user reads g_epoch before a call and, after a fence, again after it. Equal readings in
// a stable phase mean no change overlapped the call (the main thread fences after each store
// and before the change, so a call that saw a change would read a later epoch), and the status
// must be exactly: kvt_pool_has 0 if live / ESTALE if freed; kvreg_register OK / ESTALE;
// kvreg_release of the block it just registered OK in the same stable live window, ESTALE once
// that pool has been freed since. Only a call that overlapped a change may return either of
// the two, and never anything else (EEXIST cannot happen: the user releases what it registers,
// and kvreg_pool_free sweeps what a failed release left). When the slot comes back the main
// thread waits (no sleep: it yields until the user reports) for one fully exact iteration in
// the live state, and after freeing it again for one in the freed state (also once before the
// first cycle), so both states are checked exactly in every run, however the threads are
// scheduled.
// Env KVREG_STRESS_SECONDS (default 2).
#include <kvreg.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include "kvreg_answer.h"

namespace {

enum Phase : uint64_t { kChanging = 0, kFreed = 1, kLive = 2 };

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_epoch{0};
std::atomic<unsigned long> g_live_exact{0};  // user iterations checked exactly in kLive
std::atomic<unsigned long> g_freed_exact_it{0}; // ... and in kFreed
std::atomic<unsigned long> g_calls{0}, g_exact{0}, g_freed_exact{0};

[[noreturn]] void fail(const char *what, int st, uint64_t e1, uint64_t e2)
{
    std::fprintf(stderr, "stale_reuse FAIL: %s (status %d, epoch %llu..%llu, phase %llu..%llu)\n", what, st,
                 static_cast<unsigned long long>(e1 >> 2), static_cast<unsigned long long>(e2 >> 2),
                 static_cast<unsigned long long>(e1 & 3), static_cast<unsigned long long>(e2 & 3));
    std::abort();
}

uint64_t seq_of(uint64_t e) { return e >> 2; }
Phase phase_of(uint64_t e) { return static_cast<Phase>(e & 3); }

// A window around one call: which state it ran in, if no change overlapped it.
struct Window {
    uint64_t e1, e2;
    bool stable() const { return e1 == e2 && phase_of(e1) != kChanging; }
};

template <typename F> Window around(F call)
{
    Window w;
    w.e1 = g_epoch.load(std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    call();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    w.e2 = g_epoch.load(std::memory_order_seq_cst);
    return w;
}

// Exactly `exact` in a stable window (exact_live / exact_freed by phase), else one of the two.
void expect(const char *what, int st, const Window &w, int if_live, int if_freed)
{
    if (w.stable()) {
        const int want = phase_of(w.e1) == kLive ? if_live : if_freed;
        if (st != want) fail(what, st, w.e1, w.e2);
        g_exact.fetch_add(1, std::memory_order_relaxed);
        if (phase_of(w.e1) == kFreed) g_freed_exact.fetch_add(1, std::memory_order_relaxed);
    } else if (st != if_live && st != if_freed) {
        fail(what, st, w.e1, w.e2);
    }
}

void user(kvreg_pool *stale)
{
    kvreg_block_desc d{};
    d.sequence_hash = 42;
    d.block_hash = 42;
    unsigned long n = 0;
    while (!g_stop.load(std::memory_order_relaxed)) {
        int c = 0;
        const Window wc = around([&] { c = kvt_pool_has(stale, 42); });
        expect("kvreg_pool_contains", c, wc, 0, KVREG_ESTALE);

        kvreg_block b = 0;
        int st = 0;
        const Window wr = around([&] { st = kvreg_register(stale, &d, &b); });
        expect("kvreg_register", st, wr, KVREG_OK, KVREG_ESTALE);
        if (wc.stable() && phase_of(wc.e1) == kFreed && wr.e1 == wc.e1 && wr.stable())
            g_freed_exact_it.fetch_add(1, std::memory_order_release);
        if (st == KVREG_OK) {
            int rel = 0;
            const Window wl = around([&] { rel = kvreg_release(stale, b); });
            if (wr.stable() && phase_of(wr.e1) == kLive && wl.stable() && wl.e1 == wr.e1) {
                // the same live pool throughout: the block is there
                if (rel != KVREG_OK) fail("kvreg_release in the pool it was registered in", rel, wl.e1, wl.e2);
                g_exact.fetch_add(1, std::memory_order_relaxed);
                if (phase_of(wc.e1) == kLive && wc.stable() && wc.e1 == wr.e1)
                    g_live_exact.fetch_add(1, std::memory_order_release);
            } else if ((phase_of(wl.e1) == kFreed && seq_of(wl.e1) > seq_of(wr.e2)) ||
                       seq_of(wl.e1) >= seq_of(wr.e2) + 3) {
                // A free of the pool the block was registered in completed since: the register
                // saw the slot live in some cycle whose kChanging (before kvreg_pool_new) is at
                // or before wr.e2; that cycle's kFreed, published after its kvreg_pool_free, is
                // the first kFreed after wr.e2 and at most 3 steps after it.
                if (rel != KVREG_ESTALE) fail("kvreg_release after its pool was freed", rel, wl.e1, wl.e2);
                g_exact.fetch_add(1, std::memory_order_relaxed);
            } else if (rel != KVREG_OK && rel != KVREG_ESTALE) {
                fail("kvreg_release", rel, wl.e1, wl.e2);
            }
        }
        const char *name = kvreg_pool_name(stale);
        if (name == nullptr || (std::strcmp(name, "old") != 0 && std::strcmp(name, "cycle") != 0))
            fail("kvreg_pool_name", 0, 0, 0);
        n++;
    }
    g_calls.fetch_add(n);
}

// Yield (no sleep) until the user has completed one more iteration checked exactly.
void await_user(const std::atomic<unsigned long> &counter)
{
    const unsigned long seen = counter.load(std::memory_order_acquire);
    while (counter.load(std::memory_order_acquire) == seen)
        std::this_thread::yield();
}

uint64_t g_seq = 0;
void publish(Phase ph)
{
    g_epoch.store((++g_seq << 2) | ph, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

} // namespace

int main()
{
    double seconds = 2;
    if (const char *s = std::getenv("KVREG_STRESS_SECONDS"))
        seconds = std::atof(s);
    kvreg_registry *reg = nullptr;
    kvreg_pool *stale = nullptr;
    if (kvreg_registry_new(&reg, nullptr) != KVREG_OK || kvreg_pool_new(&stale, reg, "old") != KVREG_OK)
        fail("setup", 0, 0, 0);
    kvreg_pool_free(stale);
    publish(kFreed);
    std::thread t(user, stale);
    await_user(g_freed_exact_it);
    unsigned long cycles = 0, reuses = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    // At least two reuses however short the run: the slot comes back every ~1024 cycles.
    while (std::chrono::steady_clock::now() < deadline || reuses < 2) {
        kvreg_pool *p = nullptr;
        publish(kChanging);
        int st = kvreg_pool_new(&p, reg, "cycle");
        if (st != KVREG_OK)
            fail("kvreg_pool_new", st, 0, 0);
        publish(p == stale ? kLive : kFreed);
        if (p == stale) {
            reuses++;
            await_user(g_live_exact);
        }
        publish(kChanging);
        kvreg_pool_free(p);
        publish(kFreed);
        if (p == stale)
            await_user(g_freed_exact_it);
        cycles++;
    }
    g_stop.store(true);
    t.join();
    kvreg_registry_free(reg);
    std::printf("stale_reuse: %lu pool cycles, %lu reuses of the stale slot, %lu iterations on it, %lu calls "
                "checked exactly (%lu while freed)\n",
                cycles, reuses, g_calls.load(), g_exact.load(), g_freed_exact.load());
    if (g_freed_exact_it.load() < reuses + 1 || g_live_exact.load() < reuses) {
        std::fprintf(stderr, "stale_reuse FAIL: a state was never checked exactly\n");
        return 1;
    }
    return 0;
}
