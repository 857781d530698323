// core_transfer_ns(): how long one cache line takes to move from one CPU to another, right now.
//
// Two threads, pinned to the first two CPUs this process may use, pass a counter back and
// forth through one atomic: each store has to reach the other CPU before it can answer, so a
// round trip is two transfers. On this project's 2-vCPU VM it measured about 25, 80-130 or
// 180-210 ns from one kvreg-bench run to the next, seconds apart (the hypervisor's placement of
// the two vCPUs), and every line kvreg's threads share costs one such transfer: a 2-thread
// ratio means little without the transfer cost of its minute. The disjoint, threads and
// scaling_limit workloads report it beside their ratios.
#include "bench.hpp"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace bench {

namespace {

bool pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The first two CPUs in this thread's affinity mask, or false if it has fewer.
bool two_cpus(int &a, int &b) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
    a = b = -1;
    for (int c = 0; c < CPU_SETSIZE && b < 0; c++)
        if (CPU_ISSET(c, &set)) (a < 0 ? a : b) = c;
    return b >= 0;
}

} // namespace

double core_transfer_ns(uint32_t round_trips, uint32_t reps) {
    int ca = 0, cb = 0;
    if (round_trips == 0 || reps == 0 || !two_cpus(ca, cb)) return 0.0;
    cpu_set_t saved;
    CPU_ZERO(&saved);
    const bool restore = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
    // Unpinned, both threads could share one CPU, and every spin would last a time slice.
    const bool here = pin_to(ca);
    std::vector<double> ns;
    for (uint32_t r = 0; r < reps && here; r++) {
        constexpr uint32_t kQuit = UINT32_MAX;
        alignas(64) std::atomic<uint32_t> line{0};
        std::atomic<int> echo_pinned{0}; // 1 pinned, -1 could not
        std::thread echo([&] {
            echo_pinned.store(pin_to(cb) ? 1 : -1, std::memory_order_release);
            for (uint32_t i = 0; i < round_trips; i++) {
                uint32_t v;
                while ((v = line.load(std::memory_order_acquire)) != 2 * i + 1)
                    if (v == kQuit) return;
                line.store(2 * i + 2, std::memory_order_release);
            }
        });
        int e;
        while ((e = echo_pinned.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
        if (e < 0) {
            line.store(kQuit, std::memory_order_release);
            echo.join();
            ns.clear();
            break;
        }
        // Bounded in time as well: where threads do not run at once (valgrind), a round trip
        // is a thread switch, and the probe stops after kBudget with what it has.
        constexpr auto kBudget = std::chrono::milliseconds(50);
        const auto t0 = std::chrono::steady_clock::now();
        auto t1 = t0;
        uint32_t done = 0;
        for (; done < round_trips; done++) {
            line.store(2 * done + 1, std::memory_order_release);
            while (line.load(std::memory_order_acquire) != 2 * done + 2) {
            }
            if ((done & 1023) == 1023 && (t1 = std::chrono::steady_clock::now()) - t0 > kBudget) {
                done++;
                line.store(kQuit, std::memory_order_release);
                break;
            }
        }
        if (done == round_trips) t1 = std::chrono::steady_clock::now();
        echo.join();
        ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / (2.0 * done));
    }
    if (restore) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    return ns.empty() ? 0.0 : median(ns);
}

} // namespace bench
