"""Use-after-close protection for objects whose C memory Python frees.

A Guard counts the calls in flight on one C object. close() marks it closed (new calls raise
StaleHandle instead of touching freed memory) and, when asked, waits for the calls already
running before handing the pointer back to be freed.

It also counts the open objects that borrow the C object (a kvreg.nats.Publisher borrows its
registry, a Consumer its index: C requires them to be freed first). While one is open,
close() raises Busy and changes nothing.
"""

import collections
import threading

from . import _ffi
from .errors import Busy, StaleHandle


class Guard:
    __slots__ = ("ptr", "what", "_cond", "_busy", "_closed", "_deps", "_on_orphan")

    def __init__(self, ptr, what):
        self.ptr = ptr
        self.what = what
        self._cond = threading.Condition(threading.Lock())
        self._busy = 0
        self._closed = False
        self._deps = collections.Counter()  # label of a borrower -> how many are open
        self._on_orphan = None

    def lend(self, label):
        """The live pointer, lent to a new dependent object named label until give_back():
        close() raises Busy meanwhile. StaleHandle once closed (or closing)."""
        with self._cond:
            if self._closed:
                raise StaleHandle(_ffi.ESTALE, "%s is closed" % self.what)
            self._deps[label] += 1
            return self.ptr

    def give_back(self, label):
        """A dependent is freed. Runs the close_later() action when it was the last one."""
        with self._cond:
            self._deps[label] -= 1
            if self._deps[label] <= 0:
                del self._deps[label]
            action = None
            if not self._deps:
                action, self._on_orphan = self._on_orphan, None
        if action is not None:
            action()

    def close_later(self, action):
        """For a safety net (a finalizer, which must not fail): False when nothing borrows
        the object (close it now); else True, and action() runs when the last dependent is
        given back."""
        with self._cond:
            if not self._deps or self._closed:
                return False
            self._on_orphan = action
            return True

    def _busy_error(self):
        return Busy(_ffi.EBUSY, "the %s is still borrowed by %s: close %s first" % (
            self.what, ", ".join("%d open %s" % (n, label)
                                 for label, n in sorted(self._deps.items())),
            "it" if sum(self._deps.values()) == 1 else "them"))

    @property
    def closed(self):
        return self._closed

    def enter(self):
        """The live pointer, counted as in use until exit(). StaleHandle once closed."""
        with self._cond:
            if self._closed:
                raise StaleHandle(_ffi.ESTALE, "%s is closed" % self.what)
            self._busy += 1
            return self.ptr

    def exit(self):
        with self._cond:
            self._busy -= 1
            if self._busy == 0 and self._closed:
                self._cond.notify_all()

    def close(self, wait, nudge=None):
        """Close once: returns the pointer to free, or None if already closed. Busy (and
        nothing changes) while a dependent borrows it (lend()). With wait, blocks until no
        call is in flight (callers must not wait on their own calls).

        nudge(ptr), when given, is called while calls are still in flight, first at once and
        then every 50 ms: for calls that sleep until something wakes them (a blocking poll),
        which would otherwise keep close() waiting forever."""
        with self._cond:
            if self._closed:
                return None
            if self._deps:
                raise self._busy_error()
            self._closed = True
            if wait:
                while self._busy:
                    if nudge is not None:
                        nudge(self.ptr)
                    self._cond.wait(0.05 if nudge is not None else None)
            ptr, self.ptr = self.ptr, None
            return ptr


def leave_with(release, exc):
    """__exit__ of Pool and Block: release(), the way an error in the with body expects.

    When the body is already raising (exc) and releasing runs the event callback, which
    raises again (often the same bug on the Remove events), that second error is added to
    the first as a note instead of replacing it: the body's exception is reported once, with
    its own traceback, and the callback's second failure is not printed as a second one."""
    if exc is None:
        release()
        return
    try:
        release()
    except Exception as again:
        if not getattr(again, "kvreg_from_callback", False):
            raise
        note = ("kvreg: the event callback raised again while leaving the with block "
                "(releasing its references): %s: %s" % (type(again).__name__, again))
        if hasattr(exc, "add_note"):  # Python 3.11
            exc.add_note(note)
        else:
            exc.__dict__.setdefault("kvreg_notes", []).append(note)
