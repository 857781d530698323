// Dynamo RouterEvent{worker_id, storage_tier, event{event_id, data, dp_rank}}, one per group,
// in serde's representation: data is {"stored":{parent_hash, blocks[{block_hash,
// tokens_hash}]}}, {"removed":{block_hashes}} or the bare string "cleared" (a unit variant).
// Our sequence hash is Dynamo's block_hash (ExternalSequenceBlockHash), our block hash its
// tokens_hash (LocalBlockHash); event_id is the kvreg event_id of the group's first event, or
// for a group of snapshot events (KVREG_EVENT_ID_SNAPSHOT) the encoder's next snapshot id,
// so that a snapshot's RouterEvents carry contiguous ids.
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
    s.begin_array(plan.groups.size());
    for (const Group &g : plan.groups) {
        s.element();
        s.begin_map(3);
        s.key("worker_id"), s.u64(o.worker_id, false);
        s.key("storage_tier"), s.string(dynamo_tier_name(g.medium));
        s.key("event");
        s.begin_map(3);
        uint64_t id = ev[g.first].event_id;
        if (id == KVREG_EVENT_ID_SNAPSHOT)
            id = o.next_snapshot_id++;
        s.key("event_id"), s.u64(id, false);
        s.key("data"), data(s, ev, g);
        s.key("dp_rank"), s.u64(o.dp_rank, false);
        s.end_map();
        s.end_map();
    }
    s.end_array();
}

} // namespace kvreg::wire
