// The router-side index behind kvreg_index.h: workers' decoded events in, prefix matches out.
// apply.cpp applies event batches (sequence checks, engine -> router hashes, tiers);
// query.cpp walks a prompt's hashes over the holder table for ranked matches, depths.cpp for
// depths only.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "index/holder_table.hpp"
#include "kvreg_index.h"
#include "index/workers.hpp"

namespace kvreg::index {

struct Options {
    uint32_t block_size = 16;
    bool own_hashes = false;
    bool kv_router_profile = false;
    uint64_t salt = KVREG_ROUTER_SALT;
    uint32_t shards = 256;
    uint64_t expected_entries = 0;
    uint32_t weight[kTiers] = {1000, 800, 500, 300}; // thousandths
};

class Index {
public:
    explicit Index(const Options &o) : opt_(o), table_(o.shards, o.expected_entries) {
        for (unsigned t = 0; t < kTiers; t++) weight_[t] = o.weight[t] / 1000.0;
    }

    // KVREG_OK / KVREG_EINVAL / KVREG_ENOMEM / KVREG_EOVERFLOW (too many workers).
    int apply(uint64_t worker_id, uint32_t dp, uint64_t seq, const kvreg_wire_event *events, size_t n,
              kvreg_index_apply_info &info);
    int clear_worker(uint64_t worker_id, uint32_t dp, uint64_t next_seq);
    int remove_worker(uint64_t worker_id, uint32_t dp);

    // Matches of a prompt's router hashes, best first, at most top_k (0: all), into out[0..cap)
    // (kvreg_index_query_hashes' contract: KVREG_OK or KVREG_ERANGE). Throws std::bad_alloc.
    int query(const uint64_t *hashes, size_t n, size_t top_k, kvreg_index_match *out, size_t cap,
              size_t *n_matches) const;
    // Every matching worker's depth, in slot order (kvreg_index_query_depths' contract).
    // Throws std::bad_alloc.
    int depths(const uint64_t *hashes, size_t n, kvreg_index_depth *out, size_t cap, size_t *n_matches) const;
    // The prompt's router hashes under the index's profile (full blocks only).
    void hash_tokens(const uint32_t *tokens, size_t n_tokens, std::vector<uint64_t> &out) const;

    uint64_t stat(uint32_t which, bool *known) const noexcept;

    // dump.cpp (the format: docs/design/index.md). dump: KVREG_OK or write's non-zero return;
    // digest: the checksum the dump would end with; load: into an empty index, all or nothing
    // (kvreg_index_load's statuses). Throw std::bad_alloc (dump and digest: nothing changed).
    int dump(kvreg_index_write_fn write, void *ctx) const;
    uint64_t digest() const;
    int load(const unsigned char *data, size_t len);

private:
    struct Snapshot;
    void snapshot(Snapshot &snap) const;
    int write_snapshot(const Snapshot &snap, kvreg_index_write_fn write, void *ctx, uint64_t *sum) const;
    int load_checked(const unsigned char *data, size_t len);

    // The router hash of a block, given its parent's router hash (has_parent false: first block).
    uint64_t chain(bool has_parent, uint64_t parent, const uint32_t *tokens) const noexcept;
    // Lock the live worker (id, dp), adding it if asked; nullptr when unknown and not added.
    // *slot gets the worker's tag (workers.hpp): the slot as the table stores it. Every
    // `slot` below is such a tag.
    Worker *lock_worker(uint64_t id, uint32_t dp, bool add, bool *added, uint32_t *slot);
    void drop_entries(Worker &w, uint32_t slot) noexcept; // under w.lock
    void apply_stored(Worker &w, uint32_t slot, const kvreg_wire_event &ev, kvreg_index_apply_info &info);
    void apply_removed(Worker &w, uint32_t slot, const kvreg_wire_event &ev, kvreg_index_apply_info &info);

    Options opt_;
    double weight_[kTiers]; // opt_.weight as the factors a query's score uses
    HolderTable table_;
    Workers workers_;
    std::atomic<uint64_t> mapped_{0}, map_bytes_{0}, applied_{0}, skipped_{0}, gaps_{0};
};

} // namespace kvreg::index
