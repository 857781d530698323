"""kvreg.wire: encode -> decode round trips, the spec's worked example A, bad payloads, and our
vLLM payloads read by an independent decoder (Debian's python3-msgpack) under vLLM's rules."""

import json
import os
import subprocess
import unittest
from unittest import mock

import kvreg
from kvreg import EventKind, Medium, wire
from kvreg.wire import WireEventType

from . import support, vllm_rules

try:
    import msgpack
except ImportError:  # Debian installs python3-msgpack for /usr/bin/python3 only
    msgpack = None

_HAS_WIRE = bool(kvreg.features() & kvreg.FEATURE_WIRE)
_NEEDS_WIRE = unittest.skipUnless(_HAS_WIRE, "libkvreg built without the wire feature "
                                  "(NotSupported is checked by WithoutWire)")

# A vLLM KVEventBatch written out by hand, byte for byte (current vLLM, map events; as
# tests/wire/wire_examples.h has it):
# [1.5, [BlockStored(H1, H2; tokens 1..4; block_size 2; GPU), BlockRemoved([H2], GPU),
#  AllBlocksCleared], 0]
H1, H2 = 0xdab89baa7b5857c0, 0x1f2e3d4c5b6a7988
EXAMPLE_A = bytes.fromhex("".join("""
93 cb 3f f8 00 00 00 00 00 00 93
8b
 a4 74797065 ab 426c6f636b53746f726564
 ac 626c6f636b5f686173686573 92 cf dab89baa7b5857c0 cf 1f2e3d4c5b6a7988
 b1 706172656e745f626c6f636b5f68617368 c0
 a9 746f6b656e5f696473 94 01 02 03 04
 aa 626c6f636b5f73697a65 02
 a7 6c6f72615f6964 c0
 a6 6d656469756d a3 475055
 a9 6c6f72615f6e616d65 c0
 aa 65787472615f6b657973 92 c0 c0
 a9 67726f75705f696478 00
 b2 6b765f63616368655f737065635f6b696e64 ae 66756c6c5f617474656e74696f6e
84
 a4 74797065 ac 426c6f636b52656d6f766564 ac 626c6f636b5f686173686573 91 cf 1f2e3d4c5b6a7988
 a6 6d656469756d a3 475055 a9 67726f75705f696478 00
81 a4 74797065 b0 416c6c426c6f636b73436c6561726564
00
""".split()))


def _registry_events(n=3, block_size=4, salt=0, medium=Medium.GPU, remove=True):
    """Real events: n chained Registers from one pool, then their Removes."""
    with kvreg.Registry("poll", keep_tokens=True) as reg:
        with reg.pool("p", medium=medium) as pool:
            blocks = support.infos(n, salt=salt, block_size=block_size)
            held = pool.register_batch(blocks, block_size=block_size)
            if remove:
                pool.release_batch(held)
            else:
                for b in held:
                    b.detach()
            return reg.poll(), blocks


class WithoutWire(unittest.TestCase):
    def test_not_built_is_a_clear_not_supported(self):
        if _HAS_WIRE:
            # Stand in for the stub's kvreg_wire_encoder_new (KVREG_ENOTSUP).
            def stub(out, fmt):
                raise kvreg.NotSupported(kvreg._ffi.ENOTSUP, kvreg.strerror(kvreg._ffi.ENOTSUP))
            stub.argtypes = [wire._PROTOTYPES["kvreg_wire_encoder_new"][1][0]]
            with self.assertRaises(kvreg.NotSupported) as cm:
                wire._Handle(object(), stub, None, 1, "x")
        else:
            with self.assertRaises(kvreg.NotSupported) as cm:
                wire.Encoder("vllm")
            with self.assertRaises(kvreg.NotSupported):
                wire.Decoder("vllm")
        self.assertEqual(cm.exception.code, -10)
        # A stub library says so; one older than the wire API names the missing symbols.
        self.assertRegex(str(cm.exception), "without the wire feature|has no wire API")

    def test_missing_symbols_are_not_supported(self):
        with mock.patch.object(wire, "_bound", []), \
                mock.patch.object(wire, "lib", object()):
            with self.assertRaisesRegex(kvreg.NotSupported, "kvreg_wire_encode"):
                wire.Encoder()

    def test_every_wire_header_function_has_a_prototype(self):
        header = os.path.join(os.path.dirname(os.path.dirname(kvreg.__file__)), "..", "..",
                              "include", "kvreg_wire.h")
        if not os.path.isfile(header):
            self.skipTest("include/kvreg_wire.h not found next to the binding")
        import re
        with open(header, encoding="utf-8") as f:
            declared = set(re.findall(r"KVREG_API[^;{]*?\b(kvreg_\w+)\s*\(", f.read()))
        self.assertEqual(declared, set(wire._PROTOTYPES))


@_NEEDS_WIRE
class ExampleA(unittest.TestCase):
    def test_decodes_field_for_field(self):
        self.assertEqual(len(EXAMPLE_A), 285)
        with wire.Decoder("vllm") as dec:
            evs = dec.decode(EXAMPLE_A)
            self.assertEqual(dec.stats(), {"batches": 1, "rejected": 0, "events": 3,
                                           "skipped": 0})
        self.assertEqual([e.type for e in evs],
                         [WireEventType.STORED, WireEventType.REMOVED, WireEventType.CLEARED])
        st, rm, cl = evs
        self.assertEqual(st.block_hashes, (H1, H2))
        self.assertEqual(st.block_hashes[0], 15760518052499183552)  # a Python int, exact
        self.assertIsNone(st.parent_block_hash)
        self.assertEqual((st.block_size, st.token_ids), (2, (1, 2, 3, 4)))
        self.assertEqual((st.medium, st.medium_name, st.lora_name), (Medium.GPU, "GPU", None))
        self.assertEqual((st.group_idx, st.dp_rank, st.ts), (0, 0, 1.5))
        self.assertEqual((st.worker_id, st.event_id, st.tokens_hashes), (0, 0, ()))
        self.assertEqual((rm.block_hashes, rm.medium_name, rm.group_idx), ((H2,), "GPU", 0))
        self.assertEqual(rm.token_ids, ())
        self.assertEqual((cl.block_hashes, cl.medium_name, cl.dp_rank), ((), None, 0))

    def test_truncated_payload_reports_where(self):
        # The offset is where the unfinished value starts: the end itself when the payload
        # stops between values (dp_rank missing), earlier inside one (a string cut short).
        tokens_key = EXAMPLE_A.index(b"\xa9token_ids")
        with wire.Decoder() as dec:
            for cut, where in ((len(EXAMPLE_A) - 1, len(EXAMPLE_A) - 1), (1, 0),
                               (tokens_key + 4, tokens_key)):
                with self.subTest(cut=cut):
                    with self.assertRaises(kvreg.ProtocolError) as cm:
                        dec.decode(EXAMPLE_A[:cut])
                    self.assertEqual(cm.exception.offset, where)
                    self.assertIsInstance(cm.exception, ValueError)
                    self.assertTrue(cm.exception.detail)
            self.assertEqual(dec.stats()["rejected"], 3)
            self.assertEqual(len(dec.decode(EXAMPLE_A)), 3, "the decoder is usable afterwards")

    def test_wrong_type_reports_its_offset(self):
        # block_size's value 0x02 becomes the string "x" (a1 78): a known field of the wrong
        # type rejects the payload at that byte.
        key = bytes.fromhex("aa626c6f636b5f73697a65")
        at = EXAMPLE_A.index(key) + len(key)
        self.assertEqual(EXAMPLE_A[at], 0x02)
        bad = EXAMPLE_A[:at] + b"\xa1x" + EXAMPLE_A[at + 1:]
        with wire.Decoder() as dec:
            with self.assertRaises(kvreg.ProtocolError) as cm:
                dec.decode(bad)
        self.assertEqual(cm.exception.offset, at)
        self.assertIn("offset %d" % at, str(cm.exception))
        self.assertIn(cm.exception.detail, str(cm.exception))

    def test_garbage_is_rejected_not_crashed(self):
        with wire.Decoder() as dec:
            for payload in (b"", b"\xc1", b"\x93" + b"\xff" * 40, bytes(range(256))):
                with self.assertRaises(kvreg.ProtocolError):
                    dec.decode(payload)


@_NEEDS_WIRE
class RoundTrip(unittest.TestCase):
    def test_bad_lora_names_are_invalid_arguments(self):
        # A NUL (C would read only up to it) and bytes that are not UTF-8 (written as a msgpack
        # str, which consumers decode as UTF-8): kvreg.InvalidArgument, itself a ValueError.
        for bad in ("ad\0x", b"ad\xff"):
            with self.subTest(bad=bad), self.assertRaises(kvreg.InvalidArgument):
                wire.Encoder("vllm", lora_name=bad)

    def test_vllm_formats_keep_hashes_tokens_medium_and_batch_fields(self):
        evs, blocks = _registry_events(3, medium=Medium.CPU)
        seq = [info.sequence_hash for info, _ in blocks]
        for fmt in ("vllm", "vllm_legacy"):
            with self.subTest(fmt), \
                    wire.Encoder(fmt, dp_rank=3, block_size=4, lora_name="ad") as enc, \
                    wire.Decoder("vllm") as dec:
                payloads = enc.encode(evs, ts=12.25)
                self.assertEqual(len(payloads), 1)
                got = dec.decode(payloads[0])
                # One chain of Registers is one stored event; the Removes one removed event.
                self.assertEqual([e.type for e in got],
                                 [WireEventType.STORED, WireEventType.REMOVED])
                st, rm = got
                self.assertEqual(st.block_hashes, tuple(seq))
                self.assertEqual(st.token_ids, tuple(t for _, toks in blocks for t in toks))
                self.assertEqual((st.block_size, st.parent_block_hash), (4, None))
                self.assertEqual((st.medium, st.medium_name, st.lora_name),
                                 (Medium.CPU, "CPU", "ad"))
                self.assertEqual((st.dp_rank, st.ts), (3, 12.25))
                self.assertEqual(sorted(rm.block_hashes), sorted(seq))

    def test_dynamo_formats_keep_worker_and_event_ids(self):
        evs, blocks = _registry_events(2, medium=Medium.STORAGE, remove=False)
        for fmt in ("dynamo_json", "dynamo_msgpack"):
            with self.subTest(fmt), wire.Encoder(fmt, worker_id=2 ** 63 + 5) as enc, \
                    wire.Decoder(fmt) as dec:
                got = [e for p in enc.encode(evs) for e in dec.decode(p)]
                self.assertEqual([e.type for e in got], [WireEventType.STORED])
                self.assertEqual(got[0].block_hashes, tuple(b.sequence_hash for b, _ in blocks))
                self.assertEqual(got[0].tokens_hashes, tuple(b.block_hash for b, _ in blocks))
                self.assertEqual((got[0].worker_id, got[0].event_id), (2 ** 63 + 5, 0))
                self.assertEqual(got[0].medium, Medium.STORAGE)

    def test_max_events_splits_into_several_payloads(self):
        evs, blocks = _registry_events(5)
        with wire.Encoder("vllm", max_events=2) as enc, wire.Decoder() as dec:
            payloads = enc.encode(evs, ts=1.0)
            self.assertEqual(len(payloads), 5)  # 10 events, 2 per payload
            got = [e for p in payloads for e in dec.decode(p)]
        stored = [h for e in got if e.type == WireEventType.STORED for h in e.block_hashes]
        removed = [h for e in got if e.type == WireEventType.REMOVED for h in e.block_hashes]
        seq = [info.sequence_hash for info, _ in blocks]
        self.assertEqual(stored, seq)
        self.assertEqual(sorted(removed), sorted(seq))

    def test_cleared_and_snapshot_events_encode(self):
        with kvreg.Registry("poll", keep_tokens=True) as reg, reg.pool("g") as pool:
            blocks = support.infos(2)
            for b in pool.register_batch(blocks):
                b.detach()
            snap = reg.snapshot()
            reg.clear()
            cleared = [e for e in reg.poll() if e.kind == EventKind.CLEARED]
        with wire.Encoder("vllm") as enc, wire.Decoder() as dec:
            got = [e for p in enc.encode(list(snap) + cleared) for e in dec.decode(p)]
        self.assertEqual([e.type for e in got], [WireEventType.STORED, WireEventType.CLEARED])
        self.assertEqual(got[0].block_hashes, tuple(b.sequence_hash for b, _ in blocks))

    def test_event_the_format_cannot_carry_stops_cleanly(self):
        evs, _ = _registry_events(2, remove=False)
        hash_only = evs[1]._replace(tokens=())  # registered by hash only: no token_ids
        with wire.Encoder("vllm") as enc:
            with self.assertRaises(kvreg.StateError) as cm:
                enc.encode([evs[0], hash_only])
            self.assertEqual(cm.exception.index, 1)
            self.assertEqual(len(cm.exception.payloads), 1)  # evs[0], complete and sendable
            with self.assertRaises(kvreg.InvalidArgument):
                enc.encode([evs[0]._replace(medium=9)])
        with wire.Encoder("dynamo_json") as enc:  # Dynamo carries no tokens: fine there
            self.assertEqual(len(enc.encode([evs[0], hash_only])), 1)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            wire.Encoder("sglang")  # decode only
        with self.assertRaises(ValueError):
            wire.Decoder("protobuf")
        with self.assertRaises(kvreg.InvalidArgument):
            wire.Encoder(max_events=0)
        with self.assertRaises(kvreg.InvalidArgument):
            wire.Encoder(dp_rank=2 ** 40)
        enc = wire.Encoder()
        enc.close()
        enc.close()
        with self.assertRaises(kvreg.StaleHandle):
            enc.encode(_registry_events(1)[0])
        self.assertEqual(enc.encode([]), [])


def _independent_decode(payloads):
    """Each payload through python3-msgpack and check_batch: in-process when msgpack imports,
    else in Debian's interpreter. [{"ok": summary} | {"violation": text}]."""
    if msgpack is not None:
        out = []
        for p in payloads:
            try:
                out.append({"ok": vllm_rules.check_batch(
                    msgpack.unpackb(p, raw=False, strict_map_key=True))})
            except vllm_rules.Violation as v:
                out.append({"violation": str(v)})
        return out
    debian = "/usr/bin/python3"
    probe = subprocess.run([debian, "-c", "import msgpack"], capture_output=True) \
        if os.path.exists(debian) else None
    if probe is None or probe.returncode != 0:
        raise unittest.SkipTest("python3-msgpack is not installed (Debian package "
                                "python3-msgpack; .ci/packages/python.txt lists it)")
    res = subprocess.run([debian, vllm_rules.__file__] + [p.hex() for p in payloads],
                         capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise AssertionError("independent decoder failed: %s" % res.stderr)
    return json.loads(res.stdout)


@_NEEDS_WIRE
class IndependentConsumer(unittest.TestCase):
    def test_checker_catches_a_broken_batch(self):
        # The checks themselves must be able to fail: example A passes, a bent copy does not.
        good = _independent_decode([EXAMPLE_A])[0]
        self.assertIn("ok", good)
        self.assertEqual(good["ok"]["events"][0]["block_hashes"], [H1, H2])
        short = EXAMPLE_A.replace(bytes.fromhex("94 01 02 03 04"), bytes.fromhex("93 01 02 03"))
        bad = _independent_decode([short])[0]
        self.assertIn("3 token_ids for 2 blocks of 2", bad.get("violation", ""))

    def test_our_vllm_payloads_follow_vllms_rules(self):
        evs, blocks = _registry_events(4, block_size=4, salt=kvreg.ROUTER_SALT,
                                       medium=Medium.CPU)
        with wire.Encoder("vllm", dp_rank=1, block_size=4, max_events=3) as enc:
            payloads = enc.encode(evs, ts=7.5)
        results = _independent_decode(payloads)
        self.assertEqual([r.get("violation") for r in results], [None] * len(payloads))
        batches = [r["ok"] for r in results]
        self.assertTrue(all(b["ts"] == 7.5 and b["dp_rank"] == 1 for b in batches))
        stored = [e for b in batches for e in b["events"] if e["type"] == "BlockStored"]
        self.assertEqual([h for e in stored for h in e["block_hashes"]],
                         [info.sequence_hash for info, _ in blocks])
        self.assertEqual([t for e in stored for t in e["token_ids"]],
                         [t for _, toks in blocks for t in toks])
        self.assertTrue(all(e["medium"] == "CPU" and e["block_size"] == 4 for e in stored))
        # The second stored event continues the chain: its parent is the first one's last hash.
        self.assertEqual(stored[1]["parent_block_hash"], stored[0]["block_hashes"][-1])


if __name__ == "__main__":
    unittest.main()


@_NEEDS_WIRE
class Fidelity(unittest.TestCase):
    """0.5: decoder limits, the extended fields, re-encoding, snapshot event ids."""

    def test_limits_at_the_edge(self):
        with wire.Decoder(max_payload=len(EXAMPLE_A)) as dec:
            self.assertEqual(len(dec.decode(EXAMPLE_A)), 3)
        with wire.Decoder(max_payload=len(EXAMPLE_A) - 1) as dec:
            with self.assertRaises(kvreg.ProtocolError) as cm:
                dec.decode(EXAMPLE_A)
            self.assertEqual(cm.exception.offset, len(EXAMPLE_A) - 1)
        with wire.Decoder(max_events=2) as dec:
            with self.assertRaises(kvreg.ProtocolError):
                dec.decode(EXAMPLE_A)
        with self.assertRaises(kvreg.InvalidArgument):
            wire.Decoder(max_depth=65)

    def test_extended_fields_and_reencode(self):
        with wire.Decoder() as dec:
            got = dec.decode_extended(EXAMPLE_A)
            self.assertEqual(dec.reencode(), EXAMPLE_A)
        ev, x = got[0]
        self.assertEqual((x.tag, x.shape, x.n_fields), ("BlockStored", "map", 11))
        self.assertEqual(x.kv_cache_spec_kind, ("set", "full_attention"))
        self.assertEqual(x.lora_id, ("nil", None))
        self.assertEqual(x.extra_keys, bytes.fromhex("92c0c0"))
        self.assertEqual(x.cache_salt, ("absent", None))
        self.assertEqual(got[2][1].medium, "absent")  # AllBlocksCleared has no medium
        self.assertEqual(got[2][0].medium_name, None)

    def test_reencode_refuses_what_it_would_lose(self):
        with wire.Decoder() as dec:
            with self.assertRaises(kvreg.StateError):
                dec.reencode()
        with wire.Decoder("dynamo_json") as dec:
            dec.decode(b'{"event":{"data":"cleared"},"zz":1}')  # a key it does not read
            with self.assertRaises(kvreg.StateError):
                dec.reencode()

    def test_dynamo_extended_fields_and_reencode(self):
        # as Dynamo's serde writes it (keys in declaration order, compact JSON / named msgpack)
        owner = {"pool": 3, "slot": "a"}
        doc = {"worker_id": 1, "storage_tier": "disk", "residency_domain": "cache_owner",
               "event": {"event_id": 2, "data": {"stored": {
                   "parent_hash": None, "start_position": 12, "blocks": [
                       {"block_hash": 3, "tokens_hash": 4, "mm_extra_info": {"mm_objects": [
                           {"mm_hash": 2**63 + 1, "offsets": [[0, 2], [3, 4]]}]}},
                       {"block_hash": 5, "tokens_hash": 6, "mm_extra_info": None}]}},
                   "dp_rank": 0},
               "state_source": owner}
        js = json.dumps(doc, separators=(",", ":")).encode()
        with wire.Decoder("dynamo_json") as dec:
            (ev, x), = dec.decode_extended(js)
            self.assertEqual(dec.reencode(), js)
        self.assertEqual(ev.block_hashes, (3, 5))
        self.assertEqual(x.shape, "dynamo")
        self.assertEqual(x.start_position, ("set", 12))
        self.assertEqual(x.residency_domain, ("set", "cache_owner"))
        self.assertEqual(x.state_source,
                         ("set", json.dumps(owner, separators=(",", ":")).encode()))
        self.assertEqual(x.mm_objects, ((0, 2**63 + 1, ((0, 2), (3, 4))),))

    def test_dynamo_ids_contiguous_across_live_and_snapshot(self):
        with kvreg.Registry("poll", keep_tokens=True) as reg, reg.pool("g") as pool:
            for b in pool.register_batch(support.infos(2)):
                b.detach()
            live = list(reg.poll())
            snap = list(reg.snapshot())
        with wire.Encoder("dynamo_json", max_events=1) as enc, \
                wire.Decoder("dynamo_json") as dec:
            ids = [e.event_id for batch in (live, snap, live[:1]) for p in enc.encode(batch)
                   for e in dec.decode(p)]
            self.assertEqual(ids, list(range(len(ids))))
            self.assertEqual(enc.next_event_id, len(ids))
        with self.assertRaises(ValueError):
            wire.Encoder("dynamo_json", event_ids="other")

    def test_dynamo_snapshot_ids_are_contiguous(self):
        with kvreg.Registry("poll", keep_tokens=True) as reg, reg.pool("g") as pool:
            for b in pool.register_batch(support.infos(3)):
                b.detach()
            snap = list(reg.snapshot())
        with wire.Encoder("dynamo_json", snapshot_event_id=10, max_events=1,
                          event_ids="kvreg") as enc, \
                wire.Decoder("dynamo_json") as dec:
            ids = [e.event_id for p in enc.encode(snap) for e in dec.decode(p)]
            self.assertEqual(ids, [10, 11, 12])
            self.assertEqual(enc.snapshot_event_id, 13)
