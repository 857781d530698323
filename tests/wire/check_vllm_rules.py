#!/usr/bin/env python3
"""The one checker of vLLM's field rules on libkvreg's vLLM payloads, as an independent
consumer: Debian's python3-msgpack decodes the bytes, and the rules are vLLM's own plus the
profile docs/design/wire.md says the vLLM encoder writes. Two users: this file as a program
(tools/replay's consumer tests), and check_batch() imported by the Python binding's tests
(bindings/python/tests/vllm_rules.py loads this file).

Usage: check_vllm_rules.py [--legacy] [--block-size N] FILE_OR_DIR...
Prints one JSON object: {"files", "stored_blocks", "removed_blocks", "cleared"}; exit 1 with a
message on the first violation, 77 when python3-msgpack is missing.

Rules (map events; --legacy: positional events mapped to the same fields first):
  outer: an array of exactly 3 [ts float, events array, dp_rank int] (vLLM accepts >= 2;
         Dynamo and llm-d need 3);
  each event: a map whose first key is "type", one of BlockStored / BlockRemoved /
         AllBlocksCleared, keys in vLLM's declaration order; BlockStored has all 7 required
         keys (block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
         lora_name) and len(token_ids) == len(block_hashes) * block_size; BlockRemoved has
         block_hashes and medium;
  hashes: ints in [0, 2^64) (never bytes, never negative), written as msgpack uint64 (0xcf:
         checked when the raw bytes are given);
  medium: "GPU", "CPU", "STORAGE" or "EXTERNAL"; extra_keys one entry per block.
"""
import json
import os
import sys

try:
    import msgpack  # needed by the program and check_file; check_batch works without it
except ImportError:
    msgpack = None

STORED_ORDER = ['type', 'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id',
                'medium', 'lora_name', 'extra_keys', 'group_idx', 'kv_cache_spec_kind',
                'kv_cache_spec_sliding_window', 'locality', 'ownership', 'session_id']
REMOVED_ORDER = ['type', 'block_hashes', 'medium', 'group_idx', 'locality', 'ownership']
STORED_REQUIRED = STORED_ORDER[1:8]
MEDIA = {'GPU', 'CPU', 'STORAGE', 'EXTERNAL'}


class Violation(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Violation(what)


def is_hash(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


def as_map(ev, legacy):
    """A positional (legacy) event as the map vLLM's later versions would send."""
    if not legacy:
        need(isinstance(ev, dict), f'event is not a map: {ev!r}')
        return ev
    need(isinstance(ev, list) and ev and isinstance(ev[0], str), f'bad positional event {ev!r}')
    order = {'BlockStored': STORED_ORDER[:12], 'BlockRemoved': REMOVED_ORDER[:4],
             'AllBlocksCleared': ['type']}.get(ev[0])
    need(order is not None, f'unknown tag {ev[0]!r}')
    need(len(ev) == len(order), f'{ev[0]} has {len(ev)} elements, msgspec writes {len(order)}')
    return {k: v for k, v in zip(order, ev) if k == 'type' or v is not None
            or k in STORED_REQUIRED}


def check_event(ev, counts):
    keys = list(ev)
    need(keys and keys[0] == 'type', f'"type" is not the first key: {keys}')
    kind = ev['type']
    if kind == 'BlockStored':
        for k in STORED_REQUIRED:
            need(k in ev, f'BlockStored without required key {k}')
        need(keys == [k for k in STORED_ORDER if k in ev], f'key order {keys}')
        hashes, bs, toks = ev['block_hashes'], ev['block_size'], ev['token_ids']
        need(isinstance(hashes, list) and hashes and all(is_hash(h) for h in hashes),
             f'block_hashes {hashes!r}')
        need(ev['parent_block_hash'] is None or is_hash(ev['parent_block_hash']), 'parent')
        need(isinstance(bs, int) and bs > 0, f'block_size {bs!r}')
        need(isinstance(toks, list) and all(isinstance(t, int) and 0 <= t < 2**32 for t in toks),
             'token_ids')
        need(len(toks) == len(hashes) * bs,
             f'{len(toks)} token_ids for {len(hashes)} blocks of {bs}')
        need(ev['medium'] in MEDIA, f'medium {ev["medium"]!r}')
        need(ev['lora_id'] is None, 'lora_id')
        need(ev['lora_name'] is None or isinstance(ev['lora_name'], str), 'lora_name')
        if 'extra_keys' in ev:
            need(len(ev['extra_keys']) == len(hashes), 'extra_keys: one entry per block')
        need(len(set(hashes)) == len(hashes), 'duplicate hash inside one event')
        counts['stored_blocks'] += len(hashes)
    elif kind == 'BlockRemoved':
        need('block_hashes' in ev and 'medium' in ev, 'BlockRemoved needs block_hashes, medium')
        need(keys == [k for k in REMOVED_ORDER if k in ev], f'key order {keys}')
        need(all(is_hash(h) for h in ev['block_hashes']) and ev['block_hashes'], 'hashes')
        need(ev['medium'] in MEDIA, f'medium {ev["medium"]!r}')
        counts['removed_blocks'] += len(ev['block_hashes'])
    elif kind == 'AllBlocksCleared':
        need(keys == ['type'], 'AllBlocksCleared has no fields')
        counts['cleared'] += 1
    else:
        raise Violation(f'unknown event type {kind!r}')




def check_batch(batch, legacy=False, block_size=0, data=None, counts=None):
    """Check one decoded batch; raise Violation on the first broken rule. data: the raw
    payload, to check each hash's 9-byte form. counts: totals to add to. Returns a summary
    {"ts", "dp_rank", "events": [each event's fields as a map]}."""
    if counts is None:
        counts = dict(files=0, stored_blocks=0, removed_blocks=0, cleared=0)
    need(isinstance(batch, list) and len(batch) == 3, 'outer batch is not an array of 3')
    ts, events, dp = batch
    need(isinstance(ts, float), f'ts {ts!r} is not a float64')
    need(isinstance(events, list) and events, 'events is not a non-empty array')
    need(isinstance(dp, int) and not isinstance(dp, bool), f'dp_rank {dp!r}')
    summary = []
    for raw in events:
        ev = as_map(raw, legacy)
        check_event(ev, counts)
        if ev['type'] == 'BlockStored' and block_size:
            need(ev['block_size'] == block_size, f'block_size {ev["block_size"]} != {block_size}')
        if data is not None:
            for h in ev.get('block_hashes', []) + ([ev['parent_block_hash']]
                                                    if ev.get('parent_block_hash') is not None
                                                    else []):
                need(b'\xcf' + h.to_bytes(8, 'big') in data, f'hash {h} not in the 9-byte form')
        summary.append(dict(ev))
    return {'ts': ts, 'dp_rank': dp, 'events': summary}


def check_file(path, legacy, block_size, counts):
    data = open(path, 'rb').read()
    batch = msgpack.unpackb(data, raw=False, strict_map_key=True)
    check_batch(batch, legacy, block_size, data, counts)
    counts['files'] += 1


def main():
    if msgpack is None:
        print('SKIP: python3-msgpack not installed (Debian package python3-msgpack)')
        sys.exit(77)
    args = sys.argv[1:]
    legacy = '--legacy' in args
    block_size = 0
    if '--block-size' in args:
        block_size = int(args[args.index('--block-size') + 1])
        del args[args.index('--block-size'):args.index('--block-size') + 2]
    paths = [a for a in args if a != '--legacy']
    files = []
    for p in paths:
        files += sorted(os.path.join(p, f) for f in os.listdir(p)) if os.path.isdir(p) else [p]
    counts = dict(files=0, stored_blocks=0, removed_blocks=0, cleared=0)
    for f in files:
        try:
            check_file(f, legacy, block_size, counts)
        except (Violation, ValueError, msgpack.ExtraData) as e:
            print(f'FAIL: {f}: {e}')
            sys.exit(1)
    print(json.dumps(counts))


if __name__ == '__main__':
    main()
