"""Inline callbacks: exceptions are never lost, re-entrancy works, trampolines stay alive."""

import gc
import sys
import unittest

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

    def test_reraised_from_batch_and_release(self):
        calls = []

        def cb(events):
            calls.append([e.kind for e in events])
            raise Boom()
            with self.assertRaises(Boom):
                blk.release()  # the Remove event raises too; the reference is gone
            self.assertTrue(blk.released)

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
            with self.assertRaises(Boom):
                # the 4th Register; then pool close removes it
                pool.register(*support.infos(1, start=500)[0])
            with self.assertRaises(Boom) as fourth:
                pool.close()
            self.assertEqual(calls, [[EventKind.REGISTER] * 3, [EventKind.REMOVE],
                                     [EventKind.REMOVE] * 2, [EventKind.REGISTER],
                                     [EventKind.REMOVE]])

    def test_library_error_inside_callback_propagates(self):
        def cb(events):
            reg.set_callback(None)  # Busy: not allowed from a callback
            self.assertTrue(fourth.exception.kvreg_result.pool.closed)

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
