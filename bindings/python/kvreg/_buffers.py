"""Turning Python values into the C arrays and integers the raw layer takes.

ctypes silently wraps out-of-range integers (c_uint32(2**32) == 0, c_uint64(-1) == 2**64-1),
which would turn a caller's mistake into a valid-looking hash or size, so every integer that
crosses into C goes through u32()/u64() first.
"""

import ctypes
from array import array

from . import _ffi
from .errors import InvalidArgument

_U32 = ctypes.c_uint32
_U64 = ctypes.c_uint64

# array typecodes with 4-byte / 8-byte unsigned items on this platform.
_U32_CODE = next(c for c in "ILH" if array(c).itemsize == 4)
_U64_CODE = next(c for c in "QL" if array(c).itemsize == 8)
# memoryview formats read as native uint32 (bytes-like input is raw native u32 memory).
_U32_FORMATS = {"I", "L", "=I", "@I", "@L"}
_BYTE_FORMATS = {"B", "b", "c"}


def _int(value, name, top):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s must be an integer, not %s" % (name, type(value).__name__))
    value = value.__index__()
    if not 0 <= value <= top:
        raise InvalidArgument(_ffi.EINVAL, "%s=%d is out of range [0, %d]" % (name, value, top))
    return value


def u32(value, name="value"):
    return _int(value, name, _ffi.U32_MAX)


def u64(value, name="value"):
    return _int(value, name, _ffi.U64_MAX)


def size(value, name="value"):
    return _int(value, name, (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1)


class U32Buffer:
    """A (pointer, length) view of tokens as native uint32, plus whatever must stay alive
    while C reads it. `ptr` is None for an empty buffer (the header allows NULL with n == 0)."""

    __slots__ = ("ptr", "n", "_keep")

    def __init__(self, carray, n):
        self._keep = carray
        self.n = n
        self.ptr = ctypes.cast(carray, _ffi.u32_p) if n else None


def _from_memoryview(mv):
    fmt = mv.format
    if fmt in _U32_FORMATS and mv.itemsize == 4:
        n = mv.nbytes // 4
    elif fmt in _BYTE_FORMATS:
        if mv.nbytes % 4:
            raise InvalidArgument(_ffi.EINVAL, "byte buffer length %d is not a multiple of 4 "
                                  "(expected native uint32 tokens)" % mv.nbytes)
        n = mv.nbytes // 4
    else:
        raise TypeError("token buffer must hold uint32 items (format 'I' or 'L' of size 4, "
                        "or raw bytes); got format %r itemsize %d" % (fmt, mv.itemsize))
    if n == 0:
        return U32Buffer(None, 0)
    if not mv.c_contiguous:
        # Strided views cannot be shared with C: one compacting copy.
        raw = mv.tobytes()
        return U32Buffer((_U32 * n).from_buffer_copy(raw), n)
    if not mv.readonly:
        # Zero-copy: C reads the caller's memory directly (it never retains it).
        return U32Buffer((_U32 * n).from_buffer(mv), n)
    return U32Buffer((_U32 * n).from_buffer_copy(mv), n)


def tokens(value):
    """Accepts list/tuple/iterables of ints, array('I'), bytes-like objects holding native
    uint32 and memoryviews of format 'I'/'L' (itemsize 4). No numpy needed; an ndarray of
    uint32 works through the buffer protocol."""
    if value is None:
        return U32Buffer(None, 0)
    if isinstance(value, (list, tuple, range)) or not _has_buffer(value):
        try:
            arr = array(_U32_CODE, value)
        except OverflowError as e:
            raise InvalidArgument(_ffi.EINVAL, "token out of range [0, 2**32): %s" % e) from e
        n = len(arr)
        return U32Buffer((_U32 * n).from_buffer(arr) if n else None, n)
    return _from_memoryview(memoryview(value))


def _has_buffer(value):
    try:
        memoryview(value).release()
    except TypeError:
        return False
    return True


def hashes(values):
    """A list of sequence hashes: ints, objects with a `sequence_hash` (BlockInfo, Block), or
    an array('Q')/memoryview of uint64."""
    if isinstance(values, array) and values.typecode == _U64_CODE:
        n = len(values)
        return ((_U64 * n).from_buffer(values) if n else None), n
    out = array(_U64_CODE)
    for v in values:
        h = getattr(v, "sequence_hash", v)
        out.append(u64(h, "sequence_hash"))
    n = len(out)
    return ((_U64 * n).from_buffer(out) if n else None), n
