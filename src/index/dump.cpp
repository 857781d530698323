// Dump, load and digest of the whole index: the format is documented once, in
// docs/design/index.md ("Dump format"); the constants below are its fields.
#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/hash.hpp"
#include "index/counts.hpp"
#include "index/index.hpp"
#include "index/partition.hpp"

namespace kvreg::index {

namespace {

constexpr unsigned char kMagic[8] = {'K', 'V', 'R', 'E', 'G', 'I', 'D', 'X'};
constexpr uint32_t kVersion = KVREG_INDEX_DUMP_VERSION;
constexpr size_t kHeader = 40;     // magic, version, hashes, profile, block size, salt, workers
constexpr size_t kWorkerHead = 40; // id, dp, flags, next seq, model partition, groups
constexpr size_t kGroupHead = 16;  // partition, records
constexpr size_t kTrailer = 8;     // checksum
constexpr size_t kOwnRecord = 9;   // router hash, tiers
constexpr size_t kEngineRecord = 17; // engine hash, router hash, tiers
constexpr uint32_t kSeqKnown = 1;  // worker flag: next_seq is the seq the next batch must carry
constexpr size_t kChunk = 64 * 1024;

void put32(unsigned char *p, uint32_t v) noexcept {
    for (int i = 0; i < 4; i++) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char *p, uint64_t v) noexcept {
    for (int i = 0; i < 8; i++) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
// One load each where the host is little-endian (the byte loop was not merged into one by the
// compiler: a fifth of a load's time).
uint32_t get32(const unsigned char *p) noexcept {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return std::endian::native == std::endian::little ? v : __builtin_bswap32(v);
}
uint64_t get64(const unsigned char *p) noexcept {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return std::endian::native == std::endian::little ? v : __builtin_bswap64(v);
}

uint8_t tier_bits(uint32_t counts) noexcept {
    uint8_t b = 0;
    for (unsigned t = 0; t < kTiers; t++)
        if (tier_byte(counts, t)) b |= static_cast<uint8_t>(1u << t);
    return b;
}

// Buffers the dump into kChunk pieces, checksums them, and hands them to write (if any).
class Out {
public:
    Out(kvreg_index_write_fn write, void *ctx) : write_(write), ctx_(ctx) { buf_.reserve(kChunk); }
    void put(const unsigned char *p, size_t n) {
        while (n && rc_ == 0) {
            const size_t k = std::min(n, kChunk - buf_.size());
            buf_.insert(buf_.end(), p, p + k);
            p += k;
            n -= k;
            if (buf_.size() == kChunk) flush();
        }
    }
    void flush() {
        if (buf_.empty() || rc_ != 0) return;
        sum_.update(buf_.data(), buf_.size());
        if (write_) rc_ = write_(buf_.data(), buf_.size(), ctx_);
        buf_.clear();
    }
    // Ends the dump with the checksum of everything before it.
    void finish() {
        flush();
        if (rc_ != 0) return;
        unsigned char t[kTrailer];
        put64(t, sum_.digest());
        if (write_) rc_ = write_(t, sizeof t, ctx_);
    }
    uint64_t sum() const noexcept { return sum_.digest(); }
    int rc() const noexcept { return rc_; }

private:
    kvreg_index_write_fn write_;
    void *ctx_;
    std::vector<unsigned char> buf_;
    Checksum64 sum_;
    int rc_ = 0;
};

} // namespace

// The content as the dump writes it, copied out under the workers' locks.
struct Index::Snapshot {
    struct Rec {
        uint64_t part;   // partition (0: the default)
        uint64_t key;    // OWN: the router hash; ENGINE: the engine hash
        uint64_t router; // the router hash
        uint8_t tiers;   // bit t: held in tier t
    };
    struct W {
        uint64_t id;
        uint32_t dp;
        uint32_t flags;
        uint64_t next_seq;
        uint64_t model; // the worker's model partition (0: the default)
        std::vector<Rec> recs;
    };
    std::vector<W> workers;
};

void Index::snapshot(Snapshot &snap) const {
    // Lock every slot handed out so far, in slot order (no other path holds two worker locks,
    // so this cannot deadlock): from then on no worker in it changes, and a free slot cannot
    // be handed out again (its new owner waits for the lock) until the copy is done.
    const uint32_t n = workers_.used();
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(n);
    std::vector<uint32_t> pos(n, UINT32_MAX), tags(n, 0);
    std::vector<uint64_t> models(n, 0);
    for (uint32_t s = 0; s < n; s++) locks.emplace_back(workers_.at(s).lock);
    for (uint32_t s = 0; s < n; s++) {
        const Worker &w = workers_.at(s);
        if (!w.live) continue;
        const WorkerIdent &who = workers_.ident(s);
        pos[s] = static_cast<uint32_t>(snap.workers.size());
        tags[s] = workers_.tag(s);
        snap.workers.push_back(Snapshot::W{who.id.load(std::memory_order_relaxed),
                                           who.dp.load(std::memory_order_relaxed),
                                           w.seq_known ? kSeqKnown : 0u, w.seq_known ? w.next_seq : 0, w.model, {}});
        models[s] = w.model;
    }
    if (opt_.own_hashes) {
        // One pass over the table; entries of workers added since the dump started are left out.
        table_.for_each_entry([&](uint64_t hash, uint32_t tag, uint32_t counts) {
            const uint32_t s = slot_of(tag);
            if (s >= n || pos[s] == UINT32_MAX || tags[s] != tag) return;
            const uint64_t h = key_of(hash, models[s]); // the router hash (OWN: the worker's partition)
            snap.workers[pos[s]].recs.push_back(Snapshot::Rec{models[s], h, h, tier_bits(counts)});
        });
    } else {
        // The mapping names every entry of the worker, with its tiers: the table is not read.
        for (uint32_t s = 0; s < n; s++) {
            if (pos[s] == UINT32_MAX) continue;
            auto &recs = snap.workers[pos[s]].recs;
            const Worker &w = workers_.at(s);
            recs.reserve(w.map.size());
            w.map.for_each([&](const EngineMap::Entry &e) {
                recs.push_back(Snapshot::Rec{part_of(w, e.part), e.engine, e.router, static_cast<uint8_t>(e.tiers)});
            });
        }
    }
    locks.clear();
    // Canonical order: the dump does not depend on slots, shards or insertion order.
    std::sort(snap.workers.begin(), snap.workers.end(),
              [](const Snapshot::W &a, const Snapshot::W &b) { return a.id != b.id ? a.id < b.id : a.dp < b.dp; });
    for (auto &w : snap.workers)
        std::sort(w.recs.begin(), w.recs.end(), [](const Snapshot::Rec &a, const Snapshot::Rec &b) {
            return a.part != b.part ? a.part < b.part : a.key < b.key;
        });
}

int Index::write_snapshot(const Snapshot &snap, kvreg_index_write_fn write, void *ctx, uint64_t *sum) const {
    Out out(write, ctx);
    unsigned char h[kHeader];
    std::memcpy(h, kMagic, 8);
    put32(h + 8, kVersion);
    put32(h + 12, opt_.own_hashes ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE);
    put32(h + 16, opt_.kv_router_profile ? KVREG_INDEX_PROFILE_KV_ROUTER : KVREG_INDEX_PROFILE_DYNAMO);
    put32(h + 20, opt_.block_size);
    put64(h + 24, opt_.salt);
    put64(h + 32, snap.workers.size());
    out.put(h, sizeof h);
    for (const auto &w : snap.workers) {
        // Records of one partition form a group (they are sorted by partition).
        uint64_t groups = 0;
        for (size_t i = 0; i < w.recs.size(); i++) groups += i == 0 || w.recs[i].part != w.recs[i - 1].part;
        unsigned char wh[kWorkerHead];
        put64(wh, w.id);
        put32(wh + 8, w.dp);
        put32(wh + 12, w.flags);
        put64(wh + 16, w.next_seq);
        put64(wh + 24, w.model);
        put64(wh + 32, groups);
        out.put(wh, sizeof wh);
        for (size_t i = 0; i < w.recs.size();) {
            size_t j = i;
            while (j < w.recs.size() && w.recs[j].part == w.recs[i].part) j++;
            unsigned char gh[kGroupHead];
            put64(gh, w.recs[i].part);
            put64(gh + 8, j - i);
            out.put(gh, sizeof gh);
            for (; i < j; i++) {
                unsigned char r[kEngineRecord];
                const Snapshot::Rec &rec = w.recs[i];
                put64(r, rec.key);
                if (opt_.own_hashes) {
                    r[8] = rec.tiers;
                    out.put(r, kOwnRecord);
                } else {
                    put64(r + 8, rec.router);
                    r[16] = rec.tiers;
                    out.put(r, kEngineRecord);
                }
            }
        }
    }
    out.finish();
    if (sum) *sum = out.sum();
    return out.rc();
}

int Index::dump(kvreg_index_write_fn write, void *ctx) const {
    Snapshot snap;
    snapshot(snap);
    return write_snapshot(snap, write, ctx, nullptr);
}

uint64_t Index::digest() const {
    Snapshot snap;
    snapshot(snap);
    uint64_t sum = 0;
    write_snapshot(snap, nullptr, nullptr, &sum);
    return sum;
}

namespace {

// A dump's body, read field by field with its bounds checked.
struct In {
    const unsigned char *p;
    size_t left;
    bool take(size_t n, const unsigned char **at) noexcept {
        if (left < n) return false;
        *at = p;
        p += n;
        left -= n;
        return true;
    }
};

// Whether the body after the header (workers, up to the checksum) is consistent: every count
// within the bytes left, workers and records in strictly ascending order (so none repeats),
// known flags and tiers, nothing after the last worker.
bool body_ok(In in, uint64_t n_workers, size_t rec_size, bool own) noexcept {
    if (n_workers > in.left / kWorkerHead) return false;
    uint64_t prev_id = 0;
    uint32_t prev_dp = 0;
    for (uint64_t wi = 0; wi < n_workers; wi++) {
        const unsigned char *wh = nullptr;
        if (!in.take(kWorkerHead, &wh)) return false;
        const uint64_t id = get64(wh);
        const uint32_t dp = get32(wh + 8), flags = get32(wh + 12);
        const uint64_t next_seq = get64(wh + 16), model = get64(wh + 24), groups = get64(wh + 32);
        if (wi > 0 && (id < prev_id || (id == prev_id && dp <= prev_dp))) return false;
        prev_id = id;
        prev_dp = dp;
        if ((flags & ~kSeqKnown) != 0 || (!(flags & kSeqKnown) && next_seq != 0)) return false;
        if (groups > in.left / kGroupHead) return false;
        uint64_t prev_part = 0;
        for (uint64_t g = 0; g < groups; g++) {
            const unsigned char *gh = nullptr;
            if (!in.take(kGroupHead, &gh)) return false;
            const uint64_t part = get64(gh), n = get64(gh + 8);
            // OWN mode keys a worker's entries by its own partition only.
            if ((own && part != model) || (g > 0 && part <= prev_part)) return false;
            prev_part = part;
            if (n == 0 || n > in.left / rec_size) return false;
            uint64_t prev_key = 0;
            for (uint64_t r = 0; r < n; r++) {
                const unsigned char *rec = nullptr;
                in.take(rec_size, &rec);
                const uint64_t key = get64(rec);
                const uint8_t tiers = rec[rec_size - 1];
                if ((r > 0 && key <= prev_key) || tiers == 0 || tiers >= (1u << kTiers)) return false;
                prev_key = key;
            }
        }
    }
    return in.left == 0;
}

} // namespace

int Index::load(const unsigned char *data, size_t len) {
    if (workers_.count() != 0) return KVREG_ESTATE;
    if (len < kHeader + kTrailer || std::memcmp(data, kMagic, sizeof kMagic) != 0) return KVREG_EPROTO;
    if (get32(data + 8) != kVersion) return KVREG_ENOTSUP;
    if (checksum64(data, len - kTrailer) != get64(data + len - kTrailer)) return KVREG_EPROTO;
    const uint32_t hashes = get32(data + 12), profile = get32(data + 16), bs = get32(data + 20);
    if (hashes > KVREG_INDEX_HASHES_OWN || profile > KVREG_INDEX_PROFILE_KV_ROUTER || bs == 0) return KVREG_EPROTO;
    if ((hashes == KVREG_INDEX_HASHES_OWN) != opt_.own_hashes ||
        (profile == KVREG_INDEX_PROFILE_KV_ROUTER) != opt_.kv_router_profile || bs != opt_.block_size ||
        get64(data + 24) != opt_.salt)
        return KVREG_EINVAL;
    const uint64_t n_workers = get64(data + 32);
    const size_t rec_size = opt_.own_hashes ? kOwnRecord : kEngineRecord;
    In body{data + kHeader, len - kHeader - kTrailer};
    if (!body_ok(body, n_workers, rec_size, opt_.own_hashes)) return KVREG_EPROTO;

    // Valid: apply it. Only running out of memory or of worker slots can fail from here; then
    // every worker loaded so far is removed again.
    int rc = KVREG_OK;
    try {
        rc = load_checked(data, len);
    } catch (const std::bad_alloc &) {
        rc = KVREG_ENOMEM;
    }
    if (rc != KVREG_OK) {
        In in{data + kHeader, len - kHeader - kTrailer};
        for (uint64_t wi = 0; wi < n_workers; wi++) {
            const unsigned char *wh = nullptr;
            in.take(kWorkerHead, &wh);
            remove_worker(get64(wh), get32(wh + 8)); // KVREG_ENOENT past the ones loaded
            const uint64_t groups = get64(wh + 32);
            for (uint64_t g = 0; g < groups; g++) {
                const unsigned char *gh = nullptr;
                in.take(kGroupHead, &gh);
                const unsigned char *skip = nullptr;
                in.take(get64(gh + 8) * rec_size, &skip);
            }
        }
    }
    return rc;
}

// Applies a dump that body_ok accepted. Throws std::bad_alloc; KVREG_EOVERFLOW when the
// workers do not fit; KVREG_EPROTO for an engine hash repeated across a worker's groups.
// Each worker's records go into its mapping (ENGINE mode) first, then into the shared table
// all at once (HolderTable::update_many: shard by shard, each table sized once), so that
// whatever fails half-way, removing the worker finds every entry it made.
int Index::load_checked(const unsigned char *data, size_t len) {
    const uint64_t n_workers = get64(data + 32);
    const size_t rec_size = opt_.own_hashes ? kOwnRecord : kEngineRecord;
    {
        // The table's room for every record first, counted per shard (records naming one
        // router hash twice count twice: a bound), so that it never grows while loading.
        std::vector<uint64_t> more(table_.shard_count(), 0);
        In in{data + kHeader, len - kHeader - kTrailer};
        for (uint64_t wi = 0; wi < n_workers; wi++) {
            const unsigned char *wh = nullptr;
            in.take(kWorkerHead, &wh);
            for (uint64_t gi = 0, groups = get64(wh + 32); gi < groups; gi++) {
                const unsigned char *gh = nullptr, *body = nullptr;
                in.take(kGroupHead, &gh);
                const uint64_t part = get64(gh), m = get64(gh + 8);
                in.take(m * rec_size, &body);
                const size_t router_at = opt_.own_hashes ? 0 : 8;
                for (uint64_t r = 0; r < m; r++)
                    more[table_.shard_index(key_of(get64(body + r * rec_size + router_at), part))]++;
            }
        }
        table_.reserve(more.data());
    }
    In in{data + kHeader, len - kHeader - kTrailer};
    std::vector<uint64_t> keys;   // the worker's table keys, one per record
    std::vector<uint8_t> tiers;   // and its tiers
    for (uint64_t wi = 0; wi < n_workers; wi++) {
        const unsigned char *wh = nullptr;
        in.take(kWorkerHead, &wh);
        bool added = false;
        const uint32_t s = workers_.find_or_add(get64(wh), get32(wh + 8), &added);
        if (s == UINT32_MAX) return KVREG_EOVERFLOW;
        Worker &w = workers_.at(s);
        std::lock_guard<std::mutex> g(w.lock);
        const uint32_t tag = workers_.tag(s);
        w.seq_known = (get32(wh + 12) & kSeqKnown) != 0;
        w.next_seq = get64(wh + 16);
        w.model = get64(wh + 24);
        const uint64_t groups = get64(wh + 32);
        struct MapBytes { // the index's total of mapping bytes, kept right even on a throw
            Worker &w;
            std::atomic<uint64_t> &total;
            uint64_t before = w.map.bytes();
            ~MapBytes() { total.fetch_add(w.map.bytes() - before, std::memory_order_relaxed); }
        } track{w, map_bytes_};
        // The worker's records: all its groups, one after another (body_ok checked the counts).
        const In recs = in;
        uint64_t n = 0;
        for (uint64_t gi = 0; gi < groups; gi++) {
            const unsigned char *gh = nullptr, *skip = nullptr;
            in.take(kGroupHead, &gh);
            n += get64(gh + 8);
            in.take(get64(gh + 8) * rec_size, &skip);
        }
        keys.resize(n);
        tiers.resize(n);
        if (!opt_.own_hashes) w.map.reserve(n); // one size for all groups: inserts cannot fail
        In at = recs;
        size_t k = 0;
        for (uint64_t gi = 0; gi < groups; gi++) {
            const unsigned char *gh = nullptr, *body = nullptr;
            at.take(kGroupHead, &gh);
            const uint64_t part = get64(gh), m = get64(gh + 8);
            if (opt_.own_hashes) {
                at.take(m * kOwnRecord, &body);
                for (uint64_t r = 0; r < m; r++, k++) {
                    keys[k] = key_of(get64(body + r * kOwnRecord), part);
                    tiers[k] = body[r * kOwnRecord + 8];
                }
                continue;
            }
            at.take(m * kEngineRecord, &body);
            const uint32_t pi = part_index(w, part);
            constexpr uint64_t kAhead = 8; // mapping slots requested ahead of their insert
            for (uint64_t r = 0; r < m && r < kAhead; r++) w.map.prefetch(get64(body + r * kEngineRecord));
            uint64_t r = 0;
            for (; r < m; r++, k++) {
                const unsigned char *rec = body + r * kEngineRecord;
                if (r + kAhead < m) w.map.prefetch(get64(rec + kAhead * kEngineRecord));
                const uint64_t router = get64(rec + 8);
                // One engine hash in two groups (each group alone is checked as ordered):
                // inconsistent; the caller removes what was loaded.
                if (!w.map.insert_new(get64(rec), router, rec[16], pi)) break;
                keys[k] = key_of(router, part);
                tiers[k] = rec[16];
            }
            mapped_.fetch_add(r, std::memory_order_relaxed);
            if (r < m) return KVREG_EPROTO;
        }
        if (opt_.own_hashes) {
            // One record per hash (ascending): the tiers are the counts.
            table_.update_many(keys.data(), n, tag, [&](size_t i, uint32_t) {
                uint32_t counts = 0;
                for (unsigned t = 0; t < kTiers; t++)
                    if (tiers[i] & tier_bit(t)) counts |= one(t);
                return counts;
            });
        } else {
            // Several engine hashes may name one router hash: each counts one in its tiers, up
            // to 255 in the table and the rest in the worker's overflow (counts.hpp).
            table_.update_many(keys.data(), n, tag, [&](size_t i, uint32_t c) {
                for (unsigned t = 0; t < kTiers; t++) {
                    if (!(tiers[i] & tier_bit(t))) continue;
                    if (tier_byte(c, t) == 255)
                        w.overflow[keys[i]][t]++; // may throw: this entry not changed yet
                    else
                        c += one(t);
                }
                return c;
            });
        }
    }
    return KVREG_OK;
}

} // namespace kvreg::index
