"""Closed objects raise StaleHandle instead of touching freed memory; GC is a safety net."""

import gc
import threading
import unittest
import weakref

import kvreg

from . import support


class UseAfterClose(unittest.TestCase):
    def setUp(self):
        (self.info, self.toks), (self.info2, _) = support.infos(2)

    def test_registry_close(self):
        reg = kvreg.Registry()
        pool = reg.pool()
        blk = pool.register(self.info)
        reg.close()
        reg.close()  # idempotent
        self.assertTrue(reg.closed and pool.closed)
        calls = [lambda: reg.pool(), lambda: reg.poll(), lambda: reg.contains(1),
                 lambda: reg.stats(), lambda: pool.register(self.info2),
                 lambda: pool.acquire(self.info.sequence_hash), lambda: pool.contains(1),
                 lambda: pool.match([1]), lambda: len(pool), lambda: blk.info(),
                 lambda: blk.refcount(), lambda: blk.release()]
        for i, call in enumerate(calls):
            with self.subTest(i):
                with self.assertRaises(kvreg.StaleHandle):
                    call()
        pool.close()  # after its registry: a no-op, not a double free

    def test_pool_close(self):
        with kvreg.Registry() as reg:
            pool = reg.pool("a")
            blk = pool.register(self.info)
            pool.close()
            pool.close()
            for call in (lambda: pool.register(self.info2), lambda: pool.acquire(1),
                         lambda: blk.release(), lambda: blk.info()):
                with self.assertRaises(kvreg.StaleHandle):
                    call()
            self.assertFalse(reg.contains(self.info.sequence_hash))
            # The C slot may be reused by a new pool; the old object must not reach it.
            other = reg.pool("b")
            other.register(self.info)
            with self.assertRaises(kvreg.StaleHandle):
                pool.contains(self.info.sequence_hash)
            self.assertTrue(other.contains(self.info.sequence_hash))

    def test_block_context_manager(self):
        with kvreg.Registry() as reg:
            pool = reg.pool()
            with pool.register(self.info) as blk:
                self.assertEqual(blk.refcount(), 1)
            self.assertTrue(blk.released)
            self.assertFalse(pool.contains(self.info.sequence_hash))
            with self.assertRaises(kvreg.StaleHandle):
                blk.release()  # double release
            with pool.register(self.info) as blk:
                pool.close()  # dropped the reference already: leaving is quiet
            with self.assertRaises(kvreg.StaleHandle):
                pool.release(kvreg.Block(reg.pool(), 1))  # another pool's block

    def test_sequence_close(self):
        seq = kvreg.Sequence(4, tokens=range(8))
        seq.close()
        seq.close()
        with self.assertRaises(kvreg.StaleHandle):
            seq.extend([1])
        with self.assertRaises(kvreg.StaleHandle):
            len(seq)
        with kvreg.Registry() as reg:
            with self.assertRaises(kvreg.StaleHandle):
                reg.pool().register_sequence(seq)


class GarbageCollection(unittest.TestCase):
    def test_pool_keeps_registry_alive(self):
        pool = kvreg.Registry().pool()
        gc.collect()
        blk = pool.register(support.infos(1)[0][0])
        self.assertTrue(pool.registry.contains(blk.sequence_hash))

    def test_finalizers_free(self):
        reg = kvreg.Registry()
        pool = reg.pool()
        pool.register(support.infos(1)[0][0])
        core, reg_ref, pool_ref = reg._core, weakref.ref(reg), weakref.ref(pool)
        del reg, pool
        gc.collect()
        self.assertIsNone(reg_ref())
        self.assertIsNone(pool_ref())
        self.assertTrue(core.guard.closed)

    def test_sequence_finalizer(self):
        seq = kvreg.Sequence(4)
        box = seq._box
        del seq
        gc.collect()
        self.assertEqual(box, [None])


class ConcurrentClose(unittest.TestCase):
    def test_close_while_threads_work(self):
        # Workers hammer the registry; close() must wait for calls in flight and every later
        # call must raise StaleHandle. A crash here is a use-after-free.
        reg = kvreg.Registry("poll", poll_capacity=16)
        pools = [reg.pool("p%d" % i) for i in range(3)]
        blocks = support.infos(8)
        running = threading.Barrier(len(pools) + 1)
        outcome = []

        def work(pool):
            rounds = 0
            try:
                while True:
                    got = pool.register_batch(blocks)
                    reg.poll()
                    pool.release_batch([b for b in got if isinstance(b, kvreg.Block)])
                    rounds += 1
                    if rounds == 5:
                        running.wait()
            except kvreg.StaleHandle:
                outcome.append(rounds)
            except BaseException as exc:  # fail the test instead of hanging the barrier
                outcome.append(exc)
                running.abort()
                raise

        threads = [threading.Thread(target=work, args=(p,)) for p in pools]
        for t in threads:
            t.start()
        running.wait()  # every worker is mid-loop (BrokenBarrierError if one died)
        reg.close()
        for t in threads:
            t.join()
        self.assertEqual(len(outcome), len(pools))
        self.assertTrue(all(r >= 5 for r in outcome))


class ConcurrentRelease(unittest.TestCase):
    def test_one_block_released_by_two_threads(self):
        # Exactly one release of a Block may reach C, or the other thread would drop the
        # reference that `keep` owns.
        info = support.infos(1)[0][0]
        with kvreg.Registry() as reg:
            pool = reg.pool()
            for _ in range(50):
                blk = pool.register(info)
                keep = pool.acquire(info.sequence_hash)
                start = threading.Barrier(2)
                outcome = []

                def release():
                    start.wait()
                    try:
                        blk.release()
                        outcome.append("ok")
                    except kvreg.StaleHandle:
                        outcome.append("stale")

                threads = [threading.Thread(target=release) for _ in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self.assertEqual(sorted(outcome), ["ok", "stale"])
                self.assertEqual(keep.refcount(), 1)
                keep.release()
