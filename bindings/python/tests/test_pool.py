"""Pool and Block queries not covered by the event tests."""

import unittest
from array import array

import kvreg

from . import support


class PoolAndBlock(unittest.TestCase):
    def setUp(self):
        self.reg = kvreg.Registry(keep_tokens=True)
        self.pool = self.reg.pool("gpu-0")

    def tearDown(self):
        self.reg.close()

    def test_identity(self):
        other = self.reg.pool()
        self.assertEqual(self.pool.name, "gpu-0")
        self.assertEqual(other.name, "")
        self.assertNotEqual(self.pool.id, other.id)
        self.assertTrue(1 <= self.pool.id <= kvreg.MAX_POOLS)
        self.assertIs(self.pool.registry, self.reg)
        with self.assertRaises(kvreg.InvalidArgument):  # a ValueError, as the library's EINVAL
            self.reg.pool("a\0b")
        other.close()

    def test_large_block_tokens_round_trip(self):
        # Larger than the first buffer tokens() tries, so the resize path runs.
        toks = list(range(1000, 1000 + 1000))
        info = kvreg.hash_blocks(toks, 1000, kvreg.ROUTER_SALT)[0]
        blk = self.pool.register(info, array("I", toks), block_size=1000)
        self.assertEqual(blk.tokens(), toks)
        self.assertEqual(self.reg.stat("token_bytes"), 4000)
        ev, = self.reg.poll()
        self.assertEqual(list(ev.tokens), toks)
        blk.release()

    def test_register_by_hash_only(self):
        info = kvreg.BlockInfo(block_hash=5, sequence_hash=7, parent_sequence_hash=3)
        blk = self.pool.register(info)
        self.assertEqual(blk.info(), kvreg.BlockInfo(5, 7, 3, None))
        with self.assertRaises(kvreg.NotFound):
            blk.tokens()
        ev, = self.reg.poll()
        self.assertEqual((ev.sequence_hash, ev.block_hash, ev.parent_sequence_hash, ev.tokens),
                         (7, 5, 3, ()))
        blk.release()

    def test_batch_reports_per_item(self):
        (a, ta), (b, tb), (c, tc) = support.infos(3)
        first = self.pool.register(a)
        got = self.pool.register_batch([(a, ta), (b, tb), (c, tc[:2])], block_size=4)
        self.assertIsInstance(got[0], kvreg.AlreadyRegistered)
        self.assertIsInstance(got[1], kvreg.Block)
        self.assertIsInstance(got[2], kvreg.StateError)  # a partial block
        self.assertEqual(len(self.pool), 2)
        extra = self.pool.acquire(a.sequence_hash)  # a second reference on a
        res = self.pool.release_batch([first, got[1], first])
        self.assertEqual(res[:2], [None, None])
        self.assertIsInstance(res[2], kvreg.StaleHandle)  # the same Block twice...
        self.assertEqual(extra.refcount(), 1)  # ...must not drop extra's reference
        extra.release()
        self.assertEqual(len(self.pool), 0)
        self.assertEqual(self.pool.register_batch([]), [])

    def test_prefix_and_match_inputs(self):
        blocks = support.infos(3)
        held = self.pool.register_batch(blocks)
        hashes = [i.sequence_hash for i, _ in blocks]
        self.assertEqual(self.pool.match_prefix([]), 0)
        self.assertEqual(self.pool.match_prefix(array("Q", hashes)), 3)
        self.assertEqual(self.pool.match_prefix([i for i, _ in blocks]), 3)  # BlockInfo accepted
        self.assertEqual(self.pool.match_prefix([hashes[0], 999, hashes[2]]), 1)
        with self.assertWarns(DeprecationWarning):  # the 0.2 name still answers
            self.assertEqual(self.pool.match(hashes), 3)
        self.assertEqual(self.pool.acquire_prefix([]), [])
        self.assertEqual(self.pool.acquire_prefix([999] + hashes), [])
        got = self.pool.acquire_prefix(hashes[:2] + [999])
        self.assertEqual([b.sequence_hash for b in got], hashes[:2])
        self.assertTrue(hashes[2] in self.pool)
        self.assertFalse(999 in self.pool)
        self.assertTrue(hashes[0] in self.reg)
        self.assertEqual(self.pool.release_batch(got + held), [None] * 5)
        self.assertEqual(len(self.pool), 0)

    def test_release_type_checks(self):
        with self.assertRaises(TypeError):
            self.pool.release(1234)
        with self.assertRaises(TypeError):
            self.pool.release_batch([1234])
