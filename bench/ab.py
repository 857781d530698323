#!/usr/bin/env python3
"""Paired A/B of two libkvreg builds on one kvreg-bench workload.

    bench/ab.py [--rounds N] [--metric KEY[,KEY...]] [--bench PATH] LIB_A LIB_B -- BENCH_ARGS...

LIB_A and LIB_B are directories holding a libkvreg.so.0 each (copy build/src/libkvreg.so* of
two builds). Every round runs kvreg-bench once with each (LD_LIBRARY_PATH), back to back, the
order alternating, and takes the ratio B / A of a JSON field (--metric, default ops_per_s;
for ns_per_op a ratio below 1 means B is faster). Several fields, comma-separated (--metric
register_ns_per_block,release_ns_per_block), come from the same pairs of runs, a line each.
It prints the median ratio, its quartiles and range, each library's median, and the median
core_transfer_ns where the workload reports it.

Why pairs: on the project's 2-vCPU VM the same binary's 2-thread ops/s moved by 2x from one
run to the next (the hypervisor's placement of the vCPUs), so medians of two
separate series could differ by more than the change measured. Two runs seconds apart mostly
meet the same state, and the ratio within a pair cancels most of it. The spread printed says
how far the answer can be trusted. Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(bench, lib, args, metrics):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.abspath(lib)
    out = subprocess.run([bench] + args, env=env, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line)
            if not d.get("verified", True):
                sys.exit("ab.py: kvreg-bench reported verified: false with " + lib)
            missing = [m for m in metrics if m not in d]
            if missing:
                sys.exit("ab.py: no field %r in kvreg-bench's output" % missing[0])
            return [float(d[m]) for m in metrics], d.get("core_transfer_ns")
    sys.exit("ab.py: no JSON line from kvreg-bench")


def quartiles(v):
    if len(v) < 2:
        return v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")  # within the range, even for 2 values
    return q[0], q[2]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--metric", default="ops_per_s")
    p.add_argument("--bench", default=os.path.join(here, "..", "..", "build", "tests", "bench", "kvreg-bench"))
    p.add_argument("lib_a")
    p.add_argument("lib_b")
    p.add_argument("bench_args", nargs=argparse.REMAINDER)
    o = p.parse_args()
    args = o.bench_args[1:] if o.bench_args[:1] == ["--"] else o.bench_args
    if o.rounds < 1:
        sys.exit("ab.py: --rounds must be at least 1")
    for lib in (o.lib_a, o.lib_b):
        if not os.path.isdir(lib):
            sys.exit("ab.py: %s is not a directory" % lib)
    metrics = [m for m in o.metric.split(",") if m]
    if not metrics:
        sys.exit("ab.py: --metric names no field")
    a_vals, b_vals, transfer = [], [], []  # per round: one value per metric
    for r in range(o.rounds):
        order = [(o.lib_a, a_vals), (o.lib_b, b_vals)]
        if r % 2:
            order.reverse()
        for lib, vals in order:
            v, t = run(o.bench, lib, args, metrics)
            vals.append(v)
            if t:
                transfer.append(float(t))
    for k, metric in enumerate(metrics):
        a = [v[k] for v in a_vals]
        b = [v[k] for v in b_vals]
        ratios = [y / x if x else float("nan") for x, y in zip(a, b)]
        q1, q3 = quartiles(ratios)
        print("%s  %s  B/A: median %.3f  quartiles %.3f-%.3f  range %.3f-%.3f  (%d pairs)"
              % (" ".join(args), metric, statistics.median(ratios), q1, q3, min(ratios), max(ratios), len(ratios)))
        print("  A %s: median %.6g    B %s: median %.6g"
              % (o.lib_a, statistics.median(a), o.lib_b, statistics.median(b)))
    if transfer:
        print("  core_transfer_ns: median %.0f (%.0f-%.0f)" % (statistics.median(transfer), min(transfer), max(transfer)))


if __name__ == "__main__":
    main()
