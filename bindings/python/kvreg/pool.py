"""Pools (tiers) and the block references they hand out."""

import ctypes
import threading
import warnings
import weakref

from . import _buffers, _ffi, errors, events as _events
from ._lifetime import Guard, leave_with
from .events import Medium
from .errors import StaleHandle
from .hashing import info_from_c

__all__ = ["Pool", "Block"]

lib = _ffi.lib

# Serialises the released-flag check-and-set of Blocks (rare, short).
_claim_lock = threading.Lock()


def _finalize(core, guard, label):
    """Safety net for a Pool garbage collected without close(): warn, and leave the C pool
    as it is. Freeing it would release its references and emit Remove events (and run
    callbacks) at whatever moment the garbage collector picked; instead they stay held, and
    the pool's memory is the registry's, freed with it."""
    guard.close(wait=False)  # nothing can reach it any more; keep the pointer out of reach
    if not core.guard.closed:
        warnings.warn("%s garbage collected without close(): its references stay held (no "
                      "Remove events) until the registry is closed; close it explicitly"
                      % label, ResourceWarning)


def _fill_desc(desc, info, tokens, block_size, keep):
    desc.sequence_hash = _buffers.u64(info.sequence_hash, "sequence_hash")
    desc.block_hash = _buffers.u64(info.block_hash, "block_hash")
    parent = getattr(info, "parent_sequence_hash", None)
    if parent is None:
        desc.parent_sequence_hash = 0
        desc.has_parent = 0
    else:
        desc.parent_sequence_hash = _buffers.u64(parent, "parent_sequence_hash")
        desc.has_parent = 1
    desc.block_size = _buffers.u32(block_size, "block_size")
    buf = _buffers.tokens(tokens)
    keep.append(buf)
    desc.tokens = buf.ptr
    desc.n_tokens = buf.n


def _attach(exc, result):
    """Hand the result of a successful C call to the caller through the callback's
    exception (exc.kvreg_result), so references taken by that call stay reachable."""
    try:
        exc.kvreg_result = result
    except AttributeError:
        pass


def _split_item(item):
    """register_batch items: a BlockInfo-like object, or (info, tokens)."""
    if hasattr(item, "sequence_hash"):
        return item, None
    info, tokens = item
    return info, tokens


class Pool:
    """One pool (tier) of a Registry. Thread-safe. Keeps its registry alive; closing the
    registry closes the pool too (its methods then raise StaleHandle).

    Close it explicitly (close(), a with block, or by closing the registry). A Pool garbage
    collected while open only warns (ResourceWarning): its references stay held, with no
    Remove events, until the registry is closed."""

    def __init__(self, registry, name="", medium=None):
        medium = _buffers.u32(_events.medium_value(Medium.GPU if medium is None else medium),
                              "medium")
        if isinstance(name, str):
            name = name.encode("utf-8")
        if b"\0" in name:
            raise errors.InvalidArgument(_ffi.EINVAL, "pool name must not contain NUL")
        self._registry = registry
        self._core = core = registry._core
        out = _ffi.pool_p()
        core.run(lambda reg: lib.kvreg_pool_new_medium(ctypes.byref(out), reg, name, medium))
        self._guard = Guard(out, "pool")
        self._id = lib.kvreg_pool_id(out)
        self._medium = _events.Medium(lib.kvreg_pool_medium(out))
        self._name = name.decode("utf-8", "replace")
        self._finalizer = weakref.finalize(self, _finalize, core, self._guard,
                                           "kvreg.Pool id=%d name=%r" % (self._id, self._name))
        core.pools.add(self)
        # At exit the Registry's own safety net frees everything: one warning is enough.
        self._finalizer.atexit = False

    # -- plumbing ------------------------------------------------------------------------
    def _run(self, fn, *args, late=None):
        """fn(pool_ptr, *args) with both the registry and this pool pinned open.

        A Python callback may raise after the C call itself succeeded (the exception is
        re-raised here, see _Core.run); late(exc) then records what C did, so no reference
        or release is lost."""
        guard = self._guard
        ptr = guard.enter()
        completed = False

        def call(_reg):
            nonlocal completed
            result = fn(ptr, *args)
            completed = True
            return result
        try:
            return self._core.run(call)
        except BaseException as exc:
            if completed and late is not None:
                late(exc)
            raise
        finally:
            guard.exit()

    def _block(self, handle, sequence_hash=None):
        return Block(self, handle, sequence_hash)

    # -- lifetime ------------------------------------------------------------------------
    def close(self):
        """Release every reference this pool holds (Remove events for hashes no other pool
        holds) and retire it. Idempotent; allowed from inside a callback."""
        self._finalizer.detach()
        core = self._core
        # From a callback, other threads' calls on this pool may be waiting for that very
        # callback to return (delivery is ordered), so do not wait for them: C tolerates
        # calls on a retired pool (ESTALE), and our guard stops new ones.
        ptr = self._guard.close(wait=not core.in_callback())
        if ptr is None or core.guard.closed:
            return
        try:
            core.run(lambda _reg: lib.kvreg_pool_free(ptr))
        except StaleHandle:
            if not core.guard.closed:
                raise

    @property
    def closed(self):
        return self._guard.closed or self._core.guard.closed

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        leave_with(self.close, exc)

    def __repr__(self):
        return "<kvreg.Pool id=%d name=%r%s>" % (self._id, self._name,
                                                  " closed" if self.closed else "")

    # -- properties ----------------------------------------------------------------------
    @property
    def registry(self):
        return self._registry

    @property
    def id(self):
        """The pool id carried by events (1 .. the library's KVREG_MAX_POOLS)."""
        return self._id

    @property
    def name(self):
        return self._name

    @property
    def medium(self):
        """The pool's Medium (tier), set when it was created and carried in its events."""
        return self._medium

    def __len__(self):
        """Distinct hashes the pool holds."""
        return self._run(lib.kvreg_pool_size)

    size = property(__len__)

    # -- registering ---------------------------------------------------------------------
    def register(self, info, tokens=None, block_size=0):
        """Register one complete block described by a BlockInfo (or anything with
        sequence_hash, block_hash, parent_sequence_hash). tokens are optional; with
        block_size != 0 they are checked against it. Returns a Block holding one reference.
        AlreadyRegistered if this pool already holds the hash (use acquire)."""
        desc = _ffi.kvreg_block_desc()
        keep = []
        _fill_desc(desc, info, tokens, block_size, keep)
        out = _ffi.kvreg_block()
        h = desc.sequence_hash
        self._run(lib.kvreg_register, ctypes.byref(desc), ctypes.byref(out),
                  late=lambda exc: _attach(exc, self._block(out.value, h)))
        return self._block(out.value, h)

    def register_batch(self, items, block_size=0):
        """Register blocks in order; items are BlockInfo-like or (info, tokens) pairs.
        Returns one entry per item: a Block, or the KvregError (not raised) for that item.
        Register events of the call are delivered together, in input order."""
        items = [_split_item(item) for item in items]
        n = len(items)
        if n == 0:
            return []
        descs = (_ffi.kvreg_block_desc * n)()
        keep = []
        for i, (info, tokens) in enumerate(items):
            _fill_desc(descs[i], info, tokens, block_size, keep)
        return self._batch(lib.kvreg_register_batch, n, (descs,),
                           [d.sequence_hash for d in descs])

    def _batch(self, fn, n, cargs, hashes=None):
        """Shared by the batch registrations: per-item Block or KvregError instance."""
        blocks = (_ffi.kvreg_block * n)()
        status = (ctypes.c_int * n)()

        def convert():
            return [self._block(blocks[i], hashes[i] if hashes else None) if status[i] == 0
                    else errors.from_status(status[i], _ffi.strerror(status[i]))
                    for i in range(n)]
        self._run(fn, *cargs, n, blocks, status, None,
                  late=lambda exc: _attach(exc, convert()))
        return convert()

    def register_sequence(self, seq, first=0, count=None):
        """Register complete blocks [first, first + count) of a Sequence (count defaults to
        the rest). Returns one Block or KvregError per block, as register_batch."""
        with seq._pinned() as sptr:
            total = lib.kvreg_sequence_num_blocks(sptr)
            first = _buffers.size(first, "first")
            if count is None:
                count = max(total - first, 0)
            count = _buffers.size(count, "count")
            if count == 0:
                if first > total:
                    raise errors.RangeError(_ffi.ERANGE, "first=%d is past the %d complete "
                                            "blocks" % (first, total))
                return []
            return self._batch(lib.kvreg_register_sequence, count, (sptr, first))

    def register_sequence_block(self, seq, index):
        """Register complete block `index` of a Sequence. StateError for the partial block."""
        out = _ffi.kvreg_block()
        with seq._pinned() as sptr:
            self._run(lib.kvreg_register_sequence_block, sptr,
                      _buffers.size(index, "index"), ctypes.byref(out),
                      late=lambda exc: _attach(exc, self._block(out.value)))
        return self._block(out.value)

    # -- acquiring and releasing ---------------------------------------------------------
    def acquire(self, sequence_hash):
        """Another reference on a block this pool holds (NotFound if it does not)."""
        h = _buffers.u64(getattr(sequence_hash, "sequence_hash", sequence_hash), "sequence_hash")
        out = _ffi.kvreg_block()
        self._run(lib.kvreg_acquire, h, ctypes.byref(out))
        return self._block(out.value, h)

    def acquire_prefix(self, hashes):
        """References on the longest prefix of hashes this pool holds (a list of Blocks)."""
        arr, n = _buffers.hashes(hashes)
        if n == 0:
            return []
        blocks = (_ffi.kvreg_block * n)()
        got = ctypes.c_size_t()
        self._run(lib.kvreg_acquire_prefix, arr, n, blocks, ctypes.byref(got))
        return [self._block(blocks[i], arr[i]) for i in range(got.value)]

    def release(self, block):
        """Drop the reference a Block holds (same as block.release())."""
        if not isinstance(block, Block):
            raise TypeError("release() takes a Block, not %s" % type(block).__name__)
        if block.pool is not self:
            raise StaleHandle(_ffi.ESTALE, "block belongs to another pool")
        block.release()

    def release_batch(self, blocks):
        """Release many Blocks in one call (Remove events delivered together). Returns one
        entry per block: None when released, else the KvregError (not raised)."""
        blocks = list(blocks)
        for b in blocks:
            if not isinstance(b, Block):
                raise TypeError("release_batch() takes Blocks, not %s" % type(b).__name__)
        result = [None] * len(blocks)
        todo = []
        with _claim_lock:
            for i, b in enumerate(blocks):
                if b.pool is not self:
                    result[i] = StaleHandle(_ffi.ESTALE, "block belongs to another pool")
                elif b._released:
                    # Also the same Block twice: it would drop a reference another Block owns.
                    result[i] = StaleHandle(_ffi.ESTALE, "block already released")
                else:
                    b._released = True
                    todo.append(i)
        n = len(todo)
        if n == 0:
            return result
        handles = (_ffi.kvreg_block * n)(*(blocks[i].handle for i in todo))
        status = (ctypes.c_int * n)()

        def record():
            for k, i in enumerate(todo):
                s = status[k]
                if s:
                    result[i] = errors.from_status(s, _ffi.strerror(s))
                    if s != _ffi.ESTALE:  # C kept that reference
                        blocks[i]._released = False
        ran = []
        try:
            self._run(lib.kvreg_release_batch, handles, n, status, None, late=ran.append)
        except StaleHandle:
            if not ran:  # pool or registry closed: their references are gone already
                raise
            record()
            raise
        except BaseException as exc:
            if ran:  # a callback raised after C released them
                record()
                _attach(exc, result)
            else:
                for i in todo:
                    blocks[i]._released = False
            raise
        record()
        return result

    # -- queries -------------------------------------------------------------------------
    def contains(self, sequence_hash):
        """True if this pool holds sequence_hash. Errors raise (StaleHandle for a closed or
        freed pool ...); they never read as False."""
        h = _buffers.u64(getattr(sequence_hash, "sequence_hash", sequence_hash), "sequence_hash")
        present = ctypes.c_int()
        self._run(lib.kvreg_pool_contains, h, ctypes.byref(present))
        return present.value != 0

    __contains__ = contains

    def match_prefix(self, hashes):
        """Length of the longest prefix of hashes this pool holds (takes no references).
        The same name as Rust's Pool::match_prefix and Go's Pool.MatchPrefix."""
        arr, n = _buffers.hashes(hashes)
        got = ctypes.c_size_t()
        self._run(lib.kvreg_pool_match, arr, n, ctypes.byref(got))
        return got.value

    def match(self, hashes):
        """Deprecated name of match_prefix() (0.2); warns DeprecationWarning."""
        warnings.warn("Pool.match() is now Pool.match_prefix(), as in the Go and Rust "
                      "bindings", DeprecationWarning, stacklevel=2)
        return self.match_prefix(hashes)


class Block:
    """One reference on a block held by a pool. Release it exactly once: release(), close()
    or leaving a `with` block (closing the pool or registry drops it too). Dropping the
    object does NOT release the reference: a GC-timed release would emit Remove events at
    random times. It warns instead (ResourceWarning); detach() hands the reference over
    without a warning."""

    __slots__ = ("_pool", "_handle", "_hash", "_released", "__weakref__")

    def __init__(self, pool, handle, sequence_hash=None):
        self._pool = pool
        self._handle = handle
        self._hash = sequence_hash
        self._released = False

    def __del__(self):
        # Leak report only: the reference stays held (no event), as the class docstring says.
        # getattr: __init__ may not have run (a failed construction, copy, pickling).
        if getattr(self, "_released", True):
            return
        pool = self._pool
        if pool.closed:  # closing the pool or registry dropped the reference already
            return
        warnings.warn("unreleased kvreg.Block %#x of pool %d garbage collected: the reference "
                      "stays held (no Remove event) until the pool or registry is closed; "
                      "release it, or detach() it to keep it on purpose"
                      % (self._handle, pool.id), ResourceWarning, source=self)

    @property
    def pool(self):
        return self._pool

    @property
    def handle(self):
        """The raw kvreg_block value (shared by all references on the same block)."""
        return self._handle

    @property
    def released(self):
        """True once this object no longer owns its reference: released, closed, detached,
        or dropped with its pool or registry (all of which behave the same from then on)."""
        return self._released or self._pool.closed

    def _live(self):
        if self._released:
            raise StaleHandle(_ffi.ESTALE, "block already released (or detached)")
        if self._pool.closed:
            raise StaleHandle(_ffi.ESTALE, "block released with its closed pool or registry")

    def release(self):
        """Drop this reference. StaleHandle if it was already released or its pool closed."""
        # Claim first, under a lock: two threads releasing one Block must not both reach C
        # (the second would drop a reference another Block object owns).
        with _claim_lock:
            self._live()
            self._released = True
        ran = []
        try:
            self._pool._run(lib.kvreg_release, self._handle, late=ran.append)
        except StaleHandle:
            # C's ESTALE (not live), or a closed pool/registry (which dropped it): gone.
            raise
        except BaseException:
            if not ran:  # C did not release it: the reference is still held
                self._released = False
            raise

    close = release

    def detach(self):
        """Stop owning the reference without releasing it, and return the raw handle: this
        object then neither releases it nor warns when collected. The reference stays held
        until Block(pool, handle).release() (that new object owns it) or until the pool or
        registry is closed. StaleHandle if already released or detached."""
        with _claim_lock:
            self._live()
            self._released = True
        return self._handle

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._released:
            return
        leave_with(self._release_on_exit, exc)

    def _release_on_exit(self):
        try:
            self.release()
        except StaleHandle:
            # Closing the pool or registry inside the block already dropped the reference.
            if not self._pool.closed:
                raise

    def info(self):
        """BlockInfo of the block (position is None: the registry does not store it)."""
        self._live()
        out = _ffi.kvreg_block_info()
        self._pool._run(lib.kvreg_block_get_info, self._handle, ctypes.byref(out))
        return info_from_c(out)

    @property
    def sequence_hash(self):
        if self._hash is None:
            self._hash = self.info().sequence_hash
        return self._hash

    def refcount(self):
        """References the pool holds on this block (all Block objects for it together)."""
        self._live()
        out = ctypes.c_uint32()
        self._pool._run(lib.kvreg_block_refcount, self._handle, ctypes.byref(out))
        return out.value

    def tokens(self):
        """The block's stored tokens (registry built with keep_tokens=True), else NotFound."""
        self._live()
        n = ctypes.c_size_t()
        cap = 256
        while True:
            buf = (ctypes.c_uint32 * cap)()
            try:
                self._pool._run(lib.kvreg_block_tokens, self._handle, buf, cap, ctypes.byref(n))
            except errors.RangeError:
                # The header does not say whether *n_tokens is set on ERANGE: use it when it
                # is, else grow geometrically (bounded by the u32 token count of a block).
                if cap > _ffi.U32_MAX:
                    raise
                cap = n.value if n.value > cap else cap * 2
                continue
            return list(buf[:n.value])

    def __repr__(self):
        state = "released" if self.released else "live"
        return "<kvreg.Block %#x pool=%d %s>" % (self._handle, self._pool.id, state)
