#!/usr/bin/env python3
"""engine.c and router.c over NATS JetStream (engine --nats, router --nats; suite nats).

A nats-server is started here (JetStream on, a temporary store, 127.0.0.1, an ephemeral port).
The engine publishes its three requests to the stream and stops once every batch is
acknowledged; the router is started only then, so everything it gets comes from the stream,
as for a replica that joins late. The router checks its own routing answers (exit status);
this script checks the engine's event count against the workload's (10 Register, 2 Remove)
and that the router applied every batch the engine made. Bounded: the server's start 10 s,
the engine 15 s, the router 25 s (its own wait 20 s), the server's stop 10 s.

Usage: test_engine_router_nats.py ENGINE ROUTER
"""
import os
import re
import sys

from test_engine_router import run  # this directory: one example program, run and echoed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "nats"))
import nats_server  # noqa: E402  (tests/nats/nats_server.py)


def main():
    engine_exe, router_exe = sys.argv[1], sys.argv[2]
    server = nats_server.start("kvreg-example-nats-")
    try:
        engine = run("engine", [engine_exe, "--nats", server.url], timeout=15)
        if engine is None:
            return 1
        m = re.search(r"engine: published (\d+) events \((\d+) Register, (\d+) Remove\)", engine)
        b = re.search(r"engine: stopped after (\d+) batches, all acknowledged", engine)
        if not m or not b:
            print("FAIL: the engine did not print its event and batch counts")
            return 1
        # 3 requests of 6 blocks sharing 4: 6 + 2 + 2 registered; request 0's 2 own evicted.
        if [int(x) for x in m.groups()] != [12, 10, 2]:
            print("FAIL: engine published %s, expected 12 events (10 Register, 2 Remove)"
                  % list(m.groups()))
            return 1
        batches = int(b.group(1))
        router = run("router", [router_exe, "--nats", server.url, str(batches), "20"], timeout=25)
        if router is None:
            return 1
        a = re.search(r"router: applied (\d+) batches", router)
        if not a or int(a.group(1)) != batches:
            print("FAIL: the router applied %s batches, the engine made %d"
                  % (a.group(1) if a else "no", batches))
            return 1
        print("ok: the router applied all %d batches from the stream and routed 4 prompts correctly"
              % batches)
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
