// The router-side index behind kvreg_index.h: workers' decoded events in, prefix matches out.
// apply.cpp applies event batches (sequence checks, engine -> router hashes, tiers);
// query.cpp walks a prompt's hashes over the holder table for ranked matches, depths.cpp for
// depths only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/hash.hpp"
#include "index/holder_table.hpp"
#include "kvreg_index.h"
#include "index/workers.hpp"
#include "util/huge_array.hpp"

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
    // The worker's partition (its model); a change drops its entries. KVREG_EOVERFLOW.
    int set_partition(uint64_t worker_id, uint32_t dp, uint64_t partition);

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

    // stats.cpp: distinct router hashes, and every known worker's counts (unsorted slots,
    // returned in ascending (id, dp)). worker_infos throws std::bad_alloc.
    struct WorkerInfo {
        uint64_t id;
        uint32_t dp;
        uint32_t tag;
        uint64_t next_seq;
        uint64_t entries;
        uint64_t tiers[kTiers];
        uint64_t mapped;
        uint64_t partition;
    };
    uint64_t blocks() const noexcept;
    void worker_infos(std::vector<WorkerInfo> &out) const;

    // dump.cpp (the format: docs/design/index.md). dump: KVREG_OK or write's non-zero return;
    // digest: the checksum the dump would end with. Throw std::bad_alloc (nothing changed).
    int dump(kvreg_index_write_fn write, void *ctx) const;
    uint64_t digest() const;
    // load.cpp: a whole dump into an empty index, all or nothing (kvreg_index_load's statuses).
    int load(const unsigned char *data, size_t len) noexcept;

    // load.cpp: a dump of `total` bytes loaded as they arrive, in pieces of any size (a
    // snapshot read from the network: the load runs while the next pieces are on their way).
    // The walk of one load, end to end, is the comment at the top of load.cpp.
    class Loader {
    public:
        // The index must know no worker (else feed() returns KVREG_ESTATE). shard_counts:
        // the records per table shard when the caller has counted them (a whole dump); else
        // the table is sized from total, as if the records fell evenly on the shards. Room
        // is taken by total before the bytes come (up to about 4x total), so a caller whose
        // total comes from untrusted input bounds it by what exists (the NATS restore: the
        // bytes its bucket holds).
        // checksum_checked: the caller has checked the dump's checksum (it holds the whole
        // dump), so the walk does not compute it again. Throws std::bad_alloc.
        // flush_records: how many records wait for the table before they go in (flush());
        // tests make it small, to see the records go in while the load goes on.
        static constexpr size_t kFlushRecords = size_t{1} << 20;
        Loader(Index &idx, uint64_t total, std::vector<uint64_t> shard_counts = {}, bool checksum_checked = false,
               size_t flush_records = kFlushRecords);
        ~Loader(); // abandon() unless finish() succeeded
        Loader(const Loader &) = delete;
        Loader &operator=(const Loader &) = delete;
        // The next piece. KVREG_OK, or the load's failure (kvreg_index_load's statuses; more
        // bytes than total: KVREG_EPROTO): then every worker it added is removed again, and
        // each later call returns the same status.
        int feed(const unsigned char *data, size_t len) noexcept;
        // All total bytes came and the checksum matches: KVREG_OK; else as feed() fails.
        int finish() noexcept;
        // Undo whatever was loaded (the caller's own check of the bytes failed).
        void abandon() noexcept;

    private:
        // Where the walk is: the field it waits for next. kFailed and kDone are final.
        enum class Stage { kHeader, kWorkerHead, kGroupHead, kRecords, kTrailer, kDone, kFailed };
        int on_header(const unsigned char *h);
        int on_worker(const unsigned char *wh);
        int on_group(const unsigned char *gh);
        int on_records(const unsigned char *recs, size_t n);
        int on_trailer(const unsigned char *t) noexcept;
        int next_group_or_worker(); // the stage after a group or worker ends
        void end_worker();          // the worker done: its records wait for flush()
        void flush();               // the waiting records of every worker into the table
        int reject(int rc) noexcept; // undo, and stay failed with rc
        size_t field_size() const noexcept;
        uint64_t body_left() const noexcept; // bytes before the trailer not read yet

        Index &idx_;
        const uint64_t total_;
        std::vector<uint64_t> shard_counts_;
        std::unique_ptr<Checksum64> sum_; // null: the caller checked the checksum
        const size_t flush_records_;
        Stage stage_ = Stage::kHeader;
        int rc_ = KVREG_OK;
        uint64_t read_ = 0;                // bytes taken by the walk so far
        uint64_t summed_ = 0;              // bytes the checksum has seen
        std::vector<unsigned char> cut_;   // a field cut by the end of a piece, as far as it came
        uint64_t n_workers_ = 0, worker_ = 0, groups_ = 0, group_ = 0, left_in_group_ = 0;
        uint64_t prev_id_ = 0, prev_order_ = 0; // prev_order_: the previous record's record_order()
        uint32_t version_ = 0;                  // the dump's format version
        uint32_t prev_dp_ = 0;
        bool group_start_ = false; // the next record is its group's first
        // The worker being loaded: its state (not locked between pieces: nothing else may
        // change the index during a load), its table tag, and the group's partition.
        Worker *w_ = nullptr;
        uint32_t tag_ = 0, part_index_ = 0;
        uint64_t group_part_ = 0; // the group's partition (also the order check's previous)
        std::vector<std::pair<uint64_t, uint32_t>> added_; // (id, dp) of every worker added
        // Records mapped but not yet in the table (flush()): each one's table key and tiers,
        // and the workers they are of, in record order (a worker's records end before `end`;
        // flush() sorts them by slot once it has taken their runs).
        struct Waiting {
            uint32_t tag;
            Worker *w;
            size_t end;
        };
        HugeArray<uint64_t> keys_; // in huge pages: see util/huge_array.hpp
        HugeArray<uint8_t> tiers_;
        std::vector<Waiting> waiting_;
    };

private:
    struct Snapshot;
    void snapshot(Snapshot &snap) const;
    int write_snapshot(const Snapshot &snap, kvreg_index_write_fn write, void *ctx, uint64_t *sum) const;

    // The router hash of a block, given its parent's router hash (has_parent false: first block).
    uint64_t chain(bool has_parent, uint64_t parent, const uint32_t *tokens) const noexcept;
    // Lock the live worker (id, dp), adding it if asked; nullptr when unknown and not added.
    // *slot gets the worker's tag (workers.hpp): the slot as the table stores it. Every
    // `slot` below is such a tag. loading: a worker added is `loading` from the start (a load's).
    Worker *lock_worker(uint64_t id, uint32_t dp, bool add, bool *added, uint32_t *slot, bool loading = false);
    // Under w.lock. table_done: OWN mode's entries of w are gone already (remove_workers).
    void drop_entries(Worker &w, uint32_t slot, bool table_done = false) noexcept;
    int remove_worker(uint64_t worker_id, uint32_t dp, bool table_done);
    // Remove every worker of ws (a failed load's). In OWN mode their entries go in one pass
    // over the table, where a worker at a time scanned the whole table for each (40,000
    // workers: 15 s); one at a time only when there is no memory for the list of their slots.
    void remove_workers(const std::vector<std::pair<uint64_t, uint32_t>> &ws) noexcept;
    // A mapping entry's partition, and the entry value of partition p for w (added to its
    // LoRA list when new; throws std::bad_alloc). Under w.lock.
    static uint64_t part_of(const Worker &w, uint32_t part) noexcept { return part ? w.loras.id(part) : w.model; }
    static uint32_t part_index(Worker &w, uint64_t p);
    void apply_stored(Worker &w, uint32_t slot, const kvreg_wire_event &ev, kvreg_index_apply_info &info);
    void apply_removed(Worker &w, uint32_t slot, const kvreg_wire_event &ev, kvreg_index_apply_info &info);

    Options opt_;
    double weight_[kTiers]; // opt_.weight as the factors a query's score uses
    HolderTable table_;
    MapArena map_arena_; // a load's mappings (before workers_: destroyed after their mappings)
    Workers workers_;
    std::atomic<uint64_t> mapped_{0}, map_bytes_{0}, applied_{0}, skipped_{0}, gaps_{0};
};

} // namespace kvreg::index
