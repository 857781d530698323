// Dynamo RouterEvent{worker_id, storage_tier, event{event_id, data, dp_rank}}, one per group,
// in serde's representation: data is {"stored":{parent_hash, blocks[{block_hash,
// tokens_hash}]}}, {"removed":{block_hashes}} or the bare string "cleared" (a unit variant).
// Our sequence hash is Dynamo's block_hash (ExternalSequenceBlockHash), our block hash its
// tokens_hash (LocalBlockHash). event_id: by default the encoder's next id for every
// RouterEvent, so that live batches and snapshots form one contiguous run as Dynamo's
// consumers check it; with KVREG_WIRE_EVENT_IDS_KVREG the kvreg event_id of the group's first
// event, and the next id only for snapshot groups (KVREG_EVENT_ID_SNAPSHOT).
// JSON is written by hand (a fixed shape of integers and constant strings: nothing to escape).
#include "wire/dyn_sink.hpp"
#include "wire/encode.hpp"
#include "wire/media.hpp"

#include "kvreg_wire.h"

namespace kvreg::wire {
namespace {

void data(Sink &s, const kvreg_event *ev, const Group &g) {
    if (g.type == KVREG_WIRE_CLEARED) {
        s.string("cleared");
        return;
    }
    s.begin_map(1);
    if (g.type == KVREG_WIRE_STORED) {
        s.key("stored");
        s.begin_map(2);
        s.key("parent_hash");
        if (ev[g.first].has_parent)
            s.u64(ev[g.first].parent_sequence_hash, true);
        else
            s.nil();
        s.key("blocks");
        s.begin_array(g.end - g.first);
        for (size_t i = g.first; i < g.end; i++) {
            s.element();
            s.begin_map(2);
            s.key("block_hash"), s.u64(ev[i].sequence_hash, true);
            s.key("tokens_hash"), s.u64(ev[i].block_hash, true);
            s.end_map();
        }
        s.end_array();
        s.end_map();
    } else {
        s.key("removed");
        s.begin_map(1);
        s.key("block_hashes");
        size_t count = 0;
        for (size_t i = g.first; i < g.end; i++)
            count += ev[i].medium == g.medium;
        s.begin_array(count);
        for (size_t i = g.first; i < g.end; i++) {
            if (ev[i].medium != g.medium)
                continue;
            s.element();
            s.u64(ev[i].sequence_hash, true);
        }
        s.end_array();
        s.end_map();
    }
    s.end_map();
}

} // namespace

void encode_dynamo(MpWriter &w, const Plan &plan, const kvreg_event *ev, EncodeOptions &o,
                   bool json) {
    Sink s(w, json);
    if (!o.kvreg_ids) {
        const uint64_t first = plan.n_events ? ev[0].event_id : KVREG_EVENT_ID_SNAPSHOT;
        if (first != KVREG_EVENT_ID_SNAPSHOT && first == o.last_first)
            o.next_event_id = o.last_start; // the same live events again: the same ids
        o.last_first = first, o.last_start = o.next_event_id;
    }
    s.begin_array(plan.groups.size());
    for (const Group &g : plan.groups) {
        s.element();
        s.begin_map(3);
        s.key("worker_id"), s.u64(o.worker_id, false);
        s.key("storage_tier"), s.string(dynamo_tier_name(g.medium));
        s.key("event");
        s.begin_map(3);
        uint64_t id = ev[g.first].event_id;
        if (!o.kvreg_ids || id == KVREG_EVENT_ID_SNAPSHOT)
            id = o.next_event_id++;
        s.key("event_id"), s.u64(id, false);
        s.key("data"), data(s, ev, g);
        s.key("dp_rank"), s.u64(o.dp_rank, false);
        s.end_map();
        s.end_map();
    }
    s.end_array();
}

} // namespace kvreg::wire
