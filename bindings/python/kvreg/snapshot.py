"""Snapshot: the registered set at one position of the event stream (Registry.snapshot())."""

import ctypes

from . import _ffi, events as _events

__all__ = ["Snapshot"]

lib = _ffi.lib


class Snapshot:
    """What Registry.snapshot() returns: one Register event per registered hash, parents
    before children, with event_id EVENT_ID_SNAPSHOT and the pool_id / medium of a pool
    holding it (tokens with keep_tokens=True), and `position`: the event_id of the first
    event it does not contain.

    Resync a consumer: apply the snapshot's events, then every polled event with
    event_id >= position (skip older ones: the snapshot already has their effect).

    The events are copied into Python values when the snapshot is taken, so the object owns
    nothing in C: it needs no close and outlives its registry. It is a sequence:
    len(snap), snap[i], iter(snap)."""

    __slots__ = ("position", "events")

    def __init__(self, position, events):
        self.position = position
        self.events = events

    def __len__(self):
        return len(self.events)

    def __iter__(self):
        return iter(self.events)

    def __getitem__(self, index):
        return self.events[index]

    def __repr__(self):
        return "<kvreg.Snapshot position=%d events=%d>" % (self.position, len(self.events))


def take(reg_ptr):
    """Snapshot of the registry at reg_ptr: copy everything out, then free the C snapshot
    (its tokens are borrowed from it), whatever happens while copying."""
    snap = _ffi.snap_p()
    lib.kvreg_registry_snapshot(reg_ptr, ctypes.byref(snap))
    try:
        evs = _ffi.event_p()
        n = ctypes.c_size_t()
        lib.kvreg_snapshot_events(snap, ctypes.byref(evs), ctypes.byref(n))
        copied = [_events.from_c(evs[i]) for i in range(n.value)]
        return Snapshot(lib.kvreg_snapshot_position(snap), copied)
    finally:
        lib.kvreg_snapshot_free(snap)
