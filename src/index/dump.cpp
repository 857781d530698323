// Dump and digest of the whole index (the format: index/dump_format.hpp; loading it:
// load.cpp).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/hash.hpp"
#include "index/counts.hpp"
#include "index/dump_format.hpp"
#include "index/index.hpp"
#include "index/partition.hpp"

namespace kvreg::index {

using namespace dump_format;

namespace {

constexpr size_t kChunk = 64 * 1024;

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

namespace {
// Into the dump's order: by partition, then by record_order(). ENGINE records come out of a
// mapping in slot order, and a mapping's home slot is the top bits of record_order(): they
// are in order already but for entries displaced within a cluster (a few slots), unless
// several partitions interleave. An insertion sort puts the first kind right in about one
// pass, where std::sort took about a third of a dump's time (kvreg-bench --workload
// index_load: dump and digest); past a budget of moves (interleaved partitions, OWN records
// in table order) std::sort does it.
template <class Rec> void sort_records(std::vector<Rec> &recs) {
    const auto before = [](const Rec &a, const Rec &b) {
        return a.part != b.part ? a.part < b.part : record_order(a.key, kVersion) < record_order(b.key, kVersion);
    };
    size_t budget = 4 * recs.size();
    for (size_t i = 1; i < recs.size(); i++) {
        if (!before(recs[i], recs[i - 1])) continue;
        const Rec x = recs[i];
        size_t j = i;
        for (; j > 0 && before(x, recs[j - 1]) && budget > 0; j--, budget--) recs[j] = recs[j - 1];
        recs[j] = x;
        if (budget == 0) {
            std::sort(recs.begin(), recs.end(), before);
            return;
        }
    }
}
} // namespace

void Index::snapshot(Snapshot &snap) const {
    // Lock every slot handed out so far, in slot order (the only other path that holds two
    // worker locks, a load's flush, takes them in slot order too, so this cannot deadlock):
    // from then on no worker in it changes, and a free slot cannot be handed out again (its
    // new owner waits for the lock) until the copy is done.
    const uint32_t n = workers_.used();
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(n);
    std::vector<uint32_t> pos(n, UINT32_MAX), tags(n, 0);
    std::vector<uint64_t> models(n, 0);
    for (uint32_t s = 0; s < n; s++) locks.emplace_back(workers_.at(s).lock);
    for (uint32_t s = 0; s < n; s++) {
        const Worker &w = workers_.at(s);
        if (!w.live || w.loading) continue; // a worker part-way through a load: not at all
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
    // Canonical order: the dump does not depend on slots, shards or insertion order. Records
    // by their key mixed (record_order(): the order a load fills a mapping in).
    std::sort(snap.workers.begin(), snap.workers.end(),
              [](const Snapshot::W &a, const Snapshot::W &b) { return a.id != b.id ? a.id < b.id : a.dp < b.dp; });
    for (auto &w : snap.workers) sort_records(w.recs);
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

} // namespace kvreg::index
