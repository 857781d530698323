// vLLM KVEventBatch, the safe profile every current consumer decodes (vLLM main, Dynamo's ZMQ
// listener, llm-d): outer array of exactly 3 [ts float64, events, dp_rank int]; events as maps
// with "type" first and the rest in vLLM's declaration order, or (legacy) as arrays carrying
// every declared field as msgspec's array_like structs do (12 for BlockStored, 4 for
// BlockRemoved). Values are what vLLM itself sends for a plain model: lora_id nil, extra_keys
// one nil per block, group_idx 0, kv_cache_spec_kind "full_attention".
#include "wire/encode.hpp"
#include "wire/media.hpp"

#include "kvreg_wire.h"

namespace kvreg::wire {
namespace {

void lora(MpWriter &w, const EncodeOptions &o) {
    if (o.has_lora)
        w.str(o.lora_name.data(), o.lora_name.size());
    else
        w.nil();
}

void stored_hashes(MpWriter &w, const kvreg_event *ev, const Group &g) {
    w.array(g.end - g.first);
    for (size_t i = g.first; i < g.end; i++)
        w.hash(ev[i].sequence_hash);
}

void stored_parent(MpWriter &w, const kvreg_event &first) {
    if (first.has_parent)
        w.hash(first.parent_sequence_hash);
    else
        w.nil();
}

void stored_tokens(MpWriter &w, const kvreg_event *ev, const Group &g) {
    size_t total = 0;
    for (size_t i = g.first; i < g.end; i++)
        total += ev[i].n_tokens;
    w.array(total);
    for (size_t i = g.first; i < g.end; i++)
        w.uints(ev[i].tokens, ev[i].n_tokens);
}

void extra_keys(MpWriter &w, const Group &g) {
    w.array(g.end - g.first);
    for (size_t i = g.first; i < g.end; i++)
        w.nil();
}

void removed_hashes(MpWriter &w, const kvreg_event *ev, const Group &g) {
    size_t count = 0;
    for (size_t i = g.first; i < g.end; i++)
        count += ev[i].medium == g.medium;
    w.array(count);
    for (size_t i = g.first; i < g.end; i++)
        if (ev[i].medium == g.medium)
            w.hash(ev[i].sequence_hash);
}

void stored_map(MpWriter &w, const kvreg_event *ev, const Group &g, const EncodeOptions &o) {
    w.map(11);
    w.str("type"), w.str("BlockStored");
    w.str("block_hashes"), stored_hashes(w, ev, g);
    w.str("parent_block_hash"), stored_parent(w, ev[g.first]);
    w.str("token_ids"), stored_tokens(w, ev, g);
    w.str("block_size"), w.uint(ev[g.first].n_tokens);
    w.str("lora_id"), w.nil();
    w.str("medium"), w.str(vllm_medium_name(g.medium));
    w.str("lora_name"), lora(w, o);
    w.str("extra_keys"), extra_keys(w, g);
    w.str("group_idx"), w.uint(0);
    w.str("kv_cache_spec_kind"), w.str("full_attention");
}

void stored_array(MpWriter &w, const kvreg_event *ev, const Group &g, const EncodeOptions &o) {
    w.array(12);
    w.str("BlockStored");
    stored_hashes(w, ev, g);
    stored_parent(w, ev[g.first]);
    stored_tokens(w, ev, g);
    w.uint(ev[g.first].n_tokens);
    w.nil(); // lora_id
    w.str(vllm_medium_name(g.medium));
    lora(w, o);
    extra_keys(w, g);
    w.uint(0); // group_idx
    w.str("full_attention");
    w.nil(); // kv_cache_spec_sliding_window
}

} // namespace

void encode_vllm(MpWriter &w, const Plan &plan, const kvreg_event *ev, double ts,
                 const EncodeOptions &o, bool legacy) {
    w.array(3);
    w.f64(ts);
    w.array(plan.groups.size());
    for (const Group &g : plan.groups) {
        switch (g.type) {
        case KVREG_WIRE_STORED:
            if (legacy)
                stored_array(w, ev, g, o);
            else
                stored_map(w, ev, g, o);
            break;
        case KVREG_WIRE_REMOVED:
            if (legacy) {
                w.array(4);
                w.str("BlockRemoved");
                removed_hashes(w, ev, g);
                w.str(vllm_medium_name(g.medium));
                w.uint(0);
            } else {
                w.map(4);
                w.str("type"), w.str("BlockRemoved");
                w.str("block_hashes"), removed_hashes(w, ev, g);
                w.str("medium"), w.str(vllm_medium_name(g.medium));
                w.str("group_idx"), w.uint(0);
            }
            break;
        default: // cleared
            if (legacy) {
                w.array(1);
            } else {
                w.map(1);
                w.str("type");
            }
            w.str("AllBlocksCleared");
            break;
        }
    }
    w.uint(o.dp_rank);
}

} // namespace kvreg::wire
