#!/usr/bin/env python3
"""kvreg-replay --publish into kvreg-events sub (suite net).

kvreg-replay runs a small synthetic workload, publishing on ephemeral 127.0.0.1 ports with a
replay ROUTER, and lingers; kvreg-events sub --from-seq 0 must then print every event of the
run as JSON lines: as many stored hashes as the run's Register events, as many removed hashes
as its Remove events, each publisher's seqs in order. Output is read until complete (or a
30 s deadline), then the subscriber is stopped.

Usage: test_events_sub.py KVREG_REPLAY KVREG_EVENTS
"""
import json
import re
import subprocess
import sys
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    replay, events = sys.argv[1], sys.argv[2]
    rp = subprocess.Popen([replay, "--publish", "tcp://127.0.0.1:*", "--replay-endpoint",
                           "tcp://127.0.0.1:*", "--topic", "kv@pod-r@model-r", "--conversations",
                           "3", "--max-requests", "20", "--g1-blocks", "16", "--no-progress", "--json",
                           "--linger", "30"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sub = None
    try:
        ep = rep = None
        while ep is None or rep is None:
            line = rp.stderr.readline()
            if not line:
                fail("kvreg-replay ended before printing its endpoints")
            if line.startswith("kvreg-replay: publishing on "):
                ep = line.split()[-1]
            elif line.startswith("kvreg-replay: replay on "):
                rep = line.split()[-1]
        report = json.loads(rp.stdout.readline())
        want_stored, want_removed = report["events"]["register"], report["events"]["remove"]
        if want_stored == 0:
            fail("the workload registered nothing")

        sub = subprocess.Popen([events, "sub", ep, "--replay", rep, "--from-seq", "0",
                                "--timeout", "30"], stdout=subprocess.PIPE, text=True)
        stored = removed = 0
        last_seq = -1
        deadline = time.time() + 30
        while (stored, removed) != (want_stored, want_removed) and time.time() < deadline:
            line = sub.stdout.readline()
            if not line:
                break
            e = json.loads(line)
            if e["publisher"] != 0 or e["seq"] < last_seq:
                fail(f"out of order: {line}")
            last_seq = e["seq"]
            if e["topic"] != "kv@pod-r@model-r":
                fail(f"topic: {line}")
            # The instance id is known once an end marker named it: null before, then hex.
            if e["instance"] is not None and re.fullmatch(r"[0-9a-f]{16}", e["instance"]) is None:
                fail(f"instance: {line}")
            if e["type"] == "BlockStored":
                stored += len(e["block_hashes"])
                if len(e["token_ids"]) != len(e["block_hashes"]) * e["block_size"]:
                    fail(f"token_ids do not fill the blocks: {line}")
            elif e["type"] == "BlockRemoved":
                removed += len(e["block_hashes"])
            if e["dp_rank"] != 0:
                fail(f"dp_rank: {line}")
        if (stored, removed) != (want_stored, want_removed):
            fail(f"stored/removed {stored}/{removed}, the run had {want_stored}/{want_removed}")
        print(f"ok: {stored} stored and {removed} removed hashes up to seq {last_seq}")

        # Nothing published: exit status 1 and a message once the timeout passes.
        quiet = subprocess.run([events, "sub", "tcp://127.0.0.1:1", "--timeout", "0.3"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
        if quiet.returncode != 1 or "nothing arrived" not in quiet.stderr or quiet.stdout:
            fail(f"a silent endpoint: status {quiet.returncode}, stderr {quiet.stderr!r}")
        print("ok: nothing arrived -> status 1")
    finally:
        for p in (sub, rp):
            if p and p.poll() is None:
                p.terminate()
                p.wait(timeout=10)


if __name__ == "__main__":
    main()
