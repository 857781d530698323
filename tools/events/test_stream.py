#!/usr/bin/env python3
"""kvreg-replay --wire-out FILE writes one stream file (tools/events/stream_file.h), and
`kvreg-events decode FILE` reads it back.

Expected values come from kvreg-replay's own report (payloads written, Register / Remove
events) and from an independent reader: this script parses the framing with `struct` and
decodes every payload with python3-msgpack. Also: --wire-out-per-payload writes one file per
payload instead, and a truncated stream file is rejected with its byte offset.
Usage: test_stream.py --replay KVREG_REPLAY --events KVREG_EVENTS
Exit 77 (skipped) without python3-msgpack."""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77
MAGIC = b"KVRGSTR1"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def records(data):
    """The payloads of a stream file, by the format in stream_file.h."""
    check(data[:8] == MAGIC, f"no magic: {data[:8]!r}")
    out, at = [], 8
    while at < len(data):
        check(len(data) - at >= 4, f"length cut short at {at}")
        (n,) = struct.unpack_from("<I", data, at)
        check(len(data) - at - 4 >= n, f"payload at {at + 4} cut short")
        out.append(data[at + 4:at + 4 + n])
        at += 4 + n
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True)
    ap.add_argument("--events", required=True)
    args = ap.parse_args()
    try:
        import msgpack
    except ImportError:
        print("SKIP: python3-msgpack is not installed (the independent decoder)")
        return SKIP

    with tempfile.TemporaryDirectory() as tmp:
        stream = os.path.join(tmp, "run.kvstream")
        # No G2: evicted blocks leave the registry, so the payloads carry Removes too.
        model = ["--conversations", "12", "--g1-blocks", "48", "--g2-blocks", "0", "--wire", "vllm",
                 "--json", "--no-progress"]
        proc = subprocess.run([args.replay, *model, "--wire-out", stream], capture_output=True,
                              timeout=120)
        check(proc.returncode == 0, f"kvreg-replay: {proc.stderr.decode()}")
        report = json.loads(proc.stdout)
        reg, rem = report["events"]["register"], report["events"]["remove"]
        check(reg > 0 and rem > 0, f"the run needs Registers and Removes: {report['events']}")
        check(os.path.isfile(stream), "--wire-out did not write one file")

        # the independent reader
        with open(stream, "rb") as f:
            data = f.read()
        payloads = records(data)
        check(len(payloads) == report["wire"]["batches"],
              f"{len(payloads)} records, kvreg-replay reported {report['wire']['batches']} payloads")
        n_events = stored = removed = 0
        for p in payloads:
            batch = msgpack.unpackb(p, raw=False, strict_map_key=False)
            for ev in batch[1]:
                n_events += 1
                if ev["type"] == "BlockStored":
                    stored += len(ev["block_hashes"])
                elif ev["type"] == "BlockRemoved":
                    removed += len(ev["block_hashes"])
        check((stored, removed) == (reg, rem),
              f"msgpack: {stored} stored / {removed} removed blocks, report {reg} / {rem}")

        # kvreg-events decode
        proc = subprocess.run([args.events, "decode", stream], capture_output=True, timeout=120)
        check(proc.returncode == 0, f"decode: rc {proc.returncode}: {proc.stderr.decode()}")
        lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        check(len(lines) == n_events, f"decode printed {len(lines)} events, msgpack read {n_events}")
        d_stored = sum(len(e["block_hashes"]) for e in lines if e["type"] == "BlockStored")
        d_removed = sum(len(e["block_hashes"]) for e in lines if e["type"] == "BlockRemoved")
        check((d_stored, d_removed) == (reg, rem),
              f"decode: {d_stored} stored / {d_removed} removed blocks, report {reg} / {rem}")
        print(f"stream file: {len(payloads)} payloads, {n_events} events, {reg} stored and "
              f"{rem} removed blocks; kvreg-events decode agrees")

        # truncated inside the third payload: two decode, then an error naming the offset
        cut = 8 + sum(4 + len(p) for p in payloads[:2]) + 4 + len(payloads[2]) // 2
        short = os.path.join(tmp, "short.kvstream")
        with open(short, "wb") as f:
            f.write(data[:cut])
        proc = subprocess.run([args.events, "decode", short], capture_output=True, timeout=60)
        err = proc.stderr.decode()
        head_events = sum(len(msgpack.unpackb(p, raw=False)[1]) for p in payloads[:2])
        check(proc.returncode == 1, f"truncated file: rc {proc.returncode}")
        check(len(proc.stdout.decode().splitlines()) == head_events,
              f"truncated file: not the {head_events} events of the two whole payloads")
        start = 8 + sum(4 + len(p) for p in payloads[:2]) + 4
        check("truncated" in err and f"byte {start}" in err,
              f"truncated file: no message with byte {start}: {err}")

        # --all-fields applies to a stream file's payloads as to a single payload's
        extra = msgpack.packb([1.0, [
            {"type": "BlockStored", "block_hashes": [1], "parent_block_hash": None,
             "token_ids": [1], "block_size": 1, "lora_id": 9, "medium": "GPU",
             "cache_salt": "s", "kv_cache_spec_kind": "mamba", "session_id": None},
            {"type": "TierBlocksCleared", "medium": "CPU"}], 0], use_bin_type=True)
        single = os.path.join(tmp, "extra.msgpack")
        with open(single, "wb") as f:
            f.write(extra)
        both = os.path.join(tmp, "extra.kvstream")
        with open(both, "wb") as f:
            f.write(MAGIC + (struct.pack("<I", len(extra)) + extra) * 2)
        outs = []
        for path in (single, both):
            proc = subprocess.run([args.events, "decode", "--all-fields", path],
                                  capture_output=True, timeout=60)
            check(proc.returncode == 0, f"--all-fields {path}: {proc.stderr.decode()}")
            outs.append([json.loads(line) for line in proc.stdout.decode().splitlines()])
        want = {"lora_id": 9, "cache_salt": "s", "kv_cache_spec_kind": "mamba", "session_id": None}
        check(len(outs[0]) == 2 and all(outs[0][0].get(k, "-") == v for k, v in want.items())
              and outs[0][1].get("tag") == "TierBlocksCleared",
              f"--all-fields, one payload: {outs[0]}")
        check(outs[1] == outs[0] * 2, f"--all-fields, stream file: {outs[1]}\nwant {outs[0] * 2}")

        # one file per payload only on request
        outdir = os.path.join(tmp, "per")
        proc = subprocess.run([args.replay, *model, "--wire-out-per-payload", outdir],
                              capture_output=True, timeout=120)
        check(proc.returncode == 0, f"--wire-out-per-payload: {proc.stderr.decode()}")
        files = sorted(os.listdir(outdir))
        check(files == [f"{i:08d}.msgpack" for i in range(len(payloads))],
              f"--wire-out-per-payload: {len(files)} files, want {len(payloads)}")
        with open(os.path.join(outdir, files[-1]), "rb") as f:
            # the same events ([1]); the timestamp ([0]) is the time of writing
            check(msgpack.unpackb(f.read(), raw=False)[1] == msgpack.unpackb(payloads[-1], raw=False)[1],
                  "the last payload file holds other events than the last record")
        # the old habit, --wire-out DIR: refused with the way to get one file per payload
        proc = subprocess.run([args.replay, *model, "--wire-out", outdir], capture_output=True,
                              timeout=120)
        check(proc.returncode != 0 and b"--wire-out-per-payload" in proc.stderr,
              f"--wire-out on a directory: rc {proc.returncode}, {proc.stderr.decode()}")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
