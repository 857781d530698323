"""Use-after-close protection for objects whose C memory Python frees.

A Guard counts the calls in flight on one C object. close() marks it closed (new calls raise
StaleHandle instead of touching freed memory) and, when asked, waits for the calls already
running before handing the pointer back to be freed.
"""

import threading

from . import _ffi
from .errors import StaleHandle


class Guard:
    __slots__ = ("ptr", "what", "_cond", "_busy", "_closed")

    def __init__(self, ptr, what):
        self.ptr = ptr
        self.what = what
        self._cond = threading.Condition(threading.Lock())
        self._busy = 0
        self._closed = False

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
        """Close once: returns the pointer to free, or None if already closed. With wait,
        blocks until no call is in flight (callers must not wait on their own calls).

        nudge(ptr), when given, is called while calls are still in flight, first at once and
        then every 50 ms: for calls that sleep until something wakes them (a blocking poll),
        which would otherwise keep close() waiting forever."""
        with self._cond:
            if self._closed:
                return None
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
