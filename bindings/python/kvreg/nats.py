"""NATS JetStream event plane (include/kvreg_nats.h, docs/nats.md): an engine's Publisher,
a router replica's Consumer feeding an Index.

available() says whether the loaded libkvreg was built with NATS; without it every call
raises NotSupported. Each object wraps one C handle: close it (close() or a with block)
before the object it borrows (a Publisher its Registry, a Consumer its Index). They keep a
reference to what they borrow, so it is not collected under them.
"""

import collections
import ctypes
import threading
import warnings
import weakref

from . import _ffi, errors
from ._ffi import lib

c_u32, c_u64, c_int = _ffi.c_u32, _ffi.c_u64, _ffi.c_int


class kvreg_index(ctypes.Structure):
    pass


class kvreg_index_config(ctypes.Structure):
    pass


class kvreg_nats_publisher(ctypes.Structure):
    pass


class kvreg_nats_consumer(ctypes.Structure):
    pass


class kvreg_nats_notice(ctypes.Structure):
    _fields_ = [
        ("kind", c_u32), ("dp_rank", c_u32), ("worker_id", c_u64), ("instance", c_u64),
        ("first", c_u64), ("last", c_u64), ("count", c_u64), ("stream_seq", c_u64),
        ("has_seq", c_u32), ("reserved32", c_u32), ("subject", ctypes.c_char_p),
        ("message", ctypes.c_char_p), ("reserved", c_u64 * 2),
    ]


idx_p = ctypes.POINTER(kvreg_index)
icfg_p = ctypes.POINTER(kvreg_index_config)
pub_p = ctypes.POINTER(kvreg_nats_publisher)
con_p = ctypes.POINTER(kvreg_nats_consumer)
NOTICE_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(kvreg_nats_notice), ctypes.c_void_p)

# Option, string option and stat names -> the header's numbers.
PUBLISHER_OPTIONS = {
    "format": 1, "worker_id": 2, "dp_rank": 3, "max_in_flight": 4, "ack_timeout_ms": 5,
    "retry_ms": 6, "max_events": 7, "block_size": 8, "batch_us": 9, "linger_ms": 10,
    "instance": 11, "create_stream": 12, "max_age_s": 13, "duplicate_window_ms": 14,
    "connect_timeout_ms": 15, "heartbeat_ms": 16, "liveness_ttl_ms": 17,
}
PUBLISHER_STRINGS = {"url": 1, "stream": 2, "subject_prefix": 3, "namespace": 4,
                     "component": 5, "subject": 6, "lora_name": 7, "liveness_bucket": 12}
PUBLISHER_STATS = {
    "batches": 1, "acked": 2, "duplicates": 3, "retries": 4, "in_flight": 5,
    "events_sent": 6, "events_lost": 7, "resyncs": 8, "events_skipped": 9,
    "events_unsent": 10, "batches_unacked": 11, "errors": 12, "events_handled": 13,
    "batches_refused": 14,
}
CONSUMER_OPTIONS = {
    "fetch_batch": 1, "ack_wait_ms": 2, "max_ack_pending": 3, "reorder_window": 4,
    "reorder_ms": 5, "max_msg_bytes": 6, "resume": 7, "connect_timeout_ms": 8,
    "snapshot_events": 9, "snapshot_ms": 10, "snapshot_keep": 11, "snapshot_purge": 12,
    "snapshot_chunk_bytes": 13, "restore": 14, "liveness_check_ms": 15, "snapshot_orphan_ms": 16,
}
CONSUMER_STRINGS = {"url": 1, "stream": 2, "durable": 8, "filter": 9, "snapshot_bucket": 10,
                    "snapshot_name": 11, "liveness_bucket": 12}
CONSUMER_STATS = {
    "messages": 1, "batches": 2, "events": 3, "duplicates": 4, "lost": 5, "resets": 6,
    "malformed": 7, "stale": 8, "held": 9, "fetch_errors": 10, "snapshots": 11,
    "snapshot_seq": 12, "restored": 13, "snapshots_rejected": 14, "expired": 15,
    "snapshot_errors": 16, "snapshot_orphans": 17, "start_us": 18, "restore_read_us": 19,
    "restore_load_us": 20,
}
NOTICE_KINDS = {1: "loss", 2: "reset", 3: "malformed", 4: "apply", 5: "snapshot", 6: "expired"}
INDEX_OPTIONS = {"block_size": 1, "hashes": 2, "profile": 3, "salt": 4, "shards": 5,
                 "expected_entries": 6}
INDEX_STATS = {"entries": 1, "workers": 2, "memory_bytes": 3, "bytes_per_entry": 4,
               "mapped_hashes": 5, "events_applied": 6, "events_skipped": 7, "gaps": 8}
FORMATS = {"vllm": 1, "vllm_legacy": 2, "dynamo_json": 3, "dynamo_msgpack": 4}

Notice = collections.namedtuple(
    "Notice", "kind worker_id dp_rank instance first last count stream_seq has_seq subject "
              "message")
Notice.__doc__ = ("A consumer's notice: kind 'loss', 'reset', 'malformed' or 'apply', and "
                  "the fields of kvreg_nats_notice (subject and message as str).")

_PROTOTYPES = {
    "kvreg_nats_available": (c_int, [], False),
    "kvreg_index_config_new": (c_int, [ctypes.POINTER(icfg_p)], True),
    "kvreg_index_config_free": (None, [icfg_p], False),
    "kvreg_index_config_set": (c_int, [icfg_p, c_u32, c_u64], True),
    "kvreg_index_new": (c_int, [ctypes.POINTER(idx_p), icfg_p], True),
    "kvreg_index_free": (None, [idx_p], False),
    "kvreg_index_stat": (c_int, [idx_p, c_u32, _ffi.u64_p], True),
    "kvreg_nats_publisher_new": (c_int, [ctypes.POINTER(pub_p), _ffi.reg_p], True),
    "kvreg_nats_publisher_free": (None, [pub_p], False),
    "kvreg_nats_publisher_set": (c_int, [pub_p, c_u32, c_u64], True),
    "kvreg_nats_publisher_set_string": (c_int, [pub_p, c_u32, ctypes.c_char_p], True),
    "kvreg_nats_publisher_start": (c_int, [pub_p], True),
    "kvreg_nats_publisher_stop": (c_int, [pub_p], True),
    "kvreg_nats_publisher_stat": (c_int, [pub_p, c_u32, _ffi.u64_p], True),
    "kvreg_nats_consumer_new": (c_int, [ctypes.POINTER(con_p), idx_p], True),
    "kvreg_nats_consumer_free": (None, [con_p], False),
    "kvreg_nats_consumer_set": (c_int, [con_p, c_u32, c_u64], True),
    "kvreg_nats_consumer_set_string": (c_int, [con_p, c_u32, ctypes.c_char_p], True),
    "kvreg_nats_consumer_set_notice_fn": (c_int, [con_p, NOTICE_FN, ctypes.c_void_p], True),
    "kvreg_nats_consumer_start": (c_int, [con_p], True),
    "kvreg_nats_consumer_run": (c_int, [con_p, c_int], True),
    "kvreg_nats_consumer_stop": (c_int, [con_p], True),
    "kvreg_nats_consumer_stat": (c_int, [con_p, c_u32, _ffi.u64_p], True),
    "kvreg_nats_consumer_worker": (c_int, [con_p, c_u64, c_u32, _ffi.u64_p, _ffi.u64_p],
                                   False),
}

# 0.6 (the index dump): bound when present, so a 0.5 library still serves the rest.
_SINCE_06 = {
    "kvreg_index_digest": (c_int, [idx_p, _ffi.u64_p], True),
    "kvreg_index_dump_alloc": (c_int, [idx_p, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(_ffi.c_size)], True),
    "kvreg_index_load": (c_int, [idx_p, ctypes.c_char_p, _ffi.c_size], True),
    "kvreg_nats_consumer_snapshot": (c_int, [con_p, _ffi.u64_p], True),
    "kvreg_nats_publisher_get": (c_int, [pub_p, c_u32, _ffi.u64_p], True),
    "kvreg_nats_consumer_get": (c_int, [con_p, c_u32, _ffi.u64_p], True),
    # unchecked: KVREG_ERANGE (asking the length) and KVREG_ENOENT (NULL) are answers here
    "kvreg_nats_publisher_get_string": (c_int, [pub_p, c_u32, ctypes.c_char_p, _ffi.c_size,
                                                _ffi.size_p], False),
    "kvreg_nats_consumer_get_string": (c_int, [con_p, c_u32, ctypes.c_char_p, _ffi.c_size,
                                               _ffi.size_p], False),
}

_bound = []
_bind_lock = threading.Lock()


def _lib():
    """lib with the prototypes installed; NotSupported when the library has no NATS API."""
    with _bind_lock:
        if not _bound:
            missing = [n for n in _PROTOTYPES if not hasattr(lib, n)]
            if missing:
                raise errors.NotSupported(
                    _ffi.ENOTSUP, "the loaded libkvreg has no NATS API (%s missing; libkvreg "
                    "0.5 or later is needed)" % ", ".join(missing))
            for name, (restype, argtypes, checked) in list(_PROTOTYPES.items()) + [
                    (n, p) for n, p in _SINCE_06.items() if hasattr(lib, n)]:
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
                if checked:
                    fn.errcheck = _ffi._errcheck
            _bound.append(True)
    return lib


def available():
    """True when the loaded libkvreg was built with NATS (the Meson feature `nats`)."""
    try:
        return bool(_lib().kvreg_nats_available())
    except errors.NotSupported:
        return False


def _not_built():
    return errors.NotSupported(_ffi.ENOTSUP, "this libkvreg was built without NATS "
                               "(kvreg.nats.available() is False; rebuild it with libnats-dev)")


def _check_built():
    if not available():
        raise _not_built()


def _finalize(free, ptr, label):
    try:
        warnings.warn("%s garbage collected without close(): freed now; close it explicitly"
                      % label, ResourceWarning)
    finally:
        free(ptr)


def _since_06_fn(name):
    """lib's 0.6 function `name`, or NotSupported naming what is needed."""
    w = _lib()
    if not hasattr(w, name):
        raise errors.NotSupported(_ffi.ENOTSUP, "the loaded libkvreg has no %s (libkvreg 0.6 "
                                  "is needed)" % name)
    return getattr(w, name)


def _get(prefix, ptr, name, numbers, strings, what):
    """One option by name through <prefix>_get / _get_string: an int, a str, or None for a
    string option that is NULL (KVREG_ENOENT)."""
    if name not in strings:
        v = c_u64()
        _since_06_fn(prefix + "_get")(ptr, _option(numbers, name, what), ctypes.byref(v))
        return v.value
    fn = _since_06_fn(prefix + "_get_string")
    n = _ffi.c_size()
    while True:  # the length first; again if a set from another thread made it longer
        rc = fn(ptr, strings[name], None, 0, ctypes.byref(n))
        if rc == _ffi.ENOENT:
            return None
        if rc != _ffi.ERANGE:
            raise errors.from_status(rc, _ffi.strerror(rc))
        buf = ctypes.create_string_buffer(n.value + 1)
        rc = fn(ptr, strings[name], buf, len(buf), ctypes.byref(n))
        if rc == _ffi.OK:
            return buf.value.decode()
        if rc == _ffi.ENOENT:
            return None
        if rc != _ffi.ERANGE:
            raise errors.from_status(rc, _ffi.strerror(rc))


def _option(table, name, what):
    try:
        return table[name]
    except KeyError:
        raise ValueError("unknown %s %r (known: %s)" % (what, name, ", ".join(sorted(table))))


class _Handle:
    """A C handle with close(), a with block and a safety net."""

    _free = None
    _label = ""

    def _own(self, ptr):
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, _finalize, type(self)._free_fn(), ptr,
                                           self._label)

    def _p(self):
        if self._ptr is None:
            raise errors.StaleHandle(_ffi.ESTALE, "%s is closed" % self._label)
        return self._ptr

    def close(self):
        """Free the C object. Idempotent; later calls raise StaleHandle."""
        if getattr(self, "_ptr", None) is not None:
            self._finalizer.detach()
            type(self)._free_fn()(self._ptr)
            self._ptr = None

    @property
    def closed(self):
        return getattr(self, "_ptr", None) is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Index(_Handle):
    """A router's kvreg_index (what a Consumer feeds). Options by name: block_size, hashes
    (0 engine, 1 own: the events carry libkvreg's router hashes), profile, salt, shards,
    expected_entries; see include/kvreg_index.h."""

    _label = "kvreg Index"

    @staticmethod
    def _free_fn():
        return _lib().kvreg_index_free

    def __init__(self, **options):
        w = _lib()
        cfg = icfg_p()
        w.kvreg_index_config_new(ctypes.byref(cfg))
        try:
            for name, value in options.items():
                w.kvreg_index_config_set(cfg, _option(INDEX_OPTIONS, name, "index option"),
                                         value)
            out = idx_p()
            w.kvreg_index_new(ctypes.byref(out), cfg)
        finally:
            w.kvreg_index_config_free(cfg)
        self._own(out)

    def stat(self, name):
        """One KVREG_INDEX_STAT_* counter by name (entries, workers, memory_bytes, ...)."""
        v = c_u64()
        _lib().kvreg_index_stat(self._p(), _option(INDEX_STATS, name, "index stat"),
                                ctypes.byref(v))
        return v.value


    def _since_06(self, name):
        w = _lib()
        if name not in _SINCE_06 or not hasattr(w, name):
            raise errors.NotSupported(_ffi.ENOTSUP, "the loaded libkvreg has no %s (libkvreg "
                                      "0.6 is needed)" % name)
        return getattr(w, name)

    def digest(self):
        """kvreg_index_digest: equal for equal contents, whatever order events came in."""
        v = c_u64()
        self._since_06("kvreg_index_digest")(self._p(), ctypes.byref(v))
        return v.value

    def dump(self):
        """The index's dump (kvreg_index_dump: versioned, checksummed) as bytes."""
        data, n = ctypes.c_void_p(), _ffi.c_size()
        self._since_06("kvreg_index_dump_alloc")(self._p(), ctypes.byref(data), ctypes.byref(n))
        try:
            return ctypes.string_at(data, n.value)
        finally:
            _libc_free(data)

    def load(self, dump):
        """Load a dump into this index, which must know no worker (ProtocolError: corrupt;
        InvalidArgument: another configuration; StateError: not empty)."""
        data = bytes(dump)
        self._since_06("kvreg_index_load")(self._p(), data, len(data))


def _libc_free(ptr):
    """free() for what the library allocated with malloc (kvreg_index_dump_alloc)."""
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    libc.free(ptr)


class Publisher(_Handle):
    """An engine's publisher: takes registry's events (it must be in POLL delivery) on its
    own thread and publishes them into a JetStream stream. String options (url, stream,
    subject_prefix, namespace, component, subject, lora_name) and numeric ones (format as a
    name or number, worker_id, dp_rank, max_in_flight, ... see PUBLISHER_OPTIONS) are
    keywords; start() connects. Close it before the registry."""

    _label = "kvreg nats Publisher"

    @staticmethod
    def _free_fn():
        return _lib().kvreg_nats_publisher_free

    def __init__(self, registry, **options):
        _check_built()
        self._registry = registry  # borrowed by the C publisher: keep it alive
        ptr = registry._core.guard.enter()
        try:
            out = pub_p()
            _lib().kvreg_nats_publisher_new(ctypes.byref(out), ptr)
        finally:
            registry._core.guard.exit()
        self._own(out)
        try:
            for name, value in options.items():
                self.set(name, value)
        except BaseException:
            self.close()
            raise

    def set(self, name, value):
        """Set one option by name (before start(); StateError after)."""
        w = _lib()
        if name in PUBLISHER_STRINGS:
            w.kvreg_nats_publisher_set_string(self._p(), PUBLISHER_STRINGS[name],
                                              None if value is None else value.encode())
        else:
            if name == "format" and isinstance(value, str):
                value = _option(FORMATS, value, "format")
            w.kvreg_nats_publisher_set(self._p(), _option(PUBLISHER_OPTIONS, name,
                                                          "publisher option"), value)

    def get(self, name):
        """One option by name: the default until set, after start() what is in effect (the
        drawn instance, the subject's layout); None for a string option that is not set.
        Any thread, also while the publisher runs."""
        return _get("kvreg_nats_publisher", self._p(), name, PUBLISHER_OPTIONS,
                    PUBLISHER_STRINGS, "publisher option")

    def start(self):
        """Connect, make sure the stream exists, start the sender thread (ProtocolError: no
        server, or the stream is missing / cannot be made)."""
        _lib().kvreg_nats_publisher_start(self._p())

    def stop(self):
        """Publish what is queued, wait for the acks (bounded by linger_ms), stop."""
        _lib().kvreg_nats_publisher_stop(self._p())

    def stat(self, name):
        v = c_u64()
        _lib().kvreg_nats_publisher_stat(self._p(), _option(PUBLISHER_STATS, name,
                                                            "publisher stat"), ctypes.byref(v))
        return v.value

    def stats(self):
        """Every counter, by name."""
        return {name: self.stat(name) for name in PUBLISHER_STATS}


class Consumer(_Handle):
    """A router replica: a durable pull consumer of the stream applying batches to index.
    String options url, stream, durable, filter and the numeric ones of CONSUMER_OPTIONS are
    keywords; notices (optional) is called with a Notice on the thread in run(). start()
    connects; run(timeout_ms) fetches and applies on the caller's thread. Close it before
    the index."""

    _label = "kvreg nats Consumer"

    @staticmethod
    def _free_fn():
        return _lib().kvreg_nats_consumer_free

    def __init__(self, index, notices=None, **options):
        _check_built()
        self._index = index  # borrowed by the C consumer: keep it alive
        out = con_p()
        _lib().kvreg_nats_consumer_new(ctypes.byref(out), index._p())
        self._own(out)
        self._cfunc = None
        self.errors = []  # exceptions the notice callback raised (not propagated into C)
        try:
            for name, value in options.items():
                self.set(name, value)
            if notices is not None:
                self._cfunc = NOTICE_FN(self._make_notice(notices))
                _lib().kvreg_nats_consumer_set_notice_fn(self._p(), self._cfunc, None)
        except BaseException:
            self.close()
            raise

    def _make_notice(self, fn):
        def call(p, _user):
            n = p.contents
            try:
                fn(Notice(NOTICE_KINDS.get(n.kind, str(n.kind)), n.worker_id, n.dp_rank,
                          n.instance, n.first, n.last, n.count, n.stream_seq, bool(n.has_seq),
                          (n.subject or b"").decode("utf-8", "replace"),
                          (n.message or b"").decode("utf-8", "replace")))
            except Exception as exc:  # never unwind through C
                self.errors.append(exc)
        return call

    def set(self, name, value):
        """Set one option by name (before start(); StateError after)."""
        w = _lib()
        if name in CONSUMER_STRINGS:
            w.kvreg_nats_consumer_set_string(self._p(), CONSUMER_STRINGS[name],
                                             None if value is None else value.encode())
        else:
            w.kvreg_nats_consumer_set(self._p(), _option(CONSUMER_OPTIONS, name,
                                                         "consumer option"), value)

    def get(self, name):
        """One option by name: the default until set (snapshot_name: the stream's name); None
        for a string option that is not set. Any thread, also during run()."""
        return _get("kvreg_nats_consumer", self._p(), name, CONSUMER_OPTIONS, CONSUMER_STRINGS,
                    "consumer option")

    def start(self):
        _lib().kvreg_nats_consumer_start(self._p())

    def run(self, timeout_ms=0):
        """Fetch and apply for timeout_ms (0: one fetch of what is ready; -1: until stop())."""
        _lib().kvreg_nats_consumer_run(self._p(), timeout_ms)

    def stop(self):
        """Make a run() in progress return soon (any thread)."""
        _lib().kvreg_nats_consumer_stop(self._p())

    def stat(self, name):
        v = c_u64()
        _lib().kvreg_nats_consumer_stat(self._p(), _option(CONSUMER_STATS, name,
                                                           "consumer stat"), ctypes.byref(v))
        return v.value

    def stats(self):
        """Every counter the loaded library has, by name."""
        out = {}
        for name in CONSUMER_STATS:
            try:
                out[name] = self.stat(name)
            except errors.InvalidArgument:  # a 0.5 library: no snapshot counters
                pass
        return out

    def snapshot(self):
        """Write a snapshot now (needs snapshot_bucket; between runs); the stream sequence
        it covers. A new consumer with the same bucket restores it at start()."""
        w = _lib()
        if not hasattr(w, "kvreg_nats_consumer_snapshot"):
            raise errors.NotSupported(_ffi.ENOTSUP, "the loaded libkvreg has no "
                                      "kvreg_nats_consumer_snapshot (libkvreg 0.6 is needed)")
        seq = c_u64()
        w.kvreg_nats_consumer_snapshot(self._p(), ctypes.byref(seq))
        return seq.value

    def worker(self, worker_id, dp_rank=0):
        """(instance, next_seq) the consumer follows for the worker, or None if not seen."""
        inst, nxt = c_u64(), c_u64()
        rc = _lib().kvreg_nats_consumer_worker(self._p(), worker_id, dp_rank,
                                               ctypes.byref(inst), ctypes.byref(nxt))
        if rc == _ffi.ENOENT:
            return None
        if rc < 0:
            raise errors.from_status(rc, _ffi.strerror(rc))
        return inst.value, nxt.value
