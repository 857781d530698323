"""A nats-server for Python tests: JetStream on, a temporary store, 127.0.0.1, an ephemeral
port (read back from its ports file), stopped by its pid. Standard library only. The C tests'
twin is nats_fixture.c.

    server = start("kvreg-example-")   # exits 77 (skip) without nats-server, fails with CI=true
    ... server.url ...
    server.stop()
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77


def fail(what):
    print(f"FAIL: {what}")
    sys.exit(1)


def find_server():
    """KVREG_NATS_SERVER, else nats-server on PATH or in /usr/sbin (Debian puts it there)."""
    env = os.environ.get("KVREG_NATS_SERVER")
    if env:
        return env if os.access(env, os.X_OK) else None
    path = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/usr/local/sbin"
    for d in path.split(":"):
        exe = os.path.join(d, "nats-server")
        if d and os.access(exe, os.X_OK):
            return exe
    return None


class Server:
    def __init__(self, exe, tmp):
        self.tmp = tmp
        try:
            self.proc = subprocess.Popen([exe, "-js", "-sd", os.path.join(tmp, "store"), "-a",
                                          "127.0.0.1", "-p", "-1", "--ports_file_dir", tmp,
                                          "-l", os.path.join(tmp, "log")])
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            fail(f"cannot run {exe}: {e}")
        ports = os.path.join(tmp, f"nats-server_{self.proc.pid}.ports")
        deadline = time.monotonic() + 10
        self.port = None
        while self.port is None:  # poll the ports file, bounded
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = "exited at start" if self.proc.poll() is not None else "wrote no ports file"
                self.show_log()
                self.stop()
                fail(f"nats-server {why}")
            try:
                with open(ports) as f:
                    text = f.read()
                self.port = int(json.loads(text)["nats"][0].rsplit(":", 1)[1])
            except (OSError, ValueError, KeyError, IndexError):
                time.sleep(0.01)
        self.url = f"nats://127.0.0.1:{self.port}"

    def show_log(self):
        try:
            with open(os.path.join(self.tmp, "log")) as f:
                print("nats-server's log:\n" + f.read()[-4000:])
        except OSError:
            pass

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def start(prefix):
    exe = find_server()
    if not exe:
        if os.environ.get("CI") == "true":
            fail("nats-server not found; CI=true, so this is a failure")
        print("SKIP: nats-server not found (apt-get install nats-server)")
        sys.exit(SKIP)
    return Server(exe, tempfile.mkdtemp(prefix=prefix))
