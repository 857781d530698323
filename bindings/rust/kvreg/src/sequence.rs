//! Token block sequences (Dynamo's TokenBlockSequence).

use std::ops::Range;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::slice;

use kvreg_sys as ffi;

use crate::error::{check, Error, Result};
use crate::hash::BlockInfo;

/// A token sequence split into blocks; a block is hashed as soon as it is full.
///
/// `Send` but not `Sync`: the C object has a single owner and no locking, so it may move to
/// another thread but never be shared (the raw pointer field already makes it `!Sync`).
pub struct Sequence {
    raw: NonNull<ffi::kvreg_sequence>,
}

// SAFETY: the header documents kvreg_sequence as single-owner and not thread-safe; moving the
// sole owner to another thread is fine, concurrent access is what `!Sync` rules out.
unsafe impl Send for Sequence {}

impl Sequence {
    /// An empty sequence. `InvalidArgument` when `block_size` is 0.
    pub fn new(block_size: u32, salt: u64) -> Result<Sequence> {
        let mut raw = ptr::null_mut();
        // SAFETY: raw is a valid out pointer.
        check(unsafe { ffi::kvreg_sequence_new(&mut raw, block_size, salt) })?;
        NonNull::new(raw)
            .map(|raw| Sequence { raw })
            .ok_or_else(|| Error::from_code(ffi::KVREG_ENOMEM))
    }

    /// A sequence holding `tokens`.
    pub fn from_tokens(tokens: &[u32], block_size: u32, salt: u64) -> Result<Sequence> {
        let mut seq = Sequence::new(block_size, salt)?;
        seq.extend(tokens)?;
        Ok(seq)
    }

    pub(crate) fn as_ptr(&self) -> *const ffi::kvreg_sequence {
        self.raw.as_ptr()
    }

    /// Appends tokens; returns the indices of the blocks this call completed (maybe empty).
    pub fn extend(&mut self, tokens: &[u32]) -> Result<Range<usize>> {
        let mut completed: usize = 0;
        // SAFETY: self owns a live sequence (&mut: no one else uses it); tokens is a live slice.
        check(unsafe {
            ffi::kvreg_sequence_extend(self.raw.as_ptr(), tokens.as_ptr(), tokens.len(), &mut completed)
        })?;
        let end = self.num_blocks();
        Ok(end - completed..end)
    }

    /// Appends one token; returns the index of the block it completed, if any.
    pub fn append(&mut self, token: u32) -> Result<Option<usize>> {
        let mut completed: c_int = 0;
        // SAFETY: live sequence, valid out pointer.
        check(unsafe { ffi::kvreg_sequence_append(self.raw.as_ptr(), token, &mut completed) })?;
        Ok(if completed != 0 { Some(self.num_blocks() - 1) } else { None })
    }

    /// Keeps the first `n_tokens` tokens (no-op if there are fewer).
    pub fn truncate(&mut self, n_tokens: usize) -> Result<()> {
        // SAFETY: live sequence.
        check(unsafe { ffi::kvreg_sequence_truncate(self.raw.as_ptr(), n_tokens) }).map(drop)
    }

    /// Removes the last `n` tokens; `OutOfRange` (unchanged) if there are fewer.
    pub fn unwind(&mut self, n: usize) -> Result<()> {
        // SAFETY: live sequence.
        check(unsafe { ffi::kvreg_sequence_unwind(self.raw.as_ptr(), n) }).map(drop)
    }

    /// Removes and returns the last token; None when empty.
    pub fn pop(&mut self) -> Option<u32> {
        let mut token: u32 = 0;
        // SAFETY: live sequence, valid out pointer.
        let status = unsafe { ffi::kvreg_sequence_pop(self.raw.as_ptr(), &mut token) };
        // ENOENT (empty) is the only failure a live sequence can give.
        if status == ffi::KVREG_OK {
            Some(token)
        } else {
            None
        }
    }

    /// Drops every token; block size and salt are kept.
    pub fn reset(&mut self) {
        // SAFETY: live sequence; reset cannot fail for a non-NULL sequence.
        let status = unsafe { ffi::kvreg_sequence_reset(self.raw.as_ptr()) };
        debug_assert_eq!(status, ffi::KVREG_OK);
    }

    pub fn num_blocks(&self) -> usize {
        // SAFETY: live sequence.
        unsafe { ffi::kvreg_sequence_num_blocks(self.raw.as_ptr()) }
    }

    pub fn total_tokens(&self) -> usize {
        // SAFETY: live sequence.
        unsafe { ffi::kvreg_sequence_total_tokens(self.raw.as_ptr()) }
    }

    pub fn block_size(&self) -> u32 {
        // SAFETY: live sequence.
        unsafe { ffi::kvreg_sequence_block_size(self.raw.as_ptr()) }
    }

    pub fn salt(&self) -> u64 {
        // SAFETY: live sequence.
        unsafe { ffi::kvreg_sequence_salt(self.raw.as_ptr()) }
    }

    /// Hashes of complete block `index`; `OutOfRange` past the complete blocks.
    pub fn block(&self, index: usize) -> Result<BlockInfo> {
        let mut raw = ffi::kvreg_block_info::default();
        // SAFETY: live sequence, valid out pointer.
        check(unsafe { ffi::kvreg_sequence_block(self.raw.as_ptr(), index, &mut raw) })?;
        Ok(BlockInfo::from_raw(&raw))
    }

    /// Hashes of every complete block, in order.
    pub fn blocks(&self) -> Vec<BlockInfo> {
        (0..self.num_blocks())
            .map(|i| self.block(i).expect("index below num_blocks"))
            .collect()
    }

    /// Tokens of complete block `index`. The borrow of `self` stands for the header's "valid
    /// until the sequence is next modified": modifying needs `&mut self`.
    pub fn block_tokens(&self, index: usize) -> Result<&[u32]> {
        let mut tokens: *const u32 = ptr::null();
        let mut n: usize = 0;
        // SAFETY: live sequence, valid out pointers.
        check(unsafe { ffi::kvreg_sequence_block_tokens(self.raw.as_ptr(), index, &mut tokens, &mut n) })?;
        // SAFETY: the library hands out n tokens at `tokens`, alive while the sequence is
        // unmodified, which the lifetime of the returned slice guarantees.
        Ok(unsafe { borrowed_slice(tokens, n) })
    }

    /// Tokens of the partial (not yet full) block; may be empty.
    pub fn partial_tokens(&self) -> &[u32] {
        let mut tokens: *const u32 = ptr::null();
        let mut n: usize = 0;
        // SAFETY: live sequence, valid out pointers.
        let status =
            unsafe { ffi::kvreg_sequence_partial_tokens(self.raw.as_ptr(), &mut tokens, &mut n) };
        if status != ffi::KVREG_OK {
            return &[];
        }
        // SAFETY: as in block_tokens.
        unsafe { borrowed_slice(tokens, n) }
    }
}

/// A slice over library memory; an empty view may come with a NULL pointer, which
/// `slice::from_raw_parts` does not accept.
unsafe fn borrowed_slice<'a>(tokens: *const u32, n: usize) -> &'a [u32] {
    if n == 0 || tokens.is_null() {
        &[]
    } else {
        slice::from_raw_parts(tokens, n)
    }
}

impl Drop for Sequence {
    fn drop(&mut self) {
        // SAFETY: we own the sequence and nobody borrows it any more.
        unsafe { ffi::kvreg_sequence_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequence")
            .field("block_size", &self.block_size())
            .field("salt", &self.salt())
            .field("total_tokens", &self.total_tokens())
            .field("num_blocks", &self.num_blocks())
            .finish()
    }
}
