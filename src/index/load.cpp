// Loading a dump (format: index/dump_format.hpp, documented in docs/design/index.md): one
// walk, Index::Loader, for a dump held whole (kvreg_index_load) and for one that arrives in
// pieces (a NATS replica's snapshot, nats/snapshot.cpp, loaded while its next chunks are on
// their way).
//
// One load, end to end:
//   Loader ld(index, total)    the index must know no worker
//   ld.feed(piece) ...         the bytes go to the checksum as they come, then to the walk,
//                              which waits for one field at a time (Stage); a field cut by
//                              the end of a piece is kept in cut_ until the rest comes:
//     kHeader      magic, version, the index's own options; the table gets its room for
//                  every record (counted per shard when the caller could count them, else
//                  total's worth spread evenly), so that it grows at most once per shard
//     kWorkerHead  after the previous worker (ascending id, dp); known flags; the worker is
//                  added with its next seq and partition, `loading` (left out of a dump
//                  until flush() has put its records in)
//     kGroupHead   a partition after the previous one, with 1 .. (what is left) records;
//                  ENGINE mode: room in the worker's mapping for all of them
//     kRecords     every whole record of this piece at once: checked (ascending, by record_order(), in the
//                  group, known tiers) and into the mapping (ENGINE mode); they wait for the
//                  table until a worker ends with a million waiting or the last one ends,
//                  then all go in at once (flush(): HolderTable::update_many, shard by
//                  shard, one lock each)
//     kTrailer     the checksum of every byte before it (unless the caller checked it: a
//                  whole dump is checked before the walk starts)
//   ld.finish()                every byte came and the walk is at kDone: KVREG_OK
// Any failure (a field that does not check, bytes past total or missing, the checksum,
// memory, worker slots) removes every worker the load added: the index is empty again, and
// every later call returns the same status (kFailed). A whole dump is checked against its
// checksum before the walk starts, so a damaged one never touches the index.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "index/counts.hpp"
#include "index/dump_format.hpp"
#include "index/index.hpp"
#include "index/partition.hpp"

namespace kvreg::index {

using namespace dump_format;

namespace {

// Records per shard of a whole dump whose checksum matched, for the table's room; false when
// its structure does not add up (the walk then says what is wrong).
bool count_records(const unsigned char *data, size_t len, bool own, const HolderTable &table,
                   std::vector<uint64_t> &more) {
    const size_t rec_size = own ? kOwnRecord : kEngineRecord, router_at = own ? 0 : 8;
    size_t at = kHeader;
    const size_t end = len - kTrailer;
    const auto take = [&](size_t n) {
        if (end - at < n) return false;
        at += n;
        return true;
    };
    more.assign(table.shard_count(), 0);
    for (uint64_t wi = 0, n_workers = get64(data + 32); wi < n_workers; wi++) {
        const size_t wh = at;
        if (!take(kWorkerHead)) return false;
        for (uint64_t gi = 0, groups = get64(data + wh + 32); gi < groups; gi++) {
            const size_t gh = at;
            if (!take(kGroupHead)) return false;
            const uint64_t part = get64(data + gh), m = get64(data + gh + 8);
            if (m > (end - at) / rec_size) return false;
            for (uint64_t r = 0; r < m; r++, at += rec_size)
                more[table.shard_index(key_of(get64(data + at + router_at), part))]++;
        }
    }
    return true;
}

} // namespace

int Index::load(const unsigned char *data, size_t len) noexcept {
    if (workers_.count() != 0) return KVREG_ESTATE;
    if (len < kHeader + kTrailer || std::memcmp(data, kMagic, sizeof kMagic) != 0) return KVREG_EPROTO;
    if (const uint32_t v = get32(data + 8); v < kOldestVersion || v > kVersion) return KVREG_ENOTSUP;
    if (checksum64(data, len - kTrailer) != get64(data + len - kTrailer)) return KVREG_EPROTO;
    try {
        std::vector<uint64_t> more;
        if (!count_records(data, len, opt_.own_hashes, table_, more)) more.clear();
        Loader ld(*this, len, std::move(more), true); // its checksum was just checked
        const int rc = ld.feed(data, len);
        return rc != KVREG_OK ? rc : ld.finish();
    } catch (const std::bad_alloc &) {
        return KVREG_ENOMEM;
    }
}

Index::Loader::Loader(Index &idx, uint64_t total, std::vector<uint64_t> shard_counts, bool checksum_checked,
                      size_t flush_records)
    : idx_(idx), total_(total), shard_counts_(std::move(shard_counts)),
      sum_(checksum_checked ? nullptr : std::make_unique<Checksum64>()), flush_records_(flush_records) {}

Index::Loader::~Loader() {
    if (stage_ != Stage::kDone) abandon();
}

void Index::Loader::abandon() noexcept {
    if (stage_ != Stage::kFailed) reject(KVREG_EPROTO);
}

int Index::Loader::reject(int rc) noexcept {
    rc_ = rc;
    stage_ = Stage::kFailed;
    idx_.remove_workers(added_);
    added_.clear();
    keys_.clear(); // records of removed workers that never reached the table
    tiers_.clear();
    waiting_.clear();
    return rc;
}

uint64_t Index::Loader::body_left() const noexcept { return total_ - kTrailer - read_; }

size_t Index::Loader::field_size() const noexcept {
    switch (stage_) {
    case Stage::kHeader: return kHeader;
    case Stage::kWorkerHead: return kWorkerHead;
    case Stage::kGroupHead: return kGroupHead;
    case Stage::kRecords: return idx_.opt_.own_hashes ? kOwnRecord : kEngineRecord;
    case Stage::kTrailer: return kTrailer;
    default: return 0;
    }
}

int Index::Loader::feed(const unsigned char *data, size_t len) noexcept {
    if (stage_ == Stage::kFailed) return rc_;
    if (read_ == 0 && cut_.empty()) {
        if (idx_.workers_.count() != 0) return reject(KVREG_ESTATE);
        if (total_ < kHeader + kTrailer) return reject(KVREG_EPROTO);
        idx_.map_arena_.reset(); // no worker is known: no mapping holds any of it
    }
    if (len > total_ - read_ - cut_.size()) return reject(KVREG_EPROTO); // more than the dump holds
    const uint64_t body = total_ - kTrailer;
    if (sum_ && summed_ < body) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(len, body - summed_));
        sum_->update(data, k);
        summed_ += k;
    }
    try {
        while (len > 0) {
            const size_t size = field_size();
            // Every field but the trailer ends before it: one that ran into it would leave
            // body_left() wrapped around, and every count checked against it unbounded.
            if (stage_ != Stage::kTrailer && size > body_left()) return reject(KVREG_EPROTO);
            if (stage_ == Stage::kRecords && cut_.empty() && len >= size) {
                // Every whole record of this piece (of this group) in one step.
                const uint64_t n = std::min<uint64_t>(left_in_group_, len / size);
                const size_t bytes = static_cast<size_t>(n) * size;
                read_ += bytes;
                if (const int rc = on_records(data, static_cast<size_t>(n)); rc != KVREG_OK) return reject(rc);
                data += bytes;
                len -= bytes;
                continue;
            }
            // One field, or the part of one this piece has.
            const unsigned char *field = data;
            if (!cut_.empty() || len < size) {
                const size_t k = std::min(len, size - cut_.size());
                cut_.insert(cut_.end(), data, data + k);
                data += k;
                len -= k;
                if (cut_.size() < size) break; // the rest comes with the next piece
                field = cut_.data();
            } else {
                data += size;
                len -= size;
            }
            read_ += size;
            int rc = KVREG_OK;
            switch (stage_) {
            case Stage::kHeader: rc = on_header(field); break;
            case Stage::kWorkerHead: rc = on_worker(field); break;
            case Stage::kGroupHead: rc = on_group(field); break;
            case Stage::kRecords: rc = on_records(field, 1); break;
            case Stage::kTrailer: rc = on_trailer(field); break;
            default: rc = KVREG_EPROTO; break; // kDone: bytes past the trailer (len checked above)
            }
            cut_.clear();
            if (rc != KVREG_OK) return reject(rc);
        }
    } catch (const std::bad_alloc &) {
        return reject(KVREG_ENOMEM);
    }
    return KVREG_OK;
}

int Index::Loader::finish() noexcept {
    if (stage_ == Stage::kFailed) return rc_;
    return stage_ == Stage::kDone ? KVREG_OK : reject(KVREG_EPROTO); // bytes missing
}

int Index::Loader::on_header(const unsigned char *h) {
    if (std::memcmp(h, kMagic, sizeof kMagic) != 0) return KVREG_EPROTO;
    version_ = get32(h + 8);
    if (version_ < kOldestVersion || version_ > kVersion) return KVREG_ENOTSUP;
    const Options &o = idx_.opt_;
    const uint32_t hashes = get32(h + 12), profile = get32(h + 16), bs = get32(h + 20);
    if (hashes > KVREG_INDEX_HASHES_OWN || profile > KVREG_INDEX_PROFILE_KV_ROUTER || bs == 0) return KVREG_EPROTO;
    if ((hashes == KVREG_INDEX_HASHES_OWN) != o.own_hashes ||
        (profile == KVREG_INDEX_PROFILE_KV_ROUTER) != o.kv_router_profile || bs != o.block_size || get64(h + 24) != o.salt)
        return KVREG_EINVAL;
    n_workers_ = get64(h + 32);
    if (n_workers_ > body_left() / kWorkerHead) return KVREG_EPROTO;
    // The table's room for every record, so that it grows at most once per shard while
    // loading (records naming one router hash twice count twice: a bound).
    HolderTable &table = idx_.table_;
    if (shard_counts_.size() != table.shard_count()) {
        const uint64_t records = body_left() / (o.own_hashes ? kOwnRecord : kEngineRecord);
        shard_counts_.assign(table.shard_count(), (records + table.shard_count() - 1) / table.shard_count());
    }
    table.reserve(shard_counts_.data());
    shard_counts_ = {};
    // Room for the records that wait for the table at once (all of them, up to a flush's worth).
    const uint64_t records = body_left() / (o.own_hashes ? kOwnRecord : kEngineRecord);
    const size_t waiting = static_cast<size_t>(std::min<uint64_t>(records, flush_records_));
    keys_.reserve(waiting);
    tiers_.reserve(waiting);
    return next_group_or_worker();
}

int Index::Loader::on_worker(const unsigned char *wh) {
    const uint64_t id = get64(wh);
    const uint32_t dp = get32(wh + 8), flags = get32(wh + 12);
    const uint64_t next_seq = get64(wh + 16), model = get64(wh + 24);
    groups_ = get64(wh + 32);
    if (worker_ > 0 && (id < prev_id_ || (id == prev_id_ && dp <= prev_dp_))) return KVREG_EPROTO;
    // A known next seq is never KVREG_INDEX_SEQ_NONE: after the highest seq the index takes
    // any as the start again (flag clear), and no call makes that state.
    if ((flags & ~kSeqKnown) != 0 || (!(flags & kSeqKnown) && next_seq != 0) ||
        ((flags & kSeqKnown) && next_seq == KVREG_INDEX_SEQ_NONE))
        return KVREG_EPROTO;
    if (groups_ > body_left() / kGroupHead) return KVREG_EPROTO;
    prev_id_ = id;
    prev_dp_ = dp;
    worker_++;
    // May throw: nothing added yet. Doubling: one more at a time (what libstdc++ reserves
    // when asked) copied the whole list for every worker.
    if (added_.size() == added_.capacity()) added_.reserve(std::max<size_t>(16, 2 * added_.capacity()));
    bool added = false;
    w_ = idx_.lock_worker(id, dp, true, &added, &tag_, true); // `loading` from its first instant
    if (!w_) return KVREG_EOVERFLOW;
    {
        std::lock_guard<std::mutex> g(w_->lock, std::adopt_lock);
        if (added) added_.emplace_back(id, dp);
        w_->loading = true; // until flush() has put its records in
        w_->seq_known = (flags & kSeqKnown) != 0;
        w_->next_seq = next_seq;
        w_->model = model;
    }
    group_ = 0;
    return next_group_or_worker(); // a worker without records ends here
}

int Index::Loader::on_group(const unsigned char *gh) {
    const uint64_t part = get64(gh), n = get64(gh + 8);
    const bool own = idx_.opt_.own_hashes;
    // OWN mode keys a worker's entries by its own partition only.
    if ((own && part != w_->model) || (group_ > 0 && part <= group_part_)) return KVREG_EPROTO;
    if (n == 0 || n > body_left() / (own ? kOwnRecord : kEngineRecord)) return KVREG_EPROTO;
    group_part_ = part;
    left_in_group_ = n;
    group_start_ = true;
    group_++;
    if (!own) {
        std::lock_guard<std::mutex> g(w_->lock);
        MapBytes track{*w_, idx_.map_bytes_};
        part_index_ = part_index(*w_, part);
        w_->map.reserve(n, &idx_.map_arena_); // the group's records cannot fail to insert
    }
    stage_ = Stage::kRecords;
    return KVREG_OK;
}

int Index::Loader::on_records(const unsigned char *recs, size_t n) {
    const bool own = idx_.opt_.own_hashes;
    const size_t size = own ? kOwnRecord : kEngineRecord;
    uint64_t *const keys = keys_.append(n);
    uint8_t *const tiers_out = tiers_.append(n);
    std::unique_lock<std::mutex> g(w_->lock);
    Worker &w = *w_;
    // Checked and mapped as they come; into the table once the worker's last record came
    // (end_worker): whatever fails half-way, removing the worker finds every entry it made
    // (its mapping names them).
    size_t r = 0;
    constexpr size_t kAhead = 8; // mapping slots requested ahead of their insert
    if (!own)
        for (size_t k = 0; k < n && k < kAhead; k++) w.map.prefetch(get64(recs + k * size));
    int rc = KVREG_OK;
    for (; r < n; r++) {
        const unsigned char *rec = recs + r * size;
        const uint64_t key = get64(rec), order = record_order(key, version_);
        const uint8_t tiers = rec[size - 1];
        if ((!group_start_ && order <= prev_order_) || tiers == 0 || tiers >= (1u << kTiers)) {
            rc = KVREG_EPROTO;
            break;
        }
        group_start_ = false;
        prev_order_ = order;
        tiers_out[r] = tiers;
        if (own) {
            keys[r] = key_of(key, group_part_);
            continue;
        }
        if (r + kAhead < n) w.map.prefetch(get64(rec + kAhead * size));
        const uint64_t router = get64(rec + 8);
        // One engine hash in two groups (each group alone is checked as ordered):
        // inconsistent; the failure removes what was loaded.
        if (!w.map.insert_new(key, router, tiers, part_index_)) {
            rc = KVREG_EPROTO;
            break;
        }
        keys[r] = key_of(router, group_part_);
    }
    if (!own) {
        idx_.mapped_.fetch_add(r, std::memory_order_relaxed);
        w.loras.ref(part_index_, r);
    }
    g.unlock(); // end_worker takes it again
    if (rc != KVREG_OK) return rc;
    left_in_group_ -= n;
    return left_in_group_ == 0 ? next_group_or_worker() : KVREG_OK;
}

// A worker's records wait, with those of the workers before it, until a worker ends with a
// million or more waiting (kFlushRecords: about 25 MB with update_many's sort) or the last
// worker is done; then they all go into the table at once (flush()). The table takes
// them shard by shard (HolderTable::update_many), each shard's table written just before its
// entries go in, so that they find it in cache. Flushed a worker at a time, every worker's
// pass visited every shard and found its table gone from the cache: with 8 or 64 workers a
// record cost about twice as much to load as with one (kvreg-bench --workload index_load
// --workers N); a piece at a time, the trace's load took 1.9x as long.
void Index::Loader::end_worker() {
    waiting_.push_back(Waiting{tag_, w_, keys_.size()}); // may throw: the load is undone
    if (keys_.size() >= flush_records_ || worker_ == n_workers_) flush();
}

void Index::Loader::flush() {
    // The table takes the workers' runs of records in record order; then the workers are
    // sorted by slot, to be locked in slot order as Index::snapshot() locks them (so the two
    // cannot deadlock) and to find one by its tag below. A dump leaves out a worker still
    // `loading`: it has each worker whole or not at all.
    std::vector<HolderTable::SlotRun> runs;
    runs.reserve(waiting_.size());
    for (const Waiting &w : waiting_) runs.push_back(HolderTable::SlotRun{w.end, w.tag});
    std::sort(waiting_.begin(), waiting_.end(), [](const Waiting &a, const Waiting &b) { return slot_of(a.tag) < slot_of(b.tag); });
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(waiting_.size());
    for (const Waiting &w : waiting_) locks.emplace_back(w.w->lock);
    HolderTable &table = idx_.table_;
    if (idx_.opt_.own_hashes) {
        // One record per hash (ascending): the tiers are the counts.
        table.update_many(keys_.data(), tiers_.data(), keys_.size(), runs.data(), [](uint64_t, uint32_t, uint8_t tiers, uint32_t) {
            uint32_t counts = 0;
            for (unsigned t = 0; t < kTiers; t++)
                if (tiers & tier_bit(t)) counts |= one(t);
            return counts;
        });
    } else {
        // Several engine hashes may name one router hash: each counts one in its tiers, up
        // to 255 in the table and the rest in the worker's overflow (counts.hpp).
        table.update_many(keys_.data(), tiers_.data(), keys_.size(), runs.data(), [&](uint64_t key, uint32_t tag, uint8_t tiers, uint32_t c) {
            for (unsigned t = 0; t < kTiers; t++) {
                if (!(tiers & tier_bit(t))) continue;
                if (tier_byte(c, t) == 255) {
                    const auto w = std::lower_bound(waiting_.begin(), waiting_.end(), slot_of(tag),
                                                    [](const Waiting &x, uint32_t s) { return slot_of(x.tag) < s; });
                    w->w->overflow[key][t]++; // may throw: this entry not changed yet
                } else {
                    c += one(t);
                }
            }
            return c;
        });
    }
    for (const Waiting &w : waiting_) w.w->loading = false; // whole: a dump may see them now
    keys_.clear();
    tiers_.clear();
    waiting_.clear();
}

int Index::Loader::next_group_or_worker() {
    if (group_ < groups_) {
        stage_ = Stage::kGroupHead;
        return KVREG_OK;
    }
    if (w_) {
        end_worker();
        w_ = nullptr;
    }
    if (worker_ < n_workers_) stage_ = Stage::kWorkerHead;
    else if (body_left() == 0) stage_ = Stage::kTrailer;
    else return KVREG_EPROTO; // bytes after the last worker
    return KVREG_OK;
}

int Index::Loader::on_trailer(const unsigned char *t) noexcept {
    if (sum_ && get64(t) != sum_->digest()) return KVREG_EPROTO;
    stage_ = Stage::kDone;
    return KVREG_OK;
}

} // namespace kvreg::index
