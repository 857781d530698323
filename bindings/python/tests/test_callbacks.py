"""Inline callbacks: exceptions are never lost, re-entrancy works, trampolines stay alive."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import unittest
from unittest import mock

import kvreg
from kvreg import EventKind

from . import support


class Boom(Exception):
    pass


class CallbackExceptions(unittest.TestCase):
    def setUp(self):
        self.blocks = support.infos(3)

    def test_reraised_from_register_with_result(self):
        def cb(events):
            raise Boom(events[0].sequence_hash)

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            with self.assertRaises(Boom) as cm:
                pool.register(*self.blocks[0])
            self.assertEqual(cm.exception.args, (self.blocks[0][0].sequence_hash,))
            # C registered the block before the callback ran: the reference is handed over.
            blk = cm.exception.kvreg_result
            self.assertIsInstance(blk, kvreg.Block)
            self.assertEqual(blk.refcount(), 1)
            self.assertTrue(pool.contains(self.blocks[0][0].sequence_hash))
            # Nothing stays pending: the next call that emits no event does not raise.
            pool.acquire(self.blocks[0][0].sequence_hash).release()
            with self.assertRaises(Boom):
                blk.release()  # the Remove event raises too; the reference is gone
            self.assertTrue(blk.released)

    def test_reraised_from_batch_and_release(self):
        calls = []

        def cb(events):
            calls.append([e.kind for e in events])
            raise Boom()

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            with self.assertRaises(Boom) as cm:
                pool.register_batch(self.blocks)
            blocks = cm.exception.kvreg_result
            self.assertEqual(len(blocks), 3)
            with self.assertRaises(Boom):
                blocks[0].release()
            self.assertTrue(blocks[0].released)  # C did release it
            with self.assertRaises(Boom):
                pool.release_batch(blocks[1:])
            self.assertTrue(all(b.released for b in blocks))
            with self.assertRaises(Boom) as fourth:
                # the 4th Register; then pool close removes it
                pool.register(*support.infos(1, start=500)[0])
            with self.assertRaises(Boom):
                pool.close()
            self.assertTrue(fourth.exception.kvreg_result.pool.closed)
            self.assertEqual(calls, [[EventKind.REGISTER] * 3, [EventKind.REMOVE],
                                     [EventKind.REMOVE] * 2, [EventKind.REGISTER],
                                     [EventKind.REMOVE]])

    def test_library_error_inside_callback_propagates(self):
        def cb(events):
            reg.set_callback(None)  # Busy: not allowed from a callback

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            with self.assertRaises(kvreg.Busy) as cm:
                pool.register(*self.blocks[0])
            self.assertIsInstance(cm.exception.kvreg_result, kvreg.Block)

    def test_exceptions_beyond_the_first_are_reported(self):
        seen = []
        old, sys.unraisablehook = sys.unraisablehook, seen.append
        try:
            def cb(events):
                if events[0].sequence_hash == self.blocks[0][0].sequence_hash:
                    # delivered after this callback; registry close drops the reference
                    pool.register(*self.blocks[1]).detach()
                raise Boom(events[0].sequence_hash)

            with kvreg.Registry(callback=cb) as reg:
                pool = reg.pool()
                with self.assertRaises(Boom) as cm:
                    pool.register(*self.blocks[0])
        finally:
            sys.unraisablehook = old
        self.assertEqual(cm.exception.args, (self.blocks[0][0].sequence_hash,))
        self.assertEqual([type(s.exc_value) for s in seen], [Boom])
        self.assertEqual(seen[0].exc_value.args, (self.blocks[1][0].sequence_hash,))

    def test_without_python_caller_goes_to_unraisablehook(self):
        # A callback reached when no binding call is running on the thread (a C caller in
        # another library) has nobody to re-raise to.
        seen = []
        old, sys.unraisablehook = sys.unraisablehook, seen.append
        try:
            with kvreg.Registry(callback=lambda evs: 1 / 0) as reg:
                reg._core.cfunc(None, 0, None)
        finally:
            sys.unraisablehook = old
        self.assertEqual([type(s.exc_value) for s in seen], [ZeroDivisionError])


class ExceptionsAcrossThreads(unittest.TestCase):
    """A callback runs on whichever thread is delivering: the thread whose call caused the
    events, or another thread that was delivering at the time. Its exception belongs to the
    thread that ran it, and to nobody else."""

    ROUNDS = 200

    def test_raised_once_on_the_thread_that_ran_the_callback(self):
        # Thread A's events make the callback raise while thread B makes calls of its own.
        # Each exception must surface exactly once, on the thread that ran the callback:
        # from that thread's binding call (flush() included), or through
        # sys.unraisablehook on that thread when one call ran several failing callbacks.
        lock = threading.Lock()
        raised, caught, reported, delivered = [], [], [], [0]

        def cb(events):
            with lock:
                delivered[0] += len(events)
            bad = [e.event_id for e in events if e.pool_id == pool_a.id]
            if bad:
                exc = Boom(threading.get_ident(), bad[0])
                with lock:
                    raised.append(exc)
                raise exc

        def hook(info):
            with lock:
                reported.append((threading.get_ident(), info.exc_value))

        def catch(exc):
            with lock:
                caught.append((threading.get_ident(), exc))

        def work(pool, items):
            start.wait()
            for _ in range(self.ROUNDS):
                try:
                    blocks = pool.register_batch(items)
                except Boom as exc:
                    catch(exc)
                    blocks = exc.kvreg_result  # the call itself succeeded
                try:
                    pool.release_batch(blocks)
                except Boom as exc:
                    catch(exc)
            try:
                reg.flush()
            except Boom as exc:
                catch(exc)

        old, sys.unraisablehook = sys.unraisablehook, hook
        try:
            with kvreg.Registry(callback=cb) as reg:
                pool_a, pool_b = reg.pool("a"), reg.pool("b")
                start = threading.Barrier(2)
                threads = [threading.Thread(target=work, args=(pool_a, support.infos(4))),
                           threading.Thread(target=work,
                                            args=(pool_b, support.infos(4, start=1000)))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                reg.flush()  # raises nothing: this thread ran no callback
                stats = reg.stats()
        finally:
            sys.unraisablehook = old
        self.assertEqual(delivered[0], stats["events_register"] + stats["events_remove"])
        self.assertEqual(stats["events_dropped"], 0)
        self.assertGreater(len(raised), 0)
        surfaced = caught + reported
        self.assertEqual(sorted(id(e) for _, e in surfaced), sorted(id(e) for e in raised),
                         "each exception must surface exactly once")
        for thread, exc in surfaced:
            self.assertIsInstance(exc, Boom)
            self.assertEqual(thread, exc.args[0], "surfaced on a thread that did not run it")

    def test_flush_raises_what_its_delivery_ran(self):
        # With several threads, flush() may deliver earlier events itself, running the
        # callback on this thread. A stand-in for kvreg_registry_flush does just that.
        from kvreg import _ffi
        import kvreg.registry as registry_module

        def cb(events):
            raise Boom(events[0].event_id)

        class DeliveringFlush:
            def __getattr__(self, name):
                return getattr(_ffi.lib, name)

            def kvreg_registry_flush(self, _reg):
                ev = _ffi.kvreg_event(kind=1, pool_id=1, event_id=41)
                reg._core.cfunc(ctypes.pointer(ev), 1, None)
                return 0

        with kvreg.Registry(callback=cb) as reg:
            with mock.patch.object(registry_module, "lib", DeliveringFlush()):
                with self.assertRaises(Boom) as cm:
                    reg.flush()
            self.assertEqual(cm.exception.args, (41,))
            reg.flush()  # raised once: nothing stays pending

    def test_flush_inline_and_poll(self):
        got = []

        def cb(events):
            got.extend(events)
            try:
                reg.flush()  # it would wait for itself
            except kvreg.Busy:
                got.append("busy")

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            pool.register(*support.infos(1)[0]).release()
            reg.flush()
            self.assertEqual(len(got), 4)
            self.assertEqual(got[1::2], ["busy", "busy"])
        with kvreg.Registry("poll") as reg:
            pool = reg.pool()
            pool.register(*support.infos(1)[0]).release()
            reg.flush()
            self.assertEqual(reg.stat("events_queued"), 2)


class Reentrancy(unittest.TestCase):
    def test_callback_may_call_the_registry(self):
        blocks = support.infos(2)
        log = []

        def cb(events):
            for e in events:
                log.append((e.kind, e.sequence_hash))
                if e.kind == EventKind.REGISTER and e.sequence_hash == blocks[0][0].sequence_hash:
                    held = pool.acquire(e.sequence_hash)
                    self.assertEqual(held.refcount(), 2)
                    held.release()
                    # its event comes after this callback; registry close drops it
                    pool.register(*blocks[1]).detach()

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            pool.register(*blocks[0]).detach()
            self.assertEqual(log, [(EventKind.REGISTER, blocks[0][0].sequence_hash),
                                   (EventKind.REGISTER, blocks[1][0].sequence_hash)])

    def test_registry_close_from_callback_is_busy(self):
        errors = []

        def cb(events):
            try:
                reg.close()
            except kvreg.Busy as exc:
                errors.append(exc)

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            pool.register(*support.infos(1)[0]).detach()
            self.assertEqual(len(errors), 1)
            self.assertFalse(reg.closed)
        self.assertTrue(reg.closed)

    def test_pool_close_from_callback(self):
        log = []

        def cb(events):
            log.extend(e.kind for e in events)
            if events[0].kind == EventKind.REGISTER:
                pool.close()

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            blk = pool.register(*support.infos(1)[0])
            self.assertEqual(log, [EventKind.REGISTER, EventKind.REMOVE])
            self.assertTrue(pool.closed)
            with self.assertRaises(kvreg.StaleHandle):
                blk.release()


class TrampolineLifetime(unittest.TestCase):
    def test_callback_survives_losing_every_other_reference(self):
        got = []

        def make():
            return lambda evs: got.extend(evs)

        reg = kvreg.Registry(callback=make())
        reg.set_callback(make())  # the first trampoline is now garbage
        gc.collect()
        pool = reg.pool()
        blk = pool.register(*support.infos(1)[0])
        gc.collect()
        blk.release()
        self.assertEqual([e.kind for e in got], [EventKind.REGISTER, EventKind.REMOVE])
        reg.close()


# Three threads replace the callback while a fourth emits events. Each trial then checks
# that the callback C calls is the one the binding keeps alive (core.callback): if the two
# disagree, C holds a trampoline Python has freed. That used to crash the interpreter
# (SIGSEGV, SIGBUS, SIGILL) or call whatever Python object reused the memory.
_SETTERS_SCRIPT = textwrap.dedent("""
    import sys, threading, kvreg
    sys.setswitchinterval(1e-6)  # interleave the setters as much as possible
    trials, rounds = int(sys.argv[1]), int(sys.argv[2])
    blocks = kvreg.hash_blocks(list(range(16)), 4, kvreg.ROUTER_SALT)
    mismatches = 0
    for trial in range(trials):
        seen = []

        def make(tag):
            def cb(events):
                seen.append(tag)
            cb.tag = tag
            return cb

        with kvreg.Registry(callback=make("first")) as reg:
            pool = reg.pool()
            stop = threading.Event()

            def emit():
                while not stop.is_set():
                    pool.release_batch(pool.register_batch(blocks))

            def setter(k):
                for i in range(rounds):
                    reg.set_callback(make((k, i)))

            emitter = threading.Thread(target=emit)
            emitter.start()
            setters = [threading.Thread(target=setter, args=(k,)) for k in range(3)]
            for t in setters:
                t.start()
            for t in setters:
                t.join()
            stop.set()
            emitter.join()
            del seen[:]
            pool.release_batch(pool.register_batch(blocks))
            if seen != [reg._core.callback.tag] * 2:
                mismatches += 1
    print("mismatches", mismatches)
""")


class ConcurrentSetCallback(unittest.TestCase):
    def test_three_setters_and_an_emitter(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(kvreg.__file__)))]
            + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        res = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _SETTERS_SCRIPT,
                              "60", "50"], env=env, capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(res.returncode, 0, "child died (%d):\n%s"
                         % (res.returncode, res.stderr[-3000:]))
        self.assertEqual(res.stdout.split(), ["mismatches", "0"], res.stderr[-3000:])

    def test_set_callback_from_a_callback_is_busy_without_waiting(self):
        # The setter lock must not be taken from inside a callback: another thread may hold
        # it while C waits for this very callback to return.
        errors, entered, release = [], threading.Event(), threading.Event()

        def slow(events):
            entered.set()
            release.wait(5)
            try:
                reg.set_callback(None)
            except kvreg.Busy as exc:
                errors.append(exc)

        with kvreg.Registry(callback=slow) as reg:
            pool = reg.pool()
            worker = threading.Thread(target=lambda: pool.register(*support.infos(1)[0])
                                      .detach())
            worker.start()
            self.assertTrue(entered.wait(5))
            setter = threading.Thread(target=reg.set_callback, args=(lambda evs: None,))
            setter.start()  # takes the lock, then waits in C for `slow` to return
            time.sleep(0.2)
            release.set()
            worker.join(10)
            setter.join(10)
            self.assertFalse(worker.is_alive() or setter.is_alive(), "deadlock")
            self.assertEqual(len(errors), 1)
