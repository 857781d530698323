"""kvreg.nats lifetimes: what a Publisher / Consumer borrows cannot be freed under it, close()
waits for the calls in flight (and stops a run()), and integers are range-checked before
they reach C. The tests that need a server start their own nats-server (see support.py)."""

import gc
import socket
import threading
import unittest
import warnings

import kvreg
from kvreg import nats

from .support import WithNatsServer, infos, wait_for

NEEDS_NATS = unittest.skipUnless(nats.available(), "this libkvreg was built without NATS "
                                 "(kvreg.nats.available() is False)")


def _start(pub):
    """start() once the fresh server's JetStream answers."""
    def started():
        try:
            pub.start()
            return True
        except kvreg.ProtocolError:
            return False
    wait_for(started, "the publisher to start")


def _in_thread(fn):
    """Run fn on a thread; returns (thread, outcome list: ('ok', result) or ('err', exc))."""
    out = []

    def body():
        try:
            out.append(("ok", fn()))
        except BaseException as exc:  # reported through out, asserted by the test
            out.append(("err", exc))
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


@NEEDS_NATS
class DependentsTest(unittest.TestCase):
    """No server needed: a publisher or consumer that is open (started or not) holds its
    parent, and the parent's close() says Busy instead of freeing it."""

    def test_registry_close_with_publisher_open_is_busy(self):
        reg = kvreg.Registry("poll")
        pub = nats.Publisher(reg, worker_id=1)
        try:
            with self.assertRaises(kvreg.Busy) as cm:
                reg.close()
            self.assertIn("Publisher", str(cm.exception))
            self.assertFalse(reg.closed)
            # everything still works
            with reg.pool("gpu") as gpu:
                gpu.register(infos(1)[0][0]).release()
            self.assertEqual(pub.get("worker_id"), 1)
        finally:
            pub.close()
        reg.close()  # now it may go
        self.assertTrue(reg.closed)
        with self.assertRaises(kvreg.StaleHandle):
            nats.Publisher(reg)  # a closed registry lends nothing

    def test_index_close_with_consumer_open_is_busy(self):
        idx = nats.Index(hashes=1)
        con = nats.Consumer(idx, durable="busy")
        try:
            with self.assertRaises(kvreg.Busy) as cm:
                idx.close()
            self.assertIn("Consumer", str(cm.exception))
            self.assertFalse(idx.closed)
            self.assertEqual(idx.stat("entries"), 0)
            self.assertEqual(con.get("durable"), "busy")
            second = nats.Consumer(idx)  # two consumers: both must be closed
            second.close()
        finally:
            con.close()
        idx.close()
        self.assertTrue(idx.closed)
        with self.assertRaises(kvreg.StaleHandle):
            nats.Consumer(idx)

    def test_only_what_c_borrows_is_accepted(self):
        with kvreg.Registry("poll") as reg, nats.Index() as idx, reg.pool("gpu") as gpu:
            for bad in (reg, gpu, None):
                with self.assertRaises(TypeError):
                    nats.Consumer(bad)
            for bad in (idx, None):
                with self.assertRaises(TypeError):
                    nats.Publisher(bad)

    def test_collected_parent_is_freed_after_its_last_dependent(self):
        # The garbage collector may finalize a parent before its dependents (both in one
        # cycle); the parent is then freed when its last dependent closes, never before.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reg = kvreg.Registry("poll")
            pub = nats.Publisher(reg)
            core = reg._core
            reg._finalizer()  # what the collector would do first
            self.assertFalse(core.guard.closed)
            self.assertEqual(pub.get("worker_id"), 0)
            pub.close()
            self.assertTrue(core.guard.closed)

            idx = nats.Index()
            con = nats.Consumer(idx)
            guard = idx._guard
            idx._finalizer()
            self.assertFalse(guard.closed)
            self.assertEqual(idx.stat("entries"), 0)
            con.close()
            self.assertTrue(guard.closed)

            # both collected in one cycle, whichever finalizer runs first
            reg = kvreg.Registry("poll")
            pub = nats.Publisher(reg)
            idx = nats.Index()
            con = nats.Consumer(idx)
            cycle = [reg, pub, idx, con]
            cycle.append(cycle)
            core, guard = reg._core, idx._guard
            del reg, pub, idx, con, cycle
            gc.collect()
            self.assertTrue(core.guard.closed)
            self.assertTrue(guard.closed)
        leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        self.assertEqual(len(leaks), 6, leaks)
        for name in ("kvreg.Registry", "kvreg.nats.Publisher", "kvreg.nats.Index",
                     "kvreg.nats.Consumer"):
            self.assertTrue(any(name in m for m in leaks), (name, leaks))


@NEEDS_NATS
class IntegersTest(unittest.TestCase):
    """Every integer into nats.py's C calls is range-checked (ctypes would wrap it)."""

    def test_options_and_arguments(self):
        with kvreg.Registry("poll") as reg:
            for bad in (-1, 2 ** 64):
                with self.assertRaises(ValueError):
                    nats.Publisher(reg, worker_id=bad).close()
            with nats.Publisher(reg) as pub:
                for name, bad in (("worker_id", -1), ("worker_id", 2 ** 64), ("dp_rank", -1),
                                  ("format", -1), ("max_in_flight", 2 ** 70)):
                    with self.assertRaises(ValueError, msg="%s=%r" % (name, bad)):
                        pub.set(name, bad)
                self.assertEqual(pub.get("worker_id"), 0)  # nothing wrapped through
                with self.assertRaises(TypeError):
                    pub.set("worker_id", 1.5)
                with self.assertRaises(TypeError):
                    pub.set("url", 5)
                pub.set("create_stream", False)  # a flag may be a bool
                self.assertEqual(pub.get("create_stream"), 0)
        for bad in (-1, 2 ** 64):
            with self.assertRaises(ValueError):
                nats.Index(salt=bad).close()
        with nats.Index() as idx, nats.Consumer(idx) as con:
            for bad in (2 ** 32 - 1, 2 ** 31, -2, -(2 ** 63)):
                # 2**32-1 would reach C as -1: run until stopped
                with self.assertRaises(ValueError, msg="run(%d)" % bad):
                    con.run(bad)
            with self.assertRaises(TypeError):
                con.run(0.5)
            with self.assertRaises(kvreg.StateError):
                con.run(-1)  # in range: C's answer (not started)
            for args in ((-1,), (2 ** 64,), (1, -1), (1, 2 ** 32)):
                with self.assertRaises(ValueError, msg="worker%r" % (args,)):
                    con.worker(*args)
            self.assertIsNone(con.worker(2 ** 64 - 1, 2 ** 32 - 1))
            for name, bad in (("fetch_batch", -1), ("reorder_ms", 2 ** 64)):
                with self.assertRaises(ValueError):
                    con.set(name, bad)
            self.assertEqual(con.get("fetch_batch"), 256)
            con.set("resume", True)
            self.assertEqual(con.get("resume"), 1)

    def test_strings_with_nul_are_refused(self):
        # ctypes would pass "a\0b" as "a"
        with kvreg.Registry("poll") as reg, nats.Publisher(reg) as pub:
            with self.assertRaises(ValueError):
                pub.set("lora_name", "a\0b")
            self.assertIsNone(pub.get("lora_name"))
        with nats.Index() as idx, nats.Consumer(idx) as con:
            with self.assertRaises(ValueError):
                con.set("durable", "r\0x")
            self.assertEqual(con.get("durable"), "kvreg-router")


@NEEDS_NATS
class RunningTest(WithNatsServer):
    """With a server: the same rules while the publisher's sender thread runs, and close()
    of a consumer or publisher while another thread is inside a call on it."""

    def test_registry_close_while_publisher_runs_is_busy(self):
        reg = kvreg.Registry("poll")
        gpu = reg.pool("gpu")
        pub = nats.Publisher(reg, url=self.url, stream="LTPUB", subject_prefix="ltpub.ev",
                             worker_id=1, batch_us=0)
        try:
            _start(pub)
            with self.assertRaises(kvreg.Busy):
                reg.close()
            # the sender thread still takes the registry's events and publishes them
            blocks = [gpu.register(info, tokens) for info, tokens in infos(3)]
            wait_for(lambda: pub.stat("events_handled") >= 3 and pub.stat("in_flight") == 0,
                     "3 events published after the refused close")
            self.assertGreaterEqual(pub.stat("acked"), 1)
            gpu.release_batch(blocks)
        finally:
            pub.close()
        gpu.close()
        reg.close()

    def test_index_close_while_consumer_runs_is_busy(self):
        with kvreg.Registry("poll") as reg, reg.pool("gpu") as gpu:
            with nats.Publisher(reg, url=self.url, stream="LTIDX", subject_prefix="ltidx.ev",
                                worker_id=5, batch_us=0) as pub:
                _start(pub)
                idx = nats.Index(hashes=1)
                con = nats.Consumer(idx, url=self.url, stream="LTIDX", durable="ltidx",
                                    fetch_batch=16)
                try:
                    con.start()
                    with self.assertRaises(kvreg.Busy):
                        idx.close()
                    blocks = [gpu.register(info, tokens) for info, tokens in infos(3)]
                    wait_for(lambda: pub.stat("events_handled") >= 3 and
                             pub.stat("in_flight") == 0, "3 events published")
                    target = pub.stat("batches")
                    wait_for(lambda: (con.run(50) or True) and
                             (con.worker(5) or (0, 0))[1] == target, "the batches applied")
                    self.assertEqual(idx.stat("entries"), 3)
                    gpu.release_batch(blocks)
                finally:
                    con.close()
                idx.close()
                self.assertTrue(idx.closed)

    def _junk_consumer(self, stream, notices):
        """(registry, publisher, index, consumer started): the publisher made the stream;
        self.server.publish(stream.lower() + '.ev.junk', ...) gives a MALFORMED notice."""
        reg = kvreg.Registry("poll")
        pub = nats.Publisher(reg, url=self.url, stream=stream,
                             subject_prefix=stream.lower() + ".ev", batch_us=0)
        _start(pub)
        idx = nats.Index(hashes=1)
        con = nats.Consumer(idx, notices=notices, url=self.url, stream=stream,
                            durable=stream.lower(), fetch_batch=16)
        con.start()
        return reg, pub, idx, con

    def _close_all(self, reg, pub, idx, con):
        con.close()
        idx.close()
        pub.close()
        reg.close()

    def test_consumer_close_waits_for_the_run_in_flight(self):
        # run() is held inside the notice callback: close() from another thread must wait
        # for it (and stop it), not free the consumer under it.
        inside, release = threading.Event(), threading.Event()

        def notice(n):
            inside.set()
            release.wait(10)
        objs = self._junk_consumer("LTRUN", notice)
        reg, pub, idx, con = objs
        try:
            runner, ran = _in_thread(lambda: con.run(-1))
            self.server.publish("ltrun.ev.junk", b"not a batch")
            self.assertTrue(inside.wait(10), "no notice")
            closer, closed = _in_thread(con.close)
            closer.join(0.3)
            self.assertTrue(closer.is_alive(), "close() returned while run() was in flight")
            self.assertTrue(runner.is_alive())
            release.set()
            closer.join(10)
            runner.join(10)
            self.assertFalse(closer.is_alive() or runner.is_alive())
            self.assertEqual(closed, [("ok", None)])
            self.assertEqual(ran, [("ok", None)])  # stopped by close(): a normal return
            self.assertTrue(con.closed)
            with self.assertRaises(kvreg.StaleHandle):
                con.run(0)
            self.assertEqual(con.errors, [])
        finally:
            release.set()
            self._close_all(*objs)

    def test_consumer_close_stops_a_run_forever(self):
        # p3: run(-1) on a thread; close() from another, without stop() first
        with kvreg.Registry("poll") as reg, reg.pool("gpu") as gpu:
            with nats.Publisher(reg, url=self.url, stream="LTFOR", subject_prefix="ltfor.ev",
                                worker_id=5, batch_us=0) as pub:
                _start(pub)
                with nats.Index(hashes=1) as idx:
                    con = nats.Consumer(idx, url=self.url, stream="LTFOR", durable="ltfor")
                    try:
                        con.start()
                        runner, ran = _in_thread(lambda: con.run(-1))
                        blocks = [gpu.register(info, tokens) for info, tokens in infos(2)]
                        # messages only grow inside run(): the runner is in it
                        wait_for(lambda: con.stat("messages") >= 1, "the runner to fetch")
                        self.assertTrue(runner.is_alive())
                        con.close()
                        runner.join(5)
                        self.assertFalse(runner.is_alive(), "run(-1) not stopped by close()")
                        self.assertEqual(ran, [("ok", None)])
                        gpu.release_batch(blocks)
                    finally:
                        con.close()

    def test_close_from_the_notice_callback_is_busy(self):
        seen = []
        holder = []

        def notice(n):
            con, idx = holder
            for obj in (con, idx):
                try:
                    obj.close()
                    seen.append("closed")
                except kvreg.Busy:
                    seen.append("busy")
            con.stop()  # allowed from the callback
        objs = self._junk_consumer("LTCB", notice)
        reg, pub, idx, con = objs
        holder[:] = [con, idx]
        try:
            self.server.publish("ltcb.ev.junk", b"not a batch")
            wait_for(lambda: (con.run(50) or True) and seen, "the notice")
            self.assertEqual(seen, ["busy", "busy"])
            self.assertFalse(con.closed or idx.closed)
            self.assertEqual(con.stat("malformed"), 1)
        finally:
            holder.clear()
            self._close_all(*objs)

    def test_publisher_close_waits_for_start_in_flight(self):
        # start() connecting to a server that accepts and never answers: close() from
        # another thread waits for it instead of freeing the publisher under it.
        with socket.create_server(("127.0.0.1", 0)) as mute:
            port = mute.getsockname()[1]
            with kvreg.Registry("poll") as reg:
                pub = nats.Publisher(reg, url="nats://127.0.0.1:%d" % port,
                                     connect_timeout_ms=1500)
                try:
                    starter, started = _in_thread(pub.start)
                    mute.settimeout(10)
                    conn, _ = mute.accept()  # start() is connecting: it is in C
                    with conn:
                        closer, closed = _in_thread(pub.close)
                        closer.join(0.3)
                        self.assertTrue(closer.is_alive(),
                                        "close() returned while start() was in flight")
                        starter.join(10)
                        closer.join(10)
                        self.assertFalse(starter.is_alive() or closer.is_alive())
                        self.assertEqual(len(started), 1)
                        self.assertIsInstance(started[0][1], kvreg.ProtocolError)
                        self.assertEqual(closed, [("ok", None)])
                finally:
                    pub.close()
                self.assertTrue(pub.closed)


if __name__ == "__main__":
    unittest.main()
