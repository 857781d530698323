"""Register/Remove/Cleared events as plain Python values (copied out of the borrowed C
records)."""

import enum
from typing import NamedTuple, Optional, Tuple

from . import _ffi

__all__ = ["EventKind", "Event", "Medium"]


class EventKind(enum.IntEnum):
    REGISTER = _ffi.EVENT_REGISTER  # the hash became registered in some pool (first holder)
    REMOVE = _ffi.EVENT_REMOVE      # the hash left its last pool
    CLEARED = _ffi.EVENT_CLEARED    # Registry.clear(): every hash left every pool at once


class Medium(enum.IntEnum):
    """The storage medium (tier) of a pool, carried in its events (KVREG_MEDIUM_*)."""
    GPU = _ffi.MEDIUM_GPU
    CPU = _ffi.MEDIUM_CPU
    STORAGE = _ffi.MEDIUM_STORAGE
    EXTERNAL = _ffi.MEDIUM_EXTERNAL


def medium_value(medium):
    """A Medium, its int value, or its name ("gpu", "CPU", ...) -> the KVREG_MEDIUM_* int."""
    if isinstance(medium, str):
        try:
            return Medium[medium.upper()].value
        except KeyError:
            raise ValueError("unknown medium %r (known: %s)"
                             % (medium, ", ".join(m.name for m in Medium))) from None
    return int(medium)


def _enum_or_int(cls, value):
    try:
        return cls(value)
    except ValueError:  # a value newer than this binding
        return value


class Event(NamedTuple):
    kind: int            # EventKind, or a plain int for kinds newer than this binding
    event_id: int        # 0, 1, 2, ... per registry; a gap means events were dropped;
                         # EVENT_ID_SNAPSHOT (2**64 - 1) for the events of a Snapshot
    pool_id: int         # Pool.id of the pool whose call caused it (0 for Cleared)
    sequence_hash: int
    block_hash: int
    parent_sequence_hash: Optional[int]  # None for a first block
    tokens: Tuple[int, ...]              # empty when the tokens are not known
    medium: int = Medium.GPU             # Medium of that pool (GPU for Cleared)


def from_c(ev):
    """Copy one kvreg_event: its token pointer is only valid during the callback or until
    the next poll, so nothing borrowed may survive this function."""
    n = ev.n_tokens
    return Event(
        _enum_or_int(EventKind, ev.kind),
        ev.event_id,
        ev.pool_id,
        ev.sequence_hash,
        ev.block_hash,
        ev.parent_sequence_hash if ev.has_parent else None,
        tuple(ev.tokens[:n]) if n and ev.tokens else (),
        _enum_or_int(Medium, ev.medium),
    )
