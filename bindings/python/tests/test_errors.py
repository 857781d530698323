"""Each KVREG_E* code reaches Python as its own exception class, with C's message."""

import unittest

import kvreg
from kvreg import errors

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
        self.assertCode(kvreg.InvalidArgument, kvreg.hash_blocks, [1, 2], 0)
        self.assertCode(kvreg.InvalidArgument, kvreg.Sequence, 0)
        self.assertCode(kvreg.InvalidArgument, kvreg.Registry, shards=3)  # not a power of 2
        self.assertCode(kvreg.InvalidArgument, self.reg.stat, 999)
        self.assertCode(kvreg.InvalidArgument, self.reg.set_callback, print)  # poll mode
        self.assertCode(kvreg.InvalidArgument, self.pool.register, self.info,
                        self.toks + [9], 4)  # more tokens than block_size

    def test_erange(self):
        with kvreg.Sequence(4, tokens=range(6)) as seq:
            self.assertCode(kvreg.RangeError, seq.block, 1)
            self.assertCode(kvreg.RangeError, seq.unwind, 7)
            self.assertEqual(len(seq), 6)  # unchanged
            self.assertCode(kvreg.RangeError, self.pool.register_sequence, seq, 0, 2)
            self.assertCode(kvreg.RangeError, self.pool.register_sequence_block, seq, 2)

    def test_estate(self):
        self.assertCode(kvreg.StateError, self.pool.register, self.info, self.toks[:3], 4)
        with kvreg.Sequence(4, tokens=range(6)) as seq:
            self.assertCode(kvreg.StateError, self.pool.register_sequence_block, seq, 1)

    def test_eexist(self):
        blk = self.pool.register(self.info)
        self.assertCode(kvreg.AlreadyRegistered, self.pool.register, self.info)
        self.assertEqual(blk.refcount(), 1)

    def test_enoent(self):
        self.assertCode(kvreg.NotFound, self.pool.acquire, 12345)
        with kvreg.Sequence(4) as seq:
            self.assertCode(kvreg.NotFound, seq.pop)
        blk = self.pool.register(self.info, self.toks)  # registry does not keep tokens
        self.assertCode(kvreg.NotFound, blk.tokens)

    def test_estale_from_c(self):
        blk = self.pool.register(self.info)
        copy = kvreg.Block(self.pool, blk.handle)  # a second view of the only reference
        blk.release()
        exc = self.assertCode(kvreg.StaleHandle, copy.release)
        self.assertEqual(exc.code, -7)
        self.assertCode(kvreg.StaleHandle, kvreg.Block(self.pool, 0x1234).release)

    def test_eoverflow(self):
        with kvreg.Registry() as reg:
            pools = [reg.pool() for _ in range(kvreg.MAX_POOLS)]
            self.assertEqual(reg.stat("pools"), kvreg.MAX_POOLS)
            self.assertCode(kvreg.Overflow, reg.pool)
            pools[0].close()
            reg.pool()  # a freed slot is usable again

    def test_ebusy(self):
        seen = []

        def cb(events):
            try:
                reg.set_callback(None)
            except kvreg.Busy as exc:
                seen.append(exc.code)

        with kvreg.Registry(callback=cb) as reg:
            pool = reg.pool()
            pool.register(self.info)
            self.assertEqual(seen, [-8])
