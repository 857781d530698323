"""Python binding (ctypes, standard library only) for libkvreg.

The library is found through KVREG_LIBRARY (a path), the libdir of the `meson install` that
installed this package, or its SONAME libkvreg.so.0 (a system install, after ldconfig).
"""

from . import _ffi
from ._version import __version__
from .errors import (AlreadyRegistered, Busy, InvalidArgument, KvregError, NotFound,
                     NotSupported, OutOfMemory, Overflow, ProtocolError, RangeError,
                     StaleHandle, StateError)
from .events import Event, EventKind, Medium
from .hashing import ROUTER_SALT, BlockInfo, block_hash, hash_blocks, sequence_hash
from .pool import Block, Pool
from .registry import STATS, Registry
from .sequence import Sequence
from .snapshot import Snapshot
from . import wire
from . import nats

__all__ = [
    "KvregError", "InvalidArgument", "OutOfMemory", "RangeError", "StateError",
    "AlreadyRegistered", "NotFound", "StaleHandle", "Busy", "Overflow", "NotSupported",
    "ProtocolError", "Event", "EventKind", "Medium", "Snapshot", "wire", "nats",
    "features", "FEATURE_WIRE", "FEATURE_ZMQ", "EVENT_ID_SNAPSHOT", "BlockInfo", "hash_blocks", "block_hash", "sequence_hash",
    "ROUTER_SALT", "MAX_POOLS", "STATS", "Registry", "Pool", "Block", "Sequence",
    "version", "version_number", "strerror", "__version__",
]

MAX_POOLS = _ffi.MAX_POOLS
FEATURE_WIRE = _ffi.FEATURE_WIRE  # kvreg.wire works (the library was built with msgpack-c)
FEATURE_ZMQ = _ffi.FEATURE_ZMQ    # ZeroMQ publisher/subscriber built in
EVENT_ID_SNAPSHOT = _ffi.EVENT_ID_SNAPSHOT  # event_id of a Snapshot's events
strerror = _ffi.strerror


def version():
    """Runtime version string of the loaded libkvreg."""
    return _ffi.lib.kvreg_version_string().decode("ascii")


def version_number():
    """MAJOR*10000 + MINOR*100 + PATCH of the loaded libkvreg."""
    return _ffi.lib.kvreg_version_number()


def features():
    """Bitwise OR of the FEATURE_* built into the loaded libkvreg."""
    return _ffi.lib.kvreg_features()
