"""Register/Remove semantics across pools sharing one registry, in both delivery modes."""

import threading
import time
import unittest

import kvreg
from kvreg import EventKind

from . import support

REG, REM = EventKind.REGISTER, EventKind.REMOVE


class _SharedHashes:
    """Two pools holding the same hashes: one Register per hash (first holder) and one
    Remove per hash (last holder gone), never two."""

    def make_registry(self):
        raise NotImplementedError

    def events(self):
        raise NotImplementedError

    def setUp(self):
        self.reg = self.make_registry()
        self.gpu = self.reg.pool("gpu")
        self.host = self.reg.pool("host")
        self.blocks = support.infos(4, salt=kvreg.ROUTER_SALT)
        self.hashes = [info.sequence_hash for info, _ in self.blocks]

    def tearDown(self):
        self.reg.close()

    def assertOnePerHash(self, evs, kind, pool_id):
        mine = [e for e in evs if e.kind == kind]
        self.assertEqual(sorted(e.sequence_hash for e in mine), sorted(self.hashes))
        self.assertTrue(all(e.pool_id == pool_id for e in mine), mine)

    def test_two_pools_one_register_one_remove(self):
        gpu = self.gpu.register_batch(self.blocks, block_size=4)
        host = [self.host.register(info, toks, 4) for info, toks in self.blocks]
        evs = self.events()
        self.assertEqual([e.kind for e in evs], [REG] * 4)
        self.assertOnePerHash(evs, REG, self.gpu.id)
        for e, (info, toks) in zip(evs, self.blocks):  # input order, full content
            self.assertEqual((e.sequence_hash, e.block_hash, e.parent_sequence_hash),
                             (info.sequence_hash, info.block_hash, info.parent_sequence_hash))
            self.assertEqual(list(e.tokens), toks)

        for b in gpu:
            b.release()
        self.assertEqual(self.events(), [], "Remove while another pool still holds the hash")
        self.assertTrue(all(self.reg.contains(h) for h in self.hashes))
        self.assertEqual(self.host.release_batch(host), [None] * 4)
        rem = self.events()
        self.assertEqual([e.kind for e in rem], [REM] * 4)
        self.assertOnePerHash(rem, REM, self.host.id)
        ids = [e.event_id for e in evs + rem]
        self.assertEqual(ids, list(range(ids[0], ids[0] + 8)))
        self.assertFalse(any(self.reg.contains(h) for h in self.hashes))

    def test_acquire_adds_no_event_and_delays_remove(self):
        info, toks = self.blocks[0]
        first = self.gpu.register(info, toks)
        second = self.gpu.acquire(info.sequence_hash)
        self.assertEqual(second.handle, first.handle)
        self.assertEqual(first.refcount(), 2)
        self.assertEqual(len(self.events()), 1)
        first.release()
        self.assertEqual(self.events(), [])
        self.assertTrue(self.gpu.contains(info.sequence_hash))
        second.release()
        self.assertEqual([e.kind for e in self.events()], [REM])
        self.assertFalse(self.gpu.contains(info.sequence_hash))

    def test_pool_close_removes_what_only_it_holds(self):
        gpu = self.gpu.register_batch(self.blocks)
        host = self.host.register(*self.blocks[0])
        self.events()
        self.gpu.close()
        rem = self.events()
        self.assertEqual([e.kind for e in rem], [REM] * 3)
        self.assertEqual(sorted(e.sequence_hash for e in rem), sorted(self.hashes[1:]))
        self.assertEqual(self.reg.stat("hashes"), 1)
        self.assertTrue(all(b.pool.closed for b in gpu))  # dropped with the pool
        host.release()

    def test_sequence_registration_and_match(self):
        tokens = [t for _, toks in self.blocks for t in toks] + [99, 98]
        with kvreg.Sequence(4, kvreg.ROUTER_SALT, tokens) as seq:
            got = self.gpu.register_sequence(seq)
            self.assertEqual(len(got), 4)
            again = self.host.register_sequence_block(seq, 0)
        evs = self.events()
        self.assertEqual([e.sequence_hash for e in evs], self.hashes)
        self.assertEqual([list(e.tokens) for e in evs], [t for _, t in self.blocks])
        self.assertEqual(self.gpu.match_prefix(self.hashes + [1]), 4)
        self.assertEqual(self.host.match_prefix(self.hashes), 1)
        prefix = self.host.acquire_prefix(self.hashes)
        self.assertEqual([b.handle for b in prefix], [again.handle])
        self.assertEqual(again.refcount(), 2)
        self.assertEqual(got[1].info(), kvreg.BlockInfo(self.blocks[1][0].block_hash,
                                                        self.hashes[1], self.hashes[0], None))
        self.assertEqual(len(self.gpu), 4)
        self.gpu.release_batch(got)
        self.host.release_batch(prefix + [again])

    def test_stats_count_events(self):
        blocks = self.gpu.register_batch(self.blocks)
        self.gpu.release_batch(blocks)
        self.events()
        stats = self.reg.stats()
        self.assertEqual((stats["events_register"], stats["events_remove"], stats["hashes"],
                          stats["pools"], stats["next_event_id"]), (4, 4, 0, 2, 8))


class PollMode(_SharedHashes, unittest.TestCase):
    def make_registry(self):
        return kvreg.Registry("poll", keep_tokens=True)

    def events(self):
        return self.reg.poll()

    def test_drain_and_small_polls(self):
        held = self.gpu.register_batch(self.blocks)
        first = self.reg.poll(max_events=3)
        self.assertEqual(len(first), 3)
        rest = list(self.reg.drain())
        self.assertEqual([e.event_id for e in first + rest], [0, 1, 2, 3])
        self.assertEqual(self.reg.poll(), [])
        self.gpu.release_batch(held)

    def test_full_queue_drops_and_leaves_a_gap(self):
        with kvreg.Registry("poll", poll_capacity=2) as reg:
            pool = reg.pool()
            held = pool.register_batch(self.blocks)
            self.assertEqual(reg.stat("events_dropped"), 2)
            self.assertEqual([e.event_id for e in reg.poll()], [0, 1])
            held.append(pool.register(*support.infos(1, start=1000)[0]))
            self.assertEqual([e.event_id for e in reg.poll()], [4])
            pool.close()  # drops every reference in held

    def test_remove_carries_tokens_only_with_keep_tokens(self):
        for keep in (False, True):
            with self.subTest(keep_tokens=keep), kvreg.Registry(keep_tokens=keep) as reg:
                info, toks = self.blocks[0]
                pool = reg.pool()
                pool.register(info, toks).release()
                reg_ev, rem_ev = reg.poll()
                self.assertEqual(list(reg_ev.tokens), toks)
                self.assertEqual(list(rem_ev.tokens), toks if keep else [])

    def test_concurrent_pollers_copy_safely(self):
        # Tokens point into the registry until the next poll: polls from several threads
        # must still each see intact copies.
        n = 64
        many = support.infos(n, block_size=4, start=10_000)
        got, lock = [], threading.Lock()
        stop = threading.Event()

        def poller():
            while not stop.is_set() or self.reg.stat("events_queued"):
                for e in self.reg.poll(max_events=3):
                    with lock:
                        got.append(e)

        threads = [threading.Thread(target=poller) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for info, toks in many:
                self.gpu.register(info, toks).detach()  # the pool's close drops them
        finally:
            stop.set()
            for t in threads:
                t.join()
        want = {info.sequence_hash: toks for info, toks in many}
        self.assertEqual(len(got), n)
        for e in got:
            self.assertEqual(list(e.tokens), want[e.sequence_hash])


class PollWait(unittest.TestCase):
    """poll(timeout=...) on kvreg_registry_poll_wait, wakeup() and close() of a sleeper."""

    def setUp(self):
        self.reg = kvreg.Registry("poll")
        self.pool = self.reg.pool()
        self.info, self.toks = support.infos(1)[0]

    def tearDown(self):
        self.reg.close()

    def consumer(self, **kw):
        """Start a thread running poll(**kw) once; returns (thread, result list)."""
        out = []

        def run():
            try:
                out.append(self.reg.poll(**kw))
            except BaseException as exc:
                out.append(exc)
        t = threading.Thread(target=run)
        t.start()
        return t, out

    def test_timeouts(self):
        t0 = time.monotonic()
        self.assertEqual(self.reg.poll(timeout=0), [])
        self.assertEqual(self.reg.poll(), [])  # the default does not wait either
        self.assertLess(time.monotonic() - t0, 0.5)
        t0 = time.monotonic()
        self.assertEqual(self.reg.poll(timeout=0.05), [])
        self.assertGreaterEqual(time.monotonic() - t0, 0.045)
        t0 = time.monotonic()
        self.assertEqual(self.reg.poll(timeout=0.0001), [])  # rounds up to 1 ms, not to 0
        blk = self.pool.register(self.info)
        self.assertEqual([e.kind for e in self.reg.poll(timeout=30)], [REG])  # at once
        self.assertLess(time.monotonic() - t0, 5)
        blk.release()

    def test_bad_timeouts(self):
        for bad, exc in ((-1, ValueError), (float("nan"), ValueError), ("1", TypeError),
                         (True, TypeError)):
            with self.subTest(bad), self.assertRaises(exc):
                self.reg.poll(timeout=bad)

    def test_blocking_poll_gets_another_threads_events(self):
        t, out = self.consumer(timeout=None)
        time.sleep(0.05)
        blk = self.pool.register(self.info, self.toks)
        t.join(10)
        self.assertFalse(t.is_alive())
        (ev,) = out[0]
        self.assertEqual((ev.kind, ev.sequence_hash, list(ev.tokens)),
                         (REG, self.info.sequence_hash, self.toks))
        blk.release()

    def test_wakeup_ends_a_blocking_poll_and_is_not_lost(self):
        for timeout in (None, float("inf"), 60):
            with self.subTest(timeout):
                t, out = self.consumer(timeout=timeout)
                time.sleep(0.05)
                self.reg.wakeup()
                t.join(10)
                self.assertFalse(t.is_alive())
                self.assertEqual(out, [[]])
        self.reg.wakeup()  # nobody sleeps: the next wait returns at once
        t0 = time.monotonic()
        self.assertEqual(self.reg.poll(timeout=None), [])
        self.assertLess(time.monotonic() - t0, 5)

    def test_close_wakes_a_blocking_poll(self):
        outcome = []

        def loop():
            try:
                while True:
                    self.reg.poll(timeout=None)
            except kvreg.StaleHandle:
                outcome.append("stale")
        t = threading.Thread(target=loop)
        t.start()
        time.sleep(0.05)
        closer = threading.Thread(target=self.reg.close)
        closer.start()
        closer.join(10)
        t.join(10)
        self.assertFalse(closer.is_alive(), "close() waits forever for a sleeping poll")
        self.assertFalse(t.is_alive())
        self.assertEqual(outcome, ["stale"])

    def test_second_poller_does_not_wait_behind_a_sleeper(self):
        t, out = self.consumer(timeout=None)
        time.sleep(0.05)
        t0 = time.monotonic()
        self.assertEqual(self.reg.poll(timeout=0), [])
        self.assertEqual(self.reg.poll(timeout=0.05), [])
        self.assertLess(time.monotonic() - t0, 2)
        self.reg.wakeup()
        t.join(10)
        self.assertEqual(out, [[]])

    def test_large_wait_returns_every_chunk(self):
        many = support.infos(600, start=5000)
        held = self.pool.register_batch(many)
        evs = self.reg.poll(max_events=10_000, timeout=None)
        self.assertEqual([e.sequence_hash for e in evs], [i.sequence_hash for i, _ in many])
        self.assertEqual(self.reg.poll(max_events=0, timeout=None), [])
        self.pool.release_batch(held)


class InlineMode(_SharedHashes, unittest.TestCase):
    def make_registry(self):
        self._got = []
        return kvreg.Registry("inline", keep_tokens=True, callback=self._got.extend)

    def events(self):
        out, self._got[:] = list(self._got), []
        return out

    def test_callback_runs_on_the_calling_thread(self):
        threads = []
        self.reg.set_callback(lambda evs: threads.append(threading.get_ident()))
        worker = threading.Thread(target=lambda: self.gpu.register(*self.blocks[0]).release())
        worker.start()
        worker.join()
        self.assertEqual(threads, [worker.ident] * 2)

    def test_batch_is_one_callback(self):
        calls = []
        self.reg.set_callback(calls.append)
        held = self.gpu.register_batch(self.blocks)
        self.assertEqual([len(c) for c in calls], [4])
        self.gpu.release_batch(held)
        self.assertEqual([len(c) for c in calls], [4, 4])

    def test_no_callback_counts_dropped(self):
        self.reg.set_callback(None)
        self.gpu.release_batch(self.gpu.register_batch(self.blocks))
        self.assertEqual(self.reg.stat("events_dropped"), 8)
        self.assertEqual(self._got, [])


class ManyThreads(unittest.TestCase):
    def test_per_hash_events_alternate(self):
        # Threads (the GIL is released inside C) register and release the same hashes in
        # their own pools. Whatever the interleaving, each hash's events must alternate
        # Register, Remove, ... in event_id order, ending with a Remove.
        got = []
        blocks = support.infos(16)
        with kvreg.Registry(callback=got.extend) as reg:
            pools = [reg.pool("t%d" % i) for i in range(4)]
            start = threading.Barrier(len(pools))
            failures = []

            def work(pool):
                try:
                    start.wait()
                    for _ in range(20):
                        pool.release_batch(pool.register_batch(blocks))
                except BaseException as exc:
                    failures.append(exc)

            threads = [threading.Thread(target=work, args=(p,)) for p in pools]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])
            self.assertEqual(reg.stat("hashes"), 0)
        ids = [e.event_id for e in got]
        self.assertEqual(ids, list(range(len(got))))
        per_hash = {}
        for e in got:
            per_hash.setdefault(e.sequence_hash, []).append(e.kind)
        self.assertEqual(len(per_hash), 16)
        for kinds in per_hash.values():
            self.assertEqual(kinds, [REG, REM] * (len(kinds) // 2))
