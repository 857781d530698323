"""NATS JetStream event plane (include/kvreg_nats.h, docs/nats.md): an engine's Publisher,
a router replica's Consumer feeding an Index.

available() says whether the loaded libkvreg was built with NATS; without it every call
raises NotSupported. Each object wraps one C handle: close it (close() or a with block)
before the object it borrows (a Publisher its Registry, a Consumer its Index): while it is
open, closing what it borrows raises Busy and changes nothing. They keep a reference to what
they borrow, so it is not collected under them.

Threads: every method may be called from any thread. Calls that kvreg_nats.h allows on one
thread at a time (set, start, stop of a Publisher; set, start, run, worker, snapshot of a
Consumer) are serialised: a second one waits for the first. close() from any thread waits for
the calls in flight (a Consumer's run() is stopped first, as by stop()), then frees; later
calls raise StaleHandle. Integers are range-checked (InvalidArgument, a ValueError, instead of
ctypes wrapping them).
"""

import collections
import ctypes
import threading
import warnings
import weakref

from . import _buffers, _ffi, errors
from ._ffi import lib
from ._lifetime import Guard

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
    "max_held_bytes": 17,
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


def _free(guard, free, parent, label):
    """Free the C object of guard, then give back what it borrowed."""
    ptr = guard.close(wait=True)
    if ptr is None:
        return
    try:
        free(ptr)
    finally:
        if parent is not None:
            parent.give_back(label)


def _finalize(guard, free, parent, label):
    """Safety net for an object collected open: free it, and warn. An Index that a Consumer
    still borrows (the collector may finalize both in any order) is freed when the last of
    them is closed instead."""
    later = guard.close_later(lambda: _free(guard, free, parent, label))
    try:
        warnings.warn("%s garbage collected without close(): %s; close it explicitly"
                      % (label, "freed once the objects borrowing it are closed" if later
                         else "freed now"), ResourceWarning)
    finally:
        if not later:
            _free(guard, free, parent, label)


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


def _u64_option(name, value):
    """A numeric option's value for C's uint64_t, range-checked (a flag may be a bool)."""
    if isinstance(value, bool):
        value = int(value)
    return _buffers.u64(value, name)


def _c_string(name, value):
    """A string option for C: None (NULL) or a str/bytes without NUL (C would stop there).
    bytes must be UTF-8: get() gives the value back as a str (bytes that were not UTF-8 made
    it raise UnicodeDecodeError)."""
    if value is None:
        return None
    if isinstance(value, str):
        raw = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise errors.InvalidArgument(_ffi.EINVAL, "%s must be UTF-8" % name) from None
    else:
        raise TypeError("%s must be a str or None, not %s" % (name, type(value).__name__))
    if b"\0" in raw:
        raise errors.InvalidArgument(_ffi.EINVAL, "%s must not contain NUL" % name)
    return raw


def _timeout_ms(timeout_ms):
    """run()'s timeout for C's int: -1 (until stopped) .. INT_MAX milliseconds."""
    if isinstance(timeout_ms, bool) or not hasattr(timeout_ms, "__index__"):
        raise TypeError("timeout_ms must be an integer, not %s" % type(timeout_ms).__name__)
    t = timeout_ms.__index__()
    if not -1 <= t <= _ffi.INT_MAX:
        raise errors.InvalidArgument(_ffi.EINVAL, "timeout_ms=%d is out of range [-1, %d] "
                                     "(-1: until stop())" % (t, _ffi.INT_MAX))
    return t


class _Handle:
    """A C handle with close(), a with block and a safety net.

    A Guard counts the calls in flight (close() waits for them; later calls raise
    StaleHandle) and the objects that borrow this one (close() raises Busy meanwhile).
    _serial makes the calls C allows on one thread at a time wait for each other."""

    _label = ""
    _nudge = None  # name of the C function that makes a call in flight return (stop)

    def _own(self, ptr, parent=None):
        """Take ptr; parent: the Guard of what it borrows (lent to it, given back on free)."""
        self._guard = Guard(ptr, self._label)
        self._parent = parent
        self._serial = threading.Lock()
        self._tls = threading.local()  # depth: this thread is inside a call on the object
        # (The notice trampoline stays an attribute: the collector runs this finalizer before
        # it clears the object's attributes, and a strong reference here would keep alive a
        # consumer that its own callback references.)
        self._finalizer = weakref.finalize(self, _finalize, self._guard, type(self)._free_fn(),
                                           parent, self._label)

    def _call(self, fn, *args, serial=False):
        """fn(ptr, *args) with the object pinned open; serial: one such call at a time."""
        guard, tls = self._guard, self._tls
        ptr = guard.enter()
        depth = getattr(tls, "depth", 0)
        tls.depth = depth + 1
        try:
            if not serial:
                return fn(ptr, *args)
            if getattr(tls, "serial", False):
                # from a notice callback, inside this consumer's own run(): waiting for the
                # lock would wait for ourselves
                raise errors.Busy(_ffi.EBUSY, "not allowed from inside this %s's own "
                                  "callback" % self._label)
            with self._serial:
                if guard.closed:  # closed while we waited for the call before us
                    raise errors.StaleHandle(_ffi.ESTALE, "%s is closed" % self._label)
                tls.serial = True
                try:
                    return fn(ptr, *args)
                finally:
                    tls.serial = False
        finally:
            tls.depth = depth
            guard.exit()

    def close(self):
        """Free the C object, after the calls in flight on other threads have returned (a
        Consumer's run() is stopped first). Idempotent; later calls raise StaleHandle. Busy,
        changing nothing, while an object that borrows this one is open, or from inside this
        object's own callback."""
        guard = getattr(self, "_guard", None)
        if guard is None or guard.closed:
            return
        if getattr(self._tls, "depth", 0):
            raise errors.Busy(_ffi.EBUSY, "a %s cannot be closed from inside its own callback"
                              % self._label)
        nudge = None
        if self._nudge is not None:
            stop = getattr(_lib(), self._nudge)

            def nudge(ptr):
                try:
                    stop(ptr)
                except errors.KvregError:  # it stops nothing then; close() waits anyway
                    pass
        ptr = guard.close(wait=True, nudge=nudge)  # Busy while something borrows it
        if ptr is None:
            return  # another thread closed it
        self._finalizer.detach()
        try:
            type(self)._free_fn()(ptr)
        finally:
            self._cfunc = None  # C calls it no more
            if self._parent is not None:
                self._parent.give_back(self._label)

    @property
    def closed(self):
        guard = getattr(self, "_guard", None)
        return guard is None or guard.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Index(_Handle):
    """A router's kvreg_index (what a Consumer feeds). Options by name: block_size, hashes
    (0 engine, 1 own: the events carry libkvreg's router hashes), profile, salt, shards,
    expected_entries; see include/kvreg_index.h. Any thread. close() raises Busy while a
    Consumer feeding it is open."""

    _label = "kvreg.nats.Index"

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
                                         _u64_option(name, value))
            out = idx_p()
            w.kvreg_index_new(ctypes.byref(out), cfg)
        finally:
            w.kvreg_index_config_free(cfg)
        self._own(out)

    def stat(self, name):
        """One KVREG_INDEX_STAT_* counter by name (entries, workers, memory_bytes, ...)."""
        v = c_u64()
        self._call(_lib().kvreg_index_stat, _option(INDEX_STATS, name, "index stat"),
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
        self._call(self._since_06("kvreg_index_digest"), ctypes.byref(v))
        return v.value

    def dump(self):
        """The index's dump (kvreg_index_dump: versioned, checksummed) as bytes."""
        data, n = ctypes.c_void_p(), _ffi.c_size()
        self._call(self._since_06("kvreg_index_dump_alloc"), ctypes.byref(data),
                   ctypes.byref(n))
        try:
            return ctypes.string_at(data, n.value)
        finally:
            _libc_free(data)

    def load(self, dump):
        """Load a dump into this index, which must know no worker (ProtocolError: corrupt;
        InvalidArgument: another configuration; StateError: not empty)."""
        data = bytes(dump)
        self._call(self._since_06("kvreg_index_load"), data, len(data))


def _libc_free(ptr):
    """free() for what the library allocated with malloc (kvreg_index_dump_alloc)."""
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    libc.free(ptr)


def _lend(parent, label):
    """The Guard of parent (a Publisher's Registry, a Consumer's Index) and its pointer, lent
    to a new label object until given back (StaleHandle if parent is closed)."""
    from .registry import Registry
    consumer = label.endswith("Consumer")
    if not isinstance(parent, Index if consumer else Registry):
        raise TypeError("%s needs a %s, not %s" % (
            label, "kvreg.nats.Index" if consumer else "kvreg.Registry",
            type(parent).__name__))
    guard = parent._guard if consumer else parent._core.guard
    return guard, guard.lend(label)


class Publisher(_Handle):
    """An engine's publisher: takes registry's events (it must be in POLL delivery) on its
    own thread and publishes them into a JetStream stream. String options (url, stream,
    subject_prefix, namespace, component, subject, lora_name) and numeric ones (format as a
    name or number, worker_id, dp_rank, max_in_flight, ... see PUBLISHER_OPTIONS) are
    keywords; start() connects. Close it before the registry (Registry.close() raises Busy
    while it is open). close() stops it (as stop()) if it runs."""

    _label = "kvreg.nats.Publisher"

    @staticmethod
    def _free_fn():
        return _lib().kvreg_nats_publisher_free

    def __init__(self, registry, **options):
        _check_built()
        parent, ptr = _lend(registry, self._label)
        try:
            out = pub_p()
            _lib().kvreg_nats_publisher_new(ctypes.byref(out), ptr)
        except BaseException:
            parent.give_back(self._label)
            raise
        self._registry = registry  # borrowed by the C publisher: keep it alive
        self._own(out, parent)
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
            self._call(w.kvreg_nats_publisher_set_string, PUBLISHER_STRINGS[name],
                       _c_string(name, value), serial=True)
        else:
            option = _option(PUBLISHER_OPTIONS, name, "publisher option")
            if name == "format" and isinstance(value, str):
                value = _option(FORMATS, value, "format")
            self._call(w.kvreg_nats_publisher_set, option, _u64_option(name, value),
                       serial=True)

    def get(self, name):
        """One option by name: the default until set, after start() what is in effect (the
        drawn instance, the subject's layout); None for a string option that is not set.
        Any thread, also while the publisher runs."""
        return self._call(lambda p: _get("kvreg_nats_publisher", p, name, PUBLISHER_OPTIONS,
                                         PUBLISHER_STRINGS, "publisher option"))

    def start(self):
        """Connect, make sure the stream exists, start the sender thread (ProtocolError: no
        server, or the stream is missing / cannot be made)."""
        self._call(_lib().kvreg_nats_publisher_start, serial=True)

    def stop(self):
        """Publish what is queued, wait for the acks (bounded by linger_ms), stop."""
        self._call(_lib().kvreg_nats_publisher_stop, serial=True)

    def stat(self, name):
        v = c_u64()
        self._call(_lib().kvreg_nats_publisher_stat,
                   _option(PUBLISHER_STATS, name, "publisher stat"), ctypes.byref(v))
        return v.value

    def stats(self):
        """Every counter, by name."""
        return {name: self.stat(name) for name in PUBLISHER_STATS}


class Consumer(_Handle):
    """A router replica: a durable pull consumer of the stream applying batches to index.
    String options url, stream, durable, filter and the numeric ones of CONSUMER_OPTIONS are
    keywords; notices (optional) is called with a Notice on the thread in run(). start()
    connects; run(timeout_ms) fetches and applies on the caller's thread. Close it before
    the index (Index.close() raises Busy while it is open). close() from another thread
    stops a run() in progress and waits for it. From the notices callback: stop(), stat(),
    get() and the index's methods; close() and the one-at-a-time calls (set, start, run,
    worker, snapshot) raise Busy there."""

    _label = "kvreg.nats.Consumer"
    _nudge = "kvreg_nats_consumer_stop"

    @staticmethod
    def _free_fn():
        return _lib().kvreg_nats_consumer_free

    def __init__(self, index, notices=None, **options):
        _check_built()
        if notices is not None and not callable(notices):
            raise TypeError("notices must be callable")
        parent, ptr = _lend(index, self._label)
        try:
            out = con_p()
            _lib().kvreg_nats_consumer_new(ctypes.byref(out), ptr)
        except BaseException:
            parent.give_back(self._label)
            raise
        self._index = index  # borrowed by the C consumer: keep it alive
        self._cfunc = None
        self._own(out, parent)
        self.errors = []  # exceptions the notice callback raised (not propagated into C)
        try:
            for name, value in options.items():
                self.set(name, value)
            if notices is not None:
                self._cfunc = NOTICE_FN(self._make_notice(notices))  # C calls it until freed
                self._call(_lib().kvreg_nats_consumer_set_notice_fn, self._cfunc, None,
                           serial=True)
        except BaseException:
            self.close()
            raise

    def _make_notice(self, fn):
        errors_ = self.errors  # not self: the trampoline must not keep the consumer alive

        def call(p, _user):
            n = p.contents
            try:
                fn(Notice(NOTICE_KINDS.get(n.kind, str(n.kind)), n.worker_id, n.dp_rank,
                          n.instance, n.first, n.last, n.count, n.stream_seq, bool(n.has_seq),
                          (n.subject or b"").decode("utf-8", "replace"),
                          (n.message or b"").decode("utf-8", "replace")))
            except Exception as exc:  # never unwind through C
                errors_.append(exc)
        return call

    def set(self, name, value):
        """Set one option by name (before start(); StateError after)."""
        w = _lib()
        if name in CONSUMER_STRINGS:
            self._call(w.kvreg_nats_consumer_set_string, CONSUMER_STRINGS[name],
                       _c_string(name, value), serial=True)
        else:
            option = _option(CONSUMER_OPTIONS, name, "consumer option")
            self._call(w.kvreg_nats_consumer_set, option, _u64_option(name, value),
                       serial=True)

    def get(self, name):
        """One option by name: the default until set (snapshot_name: the stream's name); None
        for a string option that is not set. Any thread, also during run()."""
        return self._call(lambda p: _get("kvreg_nats_consumer", p, name, CONSUMER_OPTIONS,
                                         CONSUMER_STRINGS, "consumer option"))

    def start(self):
        self._call(_lib().kvreg_nats_consumer_start, serial=True)

    def run(self, timeout_ms=0):
        """Fetch and apply for timeout_ms (0: one fetch of what is ready; -1: until stop() or
        close(); at most INT_MAX). One run at a time: another thread's run() waits for it."""
        t = _timeout_ms(timeout_ms)
        self._call(_lib().kvreg_nats_consumer_run, t, serial=True)

    def stop(self):
        """Make a run() in progress (or the next one) return soon. Any thread, also from the
        notices callback."""
        self._call(_lib().kvreg_nats_consumer_stop)

    def stat(self, name):
        v = c_u64()
        self._call(_lib().kvreg_nats_consumer_stat,
                   _option(CONSUMER_STATS, name, "consumer stat"), ctypes.byref(v))
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
        self._call(w.kvreg_nats_consumer_snapshot, ctypes.byref(seq), serial=True)
        return seq.value

    def worker(self, worker_id, dp_rank=0):
        """(instance, next_seq) the consumer follows for the worker, or None if not seen.
        Between runs: it waits for a run() in progress."""
        wid = _buffers.u64(worker_id, "worker_id")
        rank = _buffers.u32(dp_rank, "dp_rank")
        inst, nxt = c_u64(), c_u64()
        rc = self._call(_lib().kvreg_nats_consumer_worker, wid, rank, ctypes.byref(inst),
                        ctypes.byref(nxt), serial=True)
        if rc == _ffi.ENOENT:
            return None
        if rc < 0:
            raise errors.from_status(rc, _ffi.strerror(rc))
        return inst.value, nxt.value
