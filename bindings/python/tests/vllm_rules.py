"""vLLM's field rules for a KVEventBatch, checked on what an independent decoder (Debian's
python3-msgpack) makes of our encoder's bytes (the rules as docs/design/wire.md states them).

check_batch() needs no msgpack: the tests call it in-process when `import msgpack` works,
else they run this file under Debian's own interpreter (/usr/bin/python3, where
python3-msgpack installs), which reads hex payloads from argv and prints a JSON summary.
"""

import json
import sys

STORED_REQUIRED = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                   "medium", "lora_name"]
TYPES = {"BlockStored", "BlockRemoved", "AllBlocksCleared"}


class Violation(AssertionError):
    pass


def _need(cond, what):
    if not cond:
        raise Violation(what)


def _is_hash(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 64


def check_batch(batch):
    """Raise Violation on the first broken rule; return a summary of what the batch holds:
    {"ts", "dp_rank", "events": [{"type", "block_hashes", "token_ids", ...}]}."""
    _need(isinstance(batch, list) and len(batch) == 3,
          "outer must be an array of 3 [ts, events, dp_rank], got %r" % (batch,))
    ts, events, dp_rank = batch
    _need(isinstance(ts, (float, int)) and not isinstance(ts, bool), "ts %r" % (ts,))
    _need(isinstance(events, list), "events must be an array")
    _need(dp_rank is None or isinstance(dp_rank, int), "dp_rank %r" % (dp_rank,))
    out = []
    for ev in events:
        _need(isinstance(ev, dict), "event must be a map, got %r" % (ev,))
        keys = list(ev)
        _need(keys and keys[0] == "type", "'type' must be the first key: %r" % keys)
        kind = ev["type"]
        _need(kind in TYPES, "unknown type %r" % (kind,))
        if kind == "BlockStored":
            missing = [k for k in STORED_REQUIRED if k not in ev]
            _need(not missing, "BlockStored lacks %s" % missing)
            hashes, tokens, size = ev["block_hashes"], ev["token_ids"], ev["block_size"]
            _need(isinstance(size, int) and size > 0, "block_size %r" % (size,))
            _need(isinstance(tokens, list) and all(isinstance(t, int) for t in tokens),
                  "token_ids must be ints")
            _need(len(tokens) == len(hashes) * size,
                  "len(token_ids) %d != len(block_hashes) %d * block_size %d"
                  % (len(tokens), len(hashes), size))
            parent = ev["parent_block_hash"]
            _need(parent is None or _is_hash(parent), "parent_block_hash %r" % (parent,))
        elif kind == "BlockRemoved":
            _need("block_hashes" in ev and "medium" in ev, "BlockRemoved lacks keys")
        if kind != "AllBlocksCleared":
            _need(isinstance(ev["block_hashes"], list) and ev["block_hashes"]
                  and all(_is_hash(h) for h in ev["block_hashes"]),
                  "block_hashes must be a non-empty list of u64 ints: %r"
                  % (ev["block_hashes"],))
            _need(ev["medium"] in ("GPU", "CPU", "STORAGE", "EXTERNAL"),
                  "medium %r" % (ev["medium"],))
        out.append({k: ev[k] for k in ("type", "block_hashes", "parent_block_hash", "token_ids",
                                       "block_size", "medium", "lora_name") if k in ev})
    return {"ts": ts, "dp_rank": dp_rank, "events": out}


def main(argv):
    import msgpack  # Debian python3-msgpack: the independent decoder
    results = []
    for hexed in argv:
        batch = msgpack.unpackb(bytes.fromhex(hexed), raw=False, strict_map_key=True)
        try:
            results.append({"ok": check_batch(batch)})
        except Violation as v:
            results.append({"violation": str(v)})
    # Hashes go up to 2**64: JSON ints stay exact through Python's json module.
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
