// Registry operations shared by the workloads: the only calls inside the timed regions.
#include "bench.hpp"

namespace bench {

size_t register_seq(kvreg_pool *pool, const SeqSet &set, size_t s, kvreg_block *out, int *status) {
    size_t n = 0;
    if (set.per_seq == 0) return 0;
    check_rc(kvreg_register_batch(pool, set.seq(s), set.per_seq, out, status, &n), "kvreg_register_batch");
    return n;
}

size_t release_all(kvreg_pool *pool, const kvreg_block *handles, size_t n) {
    size_t done = 0;
    if (n == 0) return 0;
    check_rc(kvreg_release_batch(pool, handles, n, nullptr, &done), "kvreg_release_batch");
    return done;
}

void EventCounts::add(const EventCounts &o) {
    registers += o.registers;
    removes += o.removes;
    register_batches += o.register_batches;
    callbacks += o.callbacks;
    if (o.max_per_callback > max_per_callback) max_per_callback = o.max_per_callback;
    register_hash_sum += o.register_hash_sum;
    remove_hash_sum += o.remove_hash_sum;
    register_without_tokens += o.register_without_tokens;
    order_dup_register += o.order_dup_register;
    order_orphan_remove += o.order_orphan_remove;
    id_gaps += o.id_gaps;
}

void Tally::add(const Tally &o) {
    calls += o.calls;
    attempts += o.attempts;
    registered += o.registered;
    dups += o.dups;
    other += o.other;
    released += o.released;
}

void seq_worker(kvreg_pool *pool, const SeqSet &set, size_t first, size_t u, size_t rounds, size_t k,
                StartBarrier &start, Tally &out) {
    const size_t per = set.per_seq;
    std::vector<kvreg_block> tmp(per), held(k * per);
    std::vector<int> status(per);
    Tally t;
    start.arrive_and_wait();
    for (size_t r = 0; r < rounds; r++) {
        for (size_t b0 = 0; b0 < u;) {
            const size_t n = k < u - b0 ? k : u - b0;
            size_t nh = 0;
            for (size_t i = 0; i < n; i++) {
                t.registered += register_seq(pool, set, (first + b0 + i) % set.n_seqs, tmp.data(), status.data());
                t.attempts += per;
                t.calls++;
                for (size_t x = 0; x < per; x++) {
                    if (status[x] == KVREG_OK)
                        held[nh++] = tmp[x];
                    else if (status[x] == KVREG_EEXIST) // same prefix twice in this batch
                        t.dups++;
                    else
                        t.other++;
                }
            }
            t.released += release_all(pool, held.data(), nh);
            t.calls++;
            b0 += n;
        }
    }
    out = t;
}

// kvreg releases synchronously, so "drain" (the seed's wait for its cleanup task) is the wait
// for event delivery and the check that the pools and the registry are empty; timed like the
// peer's wait_drained. Delivery: with several threads a call may return before its events reach
// the callback (another thread delivers them), so kvreg_registry_flush() waits until every event
// emitted so far has been delivered. Single-threaded it returns at once (nothing is pending).
bool drained(const Harness &h, const std::vector<kvreg_pool *> &pools, bool registry, double &secs) {
    const double t = now_s();
    check_rc(kvreg_registry_flush(h.reg()), "kvreg_registry_flush");
    bool empty = true;
    for (const kvreg_pool *p : pools) empty &= kvreg_pool_size(p) == 0;
    if (registry) empty &= h.stat(KVREG_STAT_HASHES) == 0;
    secs = now_s() - t;
    return empty;
}

// Every registered hash was announced and withdrawn exactly once, with tokens, ids in order,
// in callback calls of at most KVREG_EVENTS_PER_CALL events.
bool events_match(const EventCounts &c, uint64_t n, uint64_t hash_sum) {
    return c.registers == n && c.removes == n && c.register_hash_sum == hash_sum &&
           c.remove_hash_sum == hash_sum && c.register_without_tokens == 0 && c.id_gaps == 0 &&
           c.max_per_callback <= KVREG_EVENTS_PER_CALL;
}

double per_block_ns(double secs, uint64_t n) { return n ? secs * 1e9 / static_cast<double>(n) : 0.0; }

} // namespace bench
