#!/usr/bin/env python3
"""Markdown table of medians: seed-peer vs kvreg-bench JSON lines (written by compare.sh).

usage: compare_table.py [--runs N] [--command CMD] PEER.jsonl OURS.jsonl PEER_1THREAD.jsonl

Exits 1 (after printing what it can) if any run was not verified or if a workload's
hash_checksum differs between the two programs or between runs.
"""
import argparse
import json
import os
import platform
import statistics
import sys


def load(path):
    by = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"compare_table: {path}:{n}: not JSON: {e}")
            by.setdefault(rec["workload"], []).append(rec)
    return by


def med(recs, fn):
    vals = [fn(r) for r in recs]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def ops_per_s(r):
    return r["ops"] / r["seconds"] if r["seconds"] > 0 else None


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} M{unit}"
    if abs(v) >= 100:
        return f"{v:.0f}{unit}"
    if abs(v) >= 10:
        return f"{v:.1f}{unit}"
    return f"{v:.2f}{unit}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--command", default="tests/bench/compare.sh")
    ap.add_argument("peer")
    ap.add_argument("ours")
    ap.add_argument("peer_1thread")
    a = ap.parse_args()
    peer, ours, peer1 = load(a.peer), load(a.ours), load(a.peer_1thread)

    problems = []
    # Checksums: one value per workload across all runs of both programs (hold_tokens = hold).
    for w in sorted(set(peer) | set(ours)):
        sums = {r["hash_checksum"] for r in peer.get(w, []) + ours.get(w, [])}
        if w == "hold_tokens":
            sums |= {r["hash_checksum"] for r in peer.get("hold", [])}
        if len(sums) > 1:
            problems.append(f"{w}: hash_checksum differs: {sorted(sums)}")
        for who, recs in (("seed-peer", peer.get(w, [])), ("kvreg", ours.get(w, []))):
            bad = sum(1 for r in recs if not r.get("verified"))
            if bad:
                problems.append(f"{w}: {bad} {who} run(s) not verified")

    rows = []  # (workload, metric, peer, ours, ratio-text, target, met)

    def row(w, metric, pv, ov, unit="", target="", met=None, show_ratio=True):
        rt = ratio(ov, pv) if show_ratio else None
        rows.append((w, metric, fmt(pv, unit), fmt(ov, unit), f"{rt:.2f}x" if rt is not None else "",
                     target, "" if met is None else ("yes" if met else "**no**")))

    P, O = peer.get, ours.get
    if P("hash") or O("hash"):
        pg, og = med(P("hash", []), lambda r: r["gb_per_s"]), med(O("hash", []), lambda r: r["gb_per_s"])
        row("hash", "naming blocks, GB/s of tokens (kvreg_hash_blocks)", pg, og)
        row("hash", "same, into a sequence object that keeps the tokens", pg,
            med(O("hash", []), lambda r: r.get("sequence_gb_per_s")))
        pl = med(P("hash", []), lambda r: r["chain_only_seconds"] / r["seconds"])
        ol = med(O("hash", []), lambda r: r["limit_ratio"])
        row("hash", "fraction of raw limit (2 XXH3 calls/block)", pl, ol, target=">= 0.9",
            met=None if ol is None else ol >= 0.9, show_ratio=False)
    for w in ("register_release", "two_pools", "shared_prefix"):
        if P(w) or O(w):
            pv, ov = med(P(w, []), ops_per_s), med(O(w, []), ops_per_s)
            tgt = ">= 10x" if w != "shared_prefix" else ""
            r = ratio(ov, pv)
            row(w, "ops/s (events included)", pv, ov, target=tgt,
                met=(r >= 10) if tgt and r is not None else None)
            row(w, "ns/op", med(P(w, []), lambda x: x["ns_per_op"]), med(O(w, []), lambda x: x["ns_per_op"]))
    if P("threads") or O("threads"):
        pv = med(P("threads", []), lambda r: r["ops_per_s"])
        ov = med(O("threads", []), lambda r: r["ops_per_s"])
        r = ratio(ov, pv)
        t = (O("threads") or P("threads"))[0]["threads"]
        row("threads", f"ops/s, {t} threads", pv, ov, target=">= 10x", met=None if r is None else r >= 10)
        p1 = med(peer1.get("threads", []), lambda r: r["ops_per_s"])
        os_ = med(O("threads", []), lambda r: r.get("scaling_ratio"))
        row("threads", f"{t} threads / 1 thread (ops/s)", ratio(pv, p1), os_, target=">= 1.6",
            met=None if os_ is None else os_ >= 1.6, show_ratio=False)
        cb = med(O("threads", []), lambda r: r.get("callbacks_per_call"))
        if cb is not None:
            rows.append(("threads", "kvreg: event callbacks per API call", "", fmt(cb), "", "", ""))
    if P("hold") or O("hold"):
        pb = med(P("hold", []), lambda r: r["registry_bytes_per_block"])
        ob = med(O("hold", []), lambda r: r["registry_bytes_per_block"])
        row("hold", "registry bytes per held block (no tokens)", pb, ob, target="<= 48",
            met=None if ob is None else ob <= 48)
        n = (O("hold") or P("hold"))[0]["blocks"]
        row("hold", f"register ns/block ({n} held)", med(P("hold", []), lambda r: r["ns_per_op"]),
            med(O("hold", []), lambda r: r["ns_per_op"]))
    if O("hold_tokens"):
        ht = O("hold_tokens")
        pb = med(P("hold", []), lambda r: r["registry_bytes_per_block"])
        row("hold_tokens", "registry bytes per held block, tokens kept", pb,
            med(ht, lambda r: r["registry_bytes_per_block"]))
        row("hold_tokens", "same blocks in a 2nd pool, bytes/block", None,
            med(ht, lambda r: r["second_pool_bytes_per_block"]), show_ratio=False)
        once = all(r["token_bytes"] == r["blocks"] * r["block"] * 4 == r["token_bytes_two_pools"] for r in ht)
        rows.append(("hold_tokens", "tokens stored once (token bytes, 1 vs 2 pools)", "copy per handle",
                     f"{ht[0]['token_bytes']} = {ht[0]['token_bytes_two_pools']}", "", "once",
                     "yes" if once else "**no**"))

    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    print(f"Medians of {a.runs or '?'} alternating runs per workload; `{a.command}`; "
          f"{os.cpu_count()} CPUs ({cpu or platform.machine()}). Ratios are kvreg / seed-peer.")
    print()
    print("| workload | metric | seed-peer | kvreg | kvreg / peer | target | met |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    sums = []
    for w in ("hash", "register_release", "two_pools", "shared_prefix", "threads", "hold"):
        recs = P(w, []) + O(w, [])
        if recs:
            sums.append(f"{w} `{recs[0]['hash_checksum']}`")
    if not problems:
        print("Checksums (identical in both programs): " + ", ".join(sums) + ".")
    if problems:
        print()
        for p in problems:
            print(f"**ERROR**: {p}")
        print("compare_table: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
