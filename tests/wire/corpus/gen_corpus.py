#!/usr/bin/python3
"""Writes the round-trip corpus: one payload per shape that vLLM, SGLang, Dynamo and their
older releases put on the wire, encoded by Debian's python3-msgpack following msgspec's rules (not by
libkvreg), and next to it what a decoder must read from it.

Run from anywhere: /usr/bin/python3 tests/wire/corpus/gen_corpus.py (rewrites the files next to
this script; they are checked in, so the test does not need python).

msgspec's rules followed here (the encoder vLLM and SGLang use):
  * a Struct with array_like=True is an array of every declared field in order, None as nil
    (omit_defaults has no effect on array_like structs); a tagged one starts with its tag;
  * a Struct without it is a map: "type": tag first, then the fields in declaration order;
    with omit_defaults a field equal to its default (None) is left out, required fields never;
  * ints in their smallest form (non-negative ones as unsigned forms), floats as float64,
    str as str (str8 from 32 bytes), bytes as bin, list/tuple as array.
python3-msgpack's packb(use_bin_type=True) makes the same choices for the same values.

Each NAME.msgpack has a NAME.expect: the decoded events, one line per field, in the format
tests/wire/test_wire_corpus.c prints them (written from the values below, not from libkvreg).
MANIFEST lists NAME FORMAT per line.
"""
import json
import os
import struct

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
H1 = 15760518052499183552  # 0xdab89baa7b5857c0
H2 = 0x1F2E3D4C5B6A7988
TS = 1789095808.8378847

# vLLM BlockStored's fields in declaration order (current main) and their defaults:
# REQUIRED fields are always written.
STORED_FIELDS = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id',
                 'medium', 'lora_name', 'extra_keys', 'group_idx', 'kv_cache_spec_kind',
                 'kv_cache_spec_sliding_window', 'locality', 'ownership', 'session_id']
STORED_REQUIRED = set(STORED_FIELDS[:7])
REMOVED_FIELDS = ['block_hashes', 'medium', 'group_idx', 'locality', 'ownership']
REMOVED_REQUIRED = {'block_hashes', 'medium'}
ABSENT = object()


def map_event(tag, fields, values, required):
    """msgspec map encoding with omit_defaults: required fields always, others when not None."""
    out = {'type': tag}
    for f in fields:
        v = values.get(f, None)
        if f in required or v is not None:
            out[f] = v
    return out


def positional(tag, n_fields, fields, values):
    """array_like: the tag and the first n_fields declared fields, None for unset ones."""
    return [tag] + [values.get(f, None) for f in fields[:n_fields]]


def hash_u64(h):
    if isinstance(h, bytes):
        return int.from_bytes(h[-8:], 'big')
    return h & (2**64 - 1)


def fmt_str(v):
    return '-' if v is None else v


def form(d, key):
    if key not in d:
        return 'absent'
    return 'nil' if d[key] is None else 'set'


def expect_event(k, ev):
    """The lines a decoder must print for event k (ev: the dict or list as encoded)."""
    if isinstance(ev, dict):
        tag, shape, nf = ev['type'], 'map', len(ev)
        d = dict(ev)
    else:
        tag, shape, nf = ev[0], 'array', len(ev)
        names = (STORED_FIELDS if tag.startswith('BlockStored') else
                 REMOVED_FIELDS if tag == 'BlockRemoved' else ['medium'])
        d = {}
        for i, v in enumerate(ev[1:]):
            if tag.startswith('BlockStored') and i == 6 and isinstance(v, dict):
                if 'cache_salt' in v:
                    d['cache_salt'] = v['cache_salt']
                continue
            d[names[i]] = v
    typ = {'BlockStored': 1, 'BlockStoredWithMetadata': 1, 'BlockRemoved': 2,
           'AllBlocksCleared': 3, 'TierBlocksCleared': 3}[tag]
    lines = [f'event {k} type {typ} tag {tag} shape {shape} fields {nf}']
    lines.append('hashes' + ''.join(' ' + str(hash_u64(h)) for h in d.get('block_hashes') or []))
    p = d.get('parent_block_hash', ABSENT)
    lines.append('parent ' + ('-' if p is ABSENT or p is None else str(hash_u64(p))) +
                 ' ' + form(d, 'parent_block_hash'))
    toks = d.get('token_ids') or []
    pairs = bool(toks) and isinstance(toks[0], (list, tuple))
    flat = [t for pr in toks for t in pr] if pairs else toks
    lines.append(('pairs' if pairs else 'tokens') + ''.join(' ' + str(t) for t in flat))
    bs = d.get('block_size')
    lines.append(f'block_size {bs if bs is not None else 0} {form(d, "block_size")}')
    for key in ['medium', 'lora_name', 'kv_cache_spec_kind', 'cache_salt', 'locality',
                'ownership', 'session_id']:
        lines.append(f'{key} {fmt_str(d.get(key))} {form(d, key)}')
    for key in ['lora_id', 'group_idx', 'kv_cache_spec_sliding_window']:
        v = d.get(key)
        lines.append(f'{key} {"-" if v is None else v} {form(d, key)}')
    ek = d.get('extra_keys', ABSENT)
    lines.append('extra_keys ' + ('-' if ek is ABSENT else
                                  msgpack.packb(ek, use_bin_type=True).hex()))
    return lines


def write(name, fmt, batch, manifest):
    payload = msgpack.packb(batch, use_bin_type=True)
    with open(os.path.join(HERE, name + '.msgpack'), 'wb') as f:
        f.write(payload)
    events = batch['events'] if isinstance(batch, dict) else batch[1]
    lines = [f'events {len(events)}']
    for k, ev in enumerate(events):
        lines += expect_event(k, ev)
    with open(os.path.join(HERE, name + '.expect'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    manifest.append(f'{name} {fmt}')


def main():
    manifest = []
    plain = {'block_hashes': [H1, H2], 'parent_block_hash': None, 'token_ids': [1, 2, 3, 4],
             'block_size': 2, 'lora_id': None, 'medium': 'GPU', 'lora_name': None,
             'extra_keys': [None, None], 'group_idx': 0,
             'kv_cache_spec_kind': 'full_attention'}
    removed = {'block_hashes': [H2], 'medium': 'GPU', 'group_idx': 0}

    # vLLM main (map events, outer array of 3): what vLLM 0.26 sends for a plain model
    write('vllm_map_plain', 'vllm', [TS, [
        map_event('BlockStored', STORED_FIELDS, plain, STORED_REQUIRED),
        map_event('BlockRemoved', REMOVED_FIELDS, removed, REMOVED_REQUIRED),
        map_event('AllBlocksCleared', [], {}, set())], 0], manifest)

    # every optional field set: LoRA, multimodal extra_keys (per-block tuples), a hybrid
    # model's sliding-window group on CPU, v0.26+ locality / ownership / session_id
    full = dict(plain, parent_block_hash=H1 ^ 0xFFFF, lora_id=3, lora_name='adapter-a',
                medium='CPU', extra_keys=[['mm-7f3a', 0], None, 'salt-1'], group_idx=1,
                kv_cache_spec_kind='sliding_window', kv_cache_spec_sliding_window=128,
                locality='LOCAL', ownership='kvcr', session_id='session-42',
                block_hashes=[H1, H2, 7], token_ids=[5, 6, 7, 8, 9, 10])
    write('vllm_map_every_field', 'vllm', [TS, [
        map_event('BlockStored', STORED_FIELDS, full, STORED_REQUIRED),
        map_event('BlockRemoved', REMOVED_FIELDS,
                  {'block_hashes': [7], 'medium': 'CPU', 'group_idx': 1, 'locality': 'LOCAL',
                   'ownership': 'kvcr'}, REMOVED_REQUIRED)], 3], manifest)

    # EAGLE bigram token ids (pairs), as Dynamo reads Vec<(u32, u32)>
    write('vllm_map_bigram', 'vllm', [TS, [
        map_event('BlockStored', STORED_FIELDS,
                  dict(plain, token_ids=[[1, 2], [2, 3], [3, 4], [4, 5]]), STORED_REQUIRED)],
        0], manifest)

    # tier-scoped clear (tier_scoped_clear_events) next to the all-tier one; a removed event
    # whose medium is nil
    write('vllm_map_cleared', 'vllm', [TS, [
        map_event('TierBlocksCleared', ['medium'], {'medium': 'GPU'}, {'medium'}),
        map_event('BlockRemoved', REMOVED_FIELDS, {'block_hashes': [H1], 'medium': None},
                  REMOVED_REQUIRED),
        map_event('AllBlocksCleared', [], {}, set())], 0], manifest)

    # VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: 32-byte digests as bin, and small ints in their
    # smallest forms
    d1, d2 = bytes(range(32)), bytes(range(100, 132))
    write('vllm_map_bytes_and_small_hashes', 'vllm', [TS, [
        map_event('BlockStored', STORED_FIELDS,
                  dict(plain, block_hashes=[d1, d2], parent_block_hash=bytes(range(50, 82))),
                  STORED_REQUIRED),
        map_event('BlockRemoved', REMOVED_FIELDS,
                  {'block_hashes': [0, 5, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32],
                   'medium': 'GPU'}, REMOVED_REQUIRED)], 0], manifest)

    # data_parallel_rank nil; vLLM before #18925: outer [ts, events]
    write('vllm_dp_nil', 'vllm', [TS, [
        map_event('BlockRemoved', REMOVED_FIELDS, removed, REMOVED_REQUIRED)], None], manifest)
    write('vllm_outer_two', 'vllm', [TS, [
        positional('BlockStored', 5, STORED_FIELDS, plain),
        positional('BlockRemoved', 1, REMOVED_FIELDS, removed)]], manifest)

    # the map outer of vLLM 0181ea31 (EventBatch without array_like, omit_defaults)
    write('vllm_outer_map', 'vllm', {'ts': TS, 'events': [
        map_event('BlockRemoved', REMOVED_FIELDS, removed, REMOVED_REQUIRED)],
        'data_parallel_rank': 2}, manifest)

    # legacy positional events, every generation: BlockStored with 5..11 fields (and the
    # full 12-element form), BlockRemoved with 1..3, AllBlocksCleared bare
    gens = [positional('BlockStored', n, STORED_FIELDS, full) for n in (5, 6, 7, 8, 9, 11)]
    write('vllm_positional_generations', 'vllm', [TS, gens + [
        positional('BlockRemoved', 1, REMOVED_FIELDS, removed),
        positional('BlockRemoved', 2, REMOVED_FIELDS, removed),
        positional('BlockRemoved', 3, REMOVED_FIELDS, removed),
        ['AllBlocksCleared']], 0], manifest)

    # SGLang: positional 7 / 3 with signed hashes (hash_str_to_int64) and its medium names
    neg = [-5, -(2**63), -129, 2**62]
    sg = {'block_hashes': neg, 'parent_block_hash': -77, 'token_ids': [1, 2, 3, 4, 5, 6, 7, 8],
          'block_size': 2, 'lora_id': None, 'medium': 'CPU_PINNED'}
    write('sglang_positional', 'sglang', [TS, [
        positional('BlockStored', 6, STORED_FIELDS, sg),
        ['BlockRemoved', [-5], 'CPU_PINNED']], None], manifest)

    # SGLang >= 0.5.18: the {"cache_salt": ...} metadata map at position 7
    write('sglang_metadata', 'sglang', [TS, [
        positional('BlockStored', 6, STORED_FIELDS, sg) + [{'cache_salt': 'tenant-a'}],
        positional('BlockStoredWithMetadata', 6, STORED_FIELDS, sg) + [{'cache_salt': None}]],
        1], manifest)

    # SGLang after #37482: tagged maps with omit_defaults, cache_salt and session_id
    sg_fields = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id',
                 'medium', 'cache_salt', 'session_id']
    write('sglang_map', 'sglang', [TS, [
        map_event('BlockStored', sg_fields,
                  dict(sg, cache_salt='tenant-b', session_id='s-1', medium=None),
                  {'block_hashes', 'token_ids', 'block_size'}),
        map_event('BlockStored', sg_fields, dict(sg, parent_block_hash=None, medium='GPU'),
                  {'block_hashes', 'token_ids', 'block_size'}),
        map_event('BlockRemoved', ['block_hashes', 'medium'], {'block_hashes': [-5]},
                  {'block_hashes'})], None], manifest)

    dynamo_corpus(manifest)

    with open(os.path.join(HERE, 'MANIFEST'), 'w') as f:
        f.write('\n'.join(manifest) + '\n')


# ---- Dynamo RouterEvents ------------------------------------------------------------------
# What Dynamo's publisher writes (serde derive on lib/kv-router's protocol types): a struct is a
# map with its field names in declaration order (rmp_serde::to_vec_named; serde_json for
# JSON); Option::None is nil / null unless the field skips it; enums are externally tagged
# ({"stored": {...}}, a unit variant as its bare name); every integer in its smallest form.
# python3-msgpack's packb and json.dumps(separators=(',', ':'), ensure_ascii=False) make the
# same choices for the same dicts (kept in insertion order), so they stand in for rmp-serde
# and serde_json here.
#
#   RouterEvent {worker_id, storage_tier, residency_domain (skipped when missing),
#                event: KvCacheEvent {event_id, data, dp_rank}, state_source (skipped when None)}
#   KvCacheStoreData {parent_hash, start_position, blocks: [{block_hash, tokens_hash,
#                     mm_extra_info: {mm_objects: [{mm_hash, offsets: [[start, end]]}]} | None}]}
# Older releases wrote fewer keys: 1.0.x had no residency_domain / start_position /
# mm_extra_info, and before that no storage_tier either; each generation is in the corpus.

def dyn_stored(parent, blocks, start=ABSENT):
    """blocks: (block_hash, tokens_hash[, mm_extra_info]) tuples."""
    body = {'parent_hash': parent}
    if start is not ABSENT:
        body['start_position'] = start
    out = []
    for b in blocks:
        d = {'block_hash': b[0], 'tokens_hash': b[1]}
        if len(b) > 2:
            d['mm_extra_info'] = b[2]
        out.append(d)
    body['blocks'] = out
    return {'stored': body}


def dyn_event(worker, event_id, data, dp_rank=0, tier=ABSENT, residency=ABSENT,
              state_source=ABSENT):
    ev = {}
    if worker is not ABSENT:
        ev['worker_id'] = worker
    if tier is not ABSENT:
        ev['storage_tier'] = tier
    if residency is not ABSENT:
        ev['residency_domain'] = residency
    ev['event'] = {'event_id': event_id, 'data': data, 'dp_rank': dp_rank}
    if state_source is not ABSENT:
        ev['state_source'] = state_source
    return ev


def dyn_encode(obj, json_form):
    if json_form:
        return json.dumps(obj, separators=(',', ':'), ensure_ascii=False).encode()
    return msgpack.packb(obj, use_bin_type=True)


def dyn_expect(events, json_form):
    lines = [f'events {len(events)}']
    for k, re in enumerate(events):
        ev = re['event']
        data = ev['data']
        tag = data if isinstance(data, str) else next(iter(data))
        typ = {'stored': 1, 'removed': 2, 'cleared': 3}[tag]
        lines.append(f'event {k} type {typ} tag {tag}')
        lines.append(f"worker_id {re.get('worker_id', 0)} event_id {ev.get('event_id', 0)} "
                     f"dp_rank {ev.get('dp_rank', 0)}")
        lines.append(f"storage_tier {fmt_str(re.get('storage_tier'))} {form(re, 'storage_tier')}")
        lines.append(f"residency_domain {fmt_str(re.get('residency_domain'))} "
                     f"{form(re, 'residency_domain')}")
        st = re.get('state_source')
        lines.append('state_source ' + ('-' if st is None else dyn_encode(st, json_form).hex()) +
                     ' ' + form(re, 'state_source'))
        body = data.get(tag) if isinstance(data, dict) else None
        blocks = body.get('blocks', []) if tag == 'stored' else []
        hashes = ([b['block_hash'] for b in blocks] if tag == 'stored' else
                  body['block_hashes'] if tag == 'removed' else [])
        lines.append('hashes' + ''.join(f' {h}' for h in hashes))
        lines.append('tokens_hashes' + ''.join(f" {b['tokens_hash']}" for b in blocks))
        b = body if tag == 'stored' else {}
        p = b.get('parent_hash')
        lines.append(f"parent {'-' if p is None else p} {form(b, 'parent_hash')}")
        sp = b.get('start_position')
        lines.append(f"start_position {'-' if sp is None else sp} {form(b, 'start_position')}")
        lines.append('mm_forms' + ''.join(' ' + form(bl, 'mm_extra_info') for bl in blocks))
        for i, bl in enumerate(blocks):
            info = bl.get('mm_extra_info')
            for obj in (info or {}).get('mm_objects', []):
                lines.append(f"mm_object block {i} hash {obj['mm_hash']} offsets" +
                             ''.join(f' {a}-{e}' for a, e in obj['offsets']))
    return lines


def dyn_write(name, events, manifest, single=False):
    for json_form, ext, fmt in ((True, 'json', 'dynamo-json'),
                                (False, 'msgpack', 'dynamo-msgpack')):
        payload = dyn_encode(events[0] if single else events, json_form)
        full = f'{name}_{ext}'
        with open(os.path.join(HERE, f'{full}.{ext}'), 'wb') as f:
            f.write(payload)
        with open(os.path.join(HERE, full + '.expect'), 'w') as f:
            f.write('\n'.join(dyn_expect(events, json_form)) + '\n')
        manifest.append(f'{full} {fmt}')


def dynamo_corpus(manifest):
    big = 2**64 - 1
    mm = {'mm_objects': [{'mm_hash': H1, 'offsets': [[0, 3], [5, 16]]},
                         {'mm_hash': 7, 'offsets': []}]}
    mm2 = {'mm_objects': [{'mm_hash': 2**40, 'offsets': [[300, 70000]]}]}
    # the current publisher: every field, worker-owned residency, a chain with its parent
    dyn_write('dynamo_current', [
        dyn_event(7, 42, dyn_stored(None, [(H1, 13226331709069118873, None)], None),
                  tier='device', residency='worker'),
        dyn_event(7, 43, dyn_stored(H1, [(H2, 5, None), (big, 2**32, None)], 1),
                  tier='device', residency='worker'),
        dyn_event(7, 44, {'removed': {'block_hashes': [H2, 0, 127, 128, 255, 256, 65535,
                                                       65536, 2**32 - 1, big]}},
                  tier='device', residency='worker'),
        dyn_event(7, 45, 'cleared', tier='device', residency='worker')], manifest)
    # multimodal blocks (mm_extra_info with objects and offsets; an object without offsets,
    # an empty object list), start_position, DP rank, host_pinned tier
    dyn_write('dynamo_multimodal', [
        dyn_event(2**63, 2**33, dyn_stored(None, [(1, 2, mm), (3, 4, None),
                                                  (5, 6, {'mm_objects': []}), (9, 10, mm2)],
                                           4000000000),
                  dp_rank=3, tier='host_pinned', residency='worker')], manifest)
    # cache-owner residency with its state source (a nested owner id, kept as its bytes);
    # residency strings this library does not know, one with characters JSON escapes; the
    # invalid residency Dynamo writes back as null; disk and external tiers
    owner = {'pool': {'dc_id': 3, 'indexer_domain': [[1, 2], 'scope-a']},
             'slot': 'slot/7', 'epoch': None}
    dyn_write('dynamo_cache_owner', [
        dyn_event(9, 1, dyn_stored(None, [(11, 12, None)], None), tier='disk',
                  residency='cache_owner', state_source=owner),
        dyn_event(9, 2, {'removed': {'block_hashes': [11]}}, tier='external',
                  residency='future "owner"\n\u00e9\t\u0001\u007f', state_source=owner),
        dyn_event(9, 3, 'cleared', tier='device', residency=None)], manifest)
    # Dynamo 1.0.x (no residency_domain, start_position, mm_extra_info) and before it (no
    # storage_tier), with a unit dp_rank of another value
    dyn_write('dynamo_legacy', [
        dyn_event(1, 5, dyn_stored(None, [(H1, H2)]), tier='host_pinned'),
        dyn_event(1, 6, {'removed': {'block_hashes': [H1]}}, dp_rank=1),
        dyn_event(1, 7, 'cleared')], manifest)
    # one RouterEvent per message, as the event plane publishes them
    dyn_write('dynamo_single', [
        dyn_event(4, 100, dyn_stored(77, [(78, 79, None)], 2), tier='device',
                  residency='worker')], manifest, single=True)


if __name__ == '__main__':
    main()
