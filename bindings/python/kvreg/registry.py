"""Registry: the global table shared by pools, its events and its lifetime."""

import ctypes
import math
import numbers
import threading
import time
import warnings
import weakref

from . import _buffers, _ffi, events as _events, snapshot as _snapshot
from ._lifetime import Guard
from .errors import Busy, InvalidArgument
from .pool import Pool

__all__ = ["Registry", "STATS"]

lib = _ffi.lib

STATS = {
    "hashes": _ffi.STAT_HASHES,
    "pools": _ffi.STAT_POOLS,
    "events_register": _ffi.STAT_EVENTS_REGISTER,
    "events_remove": _ffi.STAT_EVENTS_REMOVE,
    "events_dropped": _ffi.STAT_EVENTS_DROPPED,
    "events_queued": _ffi.STAT_EVENTS_QUEUED,
    "next_event_id": _ffi.STAT_NEXT_EVENT_ID,
    "token_bytes": _ffi.STAT_TOKEN_BYTES,
    "events_cleared": _ffi.STAT_EVENTS_CLEARED,
}

_DELIVERY = {"inline": _ffi.DELIVERY_INLINE, "poll": _ffi.DELIVERY_POLL}
_POLL_CHUNK = 256


class _Core:
    """Everything the C registry needs from Python, kept apart from the Registry object so
    the weakref.finalize safety net can free it without resurrecting the Registry."""

    def __init__(self, delivery, callback):
        self.guard = None
        self.delivery = delivery
        self.callback = callback
        # The CFUNCTYPE object C holds. ctypes frees a callback's machine code with the
        # object, so it must stay referenced exactly as long as C may call it: it is replaced
        # only together with the C registration, under set_lock.
        self.cfunc = None
        self.set_lock = threading.Lock()
        self.tls = threading.local()  # per thread: depth, in_callback, pending
        self.poll_lock = threading.Lock()
        self.poll_buf = None
        self.poll_sleeping = False  # the poll_lock holder sleeps in kvreg_registry_poll_wait
        # The pools created on this registry, for the report of what is still open at exit.
        self.pools = weakref.WeakSet()

    # -- calls ---------------------------------------------------------------------------
    def run(self, fn, *args):
        """Call fn(reg_ptr, *args) with the registry pinned open, then raise any exception a
        Python callback raised on this thread during this call.

        In inline mode a callback runs on whichever thread is delivering events at that
        moment: a call may run callbacks for other threads' events, and may return before its
        own events reach the callback (another thread delivers them). So the exception is
        kept per thread (tls.pending) and raised by the outermost binding call of the thread
        that ran the callback, right after its C call returns; never on another thread."""
        ptr = self.guard.enter()
        tls = self.tls
        depth = getattr(tls, "depth", 0)
        tls.depth = depth + 1
        try:
            result = fn(ptr, *args)
        except BaseException as exc:
            if depth == 0:
                self._raise_pending(exc)
            raise
        finally:
            tls.depth = depth
            self.guard.exit()
        if depth == 0 and getattr(tls, "pending", None):
            self._raise_pending(None)
        return result

    def _raise_pending(self, cause):
        pending = getattr(self.tls, "pending", None)
        if not pending:
            return
        self.tls.pending = []
        first = pending[0]
        for exc in pending:
            _mark_callback_error(exc)
        # More than one failing callback in one call: the first is raised, the others are
        # reported like any unraisable error rather than silently dropped.
        for extra in pending[1:]:
            _report_unraisable(extra)
        raise first from cause

    def in_callback(self):
        return getattr(self.tls, "in_callback", 0) > 0

    # -- callbacks -----------------------------------------------------------------------
    def make_cfunc(self, callback):
        if callback is None:
            return None
        tls = self.tls

        def trampoline(events_p, n, _user_data):
            tls.in_callback = getattr(tls, "in_callback", 0) + 1
            try:
                evs = [_events.from_c(events_p[i]) for i in range(n)]
                callback(evs)
            except BaseException as exc:  # nothing may unwind into C
                if getattr(tls, "depth", 0) > 0:
                    pending = getattr(tls, "pending", None)
                    if pending is None:
                        pending = tls.pending = []
                    pending.append(exc)
                else:
                    # No Python call of ours is waiting on this thread (a C caller caused the
                    # events): let ctypes report it through sys.unraisablehook.
                    raise
            finally:
                tls.in_callback -= 1

        return _ffi.EVENT_FN(trampoline)

    # -- lifetime ------------------------------------------------------------------------
    def lock_poll(self, timeout):
        """Take poll_lock within timeout seconds (None: no limit). False when another thread
        holds it to sleep in a blocking poll: that thread takes the next events itself."""
        lock = self.poll_lock
        if timeout is None:
            lock.acquire()
            return True
        if timeout > 0:
            got = lock.acquire(timeout=min(timeout, threading.TIMEOUT_MAX))
        else:
            got = lock.acquire(blocking=False)
        # A thread copying polled events holds the lock only briefly: wait for it, even past
        # the timeout, rather than report an empty queue that is not.
        while not got:
            if self.poll_sleeping:
                return False
            got = lock.acquire(timeout=0.001)
        return True

    def close(self):
        if self.guard is None:
            return
        if self.in_callback():
            raise Busy(_ffi.EBUSY, "a registry cannot be closed from inside its own callback")
        # A thread sleeping in a blocking poll() is a call in flight: wake it, or we would
        # wait for it forever.
        nudge = lib.kvreg_registry_wakeup if self.delivery == "poll" else None
        ptr = self.guard.close(wait=True, nudge=nudge)
        if ptr:
            lib.kvreg_registry_free(ptr)
            # Only now is the callback guaranteed not to run again.
            self.cfunc = None
            self.callback = None
            self.poll_buf = None


def _mark_callback_error(exc):
    """Remember that exc came from the event callback (see _lifetime.leave_with)."""
    try:
        exc.kvreg_from_callback = True
    except AttributeError:  # an exception type with __slots__: it simply stays unmarked
        pass


def _report_unraisable(exc):
    """Route an exception to sys.unraisablehook. Python offers no public way to build the
    hook's argument, so raise it inside a throwaway ctypes callback, which ctypes reports
    exactly as it reports any callback exception."""
    def boom():
        raise exc
    try:
        _ffi.DESTROY_FN(lambda _p: boom())(None)
    except Exception:
        pass


def _open_pools(core):
    """'G1' holding 3 blocks, ... for the pools still open on an open registry."""
    parts = []
    for pool in list(core.pools):
        if pool._guard.closed:
            continue
        try:
            held = pool._run(lib.kvreg_pool_size)
        except Exception:  # the report must not fail the exit
            held = None
        parts.append("kvreg.Pool id=%d name=%r holding %s" % (
            pool.id, pool.name, "?" if held is None else
            "%d block%s" % (held, "" if held == 1 else "s")))
    return parts


def _finalize(core):
    """Safety net for a Registry garbage collected (or still open at exit) without close().

    Freeing a registry emits no events and runs no callback, so this frees it, and warns:
    the program lost track of a registry it should close explicitly. The warning names the
    pools that were still open and how many blocks each held (unreleased Blocks): at exit
    their own objects are never collected before the registry, so this is their report."""
    # A kvreg.nats.Publisher still open borrows the C registry (the collector may finalize
    # both in any order): the registry is then freed when the last of them is closed.
    later = core.guard is not None and core.guard.close_later(core.close)
    try:
        pools = _open_pools(core) if core.guard is not None and not core.guard.closed else []
        warnings.warn("kvreg.Registry garbage collected (or still open at exit) without "
                      "close(): %s (emitting no events); close it explicitly (close() "
                      "or a with block)%s" % (
                          "freed once the kvreg.nats.Publisher borrowing it is closed"
                          if later else "freed now",
                          "; pools still open: " + ", ".join(pools) if pools else ""),
                      ResourceWarning)
    finally:
        if not later:
            core.close()


def _timeout_ms(timeout):
    """poll()'s timeout in seconds -> kvreg_registry_poll_wait's milliseconds (-1: no limit)."""
    if timeout is None:
        return -1
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError("timeout must be a number of seconds or None, not %s"
                        % type(timeout).__name__)
    t = float(timeout)
    if math.isnan(t) or t < 0:
        raise ValueError("timeout must be None or >= 0 seconds, not %r" % (timeout,))
    if math.isinf(t):
        return -1
    # Round up: a short positive timeout must still wait, not become 0 (no wait). Longer than
    # the C int allows (~24 days): wait that long; poll() may return [] early anyway.
    return min(math.ceil(t * 1000), _ffi.INT_MAX)


def _remaining_ms(deadline):
    left = deadline - time.monotonic()
    return min(math.ceil(left * 1000), _ffi.INT_MAX) if left > 0 else 0


class Registry:
    """The global registry shared by pools (thread-safe).

    delivery: "poll" (events queue for poll()/drain(); recommended from Python) or "inline"
    (callback(events) runs, one call at a time and in event order, on whichever thread is
    delivering: single-threaded, before the call that caused the events returns; with
    several threads, call flush() before reading what the callback recorded).
    Default: "inline" when a callback is given, else "poll".
    reserve_blocks: blocks (one pool's hold on a hash) to set memory aside for now; up to
    that many held, registering allocates nothing (KVREG_OPT_RESERVE_BLOCKS).
    events: "global" (default: one Register / Remove pair per hash, whatever pools hold it)
    or "per-tier" (one pair per (hash, medium)); see KVREG_OPT_EVENT_MODE in kvreg.h.

    Close it explicitly (close() or a with block). A Registry garbage collected while open
    is freed (no events) with a ResourceWarning.
    """

    def __init__(self, delivery=None, *, keep_tokens=False, poll_capacity=None, shards=None,
                 callback=None, reserve_blocks=None, events=None):
        if events not in (None, "global", "per-tier"):
            raise ValueError("events must be 'global' or 'per-tier', not %r" % (events,))
        if delivery is None:
            delivery = "inline" if callback is not None else "poll"
        if delivery not in _DELIVERY:
            raise ValueError("delivery must be 'poll' or 'inline', not %r" % (delivery,))
        if delivery == "poll" and callback is not None:
            raise ValueError("a callback needs delivery='inline'")
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable")
        self._core = core = _Core(delivery, callback)
        cfg = _ffi.cfg_p()
        lib.kvreg_config_new(ctypes.byref(cfg))
        try:
            lib.kvreg_config_set(cfg, _ffi.OPT_DELIVERY, _DELIVERY[delivery])
            lib.kvreg_config_set(cfg, _ffi.OPT_KEEP_TOKENS, 1 if keep_tokens else 0)
            if poll_capacity is not None:
                lib.kvreg_config_set(cfg, _ffi.OPT_POLL_CAPACITY,
                                     _buffers.u64(poll_capacity, "poll_capacity"))
            if shards is not None:
                lib.kvreg_config_set(cfg, _ffi.OPT_SHARDS, _buffers.u64(shards, "shards"))
            if reserve_blocks is not None:
                lib.kvreg_config_set(cfg, _ffi.OPT_RESERVE_BLOCKS,
                                     _buffers.u64(reserve_blocks, "reserve_blocks"))
            if events is not None:
                lib.kvreg_config_set(cfg, _ffi.OPT_EVENT_MODE, _ffi.EVENTS_PER_TIER
                                     if events == "per-tier" else _ffi.EVENTS_GLOBAL)
            cfunc = core.make_cfunc(callback)
            if cfunc is not None:
                lib.kvreg_config_set_event_fn(cfg, cfunc, None, _ffi.DESTROY_FN())
            reg = _ffi.reg_p()
            lib.kvreg_registry_new(ctypes.byref(reg), cfg)
        finally:
            lib.kvreg_config_free(cfg)
        core.cfunc = cfunc
        core.guard = Guard(reg, "registry")
        self._finalizer = weakref.finalize(self, _finalize, core)

    # -- lifetime ------------------------------------------------------------------------
    def close(self):
        """Free the registry and every pool it owns (no events). Idempotent. Pools and
        blocks of this registry raise StaleHandle afterwards. Busy from inside its callback,
        and while a kvreg.nats.Publisher borrows it (close that first): nothing changes then."""
        self._core.close()
        self._finalizer.detach()

    @property
    def closed(self):
        return self._core.guard.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return "<kvreg.Registry %s delivery=%s>" % (state, self._core.delivery)

    # -- pools ---------------------------------------------------------------------------
    def pool(self, name="", medium=None):
        """A new pool (tier) in this registry. medium: a Medium, its value or its name
        ("gpu", "cpu", "storage", "external"; default GPU), carried in the pool's events.
        Overflow when the registry has no free pool id (the library's KVREG_MAX_POOLS live
        pools)."""
        return Pool(self, name, medium)

    # -- whole-registry operations -------------------------------------------------------
    def clear(self):
        """Empty every pool at once (vLLM's reset_prefix_cache): every reference is dropped,
        every Block of this registry becomes stale (StaleHandle, for good), and ONE
        EventKind.CLEARED event is emitted instead of a Remove per hash. Pools stay usable.
        Events with a lower event_id happened before the clear, higher ones after it."""
        self._core.run(lib.kvreg_registry_clear)

    def snapshot(self):
        """The registered set at one position of the event stream, as a Snapshot (copied
        out: owns nothing in C). For a consumer that joined late or lost events: apply the
        snapshot, then every event with event_id >= snapshot.position. Emits no event."""
        return self._core.run(_snapshot.take)

    # -- queries -------------------------------------------------------------------------
    @property
    def delivery(self):
        return self._core.delivery

    def contains(self, sequence_hash):
        """True if any pool of the registry holds sequence_hash. Errors raise (StaleHandle
        for a closed registry ...); they never read as False."""
        h = _buffers.u64(getattr(sequence_hash, "sequence_hash", sequence_hash),
                         "sequence_hash")
        present = ctypes.c_int()
        self._core.run(lib.kvreg_registry_contains, h, ctypes.byref(present))
        return present.value != 0

    __contains__ = contains

    def stat(self, name):
        """One counter by name (see STATS) or KVREG_STAT_* number."""
        code = STATS.get(name, name) if isinstance(name, str) else name
        if isinstance(code, str):
            raise KeyError("unknown stat %r (known: %s)" % (name, ", ".join(STATS)))
        value = ctypes.c_uint64()
        self._core.run(lib.kvreg_registry_stat, _buffers.u32(code, "stat"),
                       ctypes.byref(value))
        return value.value

    def stats(self):
        """All known counters as a dict. Each value is a consistent snapshot, not the set."""
        return {name: self.stat(code) for name, code in STATS.items()}

    # -- events --------------------------------------------------------------------------
    def set_callback(self, callback):
        """Replace the inline callback (None: events are counted and dropped). When this
        returns the old callback is not running and will not run again. Busy from inside a
        callback; InvalidArgument in poll mode."""
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable")
        core = self._core
        # Checked here as well as in C: a callback must not queue on set_lock behind a setter
        # that waits in C for this very callback to return.
        if core.in_callback():
            raise Busy(_ffi.EBUSY, "set_callback() is not allowed from inside a callback")
        cfunc = core.make_cfunc(callback)
        done = []

        def call(reg):
            # ctypes wants typed NULLs for function-pointer arguments, not None.
            lib.kvreg_registry_set_event_fn(reg, cfunc or _ffi.EVENT_FN(), None,
                                            _ffi.DESTROY_FN())
            done.append(True)
        # The C registration and the Python reference that keeps its trampoline alive change
        # together: two setters interleaving must not leave C holding a trampoline Python
        # already dropped (freed machine code: the next event crashes the process).
        with core.set_lock:
            try:
                core.run(call)
            finally:
                if done:
                    # C no longer references the old trampoline: it may be collected now.
                    core.cfunc = cfunc
                    core.callback = callback

    def flush(self):
        """Wait until every event emitted before this call has been delivered: inline, the
        callback returned for it; poll, it is queued (or dropped). Use it before reading what
        a callback counted, when other threads emit events. Raises the exception of a
        callback it ran on this thread, like any other call. Busy from inside a callback."""
        self._core.run(lib.kvreg_registry_flush)

    def wakeup(self):
        """Make a poll() sleeping on this registry return now (with what is queued, maybe
        nothing), or the next one if none sleeps: the wake-up is not lost. From any thread."""
        self._core.run(lib.kvreg_registry_wakeup)

    def poll(self, max_events=1024, timeout=0):
        """Poll mode: take up to max_events queued events, oldest first.

        timeout: seconds to wait while the queue is empty. 0 (default): do not wait, [] when
        empty. None: wait without limit. The wait ends early, possibly with [], when
        wakeup() is called (use it to stop a consumer thread), when the registry is closed,
        or when another thread's poll() took the events. The waiting thread sleeps in the
        kernel; a blocking poll on the main thread is not interrupted by Ctrl-C (use a
        consumer thread, or a finite timeout in a loop)."""
        limit = _buffers.size(max_events, "max_events")
        wait_ms = _timeout_ms(timeout)
        core = self._core
        if core.delivery != "poll":
            raise InvalidArgument(_ffi.EINVAL, "poll() needs delivery='poll'")
        out = []
        if limit == 0:
            return out
        deadline = time.monotonic() + wait_ms / 1000 if wait_ms > 0 else None
        # Event tokens stay valid only until the next poll on this registry: serialise our
        # polls so one thread's copy cannot race another's poll. The time spent waiting for
        # the lock counts against the timeout.
        if not core.lock_poll(None if wait_ms < 0 else wait_ms / 1000):
            return out
        try:
            if deadline is not None:
                wait_ms = _remaining_ms(deadline)
            if core.poll_buf is None:
                core.poll_buf = (_ffi.kvreg_event * _POLL_CHUNK)()
            buf = core.poll_buf
            n = ctypes.c_size_t()
            while len(out) < limit:
                want = min(_POLL_CHUNK, limit - len(out))
                if wait_ms != 0:  # only the first chunk waits
                    core.poll_sleeping = True
                    try:
                        core.run(lib.kvreg_registry_poll_wait, buf, want, ctypes.byref(n),
                                 wait_ms)
                    finally:
                        core.poll_sleeping = False
                    wait_ms = 0
                else:
                    core.run(lib.kvreg_registry_poll, buf, want, ctypes.byref(n))
                out.extend(_events.from_c(buf[i]) for i in range(n.value))
                if n.value < want:
                    break
        finally:
            core.poll_lock.release()
        return out

    def drain(self):
        """Iterate over queued events until the queue is empty (poll mode)."""
        while True:
            batch = self.poll()
            if not batch:
                return
            yield from batch
