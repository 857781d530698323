"""Register/Remove events as plain Python values (copied out of the borrowed C records)."""

import enum
from typing import NamedTuple, Optional, Tuple

from . import _ffi

__all__ = ["EventKind", "Event"]


class EventKind(enum.IntEnum):
    REGISTER = _ffi.EVENT_REGISTER  # the hash became registered in some pool (first holder)
    REMOVE = _ffi.EVENT_REMOVE      # the hash left its last pool


class Event(NamedTuple):
    kind: int            # EventKind, or a plain int for kinds newer than this binding
    event_id: int        # 0, 1, 2, ... per registry; a gap means events were dropped
    pool_id: int         # Pool.id of the pool whose call caused it
    sequence_hash: int
    block_hash: int
    parent_sequence_hash: Optional[int]  # None for a first block
    tokens: Tuple[int, ...]              # empty when the tokens are not known


def from_c(ev):
    """Copy one kvreg_event: its token pointer is only valid during the callback or until
    the next poll, so nothing borrowed may survive this function."""
    kind = ev.kind
    try:
        kind = EventKind(kind)
    except ValueError:
        pass
    n = ev.n_tokens
    return Event(
        kind,
        ev.event_id,
        ev.pool_id,
        ev.sequence_hash,
        ev.block_hash,
        ev.parent_sequence_hash if ev.has_parent else None,
        tuple(ev.tokens[:n]) if n and ev.tokens else (),
    )
