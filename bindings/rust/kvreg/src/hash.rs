//! Dynamo-compatible block hashing (pure functions; thread-safe).

use std::ptr;

use kvreg_sys as ffi;

use crate::error::{check, Result};

/// The salt Dynamo's KV router uses; hashes match the router's only with this salt.
pub const ROUTER_SALT: u64 = ffi::KVREG_ROUTER_SALT;

/// Hashes of one complete block.
#[derive(Debug, Copy, Clone, PartialEq, Eq, Hash)]
pub struct BlockInfo {
    pub block_hash: u64,
    pub sequence_hash: u64,
    /// None for the first block of a sequence.
    pub parent_sequence_hash: Option<u64>,
    /// Block index in its sequence; None from registry queries, which do not store it.
    pub position: Option<u32>,
}

impl BlockInfo {
    pub(crate) fn from_raw(raw: &ffi::kvreg_block_info) -> BlockInfo {
        BlockInfo {
            block_hash: raw.block_hash,
            sequence_hash: raw.sequence_hash,
            parent_sequence_hash: if raw.has_parent != 0 {
                Some(raw.parent_sequence_hash)
            } else {
                None
            },
            position: if raw.position == ffi::KVREG_POSITION_UNKNOWN {
                None
            } else {
                Some(raw.position)
            },
        }
    }
}

/// XXH3-64 of the tokens as u32 little-endian, seeded with `salt`.
pub fn block_hash(tokens: &[u32], salt: u64) -> u64 {
    // SAFETY: the pointer/length pair comes from a live slice and is only read during the call.
    unsafe { ffi::kvreg_block_hash(tokens.as_ptr(), tokens.len(), salt) }
}

/// The chain step: sequence hash of a block given its parent's sequence hash.
pub fn sequence_hash(parent_sequence_hash: u64, block_hash: u64, salt: u64) -> u64 {
    // SAFETY: pure function of its integer arguments.
    unsafe { ffi::kvreg_sequence_hash(parent_sequence_hash, block_hash, salt) }
}

/// Hashes every full block of `tokens`; the trailing `len % block_size` tokens are ignored.
/// Fails with `InvalidArgument` when `block_size` is 0.
pub fn hash_blocks(tokens: &[u32], block_size: u32, salt: u64) -> Result<Vec<BlockInfo>> {
    let mut n: usize = 0;
    // First call sizes the output (documented form: out NULL, cap 0); ERANGE is expected then.
    // SAFETY: tokens is a live slice; out is NULL with cap 0 as the header allows.
    let status = unsafe {
        ffi::kvreg_hash_blocks(tokens.as_ptr(), tokens.len(), block_size, salt, ptr::null_mut(), 0, &mut n)
    };
    if status != ffi::KVREG_ERANGE {
        check(status)?;
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut raw = vec![ffi::kvreg_block_info::default(); n];
    // SAFETY: raw has exactly n writable elements.
    check(unsafe {
        ffi::kvreg_hash_blocks(
            tokens.as_ptr(),
            tokens.len(),
            block_size,
            salt,
            raw.as_mut_ptr(),
            raw.len(),
            &mut n,
        )
    })?;
    raw.truncate(n);
    Ok(raw.iter().map(BlockInfo::from_raw).collect())
}
