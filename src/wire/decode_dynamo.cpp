// Dynamo RouterEvent payloads, JSON or msgpack with field names, read from a Tree:
//   payload: an array of RouterEvents, or one RouterEvent;
//   RouterEvent {worker_id, storage_tier = "device", event {event_id, data, dp_rank = 0}};
//   data: {"stored": {parent_hash, blocks [{block_hash, tokens_hash, ...}]}},
//         {"removed": {block_hashes}}, "cleared" (or {"cleared": null}); other variants are
//         skipped and counted. Unknown keys are ignored everywhere.
// block_hash (Dynamo's sequence hash) goes to block_hashes, tokens_hash to tokens_hashes.
#include "decode.hpp"
#include "media.hpp"
#include "tree.hpp"

namespace kvreg::wire {
namespace {

class DynamoReader {
public:
    DynamoReader(const Tree &t, DecodedBatch &out, DecodeError &err) : t_(t), out_(out), err_(err) {}

    bool payload(const Node &root) {
        if (root.kind == Node::Map)
            return router_event(root);
        if (root.kind != Node::Array)
            return fail(root, "a Dynamo payload is an array of RouterEvents or one RouterEvent");
        for (size_t k = 0; k < root.count; k++)
            if (!router_event(t_.kid(root, k)))
                return false;
        return true;
    }

private:
    bool fail(const Node &n, const char *why) {
        err_.offset = n.off, err_.why = why;
        return false;
    }
    bool u64(const Node *n, uint64_t &v, const char *why) {
        if (n && n->kind == Node::Uint)
            v = n->u;
        else if (n && n->kind == Node::Int) // tolerated: bit-cast, as for vLLM hashes
            v = static_cast<uint64_t>(n->i);
        else
            return fail(*n, why);
        return true;
    }
    // Optional unsigned field: absent or null leaves v.
    bool opt_u64(const Node &map, const char *key, uint64_t &v, const char *why) {
        const Node *n = t_.find(map, key);
        if (!n || n->kind == Node::Nil)
            return true;
        return u64(n, v, why);
    }

    bool router_event(const Node &re) {
        if (re.kind != Node::Map)
            return fail(re, "a RouterEvent must be an object");
        uint64_t worker = 0;
        if (!opt_u64(re, "worker_id", worker, "worker_id must be an unsigned integer"))
            return false;
        const Node *tier = t_.find(re, "storage_tier");
        if (tier && tier->kind != Node::Str && tier->kind != Node::Nil)
            return fail(*tier, "storage_tier must be a string");
        const Node *ev = t_.find(re, "event");
        if (!ev)
            return fail(re, "a RouterEvent without \"event\"");
        if (ev->kind != Node::Map)
            return fail(*ev, "RouterEvent.event must be an object");
        uint64_t event_id = 0, dp = 0;
        if (!opt_u64(*ev, "event_id", event_id, "event_id must be an unsigned integer") ||
            !opt_u64(*ev, "dp_rank", dp, "dp_rank must be an unsigned integer"))
            return false;
        if (dp > INT64_MAX)
            return fail(*t_.find(*ev, "dp_rank"), "dp_rank out of range");
        const Node *data = t_.find(*ev, "data");
        if (!data)
            return fail(*ev, "a KvCacheEvent without \"data\"");

        size_t idx;
        if (t_.is(*data, "cleared")) {
            idx = out_.begin(KVREG_WIRE_CLEARED);
        } else if (data->kind == Node::Map && data->count == 1) {
            const Node &variant = t_.kid(*data, 0);
            const Node &body = t_.kid(*data, 1);
            if (t_.is(variant, "stored")) {
                idx = out_.begin(KVREG_WIRE_STORED);
                if (!stored(body, idx))
                    return false;
            } else if (t_.is(variant, "removed")) {
                idx = out_.begin(KVREG_WIRE_REMOVED);
                if (!removed(body))
                    return false;
            } else if (t_.is(variant, "cleared")) {
                idx = out_.begin(KVREG_WIRE_CLEARED);
            } else {
                out_.skipped++;
                return true;
            }
        } else if (data->kind == Node::Str) {
            out_.skipped++; // another unit variant
            return true;
        } else {
            return fail(*data, "KvCacheEvent.data must be a one-key object or \"cleared\"");
        }

        kvreg_wire_event &e = out_.events[idx];
        e.worker_id = worker, e.event_id = event_id;
        e.has_dp_rank = 1, e.dp_rank = static_cast<int64_t>(dp);
        if (tier && tier->kind == Node::Str) {
            out_.parts[idx].medium_name = out_.keep_string(t_.text.data() + tier->str, tier->len);
            e.medium = medium_from_name(t_.text.data() + tier->str, tier->len);
        }
        return true;
    }

    bool stored(const Node &body, size_t idx) {
        if (body.kind != Node::Map)
            return fail(body, "stored must be an object");
        const Node *parent = t_.find(body, "parent_hash");
        if (parent && parent->kind != Node::Nil) {
            kvreg_wire_event &e = out_.events[idx];
            if (!u64(parent, e.parent_block_hash, "parent_hash must be an integer or null"))
                return false;
            e.has_parent = 1;
        }
        const Node *blocks = t_.find(body, "blocks");
        if (!blocks)
            return fail(body, "stored without \"blocks\"");
        if (blocks->kind != Node::Array)
            return fail(*blocks, "stored.blocks must be an array");
        out_.parts[idx].tokens_hashes = out_.tokens_hashes.size();
        for (size_t k = 0; k < blocks->count; k++) {
            const Node &b = t_.kid(*blocks, k);
            if (b.kind != Node::Map)
                return fail(b, "a stored block must be an object");
            uint64_t h, th;
            const Node *hn = t_.find(b, "block_hash"), *tn = t_.find(b, "tokens_hash");
            if (!hn || !tn)
                return fail(b, "a stored block needs block_hash and tokens_hash");
            if (!u64(hn, h, "block_hash must be an integer") ||
                !u64(tn, th, "tokens_hash must be an integer"))
                return false;
            out_.hashes.push_back(h);
            out_.tokens_hashes.push_back(th);
        }
        return true;
    }

    bool removed(const Node &body) {
        const Node *hashes = t_.find(body, "block_hashes");
        if (body.kind != Node::Map || !hashes)
            return fail(body, "removed must be an object with block_hashes");
        if (hashes->kind != Node::Array)
            return fail(*hashes, "removed.block_hashes must be an array");
        for (size_t k = 0; k < hashes->count; k++) {
            uint64_t h;
            if (!u64(&t_.kid(*hashes, k), h, "a block hash must be an integer"))
                return false;
            out_.hashes.push_back(h);
        }
        return true;
    }

    const Tree &t_;
    DecodedBatch &out_;
    DecodeError &err_;
};

} // namespace

bool decode_dynamo(const uint8_t *p, size_t len, bool json, Tree &tree, DecodedBatch &out,
                   DecodeError &err) {
    out.clear();
    size_t root = 0;
    bool ok = json ? parse_json(p, len, tree, root, err.offset, err.why)
                   : parse_msgpack(p, len, tree, root, err.offset, err.why);
    if (ok) {
        DynamoReader r(tree, out, err);
        ok = r.payload(tree.nodes[root]);
    }
    if (!ok) {
        out.clear();
        return false;
    }
    out.finish();
    return true;
}

} // namespace kvreg::wire
