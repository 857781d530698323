// kvreg-only workload `scaling_limit`: how much two threads can gain on this machine at all, for
// an operation that costs what one of kvreg's costs, as a function of the cache lines the two
// threads share. It measures the machine, not the library: no kvreg call is timed in the
// variants, only in the calibration and in the `disjoint` run it is compared with.
//
// Every operation is W ns of private arithmetic (W = kvreg's own one-thread `disjoint` ns/op,
// measured first in the same run, or --work-ns) plus an insert or erase of the thread's own key in
// one shared open-addressing table (2^16 slots, compare-and-swap; the threads' keys never
// collide, so the table's lines are rarely the other thread's), and, by variant:
//
//   private         nothing else;
//   counter         one fetch_add on one shared counter (what one registry-wide event id per
//                   event costs);
//   counter_per_32  one fetch_add per 32 operations (ids or delivery taken once per batch call);
//   locks           a spin lock, one of 64 on lines of their own chosen by key, held around the
//                   table update (what one shard lock per operation costs);
//   locks_counter   both: the least the current design (event_log.hpp, registry.hpp) shares per
//                   operation that emits an event;
//   dense           nothing else, but the table has only twice as many slots as the keys live
//                   at once (128 slots, 16 lines), as dense as kvreg's index is on `disjoint`
//                   (about 512 live hashes in 64 shard tables of 16 slots): the threads' keys
//                   land on the same lines, as any shared index with a small live set has them.
//                   The compare-and-swap on the slot is the lock of a design whose locks sit in
//                   the index's lines (a prototype of pools owning their records);
//   dense_counter_per_32  dense, and one counter per 32 operations: change 1 together with
//                   event ids taken once per batch call (change 2), the least a redesign of
//                   both would share;
//   dense_shard_lock  dense, the update inside one of 64 locks on lines of their own, released
//                   by an exchange (as src/util/shard_lock.hpp does, to see sleepers): the shape of
//                   kvreg's registry today, a shard lock beside the index line it guards;
//   dense_line_lock  dense, the update inside a lock whose word is in the table line itself
//                   (the line's first slot), released the same way: change 1's shape, a lock
//                   per index line, with no other line per operation.
// In the last two, the private work after the update depends on the slot found (as a
// registry's work depends on what its lookup found), so it cannot run ahead of the shared line.
//
// Each variant runs one thread, then two, --reps times alternately; the JSON line gives the
// median of the ratios ops/s(2) / ops/s(1) per variant, and kvreg's own `disjoint` ratio (INLINE,
// counting callback) from the same run. A design cannot beat the ceiling of what it shares.
#include "bench.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

namespace bench {

namespace {

enum class Share { kPrivate, kCounter, kCounterPer32, kLocks, kLocksCounter, kShardLock, kLineLock };

constexpr size_t kBatch = 32; // keys inserted, then erased, as the workloads' sequences are
constexpr size_t kTableSlots = size_t{1} << 16;
constexpr size_t kDenseSlots = 2 * (2 * kBatch); // twice the keys live at once (2 threads)
static_assert((kDenseSlots & (kDenseSlots - 1)) == 0, "slots are masked: a power of two");

struct Variant {
    const char *name;
    Share share;
    size_t slots; // of the shared table
};
constexpr Variant kVariants[] = {{"private", Share::kPrivate, kTableSlots},
                                 {"counter", Share::kCounter, kTableSlots},
                                 {"counter_per_32", Share::kCounterPer32, kTableSlots},
                                 {"locks", Share::kLocks, kTableSlots},
                                 {"locks_counter", Share::kLocksCounter, kTableSlots},
                                 {"dense", Share::kPrivate, kDenseSlots},
                                 {"dense_counter_per_32", Share::kCounterPer32, kDenseSlots},
                                 {"dense_shard_lock", Share::kShardLock, kDenseSlots},
                                 {"dense_line_lock", Share::kLineLock, kDenseSlots}};
constexpr size_t kLocks = 64;

struct alignas(64) PaddedLock {
    std::atomic<uint32_t> held{0};
};

struct Shared {
    std::unique_ptr<std::atomic<uint64_t>[]> table{new std::atomic<uint64_t>[kTableSlots]()};
    std::unique_ptr<PaddedLock[]> locks{new PaddedLock[kLocks]};
    alignas(64) std::atomic<uint64_t> counter{0};
};

// Private work: a dependent multiply-add chain the compiler cannot fold (the result is kept).
inline uint64_t private_work(uint64_t x, uint64_t iters) {
    for (uint64_t i = 0; i < iters; i++) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        asm volatile("" : "+r"(x));
    }
    return x;
}

// Iterations of private_work per nanosecond, timed on this thread.
double iters_per_ns() {
    constexpr uint64_t kIters = 20'000'000;
    uint64_t sink = 1;
    double best = 1e300;
    for (int r = 0; r < 3; r++) {
        const double t = now_s();
        sink = private_work(sink, kIters);
        best = std::min(best, now_s() - t);
    }
    asm volatile("" : : "r"(sink));
    return static_cast<double>(kIters) / (best * 1e9);
}

template <typename T> inline void lock(std::atomic<T> &l) {
    for (;;) {
        T e = 0;
        if (l.compare_exchange_weak(e, 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
        while (l.load(std::memory_order_relaxed) != 0) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
}

void worker(Shared &sh, Share share, size_t slots, size_t tid, uint64_t ops, uint64_t iters,
            StartBarrier &start, uint64_t &sink_out) {
    const size_t mask = slots - 1; // a power of two, at least twice the keys live at once
    const uint64_t base = (uint64_t{tid} + 1) << 40;
    uint64_t n = 0, sink = tid, done = 0;
    start.arrive_and_wait();
    while (done < ops) {
        uint64_t keys[kBatch];
        for (size_t i = 0; i < kBatch; i++) keys[i] = (base + n++) * UINT64_C(0x9E3779B97F4A7C15) | 1;
        for (int phase = 0; phase < 2 && done < ops; phase++) {
            for (size_t i = 0; i < kBatch && done < ops; i++, done++) {
                const uint64_t k = keys[i];
                std::atomic<uint32_t> *l = nullptr;
                std::atomic<uint64_t> *line_lock = nullptr; // kLineLock: the home line's first slot
                if (share == Share::kLocks || share == Share::kLocksCounter || share == Share::kShardLock) {
                    l = &sh.locks[k >> 58].held; // 64 locks: the top 6 bits, as the shards
                    lock(*l);
                } else if (share == Share::kLineLock) {
                    line_lock = &sh.table[((k >> 20) & mask) & ~size_t{7}];
                    lock(*line_lock);
                }
                uint64_t found = 0;
                for (size_t h = (k >> 20) & mask;; h = (h + 1) & mask) {
                    if (share == Share::kLineLock && (h & 7) == 0) continue; // a lock word, not a slot
                    if (phase == 0) {
                        uint64_t e = 0;
                        if (sh.table[h].load(std::memory_order_relaxed) == 0 &&
                            sh.table[h].compare_exchange_strong(e, k, std::memory_order_acq_rel)) {
                            found = h;
                            break;
                        }
                    } else if (sh.table[h].load(std::memory_order_relaxed) == k) {
                        sh.table[h].store(0, std::memory_order_release);
                        found = h;
                        break;
                    }
                }
                if (share == Share::kCounter || share == Share::kLocksCounter ||
                    (share == Share::kCounterPer32 && i == 0))
                    sh.counter.fetch_add(1, std::memory_order_relaxed);
                if (share == Share::kShardLock || share == Share::kLineLock) sink ^= found; // work waits for the lookup
                if (line_lock) {
                    (void)line_lock->exchange(0, std::memory_order_release);
                } else if (share == Share::kShardLock) {
                    (void)l->exchange(0, std::memory_order_release);
                } else if (l) {
                    l->store(0, std::memory_order_release);
                }
                sink = private_work(sink, iters);
            }
        }
    }
    sink_out = sink;
}

// ops/s of `threads` threads, each doing `ops` operations.
double run_variant(Share share, size_t slots, size_t threads, uint64_t ops, uint64_t iters) {
    Shared sh;
    double t0 = 0;
    StartBarrier start(static_cast<std::ptrdiff_t>(threads + 1), StartClock{&t0});
    std::vector<uint64_t> sinks(threads);
    std::vector<std::thread> th;
    for (size_t t = 0; t < threads; t++)
        th.emplace_back(worker, std::ref(sh), share, slots, t, ops, iters, std::ref(start), std::ref(sinks[t]));
    start.arrive_and_wait(); // sets t0 (StartClock)
    for (std::thread &x : th) x.join();
    const double secs = now_s() - t0;
    return secs > 0 ? static_cast<double>(ops * threads) / secs : 0.0;
}

} // namespace

std::string wl_scaling_limit(const Opts &o, bool &ok) {
    // kvreg's own numbers first: the calibration and the ratio the ceilings are compared with.
    Opts d = o;
    d.threads = 2;
    d.delivery = "inline";
    bool d_ok = false;
    const DisjointResult kv = disjoint_measure(d, d_ok);
    const double kv_ns = kv.ops_per_s_1 > 0 ? 1e9 / kv.ops_per_s_1 : 0.0;
    const double work_ns = o.work_ns > 0 ? o.work_ns : kv_ns;
    const double ipn = iters_per_ns();
    // At least one iteration: tiny smoke runs of a debug build can measure kvreg at under a ns.
    const uint64_t iters = std::max<uint64_t>(1, static_cast<uint64_t>(work_ns * ipn));
    const uint64_t ops = o.limit_ops;
    const size_t reps = std::max<size_t>(o.reps, 1);

    JsonLine j;
    j.str("workload", "scaling_limit").b("kvreg_only", true);
    j.f("work_ns", work_ns).u("work_iters", iters).u("ops_per_thread", ops).u("reps", reps);
    ok = d_ok && ops > 0;
    for (const Variant &v : kVariants) {
        std::vector<double> ratios, one;
        for (size_t r = 0; r < reps; r++) {
            const double s1 = run_variant(v.share, v.slots, 1, ops, iters);
            const double s2 = run_variant(v.share, v.slots, 2, ops, iters);
            ratios.push_back(s1 > 0 ? s2 / s1 : 0.0);
            one.push_back(s1);
        }
        const std::string k = v.name;
        j.f((k + "_ops_per_s_1thread").c_str(), median(one)).f((k + "_ratio").c_str(), median(ratios));
        ok &= median(one) > 0;
    }
    j.f("kvreg_disjoint_ops_per_s_1thread", kv.ops_per_s_1)
        .f("kvreg_disjoint_ops_per_s_2threads", kv.ops_per_s_t)
        .f("kvreg_disjoint_ratio", kv.ops_per_s_1 > 0 ? kv.ops_per_s_t / kv.ops_per_s_1 : 0.0)
        .f("kvreg_isolated_ratio", kv.ops_per_s_1 > 0 ? kv.ops_per_s_isolated / kv.ops_per_s_1 : 0.0)
        .f("core_transfer_ns", kv.transfer_ns)
        .u("cpus", std::thread::hardware_concurrency())
        .hex("hash_checksum", kv.checksum)
        .b("verified", ok)
        .u("rt_threads", 0);
    return j.finish();
}

} // namespace bench
