"""Dynamo-compatible block hashing (pure functions, thread-safe)."""

import ctypes
from typing import NamedTuple, Optional

from . import _buffers, _ffi

__all__ = ["BlockInfo", "hash_blocks", "block_hash", "sequence_hash", "ROUTER_SALT"]

ROUTER_SALT = _ffi.ROUTER_SALT


class BlockInfo(NamedTuple):
    """Hashes of one complete block. parent_sequence_hash is None for the first block of a
    sequence; position is None when unknown (blocks read back from a registry)."""

    block_hash: int
    sequence_hash: int
    parent_sequence_hash: Optional[int] = None
    position: Optional[int] = None

    @property
    def has_parent(self):
        return self.parent_sequence_hash is not None


def info_from_c(c):
    return BlockInfo(
        c.block_hash,
        c.sequence_hash,
        c.parent_sequence_hash if c.has_parent else None,
        None if c.position == _ffi.POSITION_UNKNOWN else c.position,
    )


# The salt has no default, as in the Go and Rust bindings: a forgotten salt silently naming
# blocks differently from the router (Dynamo's uses ROUTER_SALT) is the mistake to prevent.
def block_hash(tokens, salt):
    """XXH3-64 of one block's tokens (as u32 little-endian), seeded with salt."""
    buf = _buffers.tokens(tokens)
    return _ffi.lib.kvreg_block_hash(buf.ptr, buf.n, _buffers.u64(salt, "salt"))


def sequence_hash(parent_sequence_hash, block_hash, salt):
    """The chain step: a block's sequence hash from its parent's and its own block hash."""
    return _ffi.lib.kvreg_sequence_hash(_buffers.u64(parent_sequence_hash, "parent_sequence_hash"),
                                        _buffers.u64(block_hash, "block_hash"),
                                        _buffers.u64(salt, "salt"))


def hash_blocks(tokens, block_size, salt):
    """BlockInfo for every full block of tokens; the trailing len % block_size are ignored.
    salt: ROUTER_SALT (1337) to match Dynamo's KV router."""
    buf = _buffers.tokens(tokens)
    bs = _buffers.u32(block_size, "block_size")
    salt = _buffers.u64(salt, "salt")
    n_blocks = ctypes.c_size_t()
    # Size from the rule rather than a second C call; C re-checks it (ERANGE if we were wrong).
    cap = buf.n // bs if bs else 0
    out = (_ffi.kvreg_block_info * cap)() if cap else None
    _ffi.lib.kvreg_hash_blocks(buf.ptr, buf.n, bs, salt, out, cap, ctypes.byref(n_blocks))
    if n_blocks.value != cap:
        raise AssertionError("kvreg_hash_blocks reported %d blocks, expected %d"
                             % (n_blocks.value, cap))
    return [info_from_c(out[i]) for i in range(cap)]
