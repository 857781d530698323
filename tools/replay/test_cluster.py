#!/usr/bin/env python3
"""Tests for kvreg-replay --workers (the cluster replay); Python 3 standard library only.

Cases:
  cluster-cli              --help mentions the options; bad values and combinations exit 2;
                           without ZeroMQ in the library, --transport zmq says so (exit 2)
  cluster-one-worker       --workers 1 gives exactly the single-engine replay's hit rate
                           (built-in workload and both traces, small tiers and unlimited)
  cluster-builtin          kv beats random on the built-in workload (1000 conversations); every policy's report is
                           consistent (requests add up, round_robin balanced, the index equals
                           the workers' tiers)
  cluster-conversation     kv beats random on the Mooncake conversation trace
  cluster-synthetic        kv beats random on the Mooncake synthetic trace
  cluster-fair             on a uniform trace (every prompt its own, equally long blocks: no
                           overlaps) least_loaded and kv give every worker its even share
                           within one request (issue 39: worker 0 used to get 9/8)
  cluster-compare          --router kv,kv-load,llm-d,least_loaded,round_robin,random: each
                           policy's row equals its own single-policy run (hits, requests per
                           worker); a three-request trace's TTFT and throughput worked out by
                           hand through the timing model; bad lists and timing options exit 2
                           (the kv-load and llm-d rows against their own runs)
  cluster-compare-rows     every row against its own run, on a larger built-in workload (long)
  cluster-nats             --transport nats --routers 2 --kill-router (a nats-server the tool
                           starts): every replica's digest equal, the restored one's too (from
                           replica 0's snapshot, then the batches after it), 0
                           requests routed otherwise than in-process, and hits, requests per
                           worker and events equal to a separate --transport inproc run; the
                           server's temporary directory is gone afterwards
  cluster-nats-checks      option errors exit 2, a missing nats-server exits 1 saying so,
                           --corrupt-restored (the restored replica drops worker 0's blocks)
                           exits 1 naming the mismatch
  cluster-nats-long        the same on a larger built-in workload with 3 replicas (long)
  cluster-sweep-workers    --sweep-workers 2,4,8,16: one row per policy per count, hit rates in
                           [0, 1], round_robin as even as the request count allows, a row equal
                           to its own run, a well-formed SVG from --plot, bad lists exit 2
  cluster-zmq              --transport zmq (the events cross loopback TCP, publisher to
                           subscriber) routes exactly as --transport inproc: same hits, same
                           requests per worker, same events and index, and batches were received
The cluster runs use --block-tokens 32: vLLM events carry every block's token ids, and hit
rates by block do not depend on the block size (ids name blocks), so small blocks keep the
tests quick. Expected values are the single-engine replay's (tested against an independent count by
test_replay.py) or relations between runs, never the cluster's own numbers.
Exit 77 (skipped) says why: no jansson or zlib in this build (the traces are .jsonl.gz), or a
libkvreg without the wire formats.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# The helpers (run, run_json, check, Failure) are test_replay.py's, so both scripts run and
# judge kvreg-replay the same way.
import test_replay
from test_replay import Failure, check

SKIP = 77


def run(args, expect_rc=0):
    _, out, err = test_replay.run(args, expect_rc)
    return out, err


def run_json(args):
    return test_replay.run_json(["--block-tokens", "32"] + args)[0]


def needs_wire():
    """The cluster replay needs the library's vLLM encoder and decoder (KVREG_FEATURE_WIRE)."""
    proc = subprocess.run([ARGS.replay, "--workers", "1", "--max-requests", "1"],
                          capture_output=True, timeout=60)
    if proc.returncode != 0 and b"without the wire formats" in proc.stderr:
        print("SKIP: this libkvreg was built without the wire formats (no msgpack-c)")
        sys.exit(SKIP)


def trace(name):
    """A shared trace (data/traces ships them gzipped); skips without jansson or zlib."""
    return test_replay.trace_path(name + ".gz")


def consistent(r, workers, policy):
    """What every cluster report must satisfy, whatever the policy."""
    c = r["cluster"]
    check(c["workers"] == workers and c["router"] == policy, "workers / router echoed")
    check(len(c["requests_per_worker"]) == workers, "one count per worker")
    check(sum(c["requests_per_worker"]) == r["requests"], "requests per worker add up")
    check(c["index"]["agrees_with_workers"] is True, "the index differs from the workers' tiers")
    check(c["index"]["workers"] == workers, "index workers")
    check(c["hit_rate_blocks"]["total"] == r["hit_rate_blocks"]["total"],
          "hit_rate_blocks.total is the cluster's")
    check(r["hit_blocks"]["total"] <= r["hit_blocks"]["max"], "more hits than possible")
    check(abs(c["hit_rate_lost_vs_shared"] - (c["shared_cache"]["hit_rate_blocks"]["total"] -
                                              r["hit_rate_blocks"]["total"])) < 1e-5, "loss")
    mean = r["requests"] / workers
    check(abs(c["load_imbalance"] - max(c["requests_per_worker"]) / mean) < 1e-5, "imbalance")
    q = c["query_latency_us"]
    check(q["count"] == r["requests"] and 0 < q["p50"] <= q["p99"], f"query latency {q}")
    f = c["feed"]
    check(f["registry_events"] == r["events"]["register"] + r["events"]["remove"], "events")
    check(f["payloads"] > 0 and f["flagged_batches"] == 0, f"feed {f}")
    check(f["events_applied_per_s"] > 0, "events applied per second")


def kv_beats_random(args, workers):
    needs_wire()
    results = {}
    for policy in ("kv", "random", "round_robin", "least_loaded"):
        r = run_json(["--workers", str(workers), "--router", policy] + args)
        consistent(r, workers, policy)
        results[policy] = r
    kv, rnd = results["kv"], results["random"]
    check(kv["hit_rate_blocks"]["total"] > rnd["hit_rate_blocks"]["total"],
          f"kv {kv['hit_rate_blocks']['total']} <= random {rnd['hit_rate_blocks']['total']}")
    shared = {r["cluster"]["shared_cache"]["hit_rate_blocks"]["total"] for r in results.values()}
    check(len(shared) == 1, "the shared-cache baseline depends on the policy")
    rr = results["round_robin"]["cluster"]["requests_per_worker"]
    check(max(rr) - min(rr) <= 1, f"round_robin unbalanced: {rr}")
    for p, r in results.items():
        c = r["cluster"]
        print(f"{p:13s} hit {r['hit_rate_blocks']['total']:.4f} (lost "
              f"{c['hit_rate_lost_vs_shared']:.4f} vs shared {c['shared_cache']['hit_rate_blocks']['total']:.4f})"
              f" imbalance {c['load_imbalance']:.3f} query p50/p99 "
              f"{c['query_latency_us']['p50']:.2f}/{c['query_latency_us']['p99']:.2f} us")


def case_cli():
    out, _ = run(["--help"])
    for word in ("--workers", "--router", "--transport", "round_robin", "least_loaded"):
        check(word in out, f"--help does not mention {word}")
    for bad in (["--workers", "0"], ["--workers", "2", "--router", "best"],
                ["--router", "kv"], ["--workers", "2", "--transport", "tcp"],
                ["--workers", "2", "--verify-events"]):
        _, err = run(bad, expect_rc=2)
        check(err.startswith("kvreg-replay: "), f"{bad}: no error message: {err!r}")
    if ARGS.zmq == "0":
        out, err = run(["--workers", "2", "--transport", "zmq"], expect_rc=2)
        check("built without ZeroMQ" in err and out == "", f"--transport zmq: {err!r}")


def case_one_worker():
    needs_wire()
    inputs = [["--conversations", "1000"]]
    if ARGS.jansson == "1" and ARGS.zlib == "1" and os.path.isdir(ARGS.traces):
        # the first 2000 requests of each trace: enough to evict from both tiers, and quick
        inputs += [["--max-requests", "2000", trace("conversation_trace.jsonl")],
                   ["--max-requests", "2000", trace("synthetic_trace.jsonl")]]
    for source in inputs:
        for tiers in (["--g1-blocks", "300", "--g2-blocks", "600"], []):
            single = run_json(tiers + source)
            for policy in ("kv", "random"):
                one = run_json(["--workers", "1", "--router", policy] + tiers + source)
                consistent(one, 1, policy)
                for key in ("hit_blocks", "hit_tokens"):
                    check(one[key] == single[key], f"{source} {tiers} {policy}: {key} "
                          f"{one[key]} != single engine {single[key]}")
                check(one["cluster"]["shared_cache"]["hit_blocks"]["g1"] == single["hit_blocks"]["g1"],
                      "with one worker the shared cache is the worker's")
            print(f"{source or 'built-in'} {tiers}: --workers 1 == single engine "
                  f"({single['hit_rate_blocks']['total']:.4f})")


def case_zmq():
    """The same runs over both transports: routing reads the index, so any event the zmq
    path lost, reordered within a tier or applied late would change the hits or the routing."""
    needs_wire()
    if ARGS.zmq != "1":
        print("SKIP: this libkvreg was built without ZeroMQ")
        sys.exit(SKIP)
    inputs = [["--conversations", "100", "--g1-blocks", "150", "--g2-blocks", "300"],
              ["--conversations", "100"]]  # unlimited tiers: no evictions, only Registers
    if ARGS.jansson == "1" and ARGS.zlib == "1" and os.path.isdir(ARGS.traces):
        inputs.append(["--max-requests", "300", "--g1-blocks", "500", "--g2-blocks", "1000",
                       trace("conversation_trace.jsonl")])
    for source in inputs:
        # kv reads the index; least_loaded does not, but its events and counts must agree too
        for policy in ("kv", "least_loaded") if source is inputs[0] else ("kv",):
            runs = {}
            for transport in ("inproc", "zmq"):
                r = run_json(["--workers", "4", "--router", policy, "--transport", transport] +
                             source)
                consistent(r, 4, policy)
                check(r["cluster"]["transport"] == transport, f"transport {transport} echoed")
                runs[transport] = r
            a, b = runs["inproc"], runs["zmq"]
            for key in ("requests", "blocks", "hit_blocks", "hit_tokens", "hit_rate_blocks", "events"):
                check(a[key] == b[key], f"{source} {policy}: {key} inproc {a[key]} != zmq {b[key]}")
            ca, cb = a["cluster"], b["cluster"]
            for key in ("requests_per_worker", "hit_rate_blocks", "shared_cache"):
                check(ca[key] == cb[key], f"{source} {policy}: cluster.{key} differs")
            for key in ("entries", "workers"):
                check(ca["index"][key] == cb["index"][key], f"{source} {policy}: index.{key}")
            check(ca["feed"]["registry_events"] == cb["feed"]["registry_events"], "registry events")
            check("zmq" not in ca, "inproc reports zmq counters")
            z = cb["zmq"]
            check(z["publishers"] == 8, f"publishers {z}")  # a G1 and a G2 stream per worker
            # Every payload applied crossed the network, and every request waited for the index
            check(z["batches_received"] >= cb["feed"]["payloads"] > 0, f"batches {z}")
            check(z["syncs"] == b["requests"] + 4, f"one sync per request and per worker at the end: {z}")
            print(f"{source} {policy}: hit {a['hit_rate_blocks']['total']:.4f} on both; "
                  f"{ca['feed']['registry_events']} events; elapsed inproc {a['elapsed_s']:.3f} s, "
                  f"zmq {b['elapsed_s']:.3f} s ({z['batches_received']} batches, "
                  f"{z['batches_replayed']} replayed)")


def needs_nats():
    """--transport nats needs a libkvreg with NATS and nats-server (found as the tool does)."""
    proc = subprocess.run([ARGS.replay, "--workers", "1", "--transport", "nats",
                           "--max-requests", "1"], capture_output=True, timeout=120)
    err = proc.stderr.decode(errors="replace")
    if proc.returncode == 2 and "built without NATS" in err:
        print("SKIP: this libkvreg was built without NATS (libnats-dev)")
        sys.exit(SKIP)
    if proc.returncode != 0 and "nats-server not found" in err:
        if os.environ.get("CI") == "true":
            raise Failure("nats-server not found; CI=true, so this is a failure")
        print("SKIP: nats-server not found (apt-get install nats-server)")
        sys.exit(SKIP)


def case_nats(conversations, routers):
    """Each replica reads the stream into its own index and routes every routers-th request;
    the reference is an independent --transport inproc run of the same workload."""
    needs_wire()
    needs_nats()
    src = ["--conversations", str(conversations), "--g1-blocks", "150", "--g2-blocks", "300"]
    ref = run_json(["--workers", "4", "--router", "kv"] + src)
    with tempfile.TemporaryDirectory() as tmp:
        env_tmp = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = tmp  # where the tool makes the server's store directory
        try:
            r = run_json(["--workers", "4", "--router", "kv", "--transport", "nats",
                          "--routers", str(routers), "--kill-router"] + src)
        finally:
            if env_tmp is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = env_tmp
        check(os.listdir(tmp) == [], f"the server's directory is left: {os.listdir(tmp)}")
    consistent(r, 4, "kv")
    c, n = r["cluster"], r["cluster"]["nats"]
    check(c["transport"] == "nats" and n["own_server"] is True, f"transport {c['transport']}")
    check(n["routers"] == routers and len(n["digests"]) == routers, f"replicas {n}")
    check(len(set(n["digests"])) == 1 and n["digests_equal"] is True, f"digests {n['digests']}")
    check(n["requests_compared"] == r["requests"] == ref["requests"], "requests compared")
    check(n["routing_differs"] == 0, f"{n['routing_differs']} requests routed otherwise")
    k = n["kill_router"]
    check(k["replica"] == routers - 1 and k["killed_at_request"] == r["requests"] // 3 and
          k["restored_at_request"] == 2 * r["requests"] // 3, f"kill {k}")
    # restored from replica 0's snapshot taken at the kill, then the batches after it
    check(k["restored_from"] == "snapshot" and k["snapshot_stream_seq"] > 0, f"restore {k}")
    check(k["digest_equal"] is True and k["restore_batches"] > 0, f"restore {k}")
    # every replica applied every batch once; the restored one read the stream again
    check(n["batches_acked"] == n["batches_published"] > 0, f"acks {n}")
    check(n["batches_applied"] >= routers * n["batches_published"], f"applied {n}")
    check(n["publish_duplicates"] == 0 and n["publish_retries"] == 0, f"resends {n}")
    # the same routing as the separate in-process run: same hits, shares and events
    for key in ("hit_blocks", "hit_tokens", "events"):
        check(r[key] == ref[key], f"{key}: nats {r[key]} != inproc {ref[key]}")
    check(c["requests_per_worker"] == ref["cluster"]["requests_per_worker"], "requests per worker")
    check(c["index"]["entries"] == ref["cluster"]["index"]["entries"], "index entries")
    print(f"{routers} replicas: digest {n['digests'][0]} on all, {n['batches_published']} "
          f"batches, 0 of {n['requests_compared']} routed otherwise; replica {k['replica']} "
          f"restored with {k['restore_batches']} batches in {k['restore_s']:.3f} s; "
          f"elapsed {r['elapsed_s']:.2f} s")


def case_nats_detects():
    """--corrupt-restored drops worker 0's blocks from the restored replica: the digests, the
    index check and (likely) the routing must say so, with exit status 1."""
    needs_wire()
    needs_nats()
    rc, out, err = test_replay.run(["--json", "--block-tokens", "32", "--workers", "4",
                                    "--conversations", "6", "--g1-blocks", "150",
                                    "--g2-blocks", "300", "--transport", "nats", "--routers", "2",
                                    "--kill-router", "--corrupt-restored"], expect_rc=None)
    check(rc == 1, f"a corrupted replica went unnoticed: exit {rc}\n{out}\n{err}")
    check("MISMATCH" in err and "differs from replica 0's" in err, f"stderr: {err}")
    print("the corrupted replica was caught: " + err.strip().splitlines()[-1])


def case_nats_cli():
    for bad in (["--workers", "2", "--routers", "2"], ["--workers", "2", "--kill-router"],
                ["--workers", "2", "--transport", "nats", "--kill-router"],
                ["--workers", "2", "--transport", "nats", "--routers", "0"],
                ["--workers", "2", "--transport", "nats", "--nats-url", ""],
                ["--workers", "2", "--transport", "nats", "--router", "kv,random"],
                ["--workers", "2", "--transport", "nats", "--routers", "2", "--corrupt-restored"],
                # too few requests to kill a replica a third in and restore it at two thirds
                ["--workers", "2", "--transport", "nats", "--routers", "2", "--kill-router",
                 "--max-requests", "2"]):
        _, err = run(bad, expect_rc=2)
        check(err.startswith("kvreg-replay: "), f"{bad}: no error message: {err!r}")
    saved = os.environ.get("KVREG_NATS_SERVER")
    os.environ["KVREG_NATS_SERVER"] = "/nonexistent/nats-server"
    try:
        rc, out, err = test_replay.run(["--workers", "2", "--transport", "nats",
                                        "--max-requests", "3"], expect_rc=None)
    finally:
        if saved is None:
            del os.environ["KVREG_NATS_SERVER"]
        else:
            os.environ["KVREG_NATS_SERVER"] = saved
    if rc == 2 and "built without NATS" in err:
        return
    check(rc == 1 and "nats-server not found" in err, f"no server: exit {rc}: {err!r}")


def case_fair():
    """Every request distinct and alike: no worker ever matches, so kv is pure load balance
    and must spread the requests as least_loaded does, evenly. The even share is computed
    here from the request count, not read from the run."""
    needs_wire()
    test_replay.needs_jansson()
    requests, workers = 400, 8
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "uniform.jsonl")
        with open(path, "w") as f:
            for i in range(requests):
                ids = [4 * i + k for k in range(4)]
                f.write(json.dumps({"timestamp": i, "input_length": 128, "output_length": 8,
                                    "hash_ids": ids}) + "\n")
        even = requests / workers
        for policy in ("least_loaded", "kv"):
            for inflight in ("1", "8"):
                r = run_json(["--workers", str(workers), "--router", policy,
                              "--inflight", inflight, path])
                consistent(r, workers, policy)
                check(r["hit_blocks"]["total"] == 0, "a uniform trace has no hits")
                per = r["cluster"]["requests_per_worker"]
                check(all(abs(n - even) <= 1 for n in per),
                      f"{policy} --inflight {inflight}: shares {per}, even is {even}")
                print(f"{policy} --inflight {inflight}: {per}")


def case_compare(every_row=False):
    needs_wire()
    policies = ["kv", "kv-load", "llm-d", "least_loaded", "round_robin", "random"]
    src = ["--conversations", "300" if every_row else "40", "--g1-blocks", "150",
           "--g2-blocks", "300"]
    table = run_json(["--workers", "4", "--router", ",".join(policies)] + src)
    check([p["router"] for p in table["policies"]] == policies, "one row per policy, in order")
    for row in table["policies"]:
        if not every_row and row["router"] not in ("kv-load", "llm-d"):
            continue  # the long run (cluster-compare-rows) checks every row
        one = run_json(["--workers", "4", "--router", row["router"]] + src)
        consistent(one, 4, row["router"])
        check(row["hit_rate_blocks"]["total"] == round(one["hit_rate_blocks"]["total"], 6),
              f"{row['router']}: hit rate {row['hit_rate_blocks']} vs its own run "
              f"{one['hit_rate_blocks']}")
        check(row["requests_per_worker"] == one["cluster"]["requests_per_worker"],
              f"{row['router']}: requests per worker differ from its own run")
        check(0 < row["ttft_s"]["p50"] <= row["ttft_s"]["p99"], f"ttft {row['ttft_s']}")
        check(row["output_tokens_per_s"] > 0, "throughput")
        print(f"{row['router']:13s} hit {row['hit_rate_blocks']['total']:.4f} imbalance "
              f"{row['load_imbalance']:.3f} ttft p50/p99 {row['ttft_s']['p50']:.3f}/"
              f"{row['ttft_s']['p99']:.3f} s")
    rr = table["policies"][policies.index("round_robin")]["requests_per_worker"]
    check(max(rr) - min(rr) <= 1, f"round_robin unbalanced: {rr}")
    if every_row:
        return

    # Three requests on one worker, block 32 tokens, G1 unlimited; prefill 32 tokens/s,
    # decode 1 token/s, one request at a time:
    #   r0 at 0 s: 64 tokens (ids 1 2), nothing cached: prefill 0 -> 2 s (TTFT 2), 1 token
    #      out, ends 3 s;
    #   r1 at 0.5 s: 96 tokens (ids 1 2 3), 64 cached: waits for r0's end (3 s), prefills
    #      32 tokens 3 -> 4 s (TTFT 3.5), ends 5 s;
    #   r2 at 10 s: 32 tokens (id 7): 10 -> 11 s (TTFT 1), 2 tokens out, ends 13 s.
    # TTFT 1 2 3.5: nearest-rank p50 2, p99 3.5, mean 6.5 / 3; 4 tokens over 0 -> 13 s.
    test_replay.needs_jansson()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.jsonl")
        with open(path, "w") as f:
            for ts, n, out, ids in ((0, 64, 1, [1, 2]), (500, 96, 1, [1, 2, 3]),
                                    (10000, 32, 2, [7])):
                f.write(json.dumps({"timestamp": ts, "input_length": n, "output_length": out,
                                    "hash_ids": ids}) + "\n")
        t = run_json(["--workers", "1", "--router", "round_robin,least_loaded",
                      "--g1-blocks", "unlimited", "--g2-blocks", "0", "--prefill-tps", "32",
                      "--decode-tps", "1", "--batch", "1", path])
        for row in t["policies"]:
            got = row["ttft_s"]
            check(abs(got["p50"] - 2) < 1e-6 and abs(got["p99"] - 3.5) < 1e-6 and
                  abs(got["mean"] - 6.5 / 3) < 1e-6, f"tiny trace: ttft {got}")
            check(abs(row["span_s"] - 13) < 1e-3 and abs(row["output_tokens_per_s"] - 4 / 13) < 1e-3,
                  f"tiny trace: span {row['span_s']}, {row['output_tokens_per_s']} tokens/s")
        check(t["timing"] == {"prefill_tps": 32, "onboard_tps": 100000, "decode_tps": 1,
                              "batch": 1, "speedup": 1}, f"timing echoed: {t['timing']}")
    # --plot: an SVG of the chart's size with something drawn (not checked: the bars' heights)
    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "p.svg")
        rc, _, err = test_replay.run(["--workers", "2", "--conversations", "20", "--router",
                                      "kv,random", "--plot", svg], expect_rc=None)
        if "without cairo" in err:
            print(f"--plot not checked: {err.strip()}")
        else:
            import xml.etree.ElementTree as ET
            check(rc == 0, f"--plot failed: {err}")
            root = ET.parse(svg).getroot()
            check(root.tag.endswith("svg") and root.get("width", "").startswith("960"),
                  f"not an SVG of the chart's size: {root.tag} {root.attrib}")
            check(len(list(root.iter())) > 20, "an SVG with (almost) nothing drawn")
        _, err = run(["--workers", "2", "--router", "kv,random", "--plot", "x.gif"], expect_rc=2)
        check(".svg or .png" in err, f"bad plot name: {err!r}")
    for bad in (["--workers", "2", "--router", "kv,kv"], ["--workers", "2", "--router", "kv,"],
                ["--workers", "2", "--router", "kv,best"], ["--workers", "2", "--batch", "0"],
                ["--workers", "2", "--prefill-tps", "0"], ["--workers", "2", "--decode-tps", "x"],
                ["--workers", "2", "--router-temperature", "-1"],
                ["--workers", "2", "--plot", "x.svg"], ["--workers", "2", "--speedup", "0"],
                ["--workers", "2", "--cpu-weight", "1.5"]):
        _, err = run(bad, expect_rc=2)
        check(err.startswith("kvreg-replay: "), f"{bad}: no error message: {err!r}")


def case_sweep_workers():
    """--sweep-workers 2,4,8,16: the table's shape (every policy at every count, in order),
    hit rates within [0, 1], round_robin's load exactly as even as the request count allows
    (computed here), a row equal to the single run at its count, and a well-formed SVG."""
    needs_wire()
    policies = ["kv", "round_robin", "random"]
    counts = [2, 4, 8, 16]
    src = ["--conversations", "20", "--g1-blocks", "100", "--g2-blocks", "200"]
    t = run_json(["--sweep-workers", ",".join(map(str, counts)), "--router", ",".join(policies)] + src)
    rows = t["sweep"]
    check([(r["workers"], r["router"]) for r in rows] == [(c, p) for c in counts for p in policies],
          f"one row per policy per count, in order: {[(r['workers'], r['router']) for r in rows]}")
    for r in rows:
        h = r["hit_rate_blocks"]
        check(0 <= h["g1"] <= 1 and 0 <= h["g2"] <= 1 and abs(h["total"] - h["g1"] - h["g2"]) < 2e-6,
              f"{r['workers']} {r['router']}: hit rate {h}")
        check(0 < r["ttft_s"]["p50"] <= r["ttft_s"]["p99"], f"ttft {r['ttft_s']}")
        check(r["load_imbalance"] >= 1, f"imbalance below 1: {r['load_imbalance']}")
        if r["router"] == "round_robin":
            # requests dealt in turn: the busiest worker has ceil(R / W), the mean is R / W
            n, w = r["requests"], r["workers"]
            want = -(-n // w) / (n / w)
            check(abs(r["load_imbalance"] - want) < 1e-5,
                  f"round_robin at {w} workers: imbalance {r['load_imbalance']}, want {want}")
    # a row is the single run of its policy at its count
    one = run_json(["--workers", "4", "--router", "kv"] + src)
    row = rows[counts.index(4) * len(policies)]
    check(row["hit_rate_blocks"]["total"] == round(one["hit_rate_blocks"]["total"], 6),
          f"4 workers, kv: {row['hit_rate_blocks']} vs its own run {one['hit_rate_blocks']}")
    # the text table: a header and one line per row
    out, _ = run(["--sweep-workers", "2,4", "--router", "kv,random"] + src)
    lines = [l for l in out.splitlines() if l.strip()]
    head = next(i for i, l in enumerate(lines) if l.split()[:2] == ["workers", "router"])
    check([l.split()[:2] for l in lines[head + 1:]] ==
          [["2", "kv"], ["2", "random"], ["4", "kv"], ["4", "random"]], f"text table: {lines[head:]}")
    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "s.svg")
        rc, _, err = test_replay.run(["--sweep-workers", "2,4", "--router", "kv,random",
                                      "--plot", svg] + src, expect_rc=None)
        if "without cairo" in err:
            print(f"--plot not checked: {err.strip()}")
        else:
            import xml.etree.ElementTree as ET
            check(rc == 0, f"--plot failed: {err}")
            root = ET.parse(svg).getroot()  # raises on a malformed file
            check(root.tag.endswith("svg") and root.get("width", "").startswith("960"),
                  f"not an SVG of the chart's size: {root.tag} {root.attrib}")
            paths = [e for e in root.iter() if e.tag.endswith("path")]
            check(len(paths) >= 2 * 2, f"fewer paths than lines drawn: {len(paths)}")
    for bad in (["--sweep-workers", "4,2"], ["--sweep-workers", "0,2"], ["--sweep-workers", "2,x"],
                ["--sweep-workers", "2,4", "--workers", "4"], ["--sweep-workers", ""],
                ["--sweep-workers", "2,4", "--sweep"]):
        _, err = run(bad, expect_rc=2)
        check(err.startswith("kvreg-replay: "), f"{bad}: no error message: {err!r}")
    for r in rows:
        print(f"{r['workers']:3d} {r['router']:12s} hit {r['hit_rate_blocks']['total']:.4f} "
              f"imbalance {r['load_imbalance']:.3f} ttft p99 {r['ttft_s']['p99']:.3f} s")


CASES = {
    "cluster-cli": case_cli,
    "cluster-one-worker": case_one_worker,
    "cluster-builtin": lambda: kv_beats_random(
        ["--conversations", "1000", "--g1-blocks", "1000", "--g2-blocks", "2000"], 4),
    "cluster-conversation": lambda: kv_beats_random(
        ["--g1-blocks", "2000", "--g2-blocks", "4000", trace("conversation_trace.jsonl")], 8),
    "cluster-synthetic": lambda: kv_beats_random(
        ["--g1-blocks", "2000", "--g2-blocks", "4000", trace("synthetic_trace.jsonl")], 8),
    "cluster-zmq": case_zmq,
    "cluster-nats": lambda: case_nats(12, 2),
    "cluster-nats-checks": lambda: (case_nats_cli(), case_nats_detects()),
    "cluster-nats-long": lambda: case_nats(300, 3),
    "cluster-fair": case_fair,
    "cluster-compare": case_compare,
    "cluster-compare-rows": lambda: case_compare(every_row=True),
    "cluster-sweep-workers": case_sweep_workers,
}

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replay", required=True)
    p.add_argument("--jansson", choices=["0", "1"], required=True)
    p.add_argument("--zlib", choices=["0", "1"], required=True)
    p.add_argument("--traces", required=True)
    p.add_argument("--zmq", choices=["0", "1"], default="0",
                   help="the library has the ZeroMQ publisher and subscriber")
    p.add_argument("--case", choices=sorted(CASES), required=True)
    ARGS = p.parse_args()
    ARGS.wrapper = []
    test_replay.ARGS = ARGS
    try:
        CASES[ARGS.case]()
    except Failure as e:
        print(f"FAIL ({ARGS.case}): {e}")
        sys.exit(1)
    print(f"ok: {ARGS.case}")
