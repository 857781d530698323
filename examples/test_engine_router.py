#!/usr/bin/env python3
"""engine.c and router.c together, as the integration guide runs them (suite net).

The engine binds ephemeral 127.0.0.1 ports and publishes; the router is started only after
the engine has published everything, so it joins late and must get every event through the
replay endpoint (seq 0 on). The router checks its own routing answers (exit status); this
script checks the engine's event count against the workload's (10 Register, 2 Remove) and
that the index stored and removed exactly those blocks. Bounded: 30 s in all.

Usage: test_engine_router.py ENGINE ROUTER
"""
import re
import subprocess
import sys


def run(name, argv, timeout=30):
    """Run one example program to its end (timeout seconds at most), echoing its output: its
    stdout, or None after a FAIL line when it exits non-zero."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    print(p.stdout, end="")
    print(p.stderr, end="", file=sys.stderr)
    if p.returncode != 0:
        print("FAIL: %s exited %d" % (name, p.returncode))
        return None
    return p.stdout


def main():
    engine_exe, router_exe = sys.argv[1], sys.argv[2]
    engine = subprocess.Popen([engine_exe, "tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "30"],
                              stdout=subprocess.PIPE, text=True)
    try:
        endpoints = events = None
        for line in engine.stdout:
            print(line, end="")
            m = re.match(r"engine: publishing on (\S+), replay on (\S+)$", line)
            if m:
                endpoints = m.groups()
            m = re.match(r"engine: published (\d+) events \((\d+) Register, (\d+) Remove\)", line)
            if m:
                events = [int(x) for x in m.groups()]
                break
        if not endpoints or not events:
            print("FAIL: the engine did not print its endpoints and event count")
            return 1
        # 3 requests of 6 blocks sharing 4: 6 + 2 + 2 registered; request 0's 2 own evicted.
        if events != [12, 10, 2]:
            print("FAIL: engine published %s, expected 12 events (10 Register, 2 Remove)" % events)
            return 1
        out = run("router", [router_exe, endpoints[0], endpoints[1], str(events[0]), "20"])
        if out is None:
            return 1
        stored = sum(int(n) for n in re.findall(r"(\d+) blocks stored", out))
        removed = sum(int(n) for n in re.findall(r"(\d+) removed", out))
        if (stored, removed) != (10, 2):
            print("FAIL: the index stored %d and removed %d blocks, expected 10 and 2"
                  % (stored, removed))
            return 1
        print("ok: the router got all 12 events through replay and routed 4 prompts correctly")
        return 0
    finally:
        engine.kill()
        engine.wait()


if __name__ == "__main__":
    sys.exit(main())
