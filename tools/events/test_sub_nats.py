#!/usr/bin/env python3
"""kvreg-events sub --nats against a nats-server this test starts (JetStream on, a temporary
store, 127.0.0.1, an ephemeral port); Python 3 standard library only.

The stream and its messages are made here with the NATS text protocol over a plain socket
(CONNECT, SUB, PUB/HPUB, MSG/HMSG), independent of libkvreg and libnats. The payload is the
spec's example A written out as hex (test_events.EXAMPLE_A), its events written out by hand
(test_events.EXAMPLE_EVENTS); what sub --nats prints must be those, with the message's subject,
Kvreg-Batch header fields and stream sequence added. Also: a message without the header
(decoded as vllm, worker null), one whose payload does not decode (reported, skipped), an empty
stream ("nothing arrived", exit 1), a missing stream (exit 1), bad usage (exit 2), a header
whose format does not fit 32 bits (no valid header), every line strict JSON with unique keys
(the header's rank is "header_dp_rank", the payload's "dp_rank"), and --timeout covering the
connection and the JetStream setup (a fake server here that never answers them).
Exit 77 (skipped) without nats-server, except with CI=true, where that fails.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

from test_events import EXAMPLE_A, EXAMPLE_EVENTS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "nats"))
import nats_server  # noqa: E402  (tests/nats/nats_server.py: the server this test starts)


def fail(what):
    print(f"FAIL: {what}")
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


class Client:
    """Just enough of the NATS text protocol: publish, request on an inbox, read answers."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        check(self.line().startswith(b"INFO "), "no INFO from the server")
        self.s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
                       b'"no_responders":true}\r\nPING\r\n')
        self.expect_pong()
        self.s.sendall(b"SUB _INBOX.test 1\r\n")

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.s.recv(65536)
            check(data, "the server closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def take(self, n):
        while len(self.buf) < n + 2:
            data = self.s.recv(65536)
            check(data, "the server closed the connection")
            self.buf += data
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def expect_pong(self):
        while True:
            line = self.line()
            if line == b"PONG":
                return
            check(not line.startswith(b"-ERR"), f"server error: {line!r}")

    def answer(self):
        """The next message on the inbox: its payload (headers dropped)."""
        while True:
            line = self.line()
            if line == b"PING":
                self.s.sendall(b"PONG\r\n")
                continue
            check(not line.startswith(b"-ERR"), f"server error: {line!r}")
            parts = line.split()
            if parts[0] == b"MSG":
                return self.take(int(parts[-1]))
            if parts[0] == b"HMSG":
                data = self.take(int(parts[-1]))
                return data[int(parts[-2]):]

    def request(self, subject, payload, headers=None):
        if headers:
            h = b"NATS/1.0\r\n" + b"".join(k.encode() + b": " + v.encode() + b"\r\n"
                                          for k, v in headers.items()) + b"\r\n"
            self.s.sendall(b"HPUB %s _INBOX.test %d %d\r\n" % (subject.encode(), len(h),
                                                               len(h) + len(payload))
                           + h + payload + b"\r\n")
        else:
            self.s.sendall(b"PUB %s _INBOX.test %d\r\n" % (subject.encode(), len(payload))
                           + payload + b"\r\n")
        reply = json.loads(self.answer())
        check("error" not in reply, f"{subject}: {reply}")
        return reply


def unique_keys(pairs):
    """json.loads object_pairs_hook: a key twice in one object is a failure (a JSON reader
    would keep only one of the values)."""
    keys = [k for k, _ in pairs]
    check(len(keys) == len(set(keys)), f"repeated keys in one object: {keys}")
    return dict(pairs)


def strict_json(line):
    return json.loads(line, object_pairs_hook=unique_keys)


def run_raw(exe, *args, rc=0):
    p = subprocess.run([exe, "sub", *args], capture_output=True, timeout=60)
    out, err = p.stdout.decode(), p.stderr.decode()
    if p.returncode != rc:
        fail(f"sub {' '.join(args)}: exit {p.returncode}, expected {rc}\n{out}\n{err}")
    return out, err


def run(exe, *args, rc=0):
    out, err = run_raw(exe, *args, rc=rc)
    return [strict_json(x) for x in out.splitlines()], err


class FakeServer:
    """A NATS server that never answers what matters: "mute" sends no INFO (the connection
    cannot finish); "silent" completes the connection (INFO, PONG) but ignores every request,
    the JetStream API's included. 127.0.0.1, an ephemeral port; threads end with the test."""

    def __init__(self, mode):
        self.mode = mode
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(8)
        self.url = f"nats://127.0.0.1:{self.s.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            if self.mode == "silent":
                c.sendall(b'INFO {"server_id":"fake","version":"2.10.0","proto":1,'
                          b'"headers":true,"max_payload":1048576,"jetstream":true}\r\n')
            buf = b""
            while True:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
                while b"\r\n" in buf:
                    line, buf = buf.split(b"\r\n", 1)
                    if self.mode == "silent" and line.startswith(b"PING"):
                        c.sendall(b"PONG\r\n")
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.s.close()


def check_setup_timeout(exe):
    """--timeout S bounds the whole run: connecting (no INFO) and the JetStream requests (stream
    info, consumer creation) too, not only the wait for messages. libnats' own defaults would
    take 2 s (connect) and 5 s (JetStream requests)."""
    for mode, extra, timeout, bound in (("mute", [], "0.3", 1.5),
                                        ("silent", [], "0.5", 2.5),
                                        ("silent", ["--subject", "ev.>"], "0.5", 2.5)):
        server = FakeServer(mode)
        try:
            t0 = time.monotonic()
            _, err = run(exe, "--nats", server.url, "--stream", "EV", *extra, "--timeout", timeout,
                         rc=1)
            took = time.monotonic() - t0
        finally:
            server.close()
        check(took < bound, f"{mode} server {extra}: --timeout {timeout} took {took:.2f} s "
              f"(bound {bound} s): {err}")
        check(err.startswith("kvreg-events sub: "), f"{mode} server: {err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", required=True)
    exe = ap.parse_args().events
    check_setup_timeout(exe)
    server = nats_server.start("kvreg-sub-nats-")
    try:
        c = Client(server.port)
        c.request("$JS.API.STREAM.CREATE.EV", json.dumps(
            {"name": "EV", "subjects": ["ev.>"], "storage": "memory"}).encode())
        c.request("$JS.API.STREAM.CREATE.EMPTY", json.dumps(
            {"name": "EMPTY", "subjects": ["empty.>"], "storage": "memory"}).encode())
        # stream seq 1: worker 7, rank 0, instance 42, seq 0, format 1 (vLLM)
        ack = c.request("ev.default.backend.7.0", EXAMPLE_A,
                        {"Nats-Msg-Id": "7-0-42-0", "Kvreg-Batch": "1 7 0 42 0 1"})
        check(ack.get("seq") == 1, f"ack {ack}")
        # seq 2: no header; seq 3: a header, a payload that is not msgpack; seq 4: rank 3 seq 1
        c.request("ev.other", EXAMPLE_A)
        c.request("ev.default.backend.7.0", b"\xc1garbage", {"Kvreg-Batch": "1 7 0 42 1 1"})
        c.request("ev.default.backend.9.3", EXAMPLE_A, {"Kvreg-Batch": "1 9 3 43 5 1"})
        # seq 5: a format past 32 bits (2^32 + 1 would be vLLM's 1 cut short): not a valid header
        c.request("ev.default.backend.9.3", EXAMPLE_A, {"Kvreg-Batch": "1 9 3 43 6 4294967297"})

        def with_head(subject, worker, rank, instance, seq, sseq):
            # the header's rank is "header_dp_rank"; the payload's stays "dp_rank" (0 here)
            head = {"subject": subject, "worker": worker, "header_dp_rank": rank,
                    "instance": instance, "seq": seq, "stream_seq": sseq, "format": "vllm"}
            check(not set(head) & set(EXAMPLE_EVENTS[0]), "test: head keys overlap")
            return [{**head, **e} for e in EXAMPLE_EVENTS]

        want = (with_head("ev.default.backend.7.0", 7, 0, 42, 0, 1) +
                with_head("ev.other", None, None, None, None, 2) +
                with_head("ev.default.backend.9.3", 9, 3, 43, 5, 4) +
                with_head("ev.default.backend.9.3", None, None, None, None, 5))
        out, err = run_raw(exe, "--nats", server.url, "--stream", "EV", "--count", str(len(want)),
                           "--timeout", "20")
        check("stream seq 5 (ev.default.backend.9.3): no valid Kvreg-Batch header" in err,
              f"a format past 32 bits: {err}")
        got = [strict_json(x) for x in out.splitlines()]
        check(got == want, f"events:\n{json.dumps(got, indent=1)}\nexpected\n"
              f"{json.dumps(want, indent=1)}")
        check("stream seq 2 (ev.other): no valid Kvreg-Batch header" in err, f"stderr: {err}")
        check("stream seq 3" in err and "rejected" in err, f"stderr: {err}")
        # --subject narrows; --count stops early
        got, _ = run(exe, "--nats", server.url, "--stream", "EV", "--subject", "ev.*.*.9.>",
                     "--count", "2", "--timeout", "20")
        check(got == want[6:8], f"--subject: {got}")
        # an empty stream: nothing arrived (exit 1), as for ZeroMQ
        _, err = run(exe, "--nats", server.url, "--stream", "EMPTY", "--timeout", "1", rc=1)
        check("nothing arrived in 1 s" in err, f"empty: {err}")
        _, err = run(exe, "--nats", server.url, "--stream", "NOPE", "--timeout", "1", rc=1)
        check("no stream NOPE" in err, f"missing stream: {err}")
        for bad in (["--nats", server.url, "tcp://127.0.0.1:5557"], ["--stream", "EV", "x"],
                    ["--nats", server.url, "--format", "sglang"]):
            _, err = run(exe, *bad, rc=2)
            check(err.startswith("kvreg-events sub: "), f"{bad}: {err}")
        print(f"ok: {len(want)} events from 4 batches, a malformed one reported")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
