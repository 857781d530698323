// The registry every workload runs against, with a counting event callback delivered INLINE:
// the callback runs inside the registering/releasing call, so its cost is in every timing, as
// the peer's CountingEventManager is in the seed's.
#include "bench.hpp"

#include <atomic>
#include <cstdio>
#include <unordered_map>

namespace bench {

// The header promises the callback never runs concurrently with itself for one registry, so
// plain load/store on relaxed atomics is enough (no lock-prefixed RMW on the hot path). If that
// promise were broken, updates would be lost and the workloads' Register == Remove checks fail.
//
// With several threads the callback may run on any of them, and a call may return before its
// events are delivered (another thread is delivering them; kvreg.h, "Delivery"). So counts()
// first calls kvreg_registry_flush(), which returns once every event emitted before it has been
// handed to the callback and the callback has returned (and makes its stores visible here).
struct alignas(64) Counter {
    std::atomic<uint64_t> registers{0};
    std::atomic<uint64_t> removes{0};
    std::atomic<uint64_t> register_batches{0};
    std::atomic<uint64_t> callbacks{0};
    std::atomic<uint64_t> max_per_callback{0};
    std::atomic<uint64_t> register_hash_sum{0};
    std::atomic<uint64_t> remove_hash_sum{0};
    std::atomic<uint64_t> register_without_tokens{0};
    std::atomic<uint64_t> next_id{0};
    std::atomic<uint64_t> id_gaps{0};
    std::atomic<int> destroyed{0};
    bool check_order = false;
    // --check-order only: live count per hash as a consumer keeping a set would see it.
    std::unordered_map<uint64_t, uint32_t> live;
    uint64_t dup_register = 0;
    uint64_t orphan_remove = 0;
};

template <typename T> static void add(std::atomic<T> &a, T v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

static void on_events(const kvreg_event *ev, size_t n, void *user_data) {
    Counter *c = static_cast<Counter *>(user_data);
    uint64_t regs = 0, rems = 0, reg_sum = 0, rem_sum = 0, no_tokens = 0, gaps = 0;
    uint64_t id = c->next_id.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        const kvreg_event &e = ev[i];
        gaps += e.event_id != id;
        id = e.event_id + 1;
        if (e.kind == KVREG_EVENT_REGISTER) {
            regs++;
            reg_sum += e.sequence_hash;
            no_tokens += e.n_tokens == 0 || e.tokens == nullptr;
        } else {
            rems++;
            rem_sum += e.sequence_hash;
        }
        if (c->check_order) {
            uint32_t &l = c->live[e.sequence_hash];
            if (e.kind == KVREG_EVENT_REGISTER) {
                c->dup_register += l > 0;
                l++;
            } else if (l == 0) {
                c->orphan_remove++;
            } else {
                l--;
            }
        }
    }
    c->next_id.store(id, std::memory_order_relaxed);
    add(c->callbacks, uint64_t{1});
    if (n > c->max_per_callback.load(std::memory_order_relaxed))
        c->max_per_callback.store(n, std::memory_order_relaxed);
    if (regs) {
        add(c->registers, regs);
        add(c->register_batches, uint64_t{1});
        add(c->register_hash_sum, reg_sum);
        add(c->register_without_tokens, no_tokens);
    }
    if (rems) {
        add(c->removes, rems);
        add(c->remove_hash_sum, rem_sum);
    }
    if (gaps) add(c->id_gaps, gaps);
}

static void on_destroy(void *user_data) { add(static_cast<Counter *>(user_data)->destroyed, 1); }

Harness::Harness(const Opts &o, bool keep_tokens, uint64_t peak_blocks) : opts_(o), counter_(new Counter) {
    counter_->check_order = o.check_order;
    kvreg_config *cfg = nullptr;
    check_rc(kvreg_config_new(&cfg), "kvreg_config_new");
    check_rc(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_INLINE), "config DELIVERY");
    check_rc(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, keep_tokens ? 1 : 0), "config KEEP_TOKENS");
    if (o.shards) check_rc(kvreg_config_set(cfg, KVREG_OPT_SHARDS, o.shards), "config SHARDS");
    reserved_ = o.reserve_auto ? peak_blocks : o.reserve_blocks;
    if (reserved_) check_rc(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, reserved_), "config RESERVE_BLOCKS");
    check_rc(kvreg_config_set_event_fn(cfg, on_events, counter_, on_destroy), "config event fn");
    const double t0 = now_s();
    check_rc(kvreg_registry_new(&reg_, cfg), "kvreg_registry_new");
    new_s_ = now_s() - t0;
    kvreg_config_free(cfg);
}

Harness::~Harness() {
    kvreg_registry_free(reg_);
    if (counter_->destroyed.load() != 1)
        std::fprintf(stderr, "kvreg-bench: warning: event destroy ran %d times (expected 1)\n",
                     counter_->destroyed.load());
    delete counter_;
}

kvreg_pool *Harness::new_pool(const char *name) {
    kvreg_pool *p = nullptr;
    check_rc(kvreg_pool_new(&p, reg_, name), "kvreg_pool_new");
    return p;
}

EventCounts Harness::counts() const {
    // Not from inside the callback (kvreg_registry_flush would return KVREG_EBUSY).
    check_rc(kvreg_registry_flush(reg_), "kvreg_registry_flush");
    EventCounts c;
    c.registers = counter_->registers.load();
    c.removes = counter_->removes.load();
    c.register_batches = counter_->register_batches.load();
    c.callbacks = counter_->callbacks.load();
    c.max_per_callback = counter_->max_per_callback.load();
    c.register_hash_sum = counter_->register_hash_sum.load();
    c.remove_hash_sum = counter_->remove_hash_sum.load();
    c.register_without_tokens = counter_->register_without_tokens.load();
    c.order_dup_register = counter_->dup_register;
    c.order_orphan_remove = counter_->orphan_remove;
    c.id_gaps = counter_->id_gaps.load();
    return c;
}

uint64_t Harness::stat(uint32_t which) const {
    uint64_t v = 0;
    check_rc(kvreg_registry_stat(reg_, which, &v), "kvreg_registry_stat");
    return v;
}

void Harness::finish(JsonLine &j) const {
    const EventCounts c = counts();
    // kvreg delivers events inline and cleans up synchronously: no runtime threads.
    j.u("rt_threads", 0);
    // The reservation's cost is paid here, before any timed pass: reported beside it.
    if (reserved_) j.u("reserve_blocks", reserved_).f("registry_new_s", new_s_);
    if (opts_.check_order) j.u("order_dup_register", c.order_dup_register).u("order_orphan_remove", c.order_orphan_remove);
}

} // namespace bench
