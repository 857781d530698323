"""Hashes against the public vectors, and hash_blocks against the chain primitives."""

import random
import unittest

import kvreg

from . import support


class PublicVectors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = support.load_vectors()

    def test_vectors_present(self):
        # The suite is meaningless against an empty file.
        self.assertGreaterEqual(len(self.cases), 20)

    def test_hash_blocks(self):
        for case in self.cases:
            with self.subTest(case["note"]):
                got = kvreg.hash_blocks(case["tokens"], case["block_size"], case["salt"])
                self.assertEqual(len(got), len(case["blocks"]))
                for i, (g, want) in enumerate(zip(got, case["blocks"])):
                    self.assertEqual(g.block_hash, want["block_hash"])
                    self.assertEqual(g.sequence_hash, want["sequence_hash"])
                    self.assertEqual(g.parent_sequence_hash, want["parent_sequence_hash"])
                    self.assertEqual(g.has_parent, want["parent_sequence_hash"] is not None)
                    self.assertEqual(g.position, i)

    def test_block_and_sequence_hash(self):
        for case in self.cases:
            with self.subTest(case["note"]):
                for want in case["blocks"]:
                    bh = kvreg.block_hash(want["tokens"], case["salt"])
                    self.assertEqual(bh, want["block_hash"])
                    if want["parent_sequence_hash"] is not None:
                        self.assertEqual(kvreg.sequence_hash(want["parent_sequence_hash"], bh,
                                                             case["salt"]),
                                         want["sequence_hash"])

    def test_sequence_extend(self):
        for case in self.cases:
            with self.subTest(case["note"]):
                with kvreg.Sequence(case["block_size"], case["salt"]) as seq:
                    done = seq.extend(case["tokens"])
                    self.assertEqual(done, range(0, len(case["blocks"])))
                    self._check(seq, case)

    def test_sequence_append(self):
        for case in self.cases[:6]:
            with self.subTest(case["note"]):
                with kvreg.Sequence(case["block_size"], case["salt"]) as seq:
                    completed = [seq.append(t) for t in case["tokens"]]
                    bs = case["block_size"]
                    want = [i // bs if (i + 1) % bs == 0 else None
                            for i in range(len(case["tokens"]))]
                    self.assertEqual(completed, want)
                    self._check(seq, case)

    def _check(self, seq, case):
        self.assertEqual(len(seq), len(case["tokens"]))
        self.assertEqual(seq.num_blocks, len(case["blocks"]))
        self.assertEqual(seq.salt, case["salt"])
        self.assertEqual(seq.block_size, case["block_size"])
        for i, want in enumerate(case["blocks"]):
            b = seq.block(i)
            self.assertEqual((b.block_hash, b.sequence_hash, b.parent_sequence_hash, b.position),
                             (want["block_hash"], want["sequence_hash"],
                              want["parent_sequence_hash"], i))
            self.assertEqual(seq.block_tokens(i), want["tokens"])
        self.assertEqual(seq.partial_tokens, case["partial_tokens"])
        self.assertEqual(seq.tokens, case["tokens"])


class CrossCheck(unittest.TestCase):
    """hash_blocks must equal the chain rule applied with block_hash/sequence_hash, and a
    Sequence must agree with hash_blocks after any edit."""

    def setUp(self):
        self.rng = random.Random(20261130)  # fixed: a failure must reproduce

    def _chain(self, tokens, bs, salt):
        out, parent = [], None
        for i in range(len(tokens) // bs):
            bh = kvreg.block_hash(tokens[i * bs:(i + 1) * bs], salt)
            sh = bh if parent is None else kvreg.sequence_hash(parent, bh, salt)
            out.append(kvreg.BlockInfo(bh, sh, parent, i))
            parent = sh
        return out

    def _random_case(self):
        rng = self.rng
        bs = rng.choice([1, 2, 3, 4, 7, 16, 32, 64, 100])
        n = rng.randrange(0, 6 * bs + 3)
        top = rng.choice([10, 1 << 16, (1 << 32) - 1])
        tokens = [rng.randint(0, top) for _ in range(n)]
        salt = rng.choice([0, 1337, (1 << 64) - 1, rng.getrandbits(64)])
        return tokens, bs, salt

    def test_hash_blocks_matches_chain(self):
        for _ in range(200):
            tokens, bs, salt = self._random_case()
            self.assertEqual(kvreg.hash_blocks(tokens, bs, salt), self._chain(tokens, bs, salt),
                             (bs, salt, tokens))

    def test_salt_is_required(self):
        # As in Go and Rust: no default that silently differs from the router's salt.
        for call in (lambda: kvreg.hash_blocks([1, 2, 3, 4], 4), lambda: kvreg.Sequence(4),
                     lambda: kvreg.block_hash([1]), lambda: kvreg.sequence_hash(1, 2)):
            with self.assertRaises(TypeError):
                call()
        self.assertEqual(kvreg.ROUTER_SALT, 1337)

    def test_salt_changes_hashes(self):
        # Guards against a binding that drops the salt on its way to C.
        tokens = list(range(8))
        self.assertNotEqual(kvreg.hash_blocks(tokens, 4, 0), kvreg.hash_blocks(tokens, 4, 1337))

    def test_sequence_edits_match_hash_blocks(self):
        for _ in range(60):
            tokens, bs, salt = self._random_case()
            with kvreg.Sequence(bs, salt, tokens) as seq:
                self.assertEqual(seq.blocks, kvreg.hash_blocks(tokens, bs, salt))
                k = self.rng.randrange(0, len(tokens) + 1)
                seq.truncate(k)
                self.assertEqual(seq.blocks, kvreg.hash_blocks(tokens[:k], bs, salt))
                self.assertEqual(seq.tokens, tokens[:k])
                u = self.rng.randrange(0, k + 1)
                seq.unwind(u)
                self.assertEqual(seq.tokens, tokens[:k - u])
                if k - u:
                    self.assertEqual(seq.pop(), tokens[k - u - 1])
                    self.assertEqual(seq.tokens, tokens[:k - u - 1])
                seq.extend(tokens[len(seq):])
                self.assertEqual(seq.blocks, kvreg.hash_blocks(tokens, bs, salt))
                seq.reset()
                self.assertEqual((len(seq), seq.num_blocks, seq.block_size, seq.salt),
                                 (0, 0, bs, salt))
