"""Shared test helpers: the public vectors and small registry fixtures."""

import json
import os
import pathlib
import unittest

_REPO = pathlib.Path(__file__).resolve().parents[3]


def load_vectors():
    """tests/vectors/public.json (KVREG_VECTORS overrides). u64 values are taken from the
    *_str fields: they are exact whatever JSON parser wrote the file."""
    path = pathlib.Path(os.environ.get("KVREG_VECTORS") or _REPO / "tests/vectors/public.json")
    if not path.is_file():
        raise unittest.SkipTest("vectors file %s not found" % path)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    cases = []
    for case in data["cases"]:
        blocks = []
        for b in case["blocks"]:
            parent = b["parent_sequence_hash_str"]
            blocks.append({
                "tokens": b["tokens"],
                "block_hash": int(b["block_hash_str"]),
                "sequence_hash": int(b["sequence_hash_str"]),
                "parent_sequence_hash": None if parent is None else int(parent),
            })
        cases.append({
            "note": case["note"],
            "tokens": case["tokens"],
            "block_size": case["block_size"],
            "salt": int(case["salt_str"]),
            "blocks": blocks,
            "partial_tokens": case["partial_tokens"],
        })
    return cases


def infos(n, salt=0, block_size=4, start=0):
    """n chained BlockInfo for distinct tokens, with the tokens of each block."""
    import kvreg
    tokens = list(range(start, start + n * block_size))
    blocks = kvreg.hash_blocks(tokens, block_size, salt)
    return [(b, tokens[i * block_size:(i + 1) * block_size]) for i, b in enumerate(blocks)]


# -- NATS: a real nats-server for the kvreg.nats tests -------------------------------------
def find_nats_server():
    """nats-server's path (KVREG_NATS_SERVER, PATH, /usr/sbin, /usr/local/sbin) or None."""
    env = os.environ.get("KVREG_NATS_SERVER")
    if env:
        return env if os.access(env, os.X_OK) else None
    for d in (os.environ.get("PATH", "") + ":/usr/sbin:/usr/local/sbin").split(":"):
        if d and os.access(os.path.join(d, "nats-server"), os.X_OK):
            return os.path.join(d, "nats-server")
    return None


def wait_for(cond, what, timeout=10.0):
    """Poll cond() until true, bounded (never a sleep standing for synchronisation)."""
    import time
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.005)


def _die_with_parent():
    """In the server's child process: SIGTERM when the test process dies (a test that
    crashes the interpreter must not leave a server behind). Linux only; else nothing."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class NatsServer:
    """A nats-server with JetStream on 127.0.0.1, an ephemeral port and a temporary store.

    start() raises SkipTest when there is no nats-server (a failure with CI=true)."""

    def __init__(self):
        import subprocess
        import tempfile
        exe = find_nats_server()
        if exe is None:
            if os.environ.get("CI") == "true":
                raise AssertionError("nats-server not found; CI=true, so this is a failure")
            raise unittest.SkipTest("nats-server not found (apt-get install nats-server)")
        self.tmp = tempfile.mkdtemp(prefix="kvreg-py-nats-")
        self.proc = subprocess.Popen(
            [exe, "-js", "-sd", os.path.join(self.tmp, "store"), "-a", "127.0.0.1", "-p", "-1",
             "--ports_file_dir", self.tmp, "-l", os.path.join(self.tmp, "log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        ports = os.path.join(self.tmp, "nats-server_%d.ports" % self.proc.pid)
        self.url = None

        def port():
            try:
                with open(ports) as f:
                    self.url = json.load(f)["nats"][0]
                return True
            except (OSError, ValueError, KeyError, IndexError):
                return False
        try:
            wait_for(port, "nats-server's ports file")
        except BaseException:
            self.stop()
            raise

    def stop(self):
        import shutil
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def publish(self, subject, payload):
        """Publish one plain message (no headers) with the NATS text protocol, and wait for
        the server to have processed it (PING/PONG)."""
        import socket
        import urllib.parse
        u = urllib.parse.urlsplit(self.url)
        with socket.create_connection((u.hostname, u.port), timeout=5) as s:
            f = s.makefile("rb")
            if not f.readline().startswith(b"INFO "):
                raise AssertionError("nats-server did not greet with INFO")
            s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n'
                      b"PUB %s %d\r\n%s\r\nPING\r\n" % (subject.encode(), len(payload), payload))
            while True:
                line = f.readline()
                if line.startswith(b"PONG"):
                    return
                if not line or line.startswith(b"-ERR"):
                    raise AssertionError("nats-server refused the message: %r" % line)


class WithNatsServer(unittest.TestCase):
    """A test case whose tests share one NatsServer (self.server, self.url) for the class."""

    @classmethod
    def setUpClass(cls):
        cls.server = NatsServer()
        cls.url = cls.server.url

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
