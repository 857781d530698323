// kvreg_registry_set_event_fn racing with events from other threads (run under TSan too).
// Workers register and release while the main thread keeps replacing the callback, clearing
// it (fn NULL) and setting it again. Checked:
//  - a callback is never called once the set_event_fn that replaced it has returned;
//  - each user_data's destroy runs exactly once, by the time its replacement returned;
//  - callbacks never overlap; delivered event ids strictly increase;
//  - every event is either delivered or counted as dropped: delivered + DROPPED == NEXT_EVENT_ID.
// Env KVREG_STRESS_SECONDS (default 2).
#include <kvreg.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

struct Cb {
    std::atomic<int> retired{0};
    std::atomic<int> destroyed{0};
};

std::atomic<int> g_inside{0};
uint64_t g_delivered = 0; // written only inside callbacks, which must never overlap
uint64_t g_last_id = 0;
bool g_any = false;
std::atomic<bool> g_stop{false};

[[noreturn]] void fail(const char *what)
{
    std::fprintf(stderr, "callback_race FAIL: %s\n", what);
    std::abort();
}

void on_events(const kvreg_event *ev, size_t n, void *ud)
{
    if (static_cast<Cb *>(ud)->retired.load())
        fail("a replaced callback was called after set_event_fn returned");
    int zero = 0;
    if (!g_inside.compare_exchange_strong(zero, 1))
        fail("callbacks overlapped");
    for (size_t i = 0; i < n; i++) {
        if (g_any && ev[i].event_id <= g_last_id)
            fail("event ids went backwards or repeated");
        g_last_id = ev[i].event_id;
        g_any = true;
    }
    g_delivered += n;
    g_inside.store(0);
}

void on_destroy(void *ud)
{
    static_cast<Cb *>(ud)->destroyed.fetch_add(1);
}

void worker(kvreg_pool *pool, uint64_t base)
{
    uint64_t i = 0;
    while (!g_stop.load(std::memory_order_relaxed)) {
        kvreg_block_desc d{};
        d.sequence_hash = base + (i++ % 32);
        d.block_hash = d.sequence_hash;
        kvreg_block b = 0;
        if (kvreg_register(pool, &d, &b) == KVREG_OK && kvreg_release(pool, b) != KVREG_OK)
            fail("release of a just registered block");
    }
}

} // namespace

int main()
{
    double seconds = 2;
    if (const char *s = std::getenv("KVREG_STRESS_SECONDS"))
        seconds = std::atof(s);
    kvreg_registry *reg = nullptr;
    if (kvreg_registry_new(&reg, nullptr) != KVREG_OK)
        fail("kvreg_registry_new");
    std::vector<kvreg_pool *> pools(3);
    for (auto &p : pools)
        if (kvreg_pool_new(&p, reg, "p") != KVREG_OK)
            fail("kvreg_pool_new");
    std::vector<std::thread> threads;
    for (size_t t = 0; t < pools.size(); t++)
        threads.emplace_back(worker, pools[t], 1000 * (t + 1));

    std::vector<Cb *> cbs;
    Cb *current = nullptr;
    unsigned swaps = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        Cb *next = (swaps % 3 == 2) ? nullptr : new Cb; // every third swap clears the callback
        int st = next ? kvreg_registry_set_event_fn(reg, on_events, next, on_destroy)
                      : kvreg_registry_set_event_fn(reg, nullptr, nullptr, nullptr);
        if (st != KVREG_OK)
            fail("kvreg_registry_set_event_fn");
        if (current) {
            current->retired.store(1);
            if (current->destroyed.load() != 1)
                fail("the replaced callback's destroy did not run exactly once before return");
        }
        if (next)
            cbs.push_back(next);
        current = next;
        swaps++;
        std::this_thread::yield();
    }
    g_stop.store(true);
    for (auto &t : threads)
        t.join();
    uint64_t next_id = 0, dropped = 0;
    kvreg_registry_stat(reg, KVREG_STAT_NEXT_EVENT_ID, &next_id);
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_DROPPED, &dropped);
    kvreg_registry_free(reg);
    if (g_delivered + dropped != next_id)
        fail("delivered + dropped != events emitted");
    for (Cb *c : cbs) {
        if (c->destroyed.load() != 1)
            fail("destroy did not run exactly once");
        delete c;
    }
    std::printf("callback_race: %u callback swaps, %llu events delivered, %llu dropped\n", swaps,
                static_cast<unsigned long long>(g_delivered), static_cast<unsigned long long>(dropped));
    return 0;
}
