#!/usr/bin/env python3
"""An independent vLLM-style consumer of libkvreg's publisher (suite net).

Written only with Debian's python3-zmq and python3-msgpack, the way a router that consumes
vLLM's ZmqEventPublisher reads it (vLLM's own client and the Dynamo / llm-d listeners):
SUB socket, three frames [topic, seq u64 big-endian, msgpack KVEventBatch], and replay over a
DEALER: send [b"", start u64 BE], receive [b"", topic, seq, payload] per batch and the end
marker [b"", b"", ff x 8, b""]. The expected values come from the test (tokens) and from the
helper's report of what it registered (hashes), never from decoding with libkvreg.

Usage: vllm_consumer.py HELPER
"""
import re
import subprocess
import sys
import time

import msgpack
import zmq

TOPIC = b"kv@pod-py@model-py"
END_SEQ = b"\xff" * 8
REQUIRED_STORED = ["type", "block_hashes", "parent_block_hash", "token_ids", "block_size",
                   "lora_id", "medium", "lora_name"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Helper:
    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.endpoint = self.p.stdout.readline().split()[1]
        self.replay = self.p.stdout.readline().split()[1]

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        words = self.p.stdout.readline().split()
        check(words and words[0] == "SENT", f"helper answered {words!r} to {line!r}")
        return int(words[1]), [int(w) for w in words[2:]]

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        check(self.p.wait(timeout=20) == 0, "helper exit status")


def decode_batch(payload):
    """msgspec's rules for KVEventBatch (array_like outer, tagged map events)."""
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    check(isinstance(batch, list) and len(batch) == 3, f"outer batch is an array of 3: {batch!r}")
    ts, events, dp_rank = batch
    check(isinstance(ts, float), "ts is a float64")
    check(abs(ts - time.time()) < 3600, "ts is wall-clock seconds")
    check(isinstance(events, list), "events is an array")
    check(dp_rank == 0, "data_parallel_rank 0")
    for e in events:
        check(isinstance(e, dict), "events are maps (vLLM >= 0.24)")
        check(next(iter(e)) == "type", "type is the first key")
        check(e["type"] in ("BlockStored", "BlockRemoved", "AllBlocksCleared"), f"tag {e['type']}")
        if e["type"] == "BlockStored":
            for k in REQUIRED_STORED:
                check(k in e, f"BlockStored has {k}")
        if e["type"] == "BlockRemoved":
            check("block_hashes" in e and "medium" in e, "BlockRemoved has block_hashes and medium")
    return events


def raw_hash_forms_are_u64(payload, hashes):
    """Every hash travels as msgpack uint64 (0xcf + 8 bytes), the form llm-d accepts."""
    for h in hashes:
        check(b"\xcf" + h.to_bytes(8, "big") in payload, f"hash {h} as 0xcf uint64")


def recv_live(sub, timeout_ms):
    if not sub.poll(timeout_ms):
        return None
    frames = sub.recv_multipart()
    check(len(frames) == 3, f"3 frames, got {len(frames)}")
    check(frames[0] == TOPIC, f"topic {frames[0]!r}")
    check(len(frames[1]) == 8, "seq is 8 bytes")
    return int.from_bytes(frames[1], "big"), frames[2]


def main():
    helper = Helper(sys.argv[1])
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
    sub.connect(helper.endpoint)

    # PUB/SUB drops what is sent before the subscription arrives: store until one lands.
    live = {}
    deadline = time.time() + 10
    stores = 0
    while not live and time.time() < deadline:
        helper.cmd("store 1")
        stores += 1
        got = recv_live(sub, 100)
        if got:
            live[got[0]] = got[1]
    check(live, "a live batch within 10 s")

    # Now in step: one chained sequence of 3 blocks is one BlockStored with 3 hashes.
    next_seq, hashes = helper.cmd("store 3")
    seq, payload = recv_live(sub, 5000)
    check(seq == next_seq - 1, f"seq {seq} == {next_seq - 1}")
    check(seq == max(live) + 1, "seqs consecutive")
    live[seq] = payload
    events = decode_batch(payload)
    check(len(events) == 1, f"one BlockStored for one chain: {events!r}")
    e = events[0]
    check(e["type"] == "BlockStored", "BlockStored")
    check(e["block_hashes"] == hashes, f"hashes {e['block_hashes']} == {hashes}")
    check(e["parent_block_hash"] is None, "first block has no parent")
    k = stores
    check(e["token_ids"] == [100 * k + i for i in range(12)], f"tokens {e['token_ids']}")
    check(e["block_size"] == 4, "block_size")
    check(e["lora_id"] is None and e["lora_name"] is None, "no LoRA")
    check(e["medium"] == "GPU", "medium GPU")
    raw_hash_forms_are_u64(payload, hashes)

    next_seq, _ = helper.cmd("release")
    while max(live) < next_seq - 1:
        got = recv_live(sub, 5000)
        check(got, "release batches arrive")
        live[got[0]] = got[1]
    removed = [h for s in live if s > seq for ev in decode_batch(live[s])
               if ev["type"] == "BlockRemoved" for h in ev["block_hashes"]]
    check(set(hashes) <= set(removed), "every stored hash removed")

    # Replay from 0 over a DEALER (a REQ client would get only the first reply).
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(helper.replay)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    replayed = []
    while True:
        check(dealer.poll(5000), "replay answers within 5 s")
        frames = dealer.recv_multipart()
        check(len(frames) == 4 and frames[0] == b"", f"[b'', topic, seq, payload]: {len(frames)} frames")
        if frames[2] == END_SEQ:
            # vLLM's marker has an empty topic frame; ours names the publisher's instance
            # there (a frame vLLM's and llm-d's consumers do not read: they end on the empty
            # payload / the empty third frame).
            check(frames[3] == b"", "end marker [b'', tag, ff x 8, b'']")
            check(re.fullmatch(rb"kvreg-instance=[0-9a-f]{16}", frames[1]) is not None,
                  f"end marker topic frame names the instance: {frames[1]!r}")
            break
        check(frames[1] == TOPIC, "replay carries the topic (vLLM >= 0.26)")
        replayed.append((int.from_bytes(frames[2], "big"), frames[3]))
    check([s for s, _ in replayed] == list(range(next_seq)), f"replay seqs 0..{next_seq - 1}")
    for s, p in replayed:
        decode_batch(p)
        if s in live:
            check(live[s] == p, f"replayed batch {s} is the live one byte for byte")

    # A late start: only what is kept from there on.
    dealer.send_multipart([b"", (next_seq - 1).to_bytes(8, "big")])
    frames = dealer.recv_multipart()
    check(int.from_bytes(frames[2], "big") == next_seq - 1, "replay from a later seq")
    check(dealer.recv_multipart()[2] == END_SEQ, "then the end marker")

    helper.quit()
    print(f"ok: {len(live)} live batches, {len(replayed)} replayed")


if __name__ == "__main__":
    main()
