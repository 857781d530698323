#!/usr/bin/env python3
"""Tests for kvreg-replay (meson suite 'examples'); Python 3 standard library only.

Each --case runs kvreg-replay and checks its exit status and output. Expected hit counts
are computed here, independently, from the requests themselves (a block is a hit iff its
id was seen before), never taken from the program under test.

Cases:
  help                     --help text; bad options exit 2
  default-text             no arguments: the readable report, which says the tiers are the
                           defaults and explains events/s and speed
  default-json             --json on the built-in workload: the default tiers evict and
                           remove; with unlimited G1 and no G2, the hits equal an independent
                           count of the same workload (written out with --dump-trace)
  verify-tiers             --verify-events with small G1 and G2: evictions, offload, onboard
  verify-g1-only           --verify-events with a small G1 and no G2: one Remove per
                           eviction; a G1 smaller than a request overflows, then trims
  verify-detects-mismatch  the verifier fails when it is made to miss one event
  progress                 progress bar only on a terminal and for long inputs
  malformed                each kind of bad line: exit 2 naming the line
  skip-bad                 --skip-bad skips and counts the bad lines
  trace-conversation       the Mooncake traces in data/traces (.jsonl.gz), unlimited
  trace-synthetic          capacity: hit rate == the theoretical maximum counted here
  trace-verify-tiers       a Mooncake trace with small tiers under --verify-events
  gzip                     a .gz trace gives the report of its plain text; a truncated one
                           fails with exit 2 and says so
  empty                    an empty trace warns and reports zero requests
  sweep                    --sweep's CSV and JSON tables equal single runs at the same
                           capacities (no G2, a fixed G2, a G1 x G2 grid)
  chart                    --chart writes a well-formed SVG and a PNG of the right size
  wire-vllm                --wire vllm --wire-out-per-payload: one file per batch, numbered in
                           order, as many as the summary counts; python3-msgpack (tests/wire/
                           check_vllm_rules.py) checks vLLM's field rules and counts as many
                           stored / removed blocks as Register / Remove events
  wire-vllm-legacy         the same with positional events
  wire-dynamo-json         --wire dynamo-json: .json files of RouterEvents (json module),
                           event ids increasing, block counts equal to the event counts
  wire-usage               --wire without --wire-out, or an unknown format: exit 2
--wrapper runs kvreg-replay under another program (meson uses it for valgrind).
Exit 77 (skipped) says why: no jansson (or, for .gz input, no zlib) in this build.
"""
import argparse
import gzip
import json
import os
import pty
import shlex
import subprocess
import sys
import tempfile

SKIP = 77
BLOCK_TOKENS = 512


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def run(args, expect_rc=0, stdin=None):
    proc = subprocess.run(ARGS.wrapper + [ARGS.replay] + args, input=stdin, capture_output=True,
                          timeout=600)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    if expect_rc is not None and proc.returncode != expect_rc:
        raise Failure(f"kvreg-replay {' '.join(args)}: exit {proc.returncode}, expected "
                      f"{expect_rc}\n--- stdout\n{out}\n--- stderr\n{err}")
    return proc.returncode, out, err


def run_json(args, expect_rc=0):
    _, out, err = run(["--json"] + args, expect_rc)
    try:
        return json.loads(out), err
    except ValueError as e:
        raise Failure(f"--json output is not one JSON object ({e}):\n{out}")


def block_tokens(input_length, i, bt=BLOCK_TOKENS):
    return max(0, min(bt, input_length - i * bt))


def independent_count(lines):
    """Requests, blocks, tokens and the theoretical-maximum hits of a list of JSONL lines."""
    seen = set()
    parent_of = {}
    c = dict(requests=0, blocks=0, prompt_tokens=0, hit_blocks=0, hit_tokens=0)
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        ids = row["hash_ids"]
        c["requests"] += 1
        c["blocks"] += len(ids)
        c["prompt_tokens"] += row["input_length"]
        for i, block_id in enumerate(ids):
            # Ids must be prefix-chained, or hit-by-id would not be a prefix-cache hit rate.
            parent = ids[i - 1] if i else None
            check(parent_of.setdefault(block_id, parent) == parent,
                  f"id {block_id} has two different parents: not a prefix-chained trace")
            if block_id in seen:
                c["hit_blocks"] += 1
                c["hit_tokens"] += block_tokens(row["input_length"], i)
            else:
                seen.add(block_id)
    c["unique_blocks"] = len(seen)
    return c


def compare_unlimited(report, expected):
    """An unlimited G1 must reach exactly the theoretical maximum."""
    got = dict(requests=report["requests"], blocks=report["blocks"],
               prompt_tokens=report["prompt_tokens"], hit_blocks=report["hit_blocks"]["total"],
               hit_tokens=report["hit_tokens"]["total"], unique_blocks=report["unique_blocks"])
    check(got == expected, f"replay {got}\n  != independent count {expected}")
    check(report["hit_blocks"]["max"] == expected["hit_blocks"], "reported max is wrong")
    check(report["hit_blocks"]["g2"] == 0 and report["g1_evictions"] == 0, "unlimited G1 evicted")
    # Nothing is ever evicted, so every distinct id stays registered and no Remove is sent.
    check(report["events"]["register"] == expected["unique_blocks"], "one Register per id")
    check(report["events"]["remove"] == 0, "Remove events with unlimited capacity")
    check(report["final"]["registry_hashes"] == expected["unique_blocks"] ==
          report["final"]["g1_blocks"], "final registry size")
    print(f"requests {got['requests']}, blocks {got['blocks']}, hits {got['hit_blocks']} "
          f"({got['hit_blocks'] / max(1, got['blocks']):.2%}) == independent count")


def check_tiers_consistent(r, g1, g2):
    check(r["verify"] == {"enabled": True, "ok": True, "checkpoints": r["verify"]["checkpoints"]},
          f"verify: {r['verify']}")
    check(r["verify"]["checkpoints"] >= 2, "too few checkpoints")
    check(r["hit_blocks"]["total"] <= r["hit_blocks"]["max"], "more hits than possible")
    check(r["events"]["register"] - r["events"]["remove"] == r["final"]["registry_hashes"],
          "Register - Remove != registered hashes")
    # After the last request finishes nothing is in use, so G1 is back within capacity.
    check(r["final"]["g1_blocks"] <= g1, "G1 above capacity at the end")
    if g2:
        check(r["final"]["g2_blocks"] <= g2, "G2 above capacity")


def needs_jansson():
    if ARGS.jansson != "1":
        print("SKIP: kvreg-replay was built without jansson (trace input disabled)")
        sys.exit(SKIP)


def needs_zlib():
    needs_jansson()
    if ARGS.zlib != "1":
        print("SKIP: kvreg-replay was built without zlib (.gz input disabled)")
        sys.exit(SKIP)


def trace_path(name):
    needs_zlib()
    path = os.path.join(ARGS.traces, name)
    check(os.path.isfile(path), f"trace file missing from {ARGS.traces}: {name}")
    return path


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return f.read().splitlines()


# --------------------------------------------------------------------------------------
def case_help():
    _, out, _ = run(["--help"])
    for word in ("Usage: kvreg-replay", "--g1-blocks", "--g2-blocks", "--inflight",
                 "--verify-events", "--skip-bad", "--json", "Exit status"):
        check(word in out, f"--help does not mention {word}")
    for bad in (["--bogus"], ["--g1-blocks", "0"], ["--inflight", "abc"], ["--g2-blocks"],
                ["--block-tokens", "-5"], ["a.jsonl", "b.jsonl"],
                ["--verify-ignore-event", "3"]):
        _, _, err = run(bad, expect_rc=2)
        check(err.startswith("kvreg-replay: "), f"{bad}: no error message: {err!r}")


def case_default_text():
    _, out, err = run([])
    for label in ("workload    synthetic", "hit rate", "  G1 ", "  G2 ", "  max ",
                  "events      Register", "speed", "peak RSS", "G1 4,096 blocks, G2 16,384",
                  "the default capacities", "events/s", "on one thread for everything"):
        check(label in out, f"report lacks {label!r}:\n{out}")
    check(err == "", f"unexpected stderr (no progress bar when not a terminal): {err!r}")
    print(out)


def case_default_json():
    with tempfile.TemporaryDirectory() as tmp:
        dumps = [os.path.join(tmp, f"w{i}.jsonl") for i in range(3)]
        # The defaults were unlimited G1 and no G2 up to 0.2; now they are small tiers, so
        # the comparison with the maximum names the unlimited model explicitly.
        r, _ = run_json(["--dump-trace", dumps[0], "--g1-blocks", "unlimited", "--g2-blocks", "0"])
        d, _ = run_json(["--dump-trace", dumps[1]])
        run_json(["--dump-trace", dumps[2], "--seed", "7"])
        with open(dumps[0]) as f:
            lines = f.read().splitlines()
        with open(dumps[1]) as f:
            check(f.read().splitlines() == lines, "the built-in workload is not deterministic")
        with open(dumps[2]) as f:
            check(f.read().splitlines() != lines, "--seed does not change the workload")
    expected = independent_count(lines)
    check(r["source"] == "synthetic" and r["seed"] == 42, "source / default seed")
    check(expected["requests"] >= 5000, "workload too small")
    rate = expected["hit_blocks"] / expected["blocks"]
    check(0.3 < rate < 0.95, f"synthetic workload should reuse prefixes, not everything: {rate}")
    compare_unlimited(r, expected)
    # The defaults: G1 4096 and G2 16384 blocks, said so, and the tiers at work.
    check(d["g1_capacity_blocks"] == 4096 and d["g2_capacity_blocks"] == 16384 and
          d["capacity_defaults"] == {"g1": True, "g2": True}, "default capacities")
    check(d["g1_evictions"] > 0 and d["g2_stores"] > 0 and d["events"]["remove"] > 0,
          "the default tiers neither evict nor remove")
    check(d["hit_blocks"]["total"] <= expected["hit_blocks"], "more hits than the maximum")
    check(d["events_per_s"] > 0, "events_per_s")


def case_verify_tiers():
    g1, g2 = 256, 1024
    size = ["--conversations", "2000"]  # plenty for these tiers, and quick under valgrind
    r, _ = run_json(size + ["--verify-events", "--g1-blocks", str(g1), "--g2-blocks", str(g2),
                            "--inflight", "4", "--checkpoint-every", "200"])
    check_tiers_consistent(r, g1, g2)
    for key in ("g1_evictions", "g2_stores", "g2_evictions", "onboards"):
        check(r[key] > 0, f"{key} is 0: the small tiers were not exercised")
    check(r["onboards"] == r["hit_blocks"]["g2"], "every G2 hit is onboarded")
    # Offloading registers in G2 before releasing from G1: only G2 evictions may remove.
    check(0 < r["events"]["remove"] <= r["g2_evictions"], "Remove without a G2 eviction")
    only_g1, _ = run_json(size + ["--verify-events", "--g1-blocks", str(g1), "--g2-blocks", "0",
                                  "--inflight", "4"])
    check(r["hit_blocks"]["total"] > only_g1["hit_blocks"]["total"], "G2 adds no hits")
    print(f"G1+G2 hits {r['hit_blocks']['total']} (G2 {r['hit_blocks']['g2']}) > G1 only "
          f"{only_g1['hit_blocks']['total']}; {r['verify']['checkpoints']} checkpoints passed")


def case_verify_g1_only():
    r, _ = run_json(["--verify-events", "--g1-blocks", "300", "--g2-blocks", "0",
                     "--checkpoint-every", "250"])
    check_tiers_consistent(r, 300, 0)
    check(r["g2_enabled"] is False and r["hit_blocks"]["g2"] == 0, "G2 used without --g2-blocks")
    check(r["g1_evictions"] > 0, "no evictions with a small G1")
    # Without G2 an evicted block leaves its last pool: exactly one Remove per eviction.
    check(r["events"]["remove"] == r["g1_evictions"], "Remove events != G1 evictions")
    # A G1 smaller than one request: it overflows while the request runs, then is trimmed.
    tiny, _ = run_json(["--verify-events", "--g1-blocks", "1", "--g2-blocks", "0", "--inflight", "1",
                        "--conversations", "300"])
    check_tiers_consistent(tiny, 1, 0)
    check(tiny["over_capacity"] > 0, "requests larger than G1 did not overflow it")
    check(tiny["events"]["remove"] == tiny["g1_evictions"], "tiny G1: Remove != evictions")


def case_verify_detects_mismatch():
    r, err = run_json(["--verify-events", "--verify-ignore-event", "10", "--g1-blocks", "300"],
                      expect_rc=1)
    check(r["verify"]["ok"] is False, "verify reported ok although an event was dropped")
    check("disagree" in err, f"no explanation on stderr: {err!r}")


BAD_LINES = [
    (b'{"timestamp": 0, "input_length": 10', "invalid JSON"),
    (b"not json at all", "invalid JSON"),
    (b"[1, 2, 3]", "expected a JSON object"),
    (b'{"timestamp": 0, "input_length": 10, "output_length": 1}', "hash_ids"),
    (b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": "0,1"}', "hash_ids"),
    (b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, -1]}',
     "hash_ids[1]"),
    (b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, 1.5]}',
     "hash_ids[1]"),
    (b'{"timestamp": 0, "input_length": -10, "output_length": 1, "hash_ids": [0]}',
     "input_length"),
    (b'{"timestamp": "0", "input_length": 10, "output_length": 1, "hash_ids": [0]}',
     "timestamp"),
    (b'{"timestamp": 0, "input_length": 99999999999999999999999, "output_length": 1, '
     b'"hash_ids": [0]}', "invalid JSON"),
    (b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}\x00x',
     "invalid JSON"),
    (b'\xff\xfe{"timestamp": 0}', "invalid JSON"),
]
GOOD = b'{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [0, 1]}'


def case_malformed():
    needs_jansson()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bad.jsonl")
        for bad, what in BAD_LINES:
            # Line 2 is blank: line numbers count every line of the file.
            with open(path, "wb") as f:
                f.write(GOOD + b"\n\n" + bad + b"\n" + GOOD + b"\n")
            _, out, err = run([path], expect_rc=2)
            check(f"{path}:3: " in err and what in err, f"{bad!r}: error lacks line 3 / "
                  f"{what!r}: {err!r}")
            check(out == "", f"{bad!r}: a report was printed for a bad trace")
            check("end of file" not in err, f"{bad!r}: an error on line 3 of 4 says 'end of "
                  f"file': {err!r}")
        _, _, err = run([os.path.join(tmp, "missing.jsonl")], expect_rc=2)
        check("cannot open" in err, f"missing file: {err!r}")


def case_skip_bad():
    needs_jansson()
    content = b"".join(GOOD + b"\n" + bad + b"\n" for bad, _ in BAD_LINES) + GOOD + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bad.jsonl")
        with open(path, "wb") as f:
            f.write(content)
        r, err = run_json(["--skip-bad", path])
    check(r["bad_lines"] == len(BAD_LINES), f"bad_lines {r['bad_lines']} != {len(BAD_LINES)}")
    good = len(BAD_LINES) + 1
    check(r["requests"] == good and r["blocks"] == 2 * good, "good lines lost")
    check(r["hit_blocks"]["total"] == 2 * good - 2, "every repeat of the good line hits")
    check(err.count("kvreg-replay: ") == len(BAD_LINES), "each skipped line is reported")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "one-bad.jsonl")
        with open(path, "wb") as f:
            f.write(GOOD + b"\n" + BAD_LINES[0][0] + b"\n")
        _, out, _ = run(["--skip-bad", path])
    check("1 bad line skipped" in out, f"singular: {out!r}")


def trace_case(name):
    path = trace_path(name)
    expected = independent_count(read_lines(path))
    r, _ = run_json(["--g1-blocks", "unlimited", "--g2-blocks", "0", path])
    check(r["source"] == path and r["bad_lines"] == 0 and r["seed"] is None, "source, bad_lines")
    compare_unlimited(r, expected)


def case_trace_verify_tiers():
    path = trace_path("conversation_trace.jsonl.gz")
    g1, g2 = 2000, 8000
    r, _ = run_json(["--verify-events", "--g1-blocks", str(g1), "--g2-blocks", str(g2),
                     "--max-requests", "4000", path])
    check(r["requests"] == 4000, "--max-requests")
    check_tiers_consistent(r, g1, g2)
    check(r["g1_evictions"] > 0 and r["g2_stores"] > 0 and r["onboards"] > 0, "tiers unused")


def run_with_tty_stderr(args):
    """Run kvreg-replay with stderr on a pseudo-terminal; return (rc, stdout, tty output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(ARGS.wrapper + [ARGS.replay] + args, stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    chunks = []
    while True:  # drain the terminal while it runs, or its writes would block
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read().decode()
    rc = proc.wait(timeout=600)
    os.close(master)
    return rc, out, b"".join(chunks).decode(errors="replace")


def case_progress():
    long_run = ["--json", "--conversations", "20000"]  # long enough for a progress bar
    rc, out, tty = run_with_tty_stderr(long_run)
    check(rc == 0, f"exit {rc}: {tty}")
    check("\r[" in tty and "%" in tty, f"no progress bar on a terminal: {tty[:200]!r}")
    check(" requests, " in tty and "/s" in tty and " left" in tty,
          f"the bar lacks counts, rate or time left: {tty[:300]!r}")
    check(json.loads(out)["requests"] > 50000, "stdout is still the JSON report")
    rc, out, tty = run_with_tty_stderr(long_run + ["--no-progress"])
    check(rc == 0 and tty == "", f"--no-progress still drew: {tty[:200]!r}")
    rc, out, tty = run_with_tty_stderr(["--json"])
    check(rc == 0 and tty == "", f"a short run drew a progress bar: {tty[:200]!r}")
    _, _, err = run(long_run)
    check(err == "", "progress bar drawn although stderr is not a terminal")


def wire_run(fmt, tmp):
    """A small run with evictions (so Removes happen) writing payloads to tmp/out."""
    out = os.path.join(tmp, "out")
    # No G2: evicted blocks leave the registry, so the payloads carry Removes too.
    report, _ = run_json(["--conversations", "12", "--g1-blocks", "48", "--g2-blocks", "0",
                          "--wire", fmt, "--wire-out-per-payload", out, "--verify-events"])
    files = sorted(os.listdir(out))
    ext = "json" if fmt == "dynamo-json" else "msgpack"
    check(files == [f"{i:08d}.{ext}" for i in range(len(files))],
          f"files not numbered 00000000.{ext}... in order: {files[:5]}")
    check(report["wire"] == {"format": fmt, "batches": len(files), "errors": 0},
          f"summary {report['wire']} vs {len(files)} files")
    check(report["events"]["remove"] > 0, "the run evicted nothing: no Remove to encode")
    return report, out, files


def consumer(out, legacy):
    if not ARGS.consumer:
        print("SKIP: no independent consumer given (--consumer)")
        sys.exit(SKIP)
    cmd = [ARGS.python or sys.executable, ARGS.consumer, "--block-size", str(BLOCK_TOKENS), out]
    proc = subprocess.run(cmd + (["--legacy"] if legacy else []), capture_output=True,
                          timeout=120)
    if proc.returncode == SKIP:
        print(proc.stdout.decode())
        sys.exit(SKIP)
    check(proc.returncode == 0, f"consumer: {proc.stdout.decode()}{proc.stderr.decode()}")
    return json.loads(proc.stdout)


def case_wire_vllm(legacy=False):
    with tempfile.TemporaryDirectory() as tmp:
        report, out, files = wire_run("vllm-legacy" if legacy else "vllm", tmp)
        counts = consumer(out, legacy)
        check(counts["files"] == len(files), f"consumer read {counts['files']} files")
        check(counts["stored_blocks"] == report["events"]["register"] and
              counts["removed_blocks"] == report["events"]["remove"],
              f"consumer counted {counts}, events {report['events']}")


def case_wire_dynamo_json():
    with tempfile.TemporaryDirectory() as tmp:
        report, out, files = wire_run("dynamo-json", tmp)
        stored = removed = 0
        last_id = -1
        for name in files:
            with open(os.path.join(out, name)) as f:
                doc = json.load(f)  # Python ints: u64 hashes stay exact
            check(isinstance(doc, list) and doc, f"{name}: not a non-empty array")
            for ev in doc:
                check(set(ev) == {"worker_id", "storage_tier", "event"}, f"{name}: keys {set(ev)}")
                check(ev["storage_tier"] in ("device", "host_pinned", "disk", "external"),
                      f"{name}: storage_tier {ev['storage_tier']}")
                e = ev["event"]
                check(e["event_id"] > last_id, f"{name}: event_id {e['event_id']} not increasing")
                last_id = e["event_id"]
                data = e["data"]
                if "stored" in data:
                    blocks = data["stored"]["blocks"]
                    check(all(0 <= b["block_hash"] < 2**64 and 0 <= b["tokens_hash"] < 2**64
                              for b in blocks), f"{name}: block hashes")
                    stored += len(blocks)
                else:
                    removed += len(data["removed"]["block_hashes"])
        check((stored, removed) == (report["events"]["register"], report["events"]["remove"]),
              f"dynamo payloads hold {stored} stored / {removed} removed blocks, events "
              f"{report['events']}")


def case_wire_usage():
    with tempfile.TemporaryDirectory() as tmp:
        _, _, err = run(["--wire", "vllm"], expect_rc=2)
        check("--wire-out" in err, f"no hint about --wire-out: {err}")
        _, _, err = run(["--wire", "protobuf", "--wire-out", tmp], expect_rc=2)
        check("protobuf" in err, f"unknown format not named: {err}")
def case_gzip():
    needs_zlib()
    lines = read_lines(trace_path("synthetic_trace.jsonl.gz"))[:1500]
    text = ("\n".join(lines) + "\n").encode()
    with tempfile.TemporaryDirectory() as tmp:
        plain, packed = os.path.join(tmp, "t.jsonl"), os.path.join(tmp, "t.jsonl.gz")
        with open(plain, "wb") as f:
            f.write(text)
        with gzip.open(packed, "wb") as f:
            f.write(text)
        a, _ = run_json([plain])
        b, _ = run_json([packed])
        for r in (a, b):
            del r["source"], r["elapsed_s"], r["peak_rss_kib"]
            for key in [k for k in r if k.endswith("_per_s")]:
                del r[key]
        check(a == b, f"plain and gzip reports differ:\n{a}\n{b}")
        check(a["requests"] == independent_count(lines)["requests"], "requests lost")
        # A gzip stream cut in the middle is an error, not a shorter trace.
        with open(packed, "rb") as f:
            data = f.read()
        with open(packed, "wb") as f:
            f.write(data[:len(data) // 2])
        _, out, err = run([packed], expect_rc=2)
        check("ends early" in err and out == "", f"truncated gzip: {err!r}")
    print(f"{a['requests']} requests: plain == gzip")


def case_empty():
    needs_jansson()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "empty.jsonl")
        open(path, "w").close()
        r, err = run_json([path])
    check(r["requests"] == 0 and r["blocks"] == 0, "requests from an empty trace")
    check("warning" in err and "no requests" in err, f"no warning for an empty trace: {err!r}")


def case_sweep():
    import csv
    base = ["--conversations", "600"]
    caps = [64, 300, 2000, "unlimited"]
    # A fixed G2 (--g2-blocks, or none), and a grid of G1 x G2 (--sweep-g2).
    for g2s, extra in (([0], []), ([500], ["--g2-blocks", "500"]),
                       ([0, 500], ["--sweep-g2", "500,0"])):
        with tempfile.TemporaryDirectory() as tmp:
            table, js = os.path.join(tmp, "s.csv"), os.path.join(tmp, "s.json")
            run(base + extra + ["--sweep-g1", ",".join(map(str, caps)), "--sweep-out", table])
            run(base + extra + ["--sweep-g1", ",".join(map(str, reversed(caps))),
                                "--sweep-out", js])
            with open(table) as f:
                rows = list(csv.DictReader(f))
            with open(js) as f:
                jrows = json.load(f)["rows"]
        points = [(g2, cap) for g2 in g2s for cap in caps]  # sorted by G2, then G1
        check([(int(r["g2_blocks"]), r["g1_blocks"]) for r in rows] ==
              [(g2, str(cap)) for g2, cap in points], f"CSV rows / order: {extra}")
        check(len(jrows) == len(points), "JSON rows")
        for (g2, cap), row, jrow in zip(points, rows, jrows):
            single, _ = run_json(base + ["--g1-blocks", str(cap), "--g2-blocks", str(g2)])
            want = {"requests": single["requests"], "blocks": single["blocks"],
                    "hit_blocks_g1": single["hit_blocks"]["g1"],
                    "hit_blocks_g2": single["hit_blocks"]["g2"],
                    "hit_blocks_total": single["hit_blocks"]["total"],
                    "max_hit_blocks": single["hit_blocks"]["max"],
                    "g1_evictions": single["g1_evictions"], "onboards": single["onboards"],
                    "register_events": single["events"]["register"],
                    "remove_events": single["events"]["remove"]}
            got = {k: int(row[k]) for k in want}
            check(got == want, f"G1 {cap}, G2 {g2}: sweep {got} != single run {want}")
            check(jrow["hit_blocks"] == single["hit_blocks"] and
                  jrow["events"] == single["events"], f"G1 {cap}: JSON row differs")
        print(f"{extra or 'no G2'}: {len(points)} sweep rows == single runs")
    _, _, err = run(["--sweep-g1", "0,5"], expect_rc=2)
    check("--sweep-g1" in err, f"bad list: {err!r}")
    _, _, err = run(["--sweep", "-"], expect_rc=2, stdin=b"")
    check("standard input" in err, f"--sweep from stdin: {err!r}")
    _, _, err = run(["--sweep-g2", "0,100", "--g2-blocks", "5"], expect_rc=2)
    check("not both" in err, f"--sweep-g2 with --g2-blocks: {err!r}")
    _, _, err = run(["--chart", "x.svg"], expect_rc=2)
    check("need --sweep" in err, f"--chart alone: {err!r}")


def case_chart():
    import struct
    import xml.etree.ElementTree as ET
    with tempfile.TemporaryDirectory() as tmp:
        svg, png = os.path.join(tmp, "c.svg"), os.path.join(tmp, "c.png")
        rc, out, err = run(["--conversations", "300", "--sweep-g1", "16,128,unlimited",
                            "--chart", svg], expect_rc=None)
        if rc == 2 and "cairo" in err:
            print(f"SKIP: {err.strip()}")
            sys.exit(SKIP)
        check(rc == 0, f"--chart failed: {err}")
        root = ET.parse(svg).getroot()
        check(root.tag.endswith("svg") and root.get("width", "").startswith("760"),
              f"not an SVG of the chart's size: {root.tag} {root.attrib}")
        check(len(list(root.iter())) > 20, "an SVG with (almost) nothing drawn")
        # three curves (one per G2) in the PNG
        run(["--conversations", "300", "--sweep-g1", "16,128,unlimited", "--sweep-g2", "0,8,64",
             "--chart", png])
        with open(png, "rb") as f:
            head = f.read(24)
        check(head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR",
              f"not a PNG: {head!r}")
        check(struct.unpack(">II", head[16:24]) == (760, 460), "PNG size")
        _, _, err = run(["--sweep", "--chart", os.path.join(tmp, "c.gif")], expect_rc=2)
        check(".svg or .png" in err, f"bad chart name: {err!r}")
    print("SVG parses; PNG 760x460")


def case_verify_per_tier():
    """--events per-tier: one Register / Remove pair per (hash, tier), checked per tier."""
    g1, g2 = 256, 1024
    size = ["--conversations", "2000", "--inflight", "4", "--checkpoint-every", "200"]
    r, _ = run_json(size + ["--events", "per-tier", "--verify-events", "--g1-blocks", str(g1),
                            "--g2-blocks", str(g2)])
    check(r["verify"]["ok"] is True and r["verify"]["checkpoints"] >= 2, f"verify: {r['verify']}")
    check(r["g1_evictions"] > 0 and r["g2_evictions"] > 0 and r["onboards"] > 0, "tiers unused")
    # Each tier is one pool: every block leaving G1 or G2 is a Remove for that tier, and what
    # is left registered is what the two tiers hold.
    check(r["events"]["remove"] == r["g1_evictions"] + r["g2_evictions"],
          f"Remove {r['events']['remove']} != G1 + G2 evictions")
    check(r["events"]["register"] - r["events"]["remove"] ==
          r["final"]["g1_blocks"] + r["final"]["g2_blocks"], "Register - Remove != blocks held")
    glob, _ = run_json(size + ["--events", "global", "--verify-events", "--g1-blocks", str(g1),
                               "--g2-blocks", str(g2)])
    check(glob["verify"]["ok"] is True, "global mode verify")
    check(glob["hit_blocks"] == r["hit_blocks"], "the event mode changed the cache's behaviour")
    check(glob["events"]["remove"] < r["events"]["remove"], "global mode sent a Remove per tier")
    # The verifier checks (hash, tier) in per-tier mode: a dropped event is noticed.
    bad, err = run_json(size + ["--events", "per-tier", "--verify-events", "--g1-blocks", str(g1),
                                "--g2-blocks", str(g2), "--verify-ignore-event", "10"], expect_rc=1)
    check(bad["verify"]["ok"] is False and "disagree" in err, "per-tier verify missed a lost event")
    _, _, err = run(["--events", "both"], expect_rc=2)
    check("global or per-tier" in err, f"bad --events value: {err!r}")
    print(f"per-tier: Register {r['events']['register']}, Remove {r['events']['remove']} "
          f"(global: {glob['events']['register']}, {glob['events']['remove']}); verify passed")


CASES = {
    "help": case_help,
    "default-text": case_default_text,
    "default-json": case_default_json,
    "verify-tiers": case_verify_tiers,
    "verify-g1-only": case_verify_g1_only,
    "verify-detects-mismatch": case_verify_detects_mismatch,
    "verify-per-tier": case_verify_per_tier,
    "progress": case_progress,
    "malformed": case_malformed,
    "skip-bad": case_skip_bad,
    "trace-conversation": lambda: trace_case("conversation_trace.jsonl.gz"),
    "trace-synthetic": lambda: trace_case("synthetic_trace.jsonl.gz"),
    "trace-verify-tiers": case_trace_verify_tiers,
    "wire-vllm": case_wire_vllm,
    "wire-vllm-legacy": lambda: case_wire_vllm(legacy=True),
    "wire-dynamo-json": case_wire_dynamo_json,
    "wire-usage": case_wire_usage,
    "gzip": case_gzip,
    "empty": case_empty,
    "sweep": case_sweep,
    "chart": case_chart,
}

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replay", required=True)
    p.add_argument("--jansson", choices=["0", "1"], required=True)
    p.add_argument("--zlib", choices=["0", "1"], required=True)
    p.add_argument("--traces", required=True)
    p.add_argument("--case", choices=sorted(CASES), required=True)
    p.add_argument("--consumer", default="",
                   help="tests/wire/check_vllm_rules.py (the python3-msgpack consumer)")
    p.add_argument("--python", default="", help="interpreter with python3-msgpack")
    p.add_argument("--wrapper", default="",
                   help="command line to run kvreg-replay under, e.g. valgrind and its flags")
    ARGS = p.parse_args()
    ARGS.wrapper = shlex.split(ARGS.wrapper)
    try:
        CASES[ARGS.case]()
    except Failure as e:
        print(f"FAIL ({ARGS.case}): {e}")
        sys.exit(1)
    print(f"ok: {ARGS.case}")
