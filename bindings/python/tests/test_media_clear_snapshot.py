"""The 0.3 core API: pool media in events, Registry.clear() and snapshot resync."""

import unittest

import kvreg
from kvreg import EventKind, Medium

from . import support


class Media(unittest.TestCase):
    def setUp(self):
        self.reg = kvreg.Registry("poll", keep_tokens=True)

    def tearDown(self):
        self.reg.close()

    def test_events_carry_their_pools_medium(self):
        pools = {m: self.reg.pool(m.name.lower(), medium=m) for m in Medium}
        pools[Medium.GPU].close()
        default = self.reg.pool("default")  # kvreg_pool_new(): a GPU pool
        self.assertEqual(default.medium, Medium.GPU)
        with self.reg.pool("by-name", medium="storage") as p:
            self.assertEqual(p.medium, Medium.STORAGE)
        with self.reg.pool("by-int", medium=3) as p:
            self.assertEqual(p.medium, Medium.EXTERNAL)
        self.pools = pools, default  # closed with the registry in tearDown
        blocks = support.infos(3)
        for (info, toks), m in zip(blocks, (Medium.CPU, Medium.STORAGE, Medium.EXTERNAL)):
            pools[m].register(info, toks).detach()
        evs = self.reg.poll()
        self.assertEqual([(e.kind, e.medium, e.pool_id) for e in evs],
                         [(EventKind.REGISTER, m, pools[m].id)
                          for m in (Medium.CPU, Medium.STORAGE, Medium.EXTERNAL)])
        self.assertIsInstance(evs[0].medium, Medium)

    def test_unknown_medium_is_rejected(self):
        with self.assertRaises(kvreg.InvalidArgument):
            self.reg.pool("x", medium=4)  # KVREG_MEDIUM_COUNT
        with self.assertRaises(ValueError):
            self.reg.pool("x", medium="tape")
        self.assertEqual(self.reg.stat("pools"), 0)


class EventModes(unittest.TestCase):
    """events="global": the Remove carries its Register's medium; "per-tier": a pair per tier."""

    def run_offload(self, events):
        with kvreg.Registry("poll", events=events) as reg:
            gpu = reg.pool("gpu")
            cpu = reg.pool("cpu", medium=Medium.CPU)
            (info, toks), = support.infos(1)
            g = gpu.register(info, toks)
            c = cpu.register(info)  # offloaded
            gpu.release(g)          # evicted from the GPU
            cpu.release(c)
            return [(e.kind, e.medium) for e in reg.poll()]

    def test_global_remove_carries_register_medium(self):
        self.assertEqual(self.run_offload(None), [(EventKind.REGISTER, Medium.GPU),
                                                  (EventKind.REMOVE, Medium.GPU)])
        self.assertEqual(self.run_offload("global"), self.run_offload(None))

    def test_per_tier(self):
        self.assertEqual(self.run_offload("per-tier"),
                         [(EventKind.REGISTER, Medium.GPU), (EventKind.REGISTER, Medium.CPU),
                          (EventKind.REMOVE, Medium.GPU), (EventKind.REMOVE, Medium.CPU)])

    def test_bad_mode(self):
        with self.assertRaises(ValueError):
            kvreg.Registry("poll", events="tiers")


class Clear(unittest.TestCase):
    def setUp(self):
        self.reg = kvreg.Registry("poll", keep_tokens=True)
        self.gpu = self.reg.pool("gpu")
        self.cpu = self.reg.pool("cpu", medium=Medium.CPU)

    def tearDown(self):
        self.reg.close()

    def test_one_cleared_event_and_stale_handles(self):
        blocks = support.infos(4)
        held = self.gpu.register_batch(blocks) + [self.cpu.register(*blocks[0])]
        before = self.reg.poll()
        self.assertEqual(len(before), 4)
        self.reg.clear()
        evs = self.reg.poll()
        self.assertEqual(len(evs), 1, "one Cleared, no Remove per hash")
        ev = evs[0]
        self.assertEqual((ev.kind, ev.event_id, ev.pool_id, ev.sequence_hash, ev.medium),
                         (EventKind.CLEARED, before[-1].event_id + 1, 0, 0, Medium.GPU))
        self.assertEqual((len(self.gpu), len(self.cpu), self.reg.stat("hashes")), (0, 0, 0))
        self.assertEqual(self.reg.stat("events_cleared"), 1)
        self.assertEqual(self.reg.stat("token_bytes"), 0)
        for block in held:
            with self.assertRaises(kvreg.StaleHandle):
                block.release()
        # Pools stay usable; an old handle stays stale once its hash is back.
        again = self.gpu.register(*blocks[0])
        with self.assertRaises(kvreg.StaleHandle):
            held[0].refcount()
        self.assertEqual(again.refcount(), 1)
        again.release()
        self.assertEqual([e.kind for e in self.reg.poll()], [EventKind.REGISTER, EventKind.REMOVE])

    def test_clear_of_an_empty_registry_still_emits(self):
        self.reg.clear()
        self.reg.clear()
        self.assertEqual([e.kind for e in self.reg.poll()], [EventKind.CLEARED] * 2)
        self.assertEqual(self.reg.stats()["events_cleared"], 2)


class SnapshotResync(unittest.TestCase):
    """A consumer that lost events rebuilds the registered set from a snapshot plus the
    events from its position on."""

    def test_snapshot_then_later_events_give_the_state(self):
        with kvreg.Registry("poll", keep_tokens=True, poll_capacity=4) as reg:
            gpu, cpu = reg.pool("gpu"), reg.pool("cpu", medium="cpu")
            blocks = support.infos(6)
            held = gpu.register_batch(blocks[:4])
            cpu.register(*blocks[4]).detach()
            self.assertGreater(reg.stat("events_dropped"), 0, "the queue must lose events")
            seen = list(reg.drain())  # the consumer sees a gap in the event ids: resync
            self.assertEqual(len(seen), 4)
            held[3].release()   # Remove of a chain's last block: queued, before the snapshot
            snap = reg.snapshot()
            after = [gpu.register(*blocks[5])]
            held[2].release()
            self.assertEqual(snap.position, 6)   # 5 Registers + 1 Remove before it
            self.assertEqual(len(snap), 4)
            self.assertTrue(all(e.event_id == kvreg.EVENT_ID_SNAPSHOT for e in snap))
            self.assertEqual({e.sequence_hash: e.medium for e in snap},
                             {blocks[0][0].sequence_hash: Medium.GPU,
                              blocks[1][0].sequence_hash: Medium.GPU,
                              blocks[2][0].sequence_hash: Medium.GPU,
                              blocks[4][0].sequence_hash: Medium.CPU})
            order = [e.sequence_hash for e in snap]
            for e in snap:  # parents before children, and the tokens are owned copies
                if e.parent_sequence_hash in order:
                    self.assertLess(order.index(e.parent_sequence_hash),
                                    order.index(e.sequence_hash))
                self.assertEqual(len(e.tokens), 4)

            state = {e.sequence_hash for e in snap}
            for e in reg.drain():
                if e.event_id < snap.position:
                    continue
                if e.kind == EventKind.REGISTER:
                    state.add(e.sequence_hash)
                elif e.kind == EventKind.REMOVE:
                    state.discard(e.sequence_hash)
            expect = {b[0].sequence_hash for b in (blocks[0], blocks[1], blocks[4], blocks[5])}
            self.assertEqual(state, expect)
            self.assertTrue(all(reg.contains(h) for h in expect))
            for b in held[:2] + after:
                b.release()
        # Owned copies: usable after the registry is gone.
        self.assertEqual(len(list(snap)), 4)
        by_hash = {e.sequence_hash: e.tokens for e in snap}
        self.assertEqual(by_hash[blocks[0][0].sequence_hash], tuple(blocks[0][1]))
        self.assertEqual(snap[len(snap) - 1], list(snap)[-1])


class Features(unittest.TestCase):
    def test_features_are_known_bits(self):
        f = kvreg.features()
        self.assertEqual(f & ~(kvreg.FEATURE_WIRE | kvreg.FEATURE_ZMQ), 0)


if __name__ == "__main__":
    unittest.main()
