#include "core/snapshot.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace kvreg {

void order_parents_first(EventCopies &ev) {
    const size_t n = ev.size();
    std::unordered_map<uint64_t, size_t> index_of;
    index_of.reserve(n);
    for (size_t i = 0; i < n; i++) index_of.emplace(ev.events[i].sequence_hash, i);

    // Depth of each event in the forest of parents present in the set, computed along each
    // chain iteratively (chains can be millions long), every event visited once.
    constexpr size_t kUnknown = SIZE_MAX, kVisiting = SIZE_MAX - 1;
    std::vector<size_t> depth(n, kUnknown);
    std::vector<size_t> chain;
    for (size_t i = 0; i < n; i++) {
        if (depth[i] != kUnknown) continue;
        size_t base = 0;
        for (size_t cur = i;;) {
            chain.push_back(cur);
            depth[cur] = kVisiting;
            const kvreg_event &e = ev.events[cur];
            if (!e.has_parent) break;
            const auto it = index_of.find(e.parent_sequence_hash);
            if (it == index_of.end()) break;
            const size_t d = depth[it->second];
            if (d == kVisiting) break; // a cycle: cut it here
            if (d != kUnknown) {
                base = d + 1;
                break;
            }
            cur = it->second;
        }
        // chain runs child -> ancestor: the ancestor gets `base`, each child one more.
        for (size_t k = chain.size(); k-- > 0;) depth[chain[k]] = base++;
        chain.clear();
    }

    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&depth](size_t a, size_t b) { return depth[a] < depth[b]; });
    EventCopies::Events events(n); // every element assigned below
    std::vector<size_t> offs(n);
    for (size_t k = 0; k < n; k++) {
        events[k] = ev.events[order[k]];
        offs[k] = ev.token_off[order[k]];
    }
    ev.events.swap(events);
    ev.token_off.swap(offs);
    ev.token_ptrs();
}

} // namespace kvreg
