"""Token block sequences (Dynamo's TokenBlockSequence)."""

import contextlib
import ctypes
import threading
import weakref

from . import _buffers, _ffi
from .errors import StaleHandle
from .hashing import info_from_c

__all__ = ["Sequence"]

lib = _ffi.lib


def _free(box):
    ptr, box[0] = box[0], None
    if ptr:
        lib.kvreg_sequence_free(ptr)


class Sequence:
    """Tokens split into blocks of block_size; a block is hashed as soon as it is full.

    Like the C object it is meant for one owner. It is still guarded by a lock, so sharing
    it by mistake (or closing it while another thread uses it) raises or serialises instead
    of corrupting memory.

    A Sequence holds only memory, never registry state, so unlike Registry, Pool and Block
    it needs no explicit close: garbage collection frees it without a warning (close()
    frees it earlier)."""

    def __init__(self, block_size, salt, tokens=None):
        """salt has no default (ROUTER_SALT matches Dynamo's KV router), as in Go and Rust."""
        out = _ffi.seq_p()
        lib.kvreg_sequence_new(ctypes.byref(out), _buffers.u32(block_size, "block_size"),
                               _buffers.u64(salt, "salt"))
        # A one-item list shared with the finalizer, which must not reference self.
        self._box = [out]
        self._lock = threading.RLock()
        self._finalizer = weakref.finalize(self, _free, self._box)
        if tokens is not None:
            self.extend(tokens)

    @contextlib.contextmanager
    def _pinned(self):
        # RLock: a registration that reads this sequence may run an inline callback that
        # touches the same sequence on the same thread.
        with self._lock:
            ptr = self._box[0]
            if not ptr:
                raise StaleHandle(_ffi.ESTALE, "sequence is closed")
            yield ptr

    def close(self):
        with self._lock:
            self._finalizer()

    @property
    def closed(self):
        return not self._box[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- mutation ------------------------------------------------------------------------
    def extend(self, tokens):
        """Append tokens; returns the range of block indices this call completed."""
        buf = _buffers.tokens(tokens)
        n = ctypes.c_size_t()
        with self._pinned() as p:
            lib.kvreg_sequence_extend(p, buf.ptr, buf.n, ctypes.byref(n))
            end = lib.kvreg_sequence_num_blocks(p)
        return range(end - n.value, end)

    def append(self, token):
        """Append one token; returns the index of the block it completed, else None."""
        done = ctypes.c_int()
        with self._pinned() as p:
            lib.kvreg_sequence_append(p, _buffers.u32(token, "token"), ctypes.byref(done))
            return lib.kvreg_sequence_num_blocks(p) - 1 if done.value else None

    def truncate(self, n_tokens):
        """Keep the first n_tokens tokens (no-op if there are fewer)."""
        with self._pinned() as p:
            lib.kvreg_sequence_truncate(p, _buffers.size(n_tokens, "n_tokens"))

    def unwind(self, n):
        """Remove the last n tokens (RangeError, unchanged, if there are fewer)."""
        with self._pinned() as p:
            lib.kvreg_sequence_unwind(p, _buffers.size(n, "n"))

    def pop(self):
        """Remove and return the last token (NotFound when empty)."""
        tok = ctypes.c_uint32()
        with self._pinned() as p:
            lib.kvreg_sequence_pop(p, ctypes.byref(tok))
        return tok.value

    def reset(self):
        """Drop every token; block size and salt stay."""
        with self._pinned() as p:
            lib.kvreg_sequence_reset(p)

    # -- queries -------------------------------------------------------------------------
    def __len__(self):
        """Total tokens, complete blocks plus the partial block."""
        with self._pinned() as p:
            return lib.kvreg_sequence_total_tokens(p)

    total_tokens = property(__len__)

    @property
    def num_blocks(self):
        with self._pinned() as p:
            return lib.kvreg_sequence_num_blocks(p)

    @property
    def block_size(self):
        with self._pinned() as p:
            return lib.kvreg_sequence_block_size(p)

    @property
    def salt(self):
        with self._pinned() as p:
            return lib.kvreg_sequence_salt(p)

    def block(self, index):
        """BlockInfo of complete block `index` (RangeError beyond the complete blocks)."""
        out = _ffi.kvreg_block_info()
        with self._pinned() as p:
            lib.kvreg_sequence_block(p, _buffers.size(index, "index"), ctypes.byref(out))
        return info_from_c(out)

    @property
    def blocks(self):
        """BlockInfo of every complete block, in order."""
        out = _ffi.kvreg_block_info()
        with self._pinned() as p:
            result = []
            for i in range(lib.kvreg_sequence_num_blocks(p)):
                lib.kvreg_sequence_block(p, i, ctypes.byref(out))
                result.append(info_from_c(out))
            return result

    def block_tokens(self, index):
        """A copy of complete block `index`'s tokens."""
        ptr = _ffi.u32_p()
        n = ctypes.c_size_t()
        with self._pinned() as p:
            lib.kvreg_sequence_block_tokens(p, _buffers.size(index, "index"),
                                            ctypes.byref(ptr), ctypes.byref(n))
            # Borrowed until the next modification: copy while still holding the lock.
            return ptr[:n.value] if n.value else []

    @property
    def partial_tokens(self):
        """A copy of the tokens of the partial (not yet hashed) block."""
        ptr = _ffi.u32_p()
        n = ctypes.c_size_t()
        with self._pinned() as p:
            lib.kvreg_sequence_partial_tokens(p, ctypes.byref(ptr), ctypes.byref(n))
            return ptr[:n.value] if n.value else []

    @property
    def tokens(self):
        """A copy of all tokens (complete blocks then the partial block)."""
        with self._lock:
            out = []
            for i in range(self.num_blocks):
                out.extend(self.block_tokens(i))
            out.extend(self.partial_tokens)
            return out

    def __repr__(self):
        if self.closed:
            return "<kvreg.Sequence closed>"
        return "<kvreg.Sequence block_size=%d tokens=%d blocks=%d>" % (
            self.block_size, len(self), self.num_blocks)
