"""kvreg.nats against a real nats-server this test starts (JetStream, a temporary store,
127.0.0.1, an ephemeral port). Skipped, saying why, when the library was built without NATS;
without nats-server too, except with CI=true, where that fails."""

import unittest

import kvreg
from kvreg import nats

from .support import WithNatsServer, infos, wait_for as _wait


@unittest.skipUnless(nats.available(), "this libkvreg was built without NATS "
                     "(kvreg.nats.available() is False)")
class NatsTest(WithNatsServer):
    def test_publish_then_consume(self):
        notices = []
        with kvreg.Registry("poll") as reg:
            gpu = kvreg.Pool(reg, "gpu")
            # start retries while the fresh server's JetStream comes up
            pub = nats.Publisher(reg, url=self.url, stream="PY", subject_prefix="py.ev",
                                 worker_id=5, batch_us=0, format="vllm")
            try:
                _wait(lambda: self._started(pub), "the publisher to start")
                with self.assertRaises(kvreg.StateError):
                    pub.set("worker_id", 6)  # options are fixed once started
                blocks = [gpu.register(info, tokens) for info, tokens in infos(3)]
                _wait(lambda: pub.stat("events_handled") >= 3 and pub.stat("in_flight") == 0,
                      "3 events published and acknowledged")
                with nats.Index(hashes=1) as idx:
                    con = nats.Consumer(idx, notices=notices.append, url=self.url,
                                        stream="PY", durable="py-replica", fetch_batch=16)
                    with con:
                        con.start()
                        self.assertIsNone(con.worker(5))
                        target = pub.stat("batches")
                        self.assertGreaterEqual(target, 1)
                        _wait(lambda: (con.run(50) or True) and
                              (con.worker(5) or (0, 0))[1] == target, "the batches applied")
                        self.assertEqual(idx.stat("entries"), 3)  # 3 blocks of worker 5
                        self.assertEqual(idx.stat("workers"), 1)
                        blocks[0].release()  # one Remove
                        _wait(lambda: pub.stat("events_handled") >= 4 and
                              pub.stat("in_flight") == 0, "the Remove published")
                        target = pub.stat("batches")
                        _wait(lambda: (con.run(50) or True) and con.worker(5)[1] == target,
                              "the Remove applied")
                        self.assertEqual(idx.stat("entries"), 2)
                        # a replica made from this one's dump is the same replica
                        with nats.Index(hashes=1) as copy:
                            copy.load(idx.dump())
                            self.assertEqual(copy.stat("entries"), 2)
                            self.assertEqual(copy.digest(), idx.digest())
                            with self.assertRaises(kvreg.StateError):
                                copy.load(idx.dump())  # it knows a worker now
                        dump = bytearray(idx.dump())
                        dump[len(dump) // 2] ^= 1
                        with nats.Index(hashes=1) as bad:
                            with self.assertRaises(kvreg.ProtocolError):
                                bad.load(bytes(dump))  # the checksum catches it
                            self.assertNotEqual(bad.digest(), idx.digest())
                        st = con.stats()
                        self.assertEqual(st["batches"], target)
                        self.assertEqual(st["duplicates"] + st["lost"] + st["malformed"], 0)
                    self.assertTrue(con.closed)
                    with self.assertRaises(kvreg.StaleHandle):
                        con.run(0)
                for b in blocks[1:]:
                    b.release()
                pub.stop()
                self.assertEqual(pub.stat("acked"), pub.stat("batches"))
                self.assertEqual(pub.stat("events_lost"), 0)
            finally:
                pub.close()
            gpu.close()
        self.assertEqual(notices, [])

    def test_snapshot_restore(self):
        with kvreg.Registry("poll") as reg:
            gpu = kvreg.Pool(reg, "gpu")
            with nats.Publisher(reg, url=self.url, stream="SNAP", subject_prefix="snap.ev",
                                worker_id=2, batch_us=0) as pub:
                _wait(lambda: self._started(pub), "the publisher to start")
                blocks = [gpu.register(info, tokens) for info, tokens in infos(5, start=50)]
                _wait(lambda: pub.stat("events_handled") >= 5 and pub.stat("in_flight") == 0,
                      "5 events published")
                target = pub.stat("batches")
                with nats.Index(hashes=1) as a, nats.Index(hashes=1) as b:
                    with nats.Consumer(a, url=self.url, stream="SNAP", durable="snap-a",
                                       snapshot_bucket="PYSNAP", fetch_batch=16) as ca:
                        ca.start()
                        _wait(lambda: (ca.run(50) or True) and
                              (ca.worker(2) or (0, 0))[1] == target, "replica a caught up")
                        seq = ca.snapshot()
                        self.assertGreater(seq, 0)
                        with nats.Consumer(b, url=self.url, stream="SNAP", durable="snap-b",
                                           snapshot_bucket="PYSNAP") as cb:
                            cb.start()  # restores a's snapshot: b has a's index at once
                            self.assertEqual(cb.stat("restored"), 1)
                            self.assertEqual(b.stat("entries"), 5)
                            self.assertEqual(b.digest(), a.digest())
                for blk in blocks:
                    blk.release()
            gpu.close()

    def _started(self, pub):
        try:
            pub.start()
            return True
        except kvreg.ProtocolError:
            return False

    def test_get(self):
        # defaults as kvreg_nats.h documents them, what was set, and what start fills in
        with kvreg.Registry("poll") as reg:
            with nats.Publisher(reg, url=self.url, stream="PYGET", subject_prefix="pyget.ev",
                                worker_id=7, dp_rank=2, batch_us=0) as pub:
                self.assertEqual(pub.get("max_in_flight"), 256)
                self.assertEqual(pub.get("worker_id"), 7)
                self.assertEqual(pub.get("namespace"), "default")
                self.assertEqual(pub.get("url"), self.url)
                self.assertIsNone(pub.get("subject"))   # the layout, filled in by start
                self.assertIsNone(pub.get("lora_name"))
                self.assertEqual(pub.get("instance"), 0)  # drawn by start
                pub.set("lora_name", "x" * 300)           # longer than any first guess
                self.assertEqual(pub.get("lora_name"), "x" * 300)
                with self.assertRaises(ValueError):
                    pub.get("no_such_option")
                _wait(lambda: self._started(pub), "the publisher to start")
                self.assertEqual(pub.get("subject"), "pyget.ev.default.backend.7.2")
                self.assertGreater(pub.get("instance"), 0)
                self.assertEqual(pub.get("worker_id"), 7)
        with nats.Index() as idx:
            with nats.Consumer(idx, stream="S1", durable="r1") as con:
                self.assertEqual(con.get("fetch_batch"), 256)
                self.assertEqual(con.get("durable"), "r1")
                self.assertEqual(con.get("snapshot_name"), "S1")  # the stream's name
                self.assertIsNone(con.get("filter"))
                con.set("snapshot_keep", 16)
                self.assertEqual(con.get("snapshot_keep"), 16)

    def test_bad_options_and_no_server(self):
        with kvreg.Registry("poll") as reg:
            with self.assertRaises(ValueError):
                nats.Publisher(reg, no_such_option=1)
            with nats.Publisher(reg, url="nats://127.0.0.1:1", connect_timeout_ms=200) as pub:
                with self.assertRaises(kvreg.ProtocolError):
                    pub.start()  # nothing listens on port 1
        with kvreg.Registry("inline", callback=lambda ev: None) as inline:
            with self.assertRaises(kvreg.InvalidArgument):
                nats.Publisher(inline)  # the publisher polls: POLL delivery only
        # bytes that are not UTF-8 are refused: get() could not give them back as a str
        with kvreg.Registry("poll") as reg, nats.Publisher(reg) as pub:
            with self.assertRaises(kvreg.InvalidArgument):
                pub.set("url", b"nats://h\xe9te:4222")
            with self.assertRaises(kvreg.InvalidArgument):
                pub.set("url", "nats://a\0b")
            pub.set("url", "nats://h\u00e9te:4222".encode("utf-8"))
            self.assertEqual(pub.get("url"), "nats://h\u00e9te:4222")
        with nats.Index() as idx:
            with self.assertRaises(kvreg.InvalidArgument):
                nats.Consumer(idx, fetch_batch=0)
            with nats.Consumer(idx) as con:
                with self.assertRaises(kvreg.StateError):
                    con.run(0)  # not started


class AvailableTest(unittest.TestCase):
    def test_available_is_a_bool(self):
        self.assertIn(nats.available(), (True, False))
        if not nats.available():
            print("kvreg.nats: the library was built without NATS; calls raise NotSupported")
            with kvreg.Registry("poll") as reg:
                with self.assertRaises(kvreg.NotSupported):
                    nats.Publisher(reg)
