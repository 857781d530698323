// A stale pool pointer used while its slot is being reused (run under TSan in CI).
// kvreg.h: calls with a freed pool's pointer return KVREG_ESTALE "until a new pool reuses the
// slot"; pools are thread-safe. So one thread may keep calling with an old pointer while
// another frees pools and creates new ones until that very slot comes back: every call must
// return a status that fits one of the two pools (and TSan must see no race).
// Env KVREG_STRESS_SECONDS (default 2).
#include <kvreg.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include "kvreg_answer.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<unsigned long> g_calls{0};

[[noreturn]] void fail(const char *what, int st)
{
    std::fprintf(stderr, "stale_reuse FAIL: %s (status %d)\n", what, st);
    std::abort();
}

void user(kvreg_pool *stale)
{
    kvreg_block_desc d{};
    d.sequence_hash = 42;
    d.block_hash = 42;
    unsigned long n = 0;
    while (!g_stop.load(std::memory_order_relaxed)) {
        int c = kvt_pool_has(stale, 42);
        if (c != 0 && c != 1 && c != KVREG_ESTALE)
            fail("kvreg_pool_contains", c);
        kvreg_block b = 0;
        int st = kvreg_register(stale, &d, &b);
        if (st == KVREG_OK) {
            st = kvreg_release(stale, b);
            if (st != KVREG_OK && st != KVREG_ESTALE)
                fail("kvreg_release", st);
        } else if (st != KVREG_EEXIST && st != KVREG_ESTALE) {
            fail("kvreg_register", st);
        }
        if (kvreg_pool_name(stale) == nullptr)
            fail("kvreg_pool_name", 0);
        n++;
    }
    g_calls.fetch_add(n);
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
        fail("setup", 0);
    kvreg_pool_free(stale);
    std::thread t(user, stale);
    unsigned long cycles = 0, reuses = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        kvreg_pool *p = nullptr;
        int st = kvreg_pool_new(&p, reg, "cycle");
        if (st != KVREG_OK)
            fail("kvreg_pool_new", st);
        reuses += p == stale;
        kvreg_pool_free(p);
        cycles++;
    }
    g_stop.store(true);
    t.join();
    kvreg_registry_free(reg);
    std::printf("stale_reuse: %lu pool cycles, %lu reuses of the stale slot, %lu calls on it\n",
                cycles, reuses, g_calls.load());
    return 0;
}
