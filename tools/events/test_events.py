#!/usr/bin/env python3
"""Checks of kvreg-events (one case per meson test: --case NAME).

Payloads are written by hand here (the spec's worked examples as hex) or packed with Debian's
python3-msgpack, an implementation independent of libkvreg; expected events are written out
by hand. Exit 77 (skip) when python3-msgpack is missing for a case that needs it.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

H1 = 15760518052499183552
H2 = 0x1f2e3d4c5b6a7988

# spec §1.7 example A (map events) and B (positional), byte for byte
EXAMPLE_A = bytes.fromhex(
    '93cb3ff800000000000093'
    '8ba474797065ab426c6f636b53746f726564'
    'ac626c6f636b5f68617368657392cfdab89baa7b5857c0cf1f2e3d4c5b6a7988'
    'b1706172656e745f626c6f636b5f68617368c0'
    'a9746f6b656e5f6964739401020304'
    'aa626c6f636b5f73697a6502'
    'a76c6f72615f6964c0'
    'a66d656469756da3475055'
    'a96c6f72615f6e616d65c0'
    'aa65787472615f6b65797392c0c0'
    'a967726f75705f69647800'
    'b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e'
    '84a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf1f2e3d4c5b6a7988'
    'a66d656469756da3475055a967726f75705f69647800'
    '81a474797065b0416c6c426c6f636b73436c6561726564'
    '00')
EXAMPLE_B = bytes.fromhex(
    '93cb3ff800000000000093'
    '9cab426c6f636b53746f72656492cfdab89baa7b5857c0cf1f2e3d4c5b6a7988c0940102030402c0'
    'a3475055c092c0c000ae66756c6c5f617474656e74696f6ec0'
    '94ac426c6f636b52656d6f76656491cf1f2e3d4c5b6a7988a347505500'
    '91b0416c6c426c6f636b73436c6561726564'
    '00')

EXAMPLE_EVENTS = [
    {'type': 'BlockStored', 'block_hashes': [H1, H2], 'parent_block_hash': None,
     'token_ids': [1, 2, 3, 4], 'block_size': 2, 'medium': 'GPU', 'lora_name': None,
     'group_idx': 0, 'dp_rank': 0, 'ts': 1.5},
    {'type': 'BlockRemoved', 'block_hashes': [H2], 'parent_block_hash': None, 'token_ids': [],
     'block_size': None, 'medium': 'GPU', 'lora_name': None, 'group_idx': 0, 'dp_rank': 0,
     'ts': 1.5},
    # the payload has no medium here: none is printed (it used to say GPU)
    {'type': 'AllBlocksCleared', 'block_hashes': [], 'parent_block_hash': None, 'token_ids': [],
     'block_size': None, 'medium': None, 'lora_name': None, 'group_idx': None, 'dp_rank': 0,
     'ts': 1.5},
]


def need_msgpack():
    try:
        import msgpack  # noqa: F401
    except ImportError:
        print('SKIP: python3-msgpack not installed (Debian package python3-msgpack)')
        sys.exit(77)
    import msgpack
    return msgpack


class Runner:
    def __init__(self, exe, tmp):
        self.exe, self.tmp, self.n = exe, tmp, 0

    def file(self, data):
        self.n += 1
        path = os.path.join(self.tmp, f'payload{self.n}')
        with open(path, 'wb') as f:
            f.write(data)
        return path

    def run(self, *args, stdin=None):
        p = subprocess.run([self.exe, *args], capture_output=True, input=stdin, timeout=30)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def run_bytes(self, *args):
        p = subprocess.run([self.exe, *args], capture_output=True, timeout=60)
        return p.returncode, p.stdout, p.stderr.decode(errors='replace')

    def events(self, *args):
        rc, out, err = self.run(*args)
        check(rc == 0, f'exit {rc}: {err}')
        return [json.loads(line) for line in out.splitlines()]


def check(cond, what):
    if not cond:
        print('FAIL:', what)
        sys.exit(1)


def case_help(r):
    rc, out, _ = r.run('--help')
    check(rc == 0 and 'decode' in out, '--help lists decode')
    rc, out, _ = r.run('decode', '--help')
    check(rc == 0 and 'dynamo-msgpack' in out and 'byte offset' in out, 'decode --help')


def case_usage(r):
    for args in ([], ['nope'], ['decode'], ['decode', '--format', 'xml', 'f'],
                 ['decode', '--format'], ['decode', '--bogus', 'f']):
        rc, _, err = r.run(*args)
        check(rc == 2 and err, f'{args}: exit {rc}, want 2 with a message')


def case_examples(r):
    check(r.events('decode', r.file(EXAMPLE_A)) == EXAMPLE_EVENTS, 'example A')
    check(r.events('decode', '--format', 'vllm', r.file(EXAMPLE_B)) == EXAMPLE_EVENTS,
          'example B')
    check(r.events('decode', '--format=sglang', r.file(EXAMPLE_A)) == EXAMPLE_EVENTS,
          'example A as sglang')
    # two files: their events in order; stdin as '-'
    both = r.events('decode', r.file(EXAMPLE_A), r.file(EXAMPLE_B))
    check(both == EXAMPLE_EVENTS * 2, 'two files')
    rc, out, _ = r.run('decode', '-', stdin=EXAMPLE_A)
    check(rc == 0 and [json.loads(x) for x in out.splitlines()] == EXAMPLE_EVENTS, 'stdin')


def case_shapes(r):
    msgpack = need_msgpack()
    # SGLang positional with the metadata map at position 7, negative hash, outer of 2
    sg = msgpack.packb([2.5, [['BlockStored', [-2, 7], None, [5, 6, 7, 8], 2, None,
                               'CPU_PINNED', {'cache_salt': 'x'}],
                              ['BlockRemoved', [7], 'DISK']]], use_bin_type=True)
    ev = r.events('decode', '--format', 'sglang', r.file(sg))
    check(ev == [
        {'type': 'BlockStored', 'block_hashes': [2**64 - 2, 7], 'parent_block_hash': None,
         'token_ids': [5, 6, 7, 8], 'block_size': 2, 'medium': 'CPU', 'lora_name': None,
         'group_idx': None, 'dp_rank': None, 'ts': 2.5},
        {'type': 'BlockRemoved', 'block_hashes': [7], 'parent_block_hash': None,
         'token_ids': [], 'block_size': None, 'medium': 'STORAGE', 'lora_name': None,
         'group_idx': None, 'dp_rank': None, 'ts': 2.5}], f'sglang: {ev}')
    # outer map, bytes hash, unknown event type skipped, unknown medium kept by name,
    # a lora name needing escapes
    digest = bytes(range(32))
    mp = msgpack.packb({'events': [{'type': 'BlockInactive', 'block_hashes': [1]},
                                   {'type': 'BlockStored', 'block_hashes': [digest],
                                    'parent_block_hash': 3, 'token_ids': [9], 'block_size': 1,
                                    'lora_id': None, 'medium': 'tape', 'lora_name': 'a"b\n'}],
                        'ts': 4, 'data_parallel_rank': 1}, use_bin_type=True)
    ev = r.events('decode', r.file(mp))
    check(ev == [{'type': 'BlockStored', 'block_hashes': [int.from_bytes(digest[-8:], 'big')],
                  'parent_block_hash': 3, 'token_ids': [9], 'block_size': 1, 'medium': 'tape',
                  'lora_name': 'a"b\n', 'group_idx': None, 'dp_rank': 1, 'ts': 4}],
          f'map outer: {ev}')


def case_dynamo(r):
    msgpack = need_msgpack()
    doc = [{'worker_id': 7, 'storage_tier': 'host_pinned',
            'event': {'event_id': 42, 'data': {'stored': {'parent_hash': None, 'blocks': [
                {'block_hash': H1, 'tokens_hash': 13226331709069118873}]}}, 'dp_rank': 0}},
           {'worker_id': 7, 'event': {'event_id': 43, 'data': 'cleared'}}]
    want = [
        {'type': 'BlockStored', 'block_hashes': [H1], 'parent_block_hash': None, 'token_ids': [],
         'block_size': None, 'medium': 'CPU', 'lora_name': None, 'group_idx': None, 'dp_rank': 0,
         'ts': None, 'worker_id': 7, 'event_id': 42, 'tokens_hashes': [13226331709069118873]},
        {'type': 'AllBlocksCleared', 'block_hashes': [], 'parent_block_hash': None,
         'token_ids': [], 'block_size': None, 'medium': None, 'lora_name': None,
         'group_idx': None, 'dp_rank': 0, 'ts': None, 'worker_id': 7, 'event_id': 43}]
    js = r.file(json.dumps(doc).encode())
    check(r.events('decode', '--format', 'dynamo-json', js) == want, 'dynamo json')
    check(r.events('decode', '--format', 'dynamo', js) == want, 'dynamo auto (json)')
    mp = r.file(msgpack.packb(doc, use_bin_type=True))
    check(r.events('decode', '--format', 'dynamo-msgpack', mp) == want, 'dynamo msgpack')
    check(r.events('decode', '--format', 'dynamo', mp) == want, 'dynamo auto (msgpack)')


def case_fields(r):
    """A medium is printed only when the payload has one; the fields of
    kvreg_wire_event_ext only when present; bigram token ids as pairs."""
    msgpack = need_msgpack()
    mp = msgpack.packb([1.0, [
        {'type': 'TierBlocksCleared', 'medium': 'CPU'},
        {'type': 'AllBlocksCleared'},
        {'type': 'BlockRemoved', 'block_hashes': [5], 'medium': None},
        {'type': 'BlockStored', 'block_hashes': [1, 2], 'parent_block_hash': None,
         'token_ids': [[1, 2], [3, 4]], 'block_size': 1, 'lora_id': 9, 'medium': 'GPU',
         'lora_name': 'l', 'extra_keys': [None, ['mm', 0]], 'kv_cache_spec_kind': 'mamba',
         'cache_salt': 's', 'session_id': None}], 0], use_bin_type=True)
    ev = r.events('decode', '--all-fields', r.file(mp))
    base = {'parent_block_hash': None, 'token_ids': [], 'block_size': None, 'lora_name': None,
            'group_idx': None, 'dp_rank': 0, 'ts': 1.0}
    want = [
        dict(base, type='AllBlocksCleared', tag='TierBlocksCleared', block_hashes=[],
             medium='CPU'),
        dict(base, type='AllBlocksCleared', block_hashes=[], medium=None),
        dict(base, type='BlockRemoved', block_hashes=[5], medium=None),
        dict(base, type='BlockStored', block_hashes=[1, 2], token_ids=[[1, 2], [3, 4]],
             block_size=1, lora_id=9, medium='GPU', lora_name='l',
             extra_keys_msgpack=msgpack.packb([None, ['mm', 0]]).hex(),
             kv_cache_spec_kind='mamba', cache_salt='s', session_id=None)]
    check(ev == want, f'fields: {ev}')
    # without --all-fields: the same keys as always (bigram ids are then not in token_ids)
    ev = r.events('decode', r.file(mp))
    check([sorted(e) for e in ev] == [sorted(list(base) + ['block_hashes', 'medium', 'type'])] * 4,
          f'default keys: {ev}')
    check([e['medium'] for e in ev] == ['CPU', None, None, 'GPU'], f'media: {ev}')
    # a repeated key: rejected with the reason and the offset of the second key
    bad = (b'\x93\x00\x91\x83' + msgpack.packb('type') + msgpack.packb('BlockRemoved') +
           msgpack.packb('block_hashes') + msgpack.packb([1]))
    second = len(bad)
    bad += msgpack.packb('block_hashes') + msgpack.packb([2]) + b'\x00'
    rc, out, err = r.run('decode', r.file(bad))
    check(rc == 1 and out == '', f'exit {rc}, out {out!r}')
    check(f'rejected at byte {second}:' in err and 'repeated key' in err, err)


def case_dynamo_fields(r):
    """Dynamo's extended fields with --all-fields, each only when the payload has it."""
    msgpack = need_msgpack()
    owner = {'pool': 3, 'slot': 'a'}
    mm = {'mm_objects': [{'mm_hash': 2**63 + 1, 'offsets': [[0, 2], [3, 4]]},
                         {'mm_hash': 5, 'offsets': []}]}
    doc = [{'worker_id': 1, 'storage_tier': 'disk', 'residency_domain': 'cache_owner',
            'event': {'event_id': 2, 'data': {'stored': {
                'parent_hash': None, 'start_position': 12, 'blocks': [
                    {'block_hash': 3, 'tokens_hash': 4, 'mm_extra_info': mm},
                    {'block_hash': 5, 'tokens_hash': 6, 'mm_extra_info': None},
                    {'block_hash': 7, 'tokens_hash': 8}]}}, 'dp_rank': 0},
            'state_source': owner},
           {'worker_id': 1, 'event': {'event_id': 3, 'data': 'cleared', 'dp_rank': 0}}]
    base = {'parent_block_hash': None, 'token_ids': [], 'block_size': None, 'lora_name': None,
            'group_idx': None, 'dp_rank': 0, 'ts': None, 'worker_id': 1}
    for fmt, enc in (('dynamo-json', lambda d: json.dumps(d, separators=(',', ':')).encode()),
                     ('dynamo-msgpack', lambda d: msgpack.packb(d, use_bin_type=True))):
        ev = r.events('decode', '--format', fmt, '--all-fields', r.file(enc(doc)))
        want = [dict(base, type='BlockStored', block_hashes=[3, 5, 7], medium='STORAGE',
                     event_id=2, tokens_hashes=[4, 6, 8], tag='stored', start_position=12,
                     residency_domain='cache_owner', state_source_bytes=enc(owner).hex(),
                     mm_extra_info=[mm, None, None]),
                dict(base, type='AllBlocksCleared', block_hashes=[], medium=None, event_id=3,
                     tag='cleared')]
        check(ev == want, f'{fmt}: {ev}')


def case_rejected(r):
    good = r.file(EXAMPLE_A)
    truncated = r.file(EXAMPLE_A[:100])
    missing = os.path.join(r.tmp, 'does-not-exist')
    rc, out, err = r.run('decode', good, truncated, missing, good)
    check(rc == 1, f'exit {rc}, want 1')
    check([json.loads(x) for x in out.splitlines()] == EXAMPLE_EVENTS * 2,
          'the good files are still decoded')
    lines = err.splitlines()
    check(len(lines) == 2, f'one error line per bad file: {lines}')
    # the cut falls inside a value: the error names the file and an offset inside it
    check(truncated in lines[0] and 'byte ' in lines[0], lines[0])
    off = int(lines[0].split('byte ')[1].split(':')[0])
    check(off <= 100, f'offset {off} within the 100 bytes')
    check(missing in lines[1], lines[1])
    # trailing garbage: the offset is exactly the payload's end
    rc, _, err = r.run('decode', r.file(EXAMPLE_A + b'\x00'))
    check(rc == 1 and f'byte {len(EXAMPLE_A)}:' in err, err)


def unique_keys(pairs):
    keys = [k for k, _ in pairs]
    check(len(keys) == len(set(keys)), f'repeated keys in one object: {keys}')
    return dict(pairs)


def strict_lines(out_bytes):
    """stdout as strict UTF-8, one JSON object per line, no key twice in an object."""
    try:
        text = out_bytes.decode('utf-8')
    except UnicodeDecodeError as e:
        check(False, f'output is not UTF-8 (so not JSON text): {e}: {out_bytes[:300]!r}')
    return [json.loads(line, object_pairs_hook=unique_keys) for line in text.splitlines()]


# valid UTF-8 of every length, and invalid sequences of each kind: a lone continuation byte, a
# lead byte cut short (at the end, before ASCII), overlong, a surrogate, past U+10FFFF, bytes
# that never occur; control bytes and DEL; characters JSON escapes
UTF8_CASES = [b'caf\xc3\xa9', '日本語 ✓ 𝄞 \u2028'.encode(), b'\xef\xbf\xbf\xf4\x8f\xbf\xbf',
              b'a\x80b', b'\xe2\x82', b'\xe2\x82x', b'\xf0\x9f\x98', b'\xc0\xaf',
              b'\xed\xa0\x80', b'\xf4\x90\x80\x80', b'\xff\xfe', b'\x7f\x01\x1f"\\/\t',
              b'\xc3\xa9\xa9\xc3', b'nel\xc2\x85 ps\xe2\x80\xa9 c1\xc2\x9f nbsp\xc2\xa0']


def case_utf8(r):
    """Strings are printed as the characters they are: valid UTF-8 as is (not byte by byte as
    \\u00XX), an invalid sequence as U+FFFD (Python's errors='replace': one per maximal
    subpart), control characters escaped, U+2028 / U+2029 / NEL too (strict_lines splits with
    str.splitlines, which breaks lines there); the output stays UTF-8 JSON text."""
    msgpack = need_msgpack()
    evs = [{'type': 'BlockStored', 'block_hashes': [i], 'token_ids': [1], 'block_size': 1,
            'lora_name': raw, 'medium': raw} for i, raw in enumerate(UTF8_CASES)]
    # use_bin_type=False: bytes go out as msgpack str, whatever they hold
    mp = msgpack.packb([1.5, evs, 0], use_bin_type=False)
    rc, out, err = r.run_bytes('decode', '--all-fields', r.file(mp))
    check(rc == 0, f'exit {rc}: {err}')
    got = strict_lines(out)
    want = [raw.decode('utf-8', 'replace') for raw in UTF8_CASES]
    check([e['lora_name'] for e in got] == want,
          f'lora_name: {[e["lora_name"] for e in got]} want {want}')
    check([e['medium'] for e in got] == want, f'medium: {[e["medium"] for e in got]}')
    check('"lora_name":"café"'.encode() in out, f'valid UTF-8 passed through: {out[:400]!r}')


def case_bounded(r):
    """decode reads no more than the payload limit (16 MiB) + 1 byte of a single payload, and
    a stream file one record at a time: input fed through a pipe, 256 MiB of it; the tool must
    stop reading (single payload) and its peak memory stay far below the input (the bound
    leaves room for a sanitizer's quarantine)."""
    limit = 16 * 1024 * 1024
    total = 256 * 1024 * 1024
    max_rss_kib = 112 * 1024

    def feed(args, head):
        p = subprocess.Popen([r.exe, 'decode', *args, '-'], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        written = [0]

        def writer():
            chunk = bytes(1 << 20)
            try:
                p.stdin.write(head)
                written[0] = len(head)
                while written[0] < total:
                    p.stdin.write(chunk)
                    p.stdin.flush()
                    written[0] += len(chunk)
            except (BrokenPipeError, OSError):
                pass
            finally:
                try:
                    p.stdin.close()
                except OSError:
                    pass

        out, err = [b''], [b'']
        readers = [threading.Thread(target=lambda: out.__setitem__(0, p.stdout.read())),
                   threading.Thread(target=lambda: err.__setitem__(0, p.stderr.read()))]
        w = threading.Thread(target=writer)
        for t in [w] + readers:
            t.daemon = True
            t.start()
        deadline = time.monotonic() + 60
        for t in [w] + readers:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                p.kill()
                check(False, f'decode {args}: not done in 60 s')
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        return p.returncode, out[0], err[0].decode(errors='replace'), written[0], usage.ru_maxrss

    # a single payload (not a stream file): 16 MiB + 1 bytes read, then rejected as too large
    rc, out, err, written, rss = feed([], b'')
    check(rc == 1 and out == b'', f'too large: exit {rc}, out {out[:100]!r}')
    check(f'rejected at byte {limit}:' in err and 'larger' in err, f'too large: {err}')
    check(written < limit + (8 << 20), f'read {written} bytes of a too-large payload')
    check(rss < max_rss_kib, f'peak memory {rss} KiB reading a too-large payload')
    # a stream file whose record claims 4 GiB, 256 MiB of it there: that record is rejected
    # after limit + 1 of its bytes, the rest is skipped, and the file is truncated
    rc, out, err, written, rss = feed([], b'KVRGSTR1' + struct.pack('<I', 0xFFFFFFFF))
    check(rc == 1 and out == b'', f'stream, too large: exit {rc}, out {out[:100]!r}')
    check(f'payload 0 rejected at byte {12 + limit} of the file' in err and 'larger' in err,
          f'stream, too large: {err}')
    check('truncated' in err, f'stream, too large and cut short: {err}')
    check(rss < max_rss_kib, f'peak memory {rss} KiB reading a stream file')
    # a too-large record between two good ones: both good ones decode
    big = limit + 5
    data = (b'KVRGSTR1' + struct.pack('<I', len(EXAMPLE_A)) + EXAMPLE_A + struct.pack('<I', big)
            + bytes(big) + struct.pack('<I', len(EXAMPLE_A)) + EXAMPLE_A)
    rc, out, err = r.run_bytes('decode', r.file(data))
    check(rc == 1 and strict_lines(out) == EXAMPLE_EVENTS * 2, f'stream: exit {rc}, {out[:200]!r}')
    check(err.count('\n') == 1 and f'payload 1 rejected at byte {8 + 4 + len(EXAMPLE_A) + 4 + limit}'
          in err, f'stream: {err}')


def need_zmq():
    try:
        import zmq
    except ImportError:
        print('SKIP: python3-zmq not installed')
        sys.exit(77)
    return zmq


def case_sub_topic(r):
    """sub prints a topic whole (up to KVREG_SUB_MAX_TOPIC_LEN, 1024 bytes) and escaped as
    every other string: valid UTF-8 as is, invalid sequences as U+FFFD."""
    msgpack, zmq = need_msgpack(), need_zmq()
    head = b'kv@caf\xc3\xa9\xff"\\\x01\xe2\x82'
    long_topic = head + 'é'.encode() * ((1024 - len(head)) // 2)
    long_topic += b'x' * (1024 - len(long_topic))
    check(len(long_topic) == 1024, 'test: topic length')
    topics = [long_topic, b'kv@\xed\xa0\x80pod@\xf0\x9f\x98\x80']
    payload = msgpack.packb([1.5, [['BlockStored', [5], None, [1], 1, None, 'GPU', None]], 0])
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)  # XPUB: the subscription is an observable event, no sleep
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port('tcp://127.0.0.1')
    p = subprocess.Popen([r.exe, 'sub', f'tcp://127.0.0.1:{port}', '--count', str(len(topics)),
                          '--timeout', '30'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        check(pub.poll(20000), 'no subscription from kvreg-events sub in 20 s')
        pub.recv()
        for t in topics:
            pub.send_multipart([t, struct.pack('>Q', 0), payload])
        out, err = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        pub.close()
        ctx.term()
    check(p.returncode == 0, f'sub: exit {p.returncode}: {err.decode(errors="replace")}')
    got = strict_lines(out)
    check(len(got) == len(topics), f'{len(got)} events: {out[:300]!r}')
    check(sorted(e['topic'] for e in got) == sorted(t.decode('utf-8', 'replace') for t in topics),
          f'topics: {[e["topic"] for e in got]}')


def case_sub_endpoints(r):
    """sub takes at most 256 ENDPOINTs: the 257th is bad usage (exit 2), not dropped."""
    eps = ['tcp://127.0.0.1:9'] * 257
    rc, _, err = r.run('sub', *eps, '--timeout', '0.2')
    check(rc == 2 and '256' in err, f'257 endpoints: exit {rc}: {err}')
    rc, _, err = r.run('sub', *eps[:256], '--timeout', '0.2')
    check(rc == 1 and 'nothing arrived' in err, f'256 endpoints: exit {rc}: {err}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--events', required=True)
    ap.add_argument('--case', required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        globals()['case_' + a.case.replace('-', '_')](Runner(a.events, tmp))
    print('ok')


if __name__ == '__main__':
    main()
