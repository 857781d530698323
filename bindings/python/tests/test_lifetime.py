"""Closed objects raise StaleHandle instead of touching freed memory; GC is a safety net."""

import gc
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest
import warnings
import weakref

import kvreg

from . import support


def _child_env():
    """The environment a child interpreter needs to import this kvreg and its library."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(kvreg.__file__)))
    return dict(os.environ, PYTHONPATH=pkg, PYTHONWARNINGS="")


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
                 lambda: pool.match_prefix([1]), lambda: len(pool), lambda: blk.info(),
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
            held = other.register(self.info)
            with self.assertRaises(kvreg.StaleHandle):
                pool.contains(self.info.sequence_hash)
            self.assertTrue(other.contains(self.info.sequence_hash))
            held.release()

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
                foreign = kvreg.Block(reg.pool(), 1)
                pool.release(foreign)  # another pool's block
            self.assertEqual(foreign.detach(), 1)  # (a made-up handle: nothing to release)

    def test_block_of_a_closed_pool_reads_as_released(self):
        # Released, closed, or dropped with its pool: one state, the same answers.
        with kvreg.Registry() as reg:
            pool = reg.pool()
            released, closed, dropped = (pool.register(i) for i, _ in support.infos(3))
            released.release()
            closed.close()
            pool.close()
            for blk in (released, closed, dropped):
                with self.subTest(blk=blk):
                    self.assertTrue(blk.released)
                    self.assertIn("released", repr(blk))
                    for call in (blk.release, blk.close, blk.detach, blk.info, blk.refcount):
                        with self.assertRaises(kvreg.StaleHandle):
                            call()
                    with blk:  # leaving a with block is quiet for all three
                        pass

    def test_what_is_open_at_exit_is_reported(self):
        # At exit the registry's safety net runs before any Pool or Block is collected, so
        # its one ResourceWarning names the pools left open and the blocks they still hold.
        script = textwrap.dedent("""
            import kvreg
            reg = kvreg.Registry()
            pool, idle = reg.pool("G1"), reg.pool("G2")
            blocks = [pool.register(b) for b in kvreg.hash_blocks(range(12), 4, 1337)]
            done = reg.pool("closed")
            done.close()
        """)
        res = subprocess.run([sys.executable, "-X", "dev", "-c", script], capture_output=True,
                             text=True, timeout=60, env=_child_env())
        self.assertEqual(res.returncode, 0, res.stderr)
        warnings_seen = [line for line in res.stderr.splitlines() if "ResourceWarning" in line]
        self.assertEqual(len(warnings_seen), 1, res.stderr)
        self.assertIn("name='G1' holding 3 blocks", warnings_seen[0])
        self.assertIn("name='G2' holding 0 blocks", warnings_seen[0])
        self.assertNotIn("closed", warnings_seen[0].split("pools still open")[1])

    def test_callback_exception_is_reported_once(self):
        # Uncaught, and raised inside with blocks whose exit releases blocks, which runs the
        # failing callback again: the first error is reported once with its own traceback
        # (the line that caused it), the second only as a note on it.
        head = textwrap.dedent("""
            import kvreg
            def cb(events):
                raise RuntimeError("callback failed here")
            info = kvreg.hash_blocks(range(4), 4, 1337)[0]
        """)
        bodies = {
            "plain": "reg = kvreg.Registry(callback=cb)\npool = reg.pool()\n"
                     "blk = pool.register(info)  # FIRST\n",
            "with pool": "with kvreg.Registry(callback=cb) as reg:\n"
                         "    with reg.pool() as pool:\n"
                         "        blk = pool.register(info)  # FIRST\n",
            "with block": "reg = kvreg.Registry(callback=lambda events: None)\n"
                          "pool = reg.pool()\n"
                          "with pool.register(info) as blk:\n"
                          "    reg.set_callback(cb)\n"
                          "    raise KeyError('FIRST')\n",
        }
        for name, body in bodies.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "script.py")  # a file: tracebacks show its lines
                with open(path, "w") as f:
                    f.write(head + body)
                res = subprocess.run([sys.executable, "-X", "dev", path], capture_output=True,
                                     text=True, timeout=60, env=_child_env())
                self.assertNotEqual(res.returncode, 0)
                errors = [line for line in res.stderr.splitlines()
                          if line.startswith(("RuntimeError", "KeyError"))]
                self.assertEqual(len(errors), 1, res.stderr)
                self.assertIn("FIRST", res.stderr)  # the original error's traceback
                self.assertNotIn("During handling", res.stderr)
                if name != "plain":
                    self.assertIn("the event callback raised again", res.stderr)

    def test_sequence_close(self):
        seq = kvreg.Sequence(4, kvreg.ROUTER_SALT, range(8))
        seq.close()
        seq.close()
        with self.assertRaises(kvreg.StaleHandle):
            seq.extend([1])
        with self.assertRaises(kvreg.StaleHandle):
            len(seq)
        with kvreg.Registry() as reg:
            with self.assertRaises(kvreg.StaleHandle):
                pool = reg.pool()
                pool.register_sequence(seq)


class _Leaks:
    """Collect the ResourceWarnings of a block of code (whatever the warning filters)."""

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self.caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        gc.collect()
        self._cm.__exit__(*exc)

    @property
    def messages(self):
        return [str(w.message) for w in self.caught if issubclass(w.category, ResourceWarning)]


class GarbageCollection(unittest.TestCase):
    """One rule: release and close explicitly. Garbage collection never changes what the
    registry holds and never runs a callback; it only reports what was forgotten with a
    ResourceWarning (and frees a forgotten Registry, which emits no events)."""

    def setUp(self):
        (self.info, self.toks), = support.infos(1)
        self.h = self.info.sequence_hash

    def test_pool_keeps_registry_alive(self):
        pool = kvreg.Registry().pool()
        gc.collect()
        blk = pool.register(self.info)
        self.assertTrue(pool.registry.contains(blk.sequence_hash))
        pool.registry.close()

    def test_dropped_pool_warns_and_emits_nothing(self):
        for delivery in ("poll", "inline"):
            with self.subTest(delivery):
                got = []
                kw = {"callback": got.extend} if delivery == "inline" else {}
                with kvreg.Registry(delivery, **kw) as reg:
                    pool = reg.pool("tier")
                    pool.register(self.info, self.toks).detach()
                    reg.poll() if delivery == "poll" else got.clear()
                    pool_ref = weakref.ref(pool)
                    with _Leaks() as leaks:
                        del pool
                    self.assertIsNone(pool_ref())
                    self.assertEqual(len(leaks.messages), 1, leaks.messages)
                    self.assertIn("kvreg.Pool", leaks.messages[0])
                    self.assertIn("'tier'", leaks.messages[0])
                    # Its reference stays held: no Remove event, no callback at GC time.
                    self.assertEqual(reg.poll() if delivery == "poll" else got, [])
                    self.assertTrue(reg.contains(self.h))
                    self.assertEqual(reg.stat("pools"), 1)
                    self.assertEqual(reg.stat("events_remove"), 0)
                # Closing the registry frees it all, still without an event.
                self.assertEqual(got, [])

    def test_dropped_block_warns_and_keeps_its_reference(self):
        with kvreg.Registry("poll") as reg:
            pool = reg.pool()
            with _Leaks() as leaks:
                pool.register(self.info)  # the Block is dropped at once
            self.assertEqual(len(leaks.messages), 1, leaks.messages)
            self.assertIn("unreleased kvreg.Block", leaks.messages[0])
            self.assertEqual([e.kind for e in reg.poll()], [kvreg.EventKind.REGISTER])
            again = pool.acquire(self.h)
            self.assertEqual(again.refcount(), 2)  # the dropped reference is still there
            again.release()
            self.assertEqual(reg.poll(), [])
            with _Leaks() as leaks:
                pool.close()  # drops it: Remove now, and no warning afterwards
                del again
            self.assertEqual([e.kind for e in reg.poll()], [kvreg.EventKind.REMOVE])
            self.assertEqual(leaks.messages, [])

    def test_detach_hands_the_reference_over_without_warning(self):
        with kvreg.Registry("poll") as reg:
            pool = reg.pool()
            with _Leaks() as leaks:
                blk = pool.register(self.info)
                handle = blk.detach()
                self.assertTrue(blk.released)
                with self.assertRaises(kvreg.StaleHandle):
                    blk.detach()
                with self.assertRaises(kvreg.StaleHandle):
                    blk.release()
                del blk
            self.assertEqual(leaks.messages, [])
            self.assertEqual(pool.acquire(self.h).detach(), handle)
            # Two references are held; a Block object takes over one each.
            first, second = kvreg.Block(pool, handle), kvreg.Block(pool, handle)
            self.assertEqual(first.refcount(), 2)
            first.release()
            second.release()
            self.assertEqual([e.kind for e in reg.poll()],
                             [kvreg.EventKind.REGISTER, kvreg.EventKind.REMOVE])

    def test_dropped_registry_warns_and_is_freed_without_events(self):
        got = []
        reg = kvreg.Registry(callback=got.extend)
        pool = reg.pool()
        pool.register(self.info).detach()
        pool.close()  # Remove
        pool2 = reg.pool()
        pool2.register(self.info).detach()
        core, reg_ref = reg._core, weakref.ref(reg)
        with _Leaks() as leaks:
            del pool, pool2  # the open pool warns; its reference stays held
            del reg
        self.assertIsNone(reg_ref())
        self.assertTrue(core.guard.closed)  # freed
        self.assertEqual([m.split(" ")[0] for m in leaks.messages],
                         ["kvreg.Pool", "kvreg.Registry"])
        self.assertEqual([e.kind for e in got], [kvreg.EventKind.REGISTER,
                                                 kvreg.EventKind.REMOVE,
                                                 kvreg.EventKind.REGISTER])

    def test_closed_and_released_objects_do_not_warn(self):
        with _Leaks() as leaks:
            reg = kvreg.Registry()
            pool, other = reg.pool(), reg.pool()
            pool.register(self.info).release()
            held = other.register(self.info)
            other.close()
            seq = kvreg.Sequence(4, kvreg.ROUTER_SALT, range(8))  # memory only: GC frees it quietly
            self.assertEqual(pool.release_batch(pool.register_sequence(seq)), [None, None])
            reg.close()
            del reg, pool, other, held, seq
        self.assertEqual(leaks.messages, [])

    def test_sequence_finalizer(self):
        seq = kvreg.Sequence(4, kvreg.ROUTER_SALT)
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
