// Statistics that take a pass over the table: distinct blocks, and the per-worker listing.
#include <algorithm>
#include <mutex>

#include "index/index.hpp"

namespace kvreg::index {

uint64_t Index::blocks() const noexcept {
    // for_each_entry hands a hash's holders over one after another, and one hash lives in
    // one shard: each change of hash is a new block.
    uint64_t n = 0, prev = 0;
    bool first = true;
    table_.for_each_entry([&](uint64_t hash, uint32_t, uint32_t) {
        n += first || hash != prev;
        first = false;
        prev = hash;
    });
    return n;
}

void Index::worker_infos(std::vector<WorkerInfo> &out) const {
    const uint32_t n = workers_.used();
    std::vector<uint32_t> pos(n, UINT32_MAX);
    for (uint32_t s = 0; s < n; s++) {
        Worker &w = workers_.at(s);
        std::lock_guard<std::mutex> g(w.lock);
        if (!w.live) continue;
        const WorkerIdent &who = workers_.ident(s);
        WorkerInfo wi{};
        wi.id = who.id.load(std::memory_order_relaxed);
        wi.dp = who.dp.load(std::memory_order_relaxed);
        wi.tag = workers_.tag(s);
        wi.next_seq = w.seq_known ? w.next_seq : KVREG_INDEX_SEQ_NONE;
        wi.mapped = w.map.size();
        wi.partition = w.model;
        pos[s] = static_cast<uint32_t>(out.size());
        out.push_back(wi);
    }
    table_.for_each_entry([&](uint64_t, uint32_t tag, uint32_t counts) {
        const uint32_t s = slot_of(tag);
        if (s >= n || pos[s] == UINT32_MAX || out[pos[s]].tag != tag) return; // left or came since
        WorkerInfo &wi = out[pos[s]];
        wi.entries++;
        for (unsigned t = 0; t < kTiers; t++) wi.tiers[t] += tier_byte(counts, t) != 0;
    });
    std::sort(out.begin(), out.end(),
              [](const WorkerInfo &a, const WorkerInfo &b) { return a.id != b.id ? a.id < b.id : a.dp < b.dp; });
}

} // namespace kvreg::index
