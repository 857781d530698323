"""Each KVREG_E* code reaches Python as its own exception class, with C's message."""

import ctypes
import unittest

import kvreg
from kvreg import _ffi, errors

from . import support

CLASSES = {
    -1: (kvreg.InvalidArgument, ValueError),
    -2: (kvreg.OutOfMemory, MemoryError),
    -3: (kvreg.RangeError, IndexError),
    -4: (kvreg.StateError, None),
    -5: (kvreg.AlreadyRegistered, None),
    -6: (kvreg.NotFound, KeyError),
    -7: (kvreg.StaleHandle, None),
    -8: (kvreg.Busy, None),
    -9: (kvreg.Overflow, OverflowError),
}


class Mapping(unittest.TestCase):
    def test_every_code_has_its_class_and_message(self):
        seen = set()
        for code, (cls, builtin) in CLASSES.items():
            with self.subTest(code):
                exc = errors.from_status(code, kvreg.strerror(code))
                self.assertIs(type(exc), cls)
                self.assertIsInstance(exc, kvreg.KvregError)
                if builtin is not None:
                    self.assertIsInstance(exc, builtin)
                self.assertEqual(exc.code, code)
                self.assertNotEqual(exc.message, kvreg.strerror(-1000))  # not "unknown"
                self.assertIn(exc.message, str(exc))
                seen.add(exc.message)
        self.assertEqual(len(seen), len(CLASSES), "strerror messages are not distinct")

    def test_unknown_code_is_base_class(self):
        exc = errors.from_status(-1000, kvreg.strerror(-1000))
        self.assertIs(type(exc), kvreg.KvregError)
        self.assertEqual(exc.args, (-1000, kvreg.strerror(-1000)))


class FromTheLibrary(unittest.TestCase):
    """The codes as the C library actually returns them."""

    def setUp(self):
        self.reg = kvreg.Registry()
        self.pool = self.reg.pool("p")
        (self.info, self.toks), = support.infos(1)

    def tearDown(self):
        self.reg.close()

    def assertCode(self, cls, fn, *args, **kw):
        with self.assertRaises(cls) as cm:
            fn(*args, **kw)
        self.assertIs(CLASSES[cm.exception.code][0], cls)
        self.assertEqual(cm.exception.message, kvreg.strerror(cm.exception.code))
        return cm.exception

    def test_einval(self):
        self.assertCode(kvreg.InvalidArgument, kvreg.hash_blocks, [1, 2], 0, kvreg.ROUTER_SALT)
        self.assertCode(kvreg.InvalidArgument, kvreg.Sequence, 0, kvreg.ROUTER_SALT)
        self.assertCode(kvreg.InvalidArgument, kvreg.Registry, shards=3)  # not a power of 2
        # one shard holds 16,776,960 blocks: one more cannot be reserved
        self.assertCode(kvreg.InvalidArgument, kvreg.Registry, shards=1, reserve_blocks=16776961)
        with kvreg.Registry(reserve_blocks=1000) as reg:
            self.assertEqual(reg.stat("hashes"), 0)
        self.assertCode(kvreg.InvalidArgument, self.reg.stat, 999)
        self.assertCode(kvreg.InvalidArgument, self.reg.set_callback, print)  # poll mode
        self.assertCode(kvreg.InvalidArgument, self.pool.register, self.info,
                        self.toks + [9], 4)  # more tokens than block_size

    def test_erange(self):
        with kvreg.Sequence(4, kvreg.ROUTER_SALT, range(6)) as seq:
            self.assertCode(kvreg.RangeError, seq.block, 1)
            self.assertCode(kvreg.RangeError, seq.unwind, 7)
            self.assertEqual(len(seq), 6)  # unchanged
            self.assertCode(kvreg.RangeError, self.pool.register_sequence, seq, 0, 2)
            self.assertCode(kvreg.RangeError, self.pool.register_sequence_block, seq, 2)

    def test_estate(self):
        self.assertCode(kvreg.StateError, self.pool.register, self.info, self.toks[:3], 4)
        with kvreg.Sequence(4, kvreg.ROUTER_SALT, range(6)) as seq:
            self.assertCode(kvreg.StateError, self.pool.register_sequence_block, seq, 1)

    def test_eexist(self):
        blk = self.pool.register(self.info)
        self.assertCode(kvreg.AlreadyRegistered, self.pool.register, self.info)
        self.assertEqual(blk.refcount(), 1)
        blk.release()

    def test_enoent(self):
        self.assertCode(kvreg.NotFound, self.pool.acquire, 12345)
        with kvreg.Sequence(4, kvreg.ROUTER_SALT) as seq:
            self.assertCode(kvreg.NotFound, seq.pop)
        blk = self.pool.register(self.info, self.toks)  # registry does not keep tokens
        self.assertCode(kvreg.NotFound, blk.tokens)
        blk.release()

    def test_estale_from_c(self):
        blk = self.pool.register(self.info)
        copy = kvreg.Block(self.pool, blk.handle)  # a second view of the only reference
        blk.release()
        exc = self.assertCode(kvreg.StaleHandle, copy.release)
        self.assertEqual(exc.code, -7)
        self.assertCode(kvreg.StaleHandle, kvreg.Block(self.pool, 0x1234).release)

    def test_contains_errors_raise_never_false(self):
        # Since API 0.2 the yes/no answer comes through an int * output and the status only
        # reports errors: an error must raise, never read as "not held".
        h = self.info.sequence_hash
        blk = self.pool.register(self.info)
        self.assertTrue(self.pool.contains(h))
        self.assertTrue(h in self.pool)
        self.assertTrue(self.reg.contains(blk))  # anything with a sequence_hash
        self.assertFalse(self.pool.contains(h + 1))
        self.assertFalse(self.reg.contains(h + 1))
        # The C pool retired behind the binding's back (as a C caller sharing it could do):
        # C answers KVREG_ESTALE, and the binding must say so.
        _ffi.lib.kvreg_pool_free(self.pool._guard.ptr)
        self.assertCode(kvreg.StaleHandle, self.pool.contains, h)
        self.assertCode(kvreg.StaleHandle, self.pool.__contains__, h)
        self.assertCode(kvreg.StaleHandle, blk.release)
        self.assertFalse(self.reg.contains(h))
        # The raw layer: the status is checked, the output untouched on error.
        present = ctypes.c_int(7)
        self.assertCode(kvreg.InvalidArgument, _ffi.lib.kvreg_pool_contains, None, h,
                        ctypes.byref(present))
        self.assertCode(kvreg.InvalidArgument, _ffi.lib.kvreg_registry_contains, None, h,
                        ctypes.byref(present))
        self.assertCode(kvreg.InvalidArgument, _ffi.lib.kvreg_registry_contains,
                        self.reg._core.guard.ptr, h, None)
        self.assertEqual(present.value, 7)

    def test_eoverflow(self):
        # The library's pool limit (KVREG_MAX_POOLS) is its own business: take ids until it
        # says Overflow, which must come within the ids kvreg.MAX_POOLS allows. All but one
        # are taken through the raw layer (the registry owns and frees those pools): tens of
        # thousands of Pool objects would only slow the test down.
        with kvreg.Registry() as reg:
            first = reg.pool()
            raw, taken = _ffi.pool_p(), 1
            with self.assertRaises(kvreg.Overflow):
                while taken <= kvreg.MAX_POOLS:
                    _ffi.lib.kvreg_pool_new(ctypes.byref(raw), reg._core.guard.ptr, b"raw")
                    taken += 1
            self.assertGreaterEqual(taken, 255)
            self.assertLessEqual(taken, kvreg.MAX_POOLS)
            self.assertEqual(reg.stat("pools"), taken)
            self.assertEqual(_ffi.lib.kvreg_pool_id(raw), taken)
            exc = self.assertCode(kvreg.Overflow, reg.pool)
            self.assertEqual(exc.code, -9)
            first.close()
            again = reg.pool()  # a freed id is usable again
            self.assertEqual(again.id, first.id)

    def test_ebusy(self):
        seen = []

        def cb(events):
            try:
                reg.set_callback(None)
            except kvreg.Busy as exc:
                seen.append(exc.code)

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            pool.register(self.info).release()
            self.assertEqual(seen, [-8, -8])
