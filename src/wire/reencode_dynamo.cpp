// Re-encoding a decoded Dynamo payload the way Dynamo writes it: serde's derive order for
// RouterEvent {worker_id, storage_tier, residency_domain, event {event_id, data, dp_rank},
// state_source}, KvCacheStoreData {parent_hash, start_position, blocks} and
// KvCacheStoredBlockData {block_hash, tokens_hash, mm_extra_info}; integers in their smallest
// form (rmp's write_uint), maps with field names (to_vec_named), externally tagged variants
// ({"stored": ...}, "cleared" bare); JSON compact as serde_json writes it. Each key is written
// when it was on the wire (Dynamo's releases differ in which of storage_tier, start_position,
// mm_extra_info, residency_domain and state_source they write), so that what any of them
// wrote comes back byte for byte. state_source comes back as the bytes it came as.
#include "wire/dyn_sink.hpp"
#include "wire/reencode.hpp"

#include <string>

namespace kvreg::wire {
namespace {

class DynReencoder {
public:
    DynReencoder(const DecodedBatch &b, MpWriter &w, bool json) : b_(b), s_(w, json) {}

    void payload() {
        if (b_.shape.single && b_.events.size() == 1) {
            router_event(0);
            return;
        }
        s_.begin_array(b_.events.size());
        for (size_t k = 0; k < b_.events.size(); k++)
            s_.element(), router_event(k);
        s_.end_array();
    }

private:
    static bool here(uint8_t form) { return form != KVREG_WIRE_FIELD_ABSENT; }
    const char *str(size_t off) const { return b_.strings.data() + off; }
    void opt_text(uint8_t form, size_t off) {
        if (form == KVREG_WIRE_FIELD_SET && off != kNone)
            s_.text(str(off), std::char_traits<char>::length(str(off)));
        else
            s_.nil();
    }

    void router_event(size_t k) {
        const kvreg_wire_event &e = b_.events[k];
        const EventParts &p = b_.parts[k];
        const bool worker = p.dyn_keys & DYN_WORKER;
        s_.begin_map(worker + here(p.medium_form) + here(p.residency_form) + 1 +
                     here(p.state_form));
        if (worker)
            s_.key("worker_id"), s_.u64(e.worker_id, false);
        if (here(p.medium_form))
            s_.key("storage_tier"), opt_text(p.medium_form, p.medium_name);
        if (here(p.residency_form))
            s_.key("residency_domain"), opt_text(p.residency_form, p.residency);
        s_.key("event");
        const bool id = p.dyn_keys & DYN_EVENT_ID, dp = p.dyn_keys & DYN_DP_RANK;
        s_.begin_map(id + 1 + dp);
        if (id)
            s_.key("event_id"), s_.u64(e.event_id, false);
        s_.key("data"), data(k);
        if (dp)
            s_.key("dp_rank"), s_.u64(static_cast<uint64_t>(e.dp_rank), false);
        s_.end_map();
        if (here(p.state_form)) {
            s_.key("state_source");
            if (p.state_form == KVREG_WIRE_FIELD_SET)
                s_.value_bytes(str(p.state_source), p.state_source_len);
            else
                s_.nil();
        }
        s_.end_map();
    }

    void data(size_t k) {
        const kvreg_wire_event &e = b_.events[k];
        if (e.type == KVREG_WIRE_CLEARED) {
            s_.string("cleared");
            return;
        }
        s_.begin_map(1);
        if (e.type == KVREG_WIRE_REMOVED) {
            s_.key("removed");
            s_.begin_map(1);
            s_.key("block_hashes");
            s_.begin_array(e.n_block_hashes);
            for (size_t i = 0; i < e.n_block_hashes; i++)
                s_.element(), s_.u64(e.block_hashes[i], false);
            s_.end_array();
            s_.end_map();
        } else {
            stored(k);
        }
        s_.end_map();
    }

    void stored(size_t k) {
        const kvreg_wire_event &e = b_.events[k];
        const EventParts &p = b_.parts[k];
        s_.key("stored");
        s_.begin_map(here(p.parent_form) + here(p.start_form) + 1);
        if (here(p.parent_form)) {
            s_.key("parent_hash");
            if (e.has_parent)
                s_.u64(e.parent_block_hash, false);
            else
                s_.nil();
        }
        if (here(p.start_form)) {
            s_.key("start_position");
            if (p.start_form == KVREG_WIRE_FIELD_SET)
                s_.u64(p.start_position, false);
            else
                s_.nil();
        }
        s_.key("blocks");
        s_.begin_array(e.n_block_hashes);
        const bool last = k + 1 == b_.parts.size();
        const size_t obj_end = last ? b_.mm_objects.size() : b_.parts[k + 1].mm_objects;
        size_t obj = p.mm_objects;
        for (size_t i = 0; i < e.n_block_hashes; i++) {
            const uint8_t mm = b_.mm_forms[p.mm_forms + i];
            s_.element();
            s_.begin_map(2 + here(mm));
            s_.key("block_hash"), s_.u64(e.block_hashes[i], false);
            s_.key("tokens_hash"), s_.u64(e.tokens_hashes[i], false);
            if (here(mm)) {
                s_.key("mm_extra_info");
                if (mm == KVREG_WIRE_FIELD_SET) {
                    size_t end = obj;
                    while (end < obj_end && b_.mm_objects[end].block == i)
                        end++;
                    mm_info(p, obj, end);
                    obj = end;
                } else {
                    s_.nil();
                }
            }
            s_.end_map();
        }
        s_.end_array();
        s_.end_map();
    }

    // BlockExtraInfo {mm_objects: [{mm_hash, offsets: [[start, end], ...]}]}
    void mm_info(const EventParts &p, size_t first, size_t end) {
        s_.begin_map(1);
        s_.key("mm_objects");
        s_.begin_array(end - first);
        for (size_t o = first; o < end; o++) {
            const kvreg_wire_mm_object &m = b_.mm_objects[o];
            s_.element();
            s_.begin_map(2);
            s_.key("mm_hash"), s_.u64(m.mm_hash, false);
            s_.key("offsets");
            s_.begin_array(m.n_offsets);
            const uint64_t *pair = b_.mm_offsets.data() + p.mm_offsets + 2 * m.first_offset;
            for (uint32_t j = 0; j < m.n_offsets; j++) {
                s_.element();
                s_.begin_array(2);
                s_.element(), s_.u64(pair[2 * j], false);
                s_.element(), s_.u64(pair[2 * j + 1], false);
                s_.end_array();
            }
            s_.end_array();
            s_.end_map();
        }
        s_.end_array();
        s_.end_map();
    }

    const DecodedBatch &b_;
    Sink s_;
};

} // namespace

bool dynamo_reencodable(const DecodedBatch &b) noexcept {
    if (!b.shape.dynamo || b.skipped)
        return false;
    for (size_t k = 0; k < b.parts.size(); k++)
        if (b.parts[k].lossy)
            return false;
    return true;
}

void reencode_dynamo(const DecodedBatch &b, MpWriter &w, bool json) {
    w.clear();
    DynReencoder(b, w, json).payload();
}

} // namespace kvreg::wire
