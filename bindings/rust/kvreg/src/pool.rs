//! Pools (one per tier), block handles and registration.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};

use kvreg_sys as ffi;

use crate::error::{check, Error, Result};
use crate::event::{self, Medium};
use crate::hash::BlockInfo;
use crate::registry::Registry;
use crate::sequence::Sequence;

/// A handle to one reference on a block held by one pool. A plain value: releasing it twice,
/// or in another pool, is detected by the library (`ErrorKind::Stale`), never undefined.
#[repr(transparent)]
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(ffi::kvreg_block);

impl Block {
    /// The raw 64-bit handle (never 0).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// Rebuilds a handle from `raw()`. Safe: the library validates every handle it is given.
    pub fn from_raw(raw: u64) -> Block {
        Block(raw)
    }
}

/// A complete block to register, described by its hashes (from `hash_blocks`, a `Sequence`,
/// or computed elsewhere with the same rule). The registry does not re-hash.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub struct BlockDesc<'a> {
    pub sequence_hash: u64,
    pub block_hash: u64,
    /// None for the first block of a sequence.
    pub parent_sequence_hash: Option<u64>,
    /// Expected tokens per block, checked against `tokens` when both are given; 0 = no check.
    pub block_size: u32,
    /// Optional; empty registers by hash only.
    pub tokens: &'a [u32],
}

impl BlockDesc<'static> {
    /// A hash-only description of a block.
    pub fn from_info(info: &BlockInfo) -> BlockDesc<'static> {
        BlockDesc {
            sequence_hash: info.sequence_hash,
            block_hash: info.block_hash,
            parent_sequence_hash: info.parent_sequence_hash,
            block_size: 0,
            tokens: &[],
        }
    }
}

impl<'a> BlockDesc<'a> {
    /// The same description carrying the block's tokens (checked against `block_size`).
    pub fn with_tokens<'t>(self, tokens: &'t [u32], block_size: u32) -> BlockDesc<'t> {
        BlockDesc {
            sequence_hash: self.sequence_hash,
            block_hash: self.block_hash,
            parent_sequence_hash: self.parent_sequence_hash,
            block_size,
            tokens,
        }
    }

    fn to_raw(self) -> ffi::kvreg_block_desc {
        ffi::kvreg_block_desc {
            sequence_hash: self.sequence_hash,
            block_hash: self.block_hash,
            parent_sequence_hash: self.parent_sequence_hash.unwrap_or(0),
            has_parent: u32::from(self.parent_sequence_hash.is_some()),
            block_size: self.block_size,
            // The header wants NULL exactly when there are no tokens.
            tokens: if self.tokens.is_empty() { ptr::null() } else { self.tokens.as_ptr() },
            n_tokens: self.tokens.len(),
        }
    }
}

impl From<&BlockInfo> for BlockDesc<'static> {
    fn from(info: &BlockInfo) -> Self {
        BlockDesc::from_info(info)
    }
}

/// One pool (tier: GPU, host, disk...) of a registry. Thread-safe (`Send + Sync`) and
/// `'static`: it owns a handle to its registry (keeping the registry alive), so an engine can
/// keep the registry and its pools side by side in one struct, or move a pool to a thread.
/// Dropping it releases every reference it still holds (Remove events for hashes no other pool
/// holds, delivered before `drop` returns when no other thread is delivering; `flush` waits for
/// them otherwise).
///
/// A panic of the event handler during a call is re-raised once the C call has returned. The
/// call has done its work by then, except that handles a `register*` or `acquire*` call would
/// have returned are released again first, since a panicking call cannot return them: the
/// panic leaves no reference behind that nobody holds.
pub struct Pool {
    raw: NonNull<ffi::kvreg_pool>,
    registry: Registry,
}

// SAFETY: the header documents kvreg_pool as thread-safe for every operation; freeing happens
// only in Drop, which has exclusive access.
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

/// Per-item results of a batch call: handles for successes, the error otherwise.
fn batch_results(blocks: &[ffi::kvreg_block], status: &[c_int]) -> Vec<Result<Block>> {
    blocks
        .iter()
        .zip(status)
        .map(|(&b, &s)| check(s).map(|_| Block(b)))
        .collect()
}

impl Pool {
    pub(crate) fn from_raw(raw: NonNull<ffi::kvreg_pool>, registry: Registry) -> Self {
        Pool { raw, registry }
    }

    fn ptr(&self) -> *mut ffi::kvreg_pool {
        self.raw.as_ptr()
    }

    /// The registry this pool belongs to.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Re-raises a panic of the event handler that ran during the call, then passes `r` on.
    fn after<T>(&self, r: T) -> T {
        event::resume_pending_panic();
        r
    }

    /// After a call that took the references `taken` (KVREG_BLOCK_NONE entries are skipped):
    /// if the event handler panicked during it, releases them, then re-raises the panic. The
    /// release may run the handler again (Remove events); a second panic is dropped in favour
    /// of the first.
    fn settle(&self, taken: &[ffi::kvreg_block]) {
        if !event::panic_pending() {
            return;
        }
        let live: Vec<ffi::kvreg_block> =
            taken.iter().copied().filter(|&b| b != ffi::KVREG_BLOCK_NONE).collect();
        if !live.is_empty() {
            // SAFETY: live pool; `live` has live.len() handles; the outputs may be NULL. A
            // handle that is somehow not live any more is reported stale and skipped.
            unsafe {
                ffi::kvreg_release_batch(
                    self.ptr(),
                    live.as_ptr(),
                    live.len(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
        }
        event::resume_pending_panic();
    }

    /// A single-handle call's result, settled (see `settle`).
    fn one(&self, status: c_int, out: ffi::kvreg_block) -> Result<Block> {
        let taken = [if status >= 0 { out } else { ffi::KVREG_BLOCK_NONE }];
        self.settle(&taken);
        check(status).map(|_| Block(out))
    }

    /// A batch call's results, settled (only the entries whose status is a success hold
    /// references).
    fn many(&self, rc: c_int, blocks: &[ffi::kvreg_block], status: &[c_int]) -> Result<Vec<Result<Block>>> {
        if event::panic_pending() {
            let taken: Vec<ffi::kvreg_block> = if rc >= 0 {
                blocks.iter().zip(status).filter(|(_, &s)| s >= 0).map(|(&b, _)| b).collect()
            } else {
                Vec::new()
            };
            self.settle(&taken);
        }
        check(rc).map(|_| batch_results(blocks, status))
    }

    /// Small integer naming the pool in events (1 ..= the library's KVREG_MAX_POOLS).
    pub fn id(&self) -> u32 {
        // SAFETY: live pool.
        unsafe { ffi::kvreg_pool_id(self.ptr()) }
    }

    pub fn name(&self) -> String {
        // SAFETY: live pool; the name is a NUL-terminated string owned by the registry.
        unsafe { CStr::from_ptr(ffi::kvreg_pool_name(self.ptr())) }
            .to_string_lossy()
            .into_owned()
    }

    /// The pool's medium (tier), set when it was created and carried in its events.
    pub fn medium(&self) -> Medium {
        // SAFETY: live pool.
        Medium::from_raw(unsafe { ffi::kvreg_pool_medium(self.ptr()) })
    }

    /// Number of distinct hashes the pool holds.
    pub fn size(&self) -> usize {
        // SAFETY: live pool.
        unsafe { ffi::kvreg_pool_size(self.ptr()) }
    }

    /// Registers one complete block; the handle holds one reference. `AlreadyExists` if the
    /// hash is live in this pool (use `acquire`). The first registration of a hash in any pool
    /// emits a Register event.
    pub fn register(&self, desc: &BlockDesc<'_>) -> Result<Block> {
        let raw = desc.to_raw();
        let mut out: ffi::kvreg_block = ffi::KVREG_BLOCK_NONE;
        // SAFETY: live pool; desc and its tokens are read during the call only.
        let status = unsafe { ffi::kvreg_register(self.ptr(), &raw, &mut out) };
        self.one(status, out)
    }

    /// Registers blocks in input order; one result per block. The outer error is for bad
    /// arguments only (then nothing was registered).
    pub fn register_batch(&self, descs: &[BlockDesc<'_>]) -> Result<Vec<Result<Block>>> {
        let raw: Vec<ffi::kvreg_block_desc> = descs.iter().map(|d| d.to_raw()).collect();
        let mut blocks = vec![ffi::KVREG_BLOCK_NONE; raw.len()];
        let mut status = vec![ffi::KVREG_OK; raw.len()];
        // SAFETY: the three arrays have raw.len() elements; n_registered may be NULL.
        let rc = unsafe {
            ffi::kvreg_register_batch(
                self.ptr(),
                raw.as_ptr(),
                raw.len(),
                blocks.as_mut_ptr(),
                status.as_mut_ptr(),
                ptr::null_mut(),
            )
        };
        self.many(rc, &blocks, &status)
    }

    /// Registers complete block `index` of `seq` with its tokens. `InvalidState` for the
    /// partial block, `OutOfRange` beyond it.
    pub fn register_sequence_block(&self, seq: &Sequence, index: usize) -> Result<Block> {
        let mut out: ffi::kvreg_block = ffi::KVREG_BLOCK_NONE;
        // SAFETY: live pool and sequence (borrowed, so unmodified during the call).
        let status =
            unsafe { ffi::kvreg_register_sequence_block(self.ptr(), seq.as_ptr(), index, &mut out) };
        self.one(status, out)
    }

    /// Registers blocks `first .. first + count` of `seq`; one result per block.
    /// `OutOfRange` (nothing registered, nothing allocated) if the range passes the complete
    /// blocks.
    pub fn register_sequence(
        &self,
        seq: &Sequence,
        first: usize,
        count: usize,
    ) -> Result<Vec<Result<Block>>> {
        // The library's own check, made before the outputs are sized by `count`: a wild count
        // must be an error, not an allocation that aborts the process. `seq` is borrowed and
        // not `Sync`, so it cannot change between this check and the call.
        let complete = seq.num_blocks();
        if first > complete || count > complete - first {
            return Err(Error::from_code(ffi::KVREG_ERANGE));
        }
        let mut blocks = vec![ffi::KVREG_BLOCK_NONE; count];
        let mut status = vec![ffi::KVREG_OK; count];
        // SAFETY: both output arrays have `count` elements.
        let rc = unsafe {
            ffi::kvreg_register_sequence(
                self.ptr(),
                seq.as_ptr(),
                first,
                count,
                blocks.as_mut_ptr(),
                status.as_mut_ptr(),
                ptr::null_mut(),
            )
        };
        self.many(rc, &blocks, &status)
    }

    /// Another reference on the block this pool holds under `sequence_hash` (the same handle
    /// value). `NotFound` if the pool does not hold it.
    pub fn acquire(&self, sequence_hash: u64) -> Result<Block> {
        let mut out: ffi::kvreg_block = ffi::KVREG_BLOCK_NONE;
        // SAFETY: live pool, valid out pointer.
        let status = unsafe { ffi::kvreg_acquire(self.ptr(), sequence_hash, &mut out) };
        self.one(status, out)
    }

    /// Acquires the longest prefix of `hashes` the pool holds.
    pub fn acquire_prefix(&self, hashes: &[u64]) -> Result<Vec<Block>> {
        let mut blocks = vec![ffi::KVREG_BLOCK_NONE; hashes.len()];
        let mut n: usize = 0;
        // SAFETY: blocks has room for hashes.len() handles.
        let status = unsafe {
            ffi::kvreg_acquire_prefix(self.ptr(), hashes.as_ptr(), hashes.len(), blocks.as_mut_ptr(), &mut n)
        };
        // Only the first n handles are references, and only on success.
        blocks.truncate(if status >= 0 { n.min(hashes.len()) } else { 0 });
        self.settle(&blocks);
        check(status).map(|_| blocks.into_iter().map(Block).collect())
    }

    /// Drops one reference. When the pool's last one goes the hash leaves the pool; when it
    /// leaves its last pool a Remove event is emitted. `Stale` for a handle not live here.
    pub fn release(&self, block: Block) -> Result<()> {
        // SAFETY: live pool; the library validates the handle.
        let status = unsafe { ffi::kvreg_release(self.ptr(), block.0) };
        self.after(check(status).map(drop))
    }

    /// Releases handles in order; one result per handle.
    pub fn release_batch(&self, blocks: &[Block]) -> Result<Vec<Result<()>>> {
        let mut status = vec![ffi::KVREG_OK; blocks.len()];
        // SAFETY: Block is repr(transparent) over kvreg_block, so the slice is a valid
        // kvreg_block array; status has one slot per handle.
        let rc = unsafe {
            ffi::kvreg_release_batch(
                self.ptr(),
                blocks.as_ptr() as *const ffi::kvreg_block,
                blocks.len(),
                status.as_mut_ptr(),
                ptr::null_mut(),
            )
        };
        self.after(check(rc).map(|_| status.iter().map(|&s| check(s).map(drop)).collect()))
    }

    /// Whether the pool holds `sequence_hash`. An error from the library is an error, never
    /// a "no".
    pub fn contains(&self, sequence_hash: u64) -> Result<bool> {
        let mut present: c_int = 0;
        // SAFETY: live pool, valid out pointer.
        check(unsafe { ffi::kvreg_pool_contains(self.ptr(), sequence_hash, &mut present) })?;
        Ok(present != 0)
    }

    /// Length of the longest prefix of `hashes` the pool holds. Takes no references.
    pub fn match_prefix(&self, hashes: &[u64]) -> Result<usize> {
        let mut n: usize = 0;
        // SAFETY: live pool; hashes read during the call.
        check(unsafe { ffi::kvreg_pool_match(self.ptr(), hashes.as_ptr(), hashes.len(), &mut n) })?;
        Ok(n)
    }

    /// Hashes of a live handle (position is None: the registry does not store it).
    pub fn block_info(&self, block: Block) -> Result<BlockInfo> {
        let mut raw = ffi::kvreg_block_info::default();
        // SAFETY: live pool, valid out pointer.
        check(unsafe { ffi::kvreg_block_get_info(self.ptr(), block.0, &mut raw) })?;
        Ok(BlockInfo::from_raw(&raw))
    }

    /// The handle's reference count in this pool.
    pub fn refcount(&self, block: Block) -> Result<u32> {
        let mut n: u32 = 0;
        // SAFETY: live pool, valid out pointer.
        check(unsafe { ffi::kvreg_block_refcount(self.ptr(), block.0, &mut n) })?;
        Ok(n)
    }

    /// The block's stored tokens (registry built with `keep_tokens(true)`); `NotFound` if none
    /// are stored for it.
    pub fn block_tokens(&self, block: Block) -> Result<Vec<u32>> {
        // The header does not promise *n_tokens on ERANGE, so grow until the copy fits.
        let mut buf: Vec<u32> = vec![0; 256];
        loop {
            let mut n: usize = 0;
            // SAFETY: buf has buf.len() writable tokens.
            let status = unsafe {
                ffi::kvreg_block_tokens(self.ptr(), block.0, buf.as_mut_ptr(), buf.len(), &mut n)
            };
            if status == ffi::KVREG_ERANGE {
                // Events carry n_tokens as u32, so no block has more than u32::MAX tokens.
                let limit = u32::MAX as usize;
                let grown = if n > buf.len() { n } else { buf.len().saturating_mul(2).min(limit) };
                if grown <= buf.len() {
                    return Err(Error::from_code(status));
                }
                buf.resize(grown, 0);
                continue;
            }
            check(status)?;
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: we own the pool, and our `registry` field (dropped after this body) keeps the
        // registry alive, so the pointer is live.
        unsafe { ffi::kvreg_pool_free(self.ptr()) };
        // Remove events were delivered during the free; their handler may have panicked.
        event::resume_pending_panic_in_drop();
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("size", &self.size())
            .finish()
    }
}
