#!/usr/bin/env python3
"""Markdown tables of medians: seed-peer vs kvreg-bench JSON lines (written by compare.sh).

usage: compare_table.py [--runs N] [--command CMD] PEER.jsonl OURS.jsonl [MORE_PEER.jsonl ...]

Prints (1) the per-workload comparison, (2) `threads` at every thread count found, with each
program's T-thread / 1-thread ratio, (3) kvreg's own scaling and latency probes (kvreg-only
workloads: disjoint, hol, pool_free, many_pools, which the seed design has no counterpart for).
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
            # kvreg runs with KVREG_OPT_RESERVE_BLOCKS are rows of their own.
            w = rec["workload"] + ("+reserved" if rec.get("reserve_blocks") else "")
            by.setdefault(w, []).append(rec)
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


KVREG_ONLY = ("disjoint", "hol", "pool_free", "many_pools", "scaling_limit", "index_k1", "index_k2")

# Dynamo's published indexer figures the index workloads stand beside (gen 2: INDEXER_BENCH on
# the conversation trace, hardware not stated; gen 3: CKF_CRTC_CROSSOVER on a 64-core EPYC 7702P).
DYNAMO_K1_OPS, DYNAMO_K1_P99_US = 130096, 655       # best branch-sharded run, logical ops/s
DYNAMO_K2_BLOCK_OPS, DYNAMO_K2_CORES = 13.26e6, 64  # CRTC highest offered corrected block ops/s kept up
DYNAMO_K2_P99_US = 10.12                            # its lookup p99 at half that load


def xfmt(v):
    """A ratio: 1.23x, or n/a."""
    return "n/a" if v is None else fmt(v) + "x"


def index_ceiling(runs, rate):
    """Per run (one process, one line per window): the highest offered `rate` kept up, the
    line of that window and the line of the window twice as long (half the load), if run."""
    out = []
    for lines in runs:
        kept = [l for l in lines if l["kept_up"]]
        if not kept:
            out.append((0, None, None))
            continue
        best = max(kept, key=lambda l: l[rate])
        half = next((l for l in lines if abs(l["window_s"] - 2 * best["window_s"]) < 1e-6), None)
        out.append((best[rate], best, half))
    return out


def index_runs(recs):
    """The lines of a workload grouped by run: a run is one process, whose windows come in
    decreasing order, so a window not shorter than the previous one starts the next run."""
    runs, prev = [], None
    for r in recs:
        if prev is None or r["window_s"] >= prev:
            runs.append([])
        runs[-1].append(r)
        prev = r["window_s"]
    return runs


def checksum_key(r):
    """Runs that must share one hash_checksum: per workload (hold_tokens with hold); disjoint's
    input grows with its thread count, pool_free's with --big-pool."""
    w = r["workload"]
    if w == "hold_tokens":
        return ("hold",)
    if w == "disjoint":
        return (w, r.get("threads"))
    if w == "scaling_limit":  # its disjoint runs: 2 threads
        return ("disjoint", 2)
    if w == "pool_free":
        return (w, r.get("big_pool"))
    return (w,)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--command", default="bench/compare.sh")
    ap.add_argument("peer")
    ap.add_argument("ours")
    ap.add_argument("more_peer", nargs="*", help="more seed-peer lines (e.g. separate 1-thread runs)")
    a = ap.parse_args()
    peer, ours = load(a.peer), load(a.ours)
    for extra in a.more_peer:
        for w, recs in load(extra).items():
            peer.setdefault(w, []).extend(recs)

    problems = []
    groups = {}
    for who, by in (("seed-peer", peer), ("kvreg", ours)):
        for w, recs in by.items():
            for r in recs:
                if "hash_checksum" in r:  # the index workloads check answers, not a checksum
                    groups.setdefault(checksum_key(r), set()).add(r["hash_checksum"])
            bad = sum(1 for r in recs if not r.get("verified"))
            if bad:
                problems.append(f"{w}: {bad} {who} run(s) not verified")
    for key, sums in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len(sums) > 1:
            problems.append(f"{' '.join(map(str, key))}: hash_checksum differs: {sorted(sums)}")

    P, O = peer.get, ours.get

    # ------------------------------------------------------------------ 1. side by side
    rows = []  # (workload, metric, peer, ours, ratio-text)

    def row(w, metric, pv, ov, unit="", show_ratio=True):
        rt = ratio(ov, pv) if show_ratio else None
        rows.append((w, metric, fmt(pv, unit), fmt(ov, unit), f"{rt:.2f}x" if rt is not None else ""))

    if P("hash") or O("hash"):
        pg, og = med(P("hash", []), lambda r: r["gb_per_s"]), med(O("hash", []), lambda r: r["gb_per_s"])
        row("hash", "naming blocks, GB/s of tokens (kvreg_hash_blocks)", pg, og)
        row("hash", "same, into a sequence object that keeps the tokens", pg,
            med(O("hash", []), lambda r: r.get("sequence_gb_per_s")))
        pl = med(P("hash", []), lambda r: r["chain_only_seconds"] / r["seconds"])
        ol = med(O("hash", []), lambda r: r["limit_ratio"])
        row("hash", "fraction of the raw limit (2 XXH3 calls per block)", pl, ol, show_ratio=False)
    for w in ("register_release", "two_pools", "shared_prefix"):
        if P(w) or O(w):
            row(w, "ops/s (events included)", med(P(w, []), ops_per_s), med(O(w, []), ops_per_s))
            row(w, "ns/op", med(P(w, []), lambda x: x["ns_per_op"]), med(O(w, []), lambda x: x["ns_per_op"]))
        if O(w + "+reserved"):
            rs = O(w + "+reserved")
            ms = med(rs, lambda x: x["registry_new_s"] * 1e3)
            row(w, f"ops/s, kvreg reserved (KVREG_OPT_RESERVE_BLOCKS = {rs[0]['reserve_blocks']}, "
                f"set aside by kvreg_registry_new in {ms:.0f} ms, before the clock)",
                med(P(w, []), ops_per_s), med(rs, ops_per_s))
            row(w, "ns/op, kvreg reserved", med(P(w, []), lambda x: x["ns_per_op"]), med(rs, lambda x: x["ns_per_op"]))
        # register_release's second pass over the same pool (both programs run it): the
        # steady state of an engine, whose freed memory is reused in whatever order it was freed.
        if any("warm_ns_per_op" in r for r in P(w, []) + O(w, [])):
            warm = lambda x: x.get("warm_ns_per_op")
            warm_ops = lambda x: 1e9 / warm(x) if warm(x) else None
            for label, recs in (("", O(w, [])), ("kvreg reserved, ", O(w + "+reserved", []))):
                if recs:
                    row(w, f"ops/s, {label}second pass over the same pool (warm)", med(P(w, []), warm_ops), med(recs, warm_ops))
                    row(w, f"ns/op, {label}second pass", med(P(w, []), warm), med(recs, warm))
    if P("hold") or O("hold"):
        pb = med(P("hold", []), lambda r: r["registry_bytes_per_block"])
        ob = med(O("hold", []), lambda r: r["registry_bytes_per_block"])
        row("hold", "registry bytes per held block (no tokens)", pb, ob)
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
        rows.append(("hold_tokens", "token bytes, 1 pool vs 2 pools holding the same blocks",
                     "a copy per registration",
                     f"{ht[0]['token_bytes']} vs {ht[0]['token_bytes_two_pools']}"
                     + (" (once per hash)" if once else " (**not** once per hash)"), ""))

    # ------------------------------------------------------------------ 2. threads by T
    def by_threads(recs):
        out = {}
        for r in recs:
            out.setdefault(r["threads"], []).append(r)
        return out

    pt, ot = by_threads(P("threads", [])), by_threads(O("threads", []))
    trows = []
    p1 = med(pt.get(1, []), lambda r: r["ops_per_s"])
    o1 = med(ot.get(1, []), lambda r: r["ops_per_s"])
    for t in sorted(set(pt) | set(ot)):
        pv = med(pt.get(t, []), lambda r: r["ops_per_s"])
        ov = med(ot.get(t, []), lambda r: r["ops_per_s"])
        # kvreg: the same process ran 1 thread right after T (--threads-scaling), else the ratio
        # of the medians of separate runs, as for the peer.
        os_ = 1.0 if t == 1 and ov is not None else med(ot.get(t, []), lambda r: r.get("scaling_ratio"))
        if os_ is None:
            os_ = ratio(ov, o1)
        ps = ratio(pv, p1)
        cb = med(ot.get(t, []), lambda r: r.get("callbacks_per_call"))
        busy = med(ot.get(t, []), lambda r: r.get("cpus_busy"))
        rt = ratio(ov, pv)
        trows.append((str(t), fmt(pv), fmt(ov), f"{rt:.2f}x" if rt is not None else "",
                      fmt(ps), fmt(os_), fmt(cb), fmt(busy)))

    # ------------------------------------------------------------------ 3. kvreg only
    krows = []  # (probe, metric, value)
    if trows and ot.get(2):
        s2 = med(ot[2], lambda r: r.get("scaling_ratio"))
        if s2 is None:
            s2 = ratio(med(ot[2], lambda r: r["ops_per_s"]), o1)
        krows.append(("threads (sequences share prefixes; 2 pools)", "2 threads / 1 thread, ops/s", fmt(s2)))
    for d, label in (("inline", "disjoint, INLINE counting callback"),
                     ("poll", "disjoint, POLL + 1 consumer thread (poll_wait)")):
        recs = [r for r in O("disjoint", []) if r.get("delivery") == d]
        for t in sorted({r["threads"] for r in recs}):
            rt = [r for r in recs if r["threads"] == t]
            krows.append((label, f"{t} threads / 1 thread, ops/s ({t}-thread ops/s)",
                          f"{fmt(med(rt, lambda r: r['scaling_ratio']))} "
                          f"({fmt(med(rt, lambda r: r['ops_per_s']))})"))
            if all("isolated_ratio" in r for r in rt):
                krows.append((label, f"same {t} threads, each with a registry of its own (nothing shared: the "
                              "machine's ceiling for the row above) / 1 thread",
                              f"{fmt(med(rt, lambda r: r['isolated_ratio']))} "
                              f"({fmt(med(rt, lambda r: r['isolated_ops_per_s']))})"))
            if all("transfers_per_op" in r for r in rt):
                krows.append((label, f"CPUs kept busy, {t} threads / 1 thread (process CPU time over wall "
                              "time; near 1 with 2 threads: they did not run at once)",
                              f"{fmt(med(rt, lambda r: r['cpus_busy']))} / "
                              f"{fmt(med(rt, lambda r: r['cpus_busy_1thread']))}"))
                krows.append((label, f"CPU ns per operation, {t} threads / 1 thread; what sharing added, in "
                              "cache-line transfers of the run's minute",
                              f"{fmt(med(rt, lambda r: r['cpu_ns_per_op']))} / "
                              f"{fmt(med(rt, lambda r: r['cpu_ns_per_op_1thread']))}; "
                              f"{fmt(med(rt, lambda r: r['transfers_per_op']))}"))
                if d == "poll":
                    krows.append((label, f"the most {t} threads / 1 thread can be on these CPUs at the 1-thread "
                                  "run's CPU per operation (consumer included)",
                                  fmt(med(rt, lambda r: r['cpu_ceiling_ratio']))))
    if O("hol"):
        h = O("hol")
        c, ms = h[0]["calls"], h[0]["callback_sleep_ms"]
        krows.append(("hol", f"{c} calls that emit no event while another thread's callback sleeps "
                      f"{ms} ms: p50 / p99 / max latency",
                      f"{fmt(med(h, lambda r: r['p50_us']))} / **{fmt(med(h, lambda r: r['p99_us']))}** / "
                      f"{fmt(med(h, lambda r: r['max_us']))} µs"))
        krows.append(("hol", "same calls, no callback running: p50 / p99",
                      f"{fmt(med(h, lambda r: r['idle_p50_us']))} / {fmt(med(h, lambda r: r['idle_p99_us']))} µs"))
        under = sum(1 for r in h if r["p99_under_1ms"])
        during = min(r["calls_during_sleep"] for r in h)
        krows.append(("hol", "runs with p99 under 1 ms; calls done before the callback returned (fewest)",
                      f"{under} of {len(h)}; {during} of {c}"))
    if O("pool_free"):
        pf = O("pool_free")
        n = pf[0]["big_pool"]
        a_ = med(pf, lambda r: r["pool_free_alone_us"])
        b_ = med(pf, lambda r: r["pool_free_beside_us"])
        krows.append(("pool_free", f"kvreg_pool_free of a 1-block pool: no other pool / beside a {n:,}-block pool "
                      "(median of 101 frees)",
                      f"{fmt(a_)} / {fmt(b_)} µs ({fmt(ratio(b_, a_))}x)"))
        krows.append(("pool_free", f"kvreg_pool_free of the {n:,}-block pool itself",
                      fmt(med(pf, lambda r: r["big_pool_free_s"] * 1e3), " ms")))

    if O("many_pools"):
        mp = O("many_pools")
        n = mp[0]["pools"]
        per = lambda k: " / ".join(fmt(med(mp, lambda r, f=f: r[f])) for f in (k % "", k % "two_"))
        krows.append(("many_pools", f"one thread, every hash in {n} pools / in 2: register, register again "
                      "(EEXIST), release, ns per block",
                      f"{per('%sregister_ns_per_block')}; {per('%sexists_ns_per_block')}; "
                      f"{per('%srelease_ns_per_block')}"))
    if O("scaling_limit"):
        sl = O("scaling_limit")
        parts = " / ".join(fmt(med(sl, lambda r, k=k: r[k + "_ratio"]))
                           for k in ("private", "counter", "counter_per_32", "locks", "locks_counter"))
        krows.append(("scaling_limit", "the machine's 2 threads / 1 thread ceiling for operations of "
                      f"{fmt(med(sl, lambda r: r['work_ns']))} ns sharing: nothing / one counter per op / "
                      "one counter per 32 ops / one of 64 locks per op / lock and counter", parts))
        if all("dense" + k in r for r in sl for k in ("_ratio", "_counter_per_32_ratio")):
            dense = " / ".join(fmt(med(sl, lambda r, k=k: r[k + "_ratio"])) for k in ("dense", "dense_counter_per_32"))
            krows.append(("scaling_limit", "same, the table as dense as kvreg's index on `disjoint` (the threads' keys "
                          "on the same lines): nothing else / one counter per 32 ops", dense))
        if all("dense_shard_lock_ratio" in r and "dense_line_lock_ratio" in r for r in sl):
            locks = " / ".join(fmt(med(sl, lambda r, k=k: r[k + "_ratio"])) for k in ("dense_shard_lock", "dense_line_lock"))
            krows.append(("scaling_limit", "same dense table, each update inside one of 64 locks on lines of their own "
                          "(kvreg's shard locks) / inside a lock whose word is in the table line itself", locks))
        krows.append(("scaling_limit", "kvreg `disjoint` INLINE in the same run: 2 threads / 1 thread",
                      fmt(med(sl, lambda r: r["kvreg_disjoint_ratio"]))))
        if all("kvreg_isolated_ratio" in r for r in sl):
            krows.append(("scaling_limit", "same, each thread with a registry of its own (nothing shared)",
                          fmt(med(sl, lambda r: r["kvreg_isolated_ratio"]))))

    # The router-side index against Dynamo's published indexer figures (bench/README.md, K1
    # and K2): each run's keep-up ceiling (the highest offered load done within 1.1 x its
    # window), medians over runs.
    irows = []
    if O("index_k1"):
        runs = index_runs(O("index_k1"))
        ceil = index_ceiling(runs, "offered_logical_ops_per_s")
        c = statistics.median(x[0] for x in ceil)
        p99 = med([x for x in ceil if x[1]], lambda x: x[1]["query_service_p99_us"])
        r0 = runs[0][0]
        bad = sum(l["mismatches"] for run in runs for l in run)
        irows.append(("index_k1", f"highest offered logical ops/s kept up ({r0['workers']:,} workers, {r0['cores']} cores; "
                      f"query p99 there; answers checked: mismatches)",
                      f"{fmt(DYNAMO_K1_OPS)} (p99 {DYNAMO_K1_P99_US} µs)",
                      f"{fmt(c)} (p99 {fmt(p99)} µs; {bad})", xfmt(ratio(c, DYNAMO_K1_OPS))))
    if O("index_k2"):
        runs = index_runs(O("index_k2"))
        ceil = index_ceiling(runs, "offered_block_ops_per_s")
        c = statistics.median(x[0] for x in ceil)
        r0 = runs[0][0]
        cores = r0["cores"]
        half = med([x for x in ceil if x[2]], lambda x: x[2]["query_service_p99_us"])
        bad = sum(l["mismatches"] for run in runs for l in run)
        irows.append(("index_k2", f"highest offered corrected block ops/s kept up ({r0['workers']} workers, {cores} cores; "
                      "answers checked: mismatches)", f"{fmt(DYNAMO_K2_BLOCK_OPS)} ({DYNAMO_K2_CORES} cores)",
                      f"{fmt(c)} ({bad})", xfmt(ratio(c, DYNAMO_K2_BLOCK_OPS))))
        irows.append(("index_k2", "same, per core", fmt(DYNAMO_K2_BLOCK_OPS / DYNAMO_K2_CORES),
                      fmt(c / cores), xfmt(ratio(c / cores, DYNAMO_K2_BLOCK_OPS / DYNAMO_K2_CORES))))
        irows.append(("index_k2", "lookup service p99 at half that load, µs", fmt(DYNAMO_K2_P99_US),
                      fmt(half), xfmt(ratio(half, DYNAMO_K2_P99_US))))

    # The cost of one shared line in these runs (transfer.cpp): the 2-thread ratios above
    # move with it from one run to the next.
    tx = [r["core_transfer_ns"] for w in ("threads", "disjoint", "scaling_limit") for r in O(w, [])
          if r.get("core_transfer_ns")]
    if tx:
        krows.append(("core_transfer_ns", "one cache-line transfer between the two CPUs, measured before each "
                      f"threads / disjoint / scaling_limit run: median (fastest - slowest of {len(tx)})",
                      f"{fmt(statistics.median(tx))} ns ({fmt(min(tx))} - {fmt(max(tx))})"))

    # ------------------------------------------------------------------ print
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    print(f"Medians of {a.runs or '?'} runs per workload, the two programs alternating; reproduce with "
          f"`{a.command}` (builds ../shared/peers/seed-rust and a release kvreg-bench); "
          f"{os.cpu_count()} CPUs ({cpu or platform.machine()}). Ratios are kvreg / seed-peer.")
    if rows:
        print()
        print("| workload | metric | seed-peer | kvreg | kvreg / peer |")
        print("| --- | --- | ---: | ---: | ---: |")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    if trows:
        print()
        print("`threads`: T threads, each with its own pool, over sequences that share 8 prefixes "
              "(one registry). T/1 = ops/s with T threads over ops/s with 1; kvreg's comes from the "
              "same process (1 thread right after T), the peer's from separate runs. CPUs busy: kvreg's "
              "process CPU time over wall time in the T-thread run (near 1: the threads took turns on one "
              "CPU, and T/1 is not parallel scaling).")
        print()
        print("| threads | seed-peer ops/s | kvreg ops/s | kvreg / peer | seed-peer T/1 | kvreg T/1 "
              "| kvreg callbacks per call | kvreg CPUs busy |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in trows:
            print("| " + " | ".join(r) + " |")
    if krows:
        print()
        print("kvreg only (the seed design has no counterpart; `kvreg-bench --workload disjoint|hol|pool_free|many_pools|scaling_limit`):")
        print()
        print("| probe | metric | kvreg |")
        print("| --- | --- | ---: |")
        for r in krows:
            print("| " + " | ".join(r) + " |")
    if irows:
        print()
        print("The router-side index against Dynamo's published indexer figures (`kvreg-bench --workload "
              "index_k1|index_k2`; Dynamo's gen-2 hardware is not stated, gen 3 ran on a 64-core EPYC 7702P):")
        print()
        print("| workload | figure | Dynamo | kvreg | kvreg / Dynamo |")
        print("| --- | --- | ---: | ---: | ---: |")
        for r in irows:
            print("| " + " | ".join(r) + " |")
    print()
    sums = []
    for w in ("hash", "register_release", "two_pools", "shared_prefix", "threads", "hold"):
        recs = P(w, []) + O(w, [])
        if recs:
            sums.append(f"{w} `{recs[0]['hash_checksum']}`")
    if not problems and sums:
        print("Checksums (identical in both programs): " + ", ".join(sums) + ".")
    if problems:
        print()
        for p in problems:
            print(f"**ERROR**: {p}")
        print("compare_table: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
