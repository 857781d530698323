"""Every accepted token-buffer kind hashes like a plain list; bad buffers are refused."""

import ctypes
import unittest
from array import array

import kvreg
from kvreg import _buffers

from . import support

_U32 = next(c for c in "ILH" if array(c).itemsize == 4)


class TokenBuffers(unittest.TestCase):
    def setUp(self):
        case = support.load_vectors()[0]  # tokens 1..10, block size 4, salt 1337
        self.tokens, self.bs, self.salt = case["tokens"], case["block_size"], case["salt"]
        self.want = [(b["block_hash"], b["sequence_hash"]) for b in case["blocks"]]

    def kinds(self):
        arr = array(_U32, self.tokens)
        raw = arr.tobytes()  # native uint32 memory
        return {
            "list": list(self.tokens),
            "tuple": tuple(self.tokens),
            "array": arr,
            "bytes": raw,
            "bytearray": bytearray(raw),
            "memoryview-I": memoryview(array(_U32, self.tokens)),
            "memoryview-readonly-I": memoryview(raw).cast("I"),
            "memoryview-B": memoryview(bytearray(raw)),
            "memoryview-strided": memoryview(array(_U32, [t for t in self.tokens
                                                          for _ in (0, 1)]))[::2],
            "generator": (t for t in self.tokens),
        }

    def test_kinds_hash_identically(self):
        for name, value in self.kinds().items():
            with self.subTest(name):
                got = [(b.block_hash, b.sequence_hash)
                       for b in kvreg.hash_blocks(value, self.bs, self.salt)]
                self.assertEqual(got, self.want)

    def test_kinds_in_sequence_and_register(self):
        block_tokens = self.tokens[:4]
        info = kvreg.hash_blocks(block_tokens, 4, self.salt)[0]
        for name, value in self.kinds().items():
            if name == "generator":
                continue
            with self.subTest(name):
                with kvreg.Sequence(self.bs, self.salt, value) as seq:
                    self.assertEqual(seq.tokens, self.tokens)
                with kvreg.Registry(keep_tokens=True) as reg:
                    blk = reg.pool().register(info, memoryview(array(_U32, block_tokens)), 4)
                    self.assertEqual(blk.tokens(), block_tokens)

    def test_writable_u32_buffer_is_not_copied(self):
        arr = array(_U32, self.tokens)
        buf = _buffers.tokens(arr)
        self.assertEqual(ctypes.addressof(buf.ptr.contents), arr.buffer_info()[0])
        ba = bytearray(arr.tobytes())
        buf = _buffers.tokens(ba)
        self.assertEqual(ctypes.addressof(buf.ptr.contents),
                         ctypes.addressof(ctypes.c_char.from_buffer(ba)))

    def test_empty_buffers(self):
        for value in ([], (), b"", bytearray(), array(_U32), memoryview(b"")):
            with self.subTest(type(value).__name__):
                self.assertEqual(kvreg.hash_blocks(value, 4, 0), [])
                # Empty input is the XXH3 of zero bytes; equal for every kind.
                self.assertEqual(kvreg.block_hash(value, 7), kvreg.block_hash([], 7))

    def test_wrong_item_types_refused(self):
        for value in (array("Q", self.tokens), array("H", self.tokens),
                      memoryview(array("d", [1.0, 2.0]))):
            with self.subTest(getattr(value, "format", getattr(value, "typecode", "?"))):
                with self.assertRaises(TypeError):
                    kvreg.hash_blocks(value, 4, 0)
        with self.assertRaises(TypeError):
            kvreg.hash_blocks("abcd", 4, 0)
        with self.assertRaises(TypeError):
            kvreg.hash_blocks([1, 2, 3.5, 4], 4, 0)

    def test_ragged_bytes_refused(self):
        with self.assertRaises(kvreg.InvalidArgument):
            kvreg.hash_blocks(b"\x01\x00\x00", 1, 0)

    def test_out_of_range_tokens_refused(self):
        for bad in ([-1], [1 << 32]):
            with self.subTest(bad):
                with self.assertRaises(kvreg.InvalidArgument):
                    kvreg.block_hash(bad, 0)
        # The top of the range is fine.
        kvreg.block_hash([(1 << 32) - 1], 0)

    def test_out_of_range_integers_refused(self):
        # ctypes would wrap these silently into valid-looking values.
        with self.assertRaises(kvreg.InvalidArgument):
            kvreg.hash_blocks([1], 1 << 32, 0)
        with self.assertRaises(kvreg.InvalidArgument):
            kvreg.block_hash([1], -1)
        with self.assertRaises(kvreg.InvalidArgument):
            kvreg.sequence_hash(1 << 64, 0, 0)
        with self.assertRaises(TypeError):
            kvreg.block_hash([1], salt=1.0)
