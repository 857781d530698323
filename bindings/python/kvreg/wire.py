"""Wire formats (include/kvreg_wire.h): kvreg events to the payloads engines and routers
exchange (vLLM KVEventBatch, Dynamo RouterEvent), and decoded payloads back to Python values.

    enc = kvreg.wire.Encoder("vllm", dp_rank=0, block_size=16)
    payloads = enc.encode(reg.poll())          # [bytes, ...]: send each as one ZMQ frame
    dec = kvreg.wire.Decoder("vllm")
    for ev in dec.decode(payloads[0]): ...     # [WireEvent, ...]

An Encoder or Decoder is used by one thread at a time (a lock here serialises calls from
several threads). Both hold C memory: close() them (or use a with block); one garbage
collected open is freed with a ResourceWarning.

The library may be built without the wire feature (kvreg.features() lacks FEATURE_WIRE):
creating an Encoder or Decoder then raises NotSupported. Decoding bad bytes raises
ProtocolError with `offset` (byte offset of the problem) and `detail` (the decoder's text).
"""

import ctypes
import enum
import threading
import warnings
import weakref
from typing import NamedTuple, Optional, Tuple

from . import _buffers, _ffi, errors
from .events import Medium

__all__ = ["Format", "WireEventType", "WireEvent", "WireEventExt", "Encoder", "Decoder",
           "MEDIUM_UNKNOWN"]

lib = _ffi.lib

# ---- constants (kvreg_wire.h) ----------------------------------------------------------------


class Format(enum.IntEnum):
    VLLM = 1            # vLLM KVEventBatch with map events (vLLM >= 0.24, Dynamo, llm-d)
    VLLM_LEGACY = 2     # the same with positional (array) events
    DYNAMO_JSON = 3     # Dynamo RouterEvent objects as a JSON array
    DYNAMO_MSGPACK = 4  # the same as MessagePack maps
    SGLANG = 5          # decode only


class WireEventType(enum.IntEnum):
    STORED = 1   # vLLM BlockStored, Dynamo stored
    REMOVED = 2  # vLLM BlockRemoved, Dynamo removed
    CLEARED = 3  # vLLM AllBlocksCleared, Dynamo cleared


# A decoded medium whose name the library does not know (the name is in medium_name).
MEDIUM_UNKNOWN = 0xFFFFFFFF

_OPT_DP_RANK = 1
_OPT_MAX_EVENTS = 2
_OPT_WORKER_ID = 3
_OPT_BLOCK_SIZE = 4
_OPT_SNAPSHOT_EVENT_ID = 5   # 0.5's name of _OPT_NEXT_EVENT_ID
_OPT_NEXT_EVENT_ID = 5
_OPT_EVENT_IDS = 6
_EVENT_IDS = {"contiguous": 0, "kvreg": 1}
_DEC_OPTS = {"max_payload": 1, "max_depth": 2, "max_events": 3}
_FIELD_FORMS = {0: "absent", 1: "nil", 2: "set"}
_SHAPES = {1: "map", 2: "array", 3: "dynamo"}

_STATS = {"batches": 1, "rejected": 2, "events": 3, "skipped": 4}

# ---- ctypes mirror of kvreg_wire.h -------------------------------------------------------------
c_double = ctypes.c_double
c_i64 = ctypes.c_int64


class kvreg_wire_event(ctypes.Structure):
    _fields_ = [
        ("type", _ffi.c_u32),
        ("medium", _ffi.c_u32),
        ("block_hashes", _ffi.u64_p),
        ("n_block_hashes", _ffi.c_size),
        ("parent_block_hash", _ffi.c_u64),
        ("has_parent", _ffi.c_u32),
        ("block_size", _ffi.c_u32),
        ("token_ids", _ffi.u32_p),
        ("n_token_ids", _ffi.c_size),
        ("medium_name", ctypes.c_char_p),
        ("lora_name", ctypes.c_char_p),
        ("group_idx", c_i64),
        ("has_group_idx", _ffi.c_u32),
        ("has_dp_rank", _ffi.c_u32),
        ("dp_rank", c_i64),
        ("ts", c_double),
        ("worker_id", _ffi.c_u64),
        ("event_id", _ffi.c_u64),
        ("tokens_hashes", _ffi.u64_p),
        ("reserved", _ffi.c_u64 * 3),
    ]


if ctypes.sizeof(ctypes.c_void_p) == 8:
    assert ctypes.sizeof(kvreg_wire_event) == 152, ctypes.sizeof(kvreg_wire_event)


class kvreg_wire_mm_object(ctypes.Structure):
    _fields_ = [
        ("mm_hash", _ffi.c_u64),
        ("block", _ffi.c_u32),
        ("n_offsets", _ffi.c_u32),
        ("first_offset", _ffi.c_size),
    ]


class kvreg_wire_event_ext(ctypes.Structure):
    _fields_ = [
        ("struct_size", _ffi.c_u32),
        ("shape", _ffi.c_u32),
        ("tag", ctypes.c_char_p),
        ("n_fields", _ffi.c_u32),
        ("medium_form", _ffi.c_u32),
        ("lora_name_form", _ffi.c_u32),
        ("lora_id_form", _ffi.c_u32),
        ("lora_id", c_i64),
        ("token_pairs", _ffi.c_u32),
        ("group_idx_form", _ffi.c_u32),
        ("pair_token_ids", _ffi.u32_p),
        ("n_pair_token_ids", _ffi.c_size),
        ("cache_salt", ctypes.c_char_p),
        ("cache_salt_form", _ffi.c_u32),
        ("kv_cache_spec_kind_form", _ffi.c_u32),
        ("kv_cache_spec_kind", ctypes.c_char_p),
        ("sliding_window_form", _ffi.c_u32),
        ("extra_keys_form", _ffi.c_u32),
        ("kv_cache_spec_sliding_window", c_i64),
        ("extra_keys", ctypes.POINTER(ctypes.c_uint8)),
        ("extra_keys_len", _ffi.c_size),
        ("locality", ctypes.c_char_p),
        ("ownership", ctypes.c_char_p),
        ("session_id", ctypes.c_char_p),
        ("locality_form", _ffi.c_u32),
        ("ownership_form", _ffi.c_u32),
        ("session_id_form", _ffi.c_u32),
        ("block_size_form", _ffi.c_u32),
        ("parent_form", _ffi.c_u32),
        ("reserved32", _ffi.c_u32),
        # 0.6: Dynamo fields (a 0.5 library fills the 168 bytes above; these stay zero)
        ("start_position_form", _ffi.c_u32),
        ("start_position", _ffi.c_u32),
        ("mm_extra_info_forms", ctypes.POINTER(ctypes.c_uint8)),
        ("mm_objects", ctypes.POINTER(kvreg_wire_mm_object)),
        ("n_mm_objects", _ffi.c_size),
        ("mm_offsets", _ffi.u64_p),
        ("n_mm_offsets", _ffi.c_size),
        ("residency_domain", ctypes.c_char_p),
        ("residency_domain_form", _ffi.c_u32),
        ("state_source_form", _ffi.c_u32),
        ("state_source", ctypes.POINTER(ctypes.c_uint8)),
        ("state_source_len", _ffi.c_size),
    ]


if ctypes.sizeof(ctypes.c_void_p) == 8:
    assert ctypes.sizeof(kvreg_wire_event_ext) == 248, ctypes.sizeof(kvreg_wire_event_ext)


class kvreg_wire_encoder(ctypes.Structure):
    pass


class kvreg_wire_decoder(ctypes.Structure):
    pass


enc_p = ctypes.POINTER(kvreg_wire_encoder)
dec_p = ctypes.POINTER(kvreg_wire_decoder)
wire_event_p = ctypes.POINTER(kvreg_wire_event)
u8_p = ctypes.POINTER(ctypes.c_uint8)

# name: (restype, argtypes, checked), as _ffi._PROTOTYPES. Bound on first use: a library
# older than the wire API lacks these symbols, and the rest of the binding must still load.
_PROTOTYPES = {
    "kvreg_wire_encoder_new": (_ffi.c_int, [ctypes.POINTER(enc_p), _ffi.c_u32], True),
    "kvreg_wire_encoder_free": (None, [enc_p], False),
    "kvreg_wire_encoder_set": (_ffi.c_int, [enc_p, _ffi.c_u32, _ffi.c_u64], True),
    "kvreg_wire_encoder_set_lora_name": (_ffi.c_int, [enc_p, ctypes.c_char_p], True),
    "kvreg_wire_encode": (_ffi.c_int, [enc_p, _ffi.event_p, _ffi.c_size, c_double,
                                       _ffi.size_p, ctypes.POINTER(u8_p), _ffi.size_p], False),
    "kvreg_wire_decoder_new": (_ffi.c_int, [ctypes.POINTER(dec_p), _ffi.c_u32], True),
    "kvreg_wire_decoder_free": (None, [dec_p], False),
    # Status checked by Decoder.decode itself: KVREG_EPROTO needs the offset and the text.
    "kvreg_wire_decode": (_ffi.c_int, [dec_p, ctypes.c_void_p, _ffi.c_size,
                                       ctypes.POINTER(wire_event_p), _ffi.size_p, _ffi.size_p],
                          False),
    "kvreg_wire_decoder_error": (ctypes.c_char_p, [dec_p], False),
    "kvreg_wire_decoder_stat": (_ffi.c_int, [dec_p, _ffi.c_u32, _ffi.u64_p], True),
    # 0.5: bound when present; an older library still serves the rest (the methods that need
    # them raise NotSupported).
    "kvreg_wire_encoder_get": (_ffi.c_int, [enc_p, _ffi.c_u32, _ffi.u64_p], True),
    "kvreg_wire_decoder_set": (_ffi.c_int, [dec_p, _ffi.c_u32, _ffi.c_u64], True),
    "kvreg_wire_decoder_event_ext": (_ffi.c_int, [dec_p, _ffi.c_size,
                                                  ctypes.POINTER(kvreg_wire_event_ext)], True),
    "kvreg_wire_decoder_reencode": (_ffi.c_int, [dec_p, ctypes.POINTER(u8_p), _ffi.size_p],
                                    True),
    # 0.6: the option family (bound when present, like the 0.5 ones)
    "kvreg_wire_encoder_set_string": (_ffi.c_int, [enc_p, _ffi.c_u32, ctypes.c_char_p], True),
    "kvreg_wire_encoder_get_string": (_ffi.c_int, [enc_p, _ffi.c_u32, ctypes.c_char_p,
                                                   _ffi.c_size, _ffi.size_p], True),
    "kvreg_wire_decoder_get": (_ffi.c_int, [dec_p, _ffi.c_u32, _ffi.u64_p], True),
}
_SINCE_05 = {"kvreg_wire_encoder_get", "kvreg_wire_decoder_set",
             "kvreg_wire_decoder_event_ext", "kvreg_wire_decoder_reencode",
             "kvreg_wire_encoder_set_string", "kvreg_wire_encoder_get_string",
             "kvreg_wire_decoder_get"}

_bound = []
_bind_lock = threading.Lock()


def _wire_lib():
    """lib with the wire prototypes installed; NotSupported when the library predates them."""
    with _bind_lock:
        if not _bound:
            missing = [n for n in _PROTOTYPES if n not in _SINCE_05 and not hasattr(lib, n)]
            if missing:
                raise errors.NotSupported(
                    _ffi.ENOTSUP, "the loaded libkvreg has no wire API (%s missing; libkvreg "
                    "0.3 built with the wire feature is needed)" % ", ".join(missing))
            for name, (restype, argtypes, checked) in _PROTOTYPES.items():
                if name in _SINCE_05 and not hasattr(lib, name):
                    continue
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
                if checked:
                    fn.errcheck = _ffi._errcheck
            _bound.append(True)
    return lib


def _since_05(name):
    """lib's 0.5 function `name`, or NotSupported with what is needed."""
    w = _wire_lib()
    if not hasattr(w, name):
        raise errors.NotSupported(_ffi.ENOTSUP, "the loaded libkvreg has no %s (libkvreg 0.5 "
                                  "is needed)" % name)
    return getattr(w, name)


def _not_built(exc):
    """A clearer NotSupported for a library built without the wire feature."""
    return errors.NotSupported(
        exc.code, "%s: this libkvreg was built without the wire feature (kvreg.features() "
        "lacks FEATURE_WIRE; rebuild it with msgpack-c, Debian libmsgpack-dev)" % exc.message)


def _format(value, allowed):
    if isinstance(value, str):
        try:
            value = Format[value.upper()]
        except KeyError:
            raise ValueError("unknown wire format %r (known: %s)"
                             % (value, ", ".join(f.name.lower() for f in Format))) from None
    value = int(value)
    if value not in allowed:
        raise ValueError("wire format %r is not one of %s" % (value, sorted(allowed)))
    return value


def _finalize(free, ptr, label):
    try:
        warnings.warn("%s garbage collected without close(): freed now; close it explicitly "
                      "(close() or a with block)" % label, ResourceWarning)
    finally:
        free(ptr)


class _Handle:
    """One C encoder/decoder: a lock (one thread at a time, as the library asks), the
    pointer, and the safety net that frees it if the owner is collected open."""

    def __init__(self, owner, new, free, fmt, label):
        out = new.argtypes[0]._type_()
        try:
            new(ctypes.byref(out), fmt)
        except errors.NotSupported as exc:
            raise _not_built(exc) from None
        self.ptr = out
        self.free = free
        self.lock = threading.Lock()
        self.finalizer = weakref.finalize(owner, _finalize, free, out, label)

    def enter(self):
        self.lock.acquire()
        if self.ptr is None:
            self.lock.release()
            raise errors.StaleHandle(_ffi.ESTALE, "wire object is closed")
        return self.ptr

    def close(self):
        with self.lock:
            if self.ptr is not None:
                self.finalizer.detach()
                self.free(self.ptr)
                self.ptr = None


class _Closable:
    def close(self):
        """Free the C object. Idempotent; later calls raise StaleHandle."""
        self._h.close()

    @property
    def closed(self):
        return self._h.ptr is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- encoder -----------------------------------------------------------------------------------
class Encoder(_Closable):
    """Turns kvreg events (Event values from poll() / a callback / a Snapshot) into payloads.

    format: "vllm" (default), "vllm_legacy", "dynamo_json", "dynamo_msgpack" or a Format.
    dp_rank: data-parallel rank written in each batch (default 0). max_events: most kvreg
    events per payload (default 1024). worker_id: Dynamo RouterEvent.worker_id (default 0).
    block_size: vLLM formats, the token count every Register must have (vLLM consumers drop
    stored events of another block size; default: not checked). lora_name: written as
    lora_name in stored events (default None: nil). Bad values raise InvalidArgument."""

    def __init__(self, format="vllm", *, dp_rank=None, max_events=None, worker_id=None,
                 block_size=None, lora_name=None, snapshot_event_id=None, event_ids=None,
                 next_event_id=None):
        w = _wire_lib()
        fmt = _format(format, {Format.VLLM, Format.VLLM_LEGACY, Format.DYNAMO_JSON,
                               Format.DYNAMO_MSGPACK})
        self.format = Format(fmt)
        self._h = h = _Handle(self, w.kvreg_wire_encoder_new, w.kvreg_wire_encoder_free, fmt,
                              "kvreg.wire.Encoder")
        try:
            for opt, value, name in ((_OPT_DP_RANK, dp_rank, "dp_rank"),
                                     (_OPT_MAX_EVENTS, max_events, "max_events"),
                                     (_OPT_WORKER_ID, worker_id, "worker_id"),
                                     (_OPT_BLOCK_SIZE, block_size, "block_size"),
                                     (_OPT_SNAPSHOT_EVENT_ID, snapshot_event_id,
                                      "snapshot_event_id"),
                                     (_OPT_NEXT_EVENT_ID, next_event_id, "next_event_id")):
                if value is not None:
                    w.kvreg_wire_encoder_set(h.ptr, opt, _buffers.u64(value, name))
            if event_ids is not None:
                if event_ids not in _EVENT_IDS:
                    raise ValueError("event_ids must be 'contiguous' or 'kvreg'")
                w.kvreg_wire_encoder_set(h.ptr, _OPT_EVENT_IDS, _EVENT_IDS[event_ids])
            if lora_name is not None:
                raw = lora_name.encode("utf-8") if isinstance(lora_name, str) else lora_name
                if b"\0" in raw:
                    raise errors.InvalidArgument(_ffi.EINVAL, "lora_name must not contain NUL")
                w.kvreg_wire_encoder_set_lora_name(h.ptr, raw)
        except BaseException:
            h.close()
            raise

    def __repr__(self):
        return "<kvreg.wire.Encoder %s%s>" % (self.format.name.lower(),
                                              " closed" if self.closed else "")

    @property
    def next_event_id(self):
        """Dynamo formats: the id the next RouterEvent takes. By default (event_ids=
        "contiguous", libkvreg >= 0.6) every RouterEvent, live or snapshot, takes one, so the
        ids form one contiguous run as Dynamo's consumers check them; with event_ids="kvreg"
        (0.5's ids) only snapshot RouterEvents do. Needs libkvreg 0.5."""
        return self.snapshot_event_id

    @property
    def snapshot_event_id(self):
        """Dynamo formats: the event_id the next RouterEvent made of snapshot events gets (set
        with the snapshot_event_id argument; each such RouterEvent takes one, so a snapshot's
        ids are contiguous). Needs libkvreg 0.5."""
        get = _since_05("kvreg_wire_encoder_get")
        value = ctypes.c_uint64()
        ptr = self._h.enter()
        try:
            get(ptr, _OPT_SNAPSHOT_EVENT_ID, ctypes.byref(value))
        finally:
            self._h.lock.release()
        return value.value

    def encode(self, events, ts=None):
        """Encode events (in event_id order) into as many payloads as max_events needs:
        a list of bytes, [] for no events. ts: the batch timestamp in seconds since the Unix
        epoch (default: now).

        An event the format cannot carry is never sent half-right: StateError for a vLLM
        Register without tokens (or with another block size than block_size), InvalidArgument
        for an unknown kind or medium. The exception then has `payloads` (the complete
        payloads encoded before it, to send) and `index` (the position of the event)."""
        events = list(events)
        if not events:
            return []
        arr, keep = _to_c(events)
        stamp = -1.0 if ts is None else float(ts)
        consumed = ctypes.c_size_t()
        data = u8_p()
        length = ctypes.c_size_t()
        payloads = []
        done = 0
        ptr = self._h.enter()
        try:
            while done < len(events):
                # arr stays referenced by this frame while C reads through the pointer.
                rest = ctypes.cast(ctypes.addressof(arr) + done * _EVENT_SIZE, _ffi.event_p)
                st = lib.kvreg_wire_encode(ptr, rest,
                                           len(events) - done, stamp, ctypes.byref(consumed),
                                           ctypes.byref(data), ctypes.byref(length))
                if st < 0:
                    exc = errors.from_status(st, _ffi.strerror(st))
                    exc.payloads, exc.index = payloads, done
                    raise exc
                # The payload points into the encoder until its next call: copy it now.
                payloads.append(ctypes.string_at(data, length.value))
                done += consumed.value
        finally:
            self._h.lock.release()
            del keep
        return payloads


_EVENT_SIZE = ctypes.sizeof(_ffi.kvreg_event)


def _to_c(events):
    """Event values -> a kvreg_event array, and the token arrays it points into (keep them
    referenced for as long as the array is used)."""
    arr = (_ffi.kvreg_event * len(events))()
    keep = []
    for c, ev in zip(arr, events):
        c.kind = _buffers.u32(ev.kind, "kind")
        c.pool_id = _buffers.u32(ev.pool_id, "pool_id")
        c.event_id = _buffers.u64(ev.event_id, "event_id")
        c.sequence_hash = _buffers.u64(ev.sequence_hash, "sequence_hash")
        c.block_hash = _buffers.u64(ev.block_hash, "block_hash")
        if ev.parent_sequence_hash is not None:
            c.parent_sequence_hash = _buffers.u64(ev.parent_sequence_hash, "parent_sequence_hash")
            c.has_parent = 1
        c.medium = _buffers.u32(getattr(ev, "medium", Medium.GPU), "medium")
        if ev.tokens:
            toks = (_ffi.c_u32 * len(ev.tokens))(*(_buffers.u32(t, "token") for t in ev.tokens))
            keep.append(toks)
            c.tokens = ctypes.cast(toks, _ffi.u32_p)
            c.n_tokens = len(toks)
    return arr, keep


# ---- decoder -----------------------------------------------------------------------------------
class WireEvent(NamedTuple):
    """One decoded event, copied out of the decoder (owns nothing in C)."""
    type: int                          # WireEventType (a plain int for newer ones)
    block_hashes: Tuple[int, ...]      # the engine's hashes as unsigned 64-bit ints
    parent_block_hash: Optional[int]   # None when absent
    block_size: int                    # 0 when absent
    token_ids: Tuple[int, ...]
    medium: int                        # Medium, or MEDIUM_UNKNOWN (see medium_name)
    medium_name: Optional[str]         # as on the wire; None when absent or nil
    lora_name: Optional[str]           # None when absent or nil
    group_idx: Optional[int]
    dp_rank: Optional[int]             # of the batch
    ts: float                          # of the batch (vLLM / SGLang formats; 0 for Dynamo)
    worker_id: int                     # Dynamo formats; 0 otherwise
    event_id: int                      # Dynamo formats; 0 otherwise
    tokens_hashes: Tuple[int, ...]     # Dynamo stored: each block's tokens_hash; else ()


class WireEventExt(NamedTuple):
    """What a decoded event carries beyond WireEvent (kvreg_wire_event_ext): each optional
    field with its form, "absent" (not in the payload), "nil" or "set"."""
    tag: Optional[str]                 # the type name as on the wire ("TierBlocksCleared", ...)
    shape: str                         # "map", "array" or "dynamo"
    n_fields: int
    medium: str                        # form of the medium: tells an absent one from "GPU"
    lora_name: str                     # form
    lora_id: Tuple[str, Optional[int]]
    pair_token_ids: Optional[Tuple[Tuple[int, int], ...]]  # EAGLE bigram token ids, or None
    group_idx: str                     # form
    cache_salt: Tuple[str, Optional[str]]
    kv_cache_spec_kind: Tuple[str, Optional[str]]
    kv_cache_spec_sliding_window: Tuple[str, Optional[int]]
    extra_keys: Optional[bytes]        # its MessagePack bytes as on the wire; None when absent
    locality: Tuple[str, Optional[str]]
    ownership: Tuple[str, Optional[str]]
    session_id: Tuple[str, Optional[str]]
    block_size: str                    # form
    parent_block_hash: str             # form
    # 0.6, Dynamo RouterEvents ("absent" with an older library):
    start_position: Tuple[str, Optional[int]] = ("absent", None)
    # (block index, mm_hash, ((start, end), ...)) per multimodal object of a stored event
    mm_objects: Tuple[Tuple[int, int, Tuple[Tuple[int, int], ...]], ...] = ()
    residency_domain: Tuple[str, Optional[str]] = ("absent", None)
    state_source: Tuple[str, Optional[bytes]] = ("absent", None)  # its bytes as on the wire


def _text(raw):
    return None if raw is None else raw.decode("utf-8", "replace")


def _ext_from_c(x):
    f = _FIELD_FORMS.get
    pairs = None
    if x.token_pairs:
        flat = x.pair_token_ids[:x.n_pair_token_ids] if x.n_pair_token_ids else []
        pairs = tuple((flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2))
    return WireEventExt(
        _text(x.tag), _SHAPES.get(x.shape, str(x.shape)), x.n_fields, f(x.medium_form),
        f(x.lora_name_form),
        (f(x.lora_id_form), x.lora_id if x.lora_id_form == 2 else None),
        pairs, f(x.group_idx_form),
        (f(x.cache_salt_form), _text(x.cache_salt)),
        (f(x.kv_cache_spec_kind_form), _text(x.kv_cache_spec_kind)),
        (f(x.sliding_window_form),
         x.kv_cache_spec_sliding_window if x.sliding_window_form == 2 else None),
        ctypes.string_at(x.extra_keys, x.extra_keys_len) if x.extra_keys_form else None,
        (f(x.locality_form), _text(x.locality)),
        (f(x.ownership_form), _text(x.ownership)),
        (f(x.session_id_form), _text(x.session_id)),
        f(x.block_size_form), f(x.parent_form),
        (f(x.start_position_form), x.start_position if x.start_position_form == 2 else None),
        _mm_objects(x), (f(x.residency_domain_form), _text(x.residency_domain)),
        (f(x.state_source_form),
         ctypes.string_at(x.state_source, x.state_source_len) if x.state_source_form == 2
         else None))


def _mm_objects(x):
    offs = x.mm_offsets[:x.n_mm_offsets] if x.n_mm_offsets else []
    out = []
    for i in range(x.n_mm_objects):
        m = x.mm_objects[i]
        first = 2 * m.first_offset
        pairs = tuple((offs[first + 2 * j], offs[first + 2 * j + 1]) for j in range(m.n_offsets))
        out.append((m.block, m.mm_hash, pairs))
    return tuple(out)


def _wire_from_c(ev):
    n = ev.n_block_hashes
    nt = ev.n_token_ids
    try:
        kind = WireEventType(ev.type)
    except ValueError:
        kind = ev.type
    medium = ev.medium
    if medium != MEDIUM_UNKNOWN:
        try:
            medium = Medium(medium)
        except ValueError:
            pass
    return WireEvent(
        kind,
        tuple(ev.block_hashes[:n]) if n else (),
        ev.parent_block_hash if ev.has_parent else None,
        ev.block_size,
        tuple(ev.token_ids[:nt]) if nt else (),
        medium,
        _text(ev.medium_name),
        _text(ev.lora_name),
        ev.group_idx if ev.has_group_idx else None,
        ev.dp_rank if ev.has_dp_rank else None,
        ev.ts,
        ev.worker_id,
        ev.event_id,
        tuple(ev.tokens_hashes[:n]) if n and ev.tokens_hashes else (),
    )


class Decoder(_Closable):
    """Decodes payloads from engines (untrusted bytes) into WireEvent values.

    format: "vllm" (default; also reads SGLang and legacy positional payloads), "sglang",
    "dynamo_json", "dynamo_msgpack" or a Format. max_payload (bytes, default 16 MiB),
    max_depth (default 32, at most 64) and max_events (default 65536): the decoder's limits
    (kvreg_wire.h, "Decoder limits"; libkvreg 0.5); past one, decode() raises ProtocolError."""

    def __init__(self, format="vllm", *, max_payload=None, max_depth=None, max_events=None):
        w = _wire_lib()
        fmt = _format(format, set(Format))
        self.format = Format(fmt)
        self._h = h = _Handle(self, w.kvreg_wire_decoder_new, w.kvreg_wire_decoder_free, fmt,
                              "kvreg.wire.Decoder")
        try:
            for name, value in (("max_payload", max_payload), ("max_depth", max_depth),
                                ("max_events", max_events)):
                if value is not None:
                    _since_05("kvreg_wire_decoder_set")(h.ptr, _DEC_OPTS[name],
                                                        _buffers.u64(value, name))
        except BaseException:
            h.close()
            raise

    def __repr__(self):
        return "<kvreg.wire.Decoder %s%s>" % (self.format.name.lower(),
                                              " closed" if self.closed else "")

    def decode(self, payload):
        """One payload (bytes-like) -> [WireEvent] in order; events of unknown types are
        skipped (counted in stats()["skipped"]). ProtocolError when it does not decode, with
        `offset` and `detail`; nothing is returned then."""
        return self._decode(payload, False)

    def decode_extended(self, payload):
        """As decode(), as [(WireEvent, WireEventExt)]. Needs libkvreg 0.5."""
        return self._decode(payload, True)

    def reencode(self):
        """The last payload decoded, encoded again from what was decoded, as its upstream
        encoder wrote it (bytes identical to an upstream payload). NotSupported for Dynamo
        formats; StateError when nothing decoded or the payload held something the decoder
        does not keep. Needs libkvreg 0.5."""
        fn = _since_05("kvreg_wire_decoder_reencode")
        p = u8_p()
        n = ctypes.c_size_t()
        ptr = self._h.enter()
        try:
            fn(ptr, ctypes.byref(p), ctypes.byref(n))
            return ctypes.string_at(p, n.value)
        finally:
            self._h.lock.release()

    def _decode(self, payload, extended):
        ext_fn = _since_05("kvreg_wire_decoder_event_ext") if extended else None
        buf = bytes(payload)
        evs = wire_event_p()
        n = ctypes.c_size_t()
        offset = ctypes.c_size_t()
        ptr = self._h.enter()
        try:
            st = lib.kvreg_wire_decode(ptr, buf, len(buf), ctypes.byref(evs), ctypes.byref(n),
                                       ctypes.byref(offset))
            if st == _ffi.EPROTO:
                detail = _text(lib.kvreg_wire_decoder_error(ptr))
                raise errors.ProtocolError(st, _ffi.strerror(st), offset.value, detail)
            if st < 0:
                raise errors.from_status(st, _ffi.strerror(st))
            # Borrowed until the decoder's next call: copy while we hold its lock.
            if not extended:
                return [_wire_from_c(evs[i]) for i in range(n.value)]
            out = []
            for i in range(n.value):
                x = kvreg_wire_event_ext()
                x.struct_size = ctypes.sizeof(x)
                ext_fn(ptr, i, ctypes.byref(x))
                out.append((_wire_from_c(evs[i]), _ext_from_c(x)))
            return out
        finally:
            self._h.lock.release()

    def stats(self):
        """{"batches", "rejected", "events", "skipped"}: this decoder's counters."""
        out = {}
        ptr = self._h.enter()
        try:
            for name, code in _STATS.items():
                value = ctypes.c_uint64()
                lib.kvreg_wire_decoder_stat(ptr, code, ctypes.byref(value))
                out[name] = value.value
        finally:
            self._h.lock.release()
        return out

