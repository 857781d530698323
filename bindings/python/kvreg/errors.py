"""Exceptions: one base class carrying the KVREG_E* code, one subclass per code.

Each subclass also derives from the built-in exception a Python caller would expect
(InvalidArgument is a ValueError, NotFound a KeyError, ...) so generic handlers keep working.
"""

__all__ = [
    "KvregError", "InvalidArgument", "OutOfMemory", "RangeError", "StateError",
    "AlreadyRegistered", "NotFound", "StaleHandle", "Busy", "Overflow", "NotSupported",
    "ProtocolError", "from_status",
]


class KvregError(Exception):
    """A negative libkvreg status. `code` is the KVREG_E* value, `message` its strerror."""

    code = None

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self):
        return "%s (kvreg status %d)" % (self.message, self.code)

    # KeyError's __str__ would repr() the args; keep one readable format for every class.
    __repr__ = Exception.__repr__


class InvalidArgument(KvregError, ValueError):
    """KVREG_EINVAL: bad argument (zero size, unknown option, value out of range)."""


class OutOfMemory(KvregError, MemoryError):
    """KVREG_ENOMEM: allocation failed; the call changed nothing."""


class RangeError(KvregError, IndexError):
    """KVREG_ERANGE: index or count out of range, output too small."""


class StateError(KvregError):
    """KVREG_ESTATE: object in the wrong state (partial block, empty sequence)."""


class AlreadyRegistered(KvregError):
    """KVREG_EEXIST: the hash is already registered in this pool (acquire it instead)."""


class NotFound(KvregError, KeyError):
    """KVREG_ENOENT: no such hash in this pool, or nothing stored."""

    __str__ = KvregError.__str__


class StaleHandle(KvregError):
    """KVREG_ESTALE: released/double-released/foreign handle, closed pool or registry."""


class Busy(KvregError):
    """KVREG_EBUSY: not allowed from inside an event callback of this registry; also what
    close() raises for an object that another open object still borrows (a Registry with a
    kvreg.nats.Publisher, an Index with a Consumer) or from inside that object's own callback.
    Nothing was changed: close the other object first and try again."""


class Overflow(KvregError, OverflowError):
    """KVREG_EOVERFLOW: a counter would overflow (reference count, pool ids)."""


class NotSupported(KvregError):
    """KVREG_ENOTSUP: the feature was not built into the loaded library (see
    kvreg.features(); the wire formats need a library built with msgpack-c)."""


class ProtocolError(KvregError, ValueError):
    """KVREG_EPROTO: malformed input from outside (a wire payload that does not decode).

    `offset` is the byte offset of the problem in the payload and `detail` the decoder's
    description of it, when the error comes from a Decoder (else None)."""

    def __init__(self, code, message, offset=None, detail=None):
        super().__init__(code, message)
        self.offset = offset
        self.detail = detail

    def __str__(self):
        if self.offset is None:
            return KvregError.__str__(self)
        return "%s: %s (offset %d, kvreg status %d)" % (self.message, self.detail or "?",
                                                        self.offset, self.code)


_BY_CODE = {
    -1: InvalidArgument,
    -2: OutOfMemory,
    -3: RangeError,
    -4: StateError,
    -5: AlreadyRegistered,
    -6: NotFound,
    -7: StaleHandle,
    -8: Busy,
    -9: Overflow,
    -10: NotSupported,
    -11: ProtocolError,
}


def from_status(code, message):
    """The exception instance for a negative status (KvregError itself for unknown codes,
    which a newer library may return)."""
    return _BY_CODE.get(code, KvregError)(code, message)
