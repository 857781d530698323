//! Sequence behaviour (Dynamo's TokenBlockSequence). Expected hashes are Dynamo 1.0.x's seed
//! vectors (tokens 1..=10, block size 4, salt 1337: the values dynamo-llm's block registry test
//! checks, computed with the rule in kvreg.h and confirmed independently of this library), not
//! values taken from this library.

use kvreg::{ErrorKind, Registry, Sequence, ROUTER_SALT};

const BH_1_4: u64 = 14643705804678351452;
const BH_5_8: u64 = 16777012769546811212;
const SH_5_8: u64 = 4945711292740353085;
/// Block [5..8]'s sequence hash with salt 0 under the 1.0.x rule (chain seeded by the salt).
const SH_5_8_SALT0: u64 = 4185132130981121146;

fn tokens(range: std::ops::RangeInclusive<u32>) -> Vec<u32> {
    range.collect()
}

#[test]
fn extend_commits_full_blocks_eagerly() {
    let mut seq = Sequence::new(4, ROUTER_SALT).unwrap();
    assert_eq!(seq.extend(&tokens(1..=4)).unwrap(), 0..1);
    assert_eq!(seq.num_blocks(), 1);
    assert!(seq.partial_tokens().is_empty(), "a full block is committed at once");
    assert!(seq.extend(&[]).unwrap().is_empty());
    assert_eq!(seq.extend(&tokens(5..=10)).unwrap(), 1..2);
    assert_eq!(seq.partial_tokens(), &[9, 10]);
    assert_eq!(seq.total_tokens(), 10);
    assert_eq!((seq.block_size(), seq.salt()), (4, ROUTER_SALT));

    let b0 = seq.block(0).unwrap();
    let b1 = seq.block(1).unwrap();
    assert_eq!((b0.block_hash, b0.sequence_hash, b0.parent_sequence_hash), (BH_1_4, BH_1_4, None));
    assert_eq!((b1.block_hash, b1.sequence_hash, b1.parent_sequence_hash), (BH_5_8, SH_5_8, Some(BH_1_4)));
    assert_eq!((b0.position, b1.position), (Some(0), Some(1)));
    assert_eq!(seq.block_tokens(1).unwrap(), &[5, 6, 7, 8]);
    assert_eq!(seq.blocks(), vec![b0, b1]);
}

#[test]
fn salt_changes_the_chain() {
    let seq = Sequence::from_tokens(&tokens(1..=10), 4, 0).unwrap();
    assert_eq!(seq.block(1).unwrap().sequence_hash, SH_5_8_SALT0);
    assert_ne!(seq.block(0).unwrap().block_hash, BH_1_4);
}

#[test]
fn append_reports_the_completed_block() {
    let mut seq = Sequence::new(4, ROUTER_SALT).unwrap();
    for t in 1..=3 {
        assert_eq!(seq.append(t).unwrap(), None);
    }
    assert_eq!(seq.append(4).unwrap(), Some(0));
    assert_eq!(seq.append(5).unwrap(), None);
    assert_eq!(seq.block(0).unwrap().sequence_hash, BH_1_4);
}

#[test]
fn pop_dissolves_the_last_block() {
    let mut seq = Sequence::from_tokens(&tokens(1..=10), 4, ROUTER_SALT).unwrap();
    assert_eq!(seq.pop(), Some(10));
    assert_eq!(seq.pop(), Some(9));
    assert_eq!(seq.num_blocks(), 2);
    assert_eq!(seq.pop(), Some(8));
    assert_eq!(seq.num_blocks(), 1);
    assert_eq!(seq.partial_tokens(), &[5, 6, 7]);
    // Completing the block again gives the same hashes.
    assert_eq!(seq.append(8).unwrap(), Some(1));
    assert_eq!(seq.block(1).unwrap().sequence_hash, SH_5_8);

    let mut empty = Sequence::new(4, 0).unwrap();
    assert_eq!(empty.pop(), None);
}

#[test]
fn truncate_unwind_and_reset() {
    let mut seq = Sequence::from_tokens(&tokens(1..=10), 4, ROUTER_SALT).unwrap();
    seq.truncate(100).unwrap();
    assert_eq!(seq.total_tokens(), 10, "truncate past the end is a no-op");
    seq.truncate(6).unwrap();
    assert_eq!(seq.num_blocks(), 1);
    assert_eq!(seq.partial_tokens(), &[5, 6]);
    assert_eq!(seq.block(0).unwrap().sequence_hash, BH_1_4, "surviving hashes are kept");

    let err = seq.unwind(7).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfRange);
    assert_eq!(seq.total_tokens(), 6, "a failed unwind changes nothing");
    seq.unwind(6).unwrap();
    assert_eq!((seq.total_tokens(), seq.num_blocks()), (0, 0));

    seq.extend(&tokens(1..=5)).unwrap();
    seq.reset();
    assert_eq!((seq.total_tokens(), seq.num_blocks()), (0, 0));
    assert_eq!((seq.block_size(), seq.salt()), (4, ROUTER_SALT));
    assert_eq!(seq.extend(&tokens(1..=4)).unwrap(), 0..1);
    assert_eq!(seq.block(0).unwrap().sequence_hash, BH_1_4);
}

#[test]
fn out_of_range_and_bad_arguments() {
    assert_eq!(Sequence::new(0, 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let seq = Sequence::from_tokens(&tokens(1..=6), 4, ROUTER_SALT).unwrap();
    assert_eq!(seq.block(1).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(seq.block_tokens(1).unwrap_err().kind(), ErrorKind::OutOfRange);
}

#[test]
fn registering_from_a_sequence() {
    let registry = Registry::new().unwrap();
    let pool = registry.pool("gpu").unwrap();
    let seq = Sequence::from_tokens(&tokens(1..=10), 4, ROUTER_SALT).unwrap();

    // Index 2 is the partial block, 3 is past it.
    assert_eq!(pool.register_sequence_block(&seq, 2).unwrap_err().kind(), ErrorKind::InvalidState);
    assert_eq!(pool.register_sequence_block(&seq, 3).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(pool.register_sequence(&seq, 1, 2).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(pool.size(), 0, "a rejected batch registers nothing");

    let handles = pool.register_sequence(&seq, 0, 2).unwrap();
    let handles: Vec<_> = handles.into_iter().map(Result::unwrap).collect();
    assert!(pool.contains(BH_1_4).unwrap() && pool.contains(SH_5_8).unwrap());
    let info = pool.block_info(handles[1]).unwrap();
    assert_eq!((info.block_hash, info.parent_sequence_hash, info.position), (BH_5_8, Some(BH_1_4), None));
    assert_eq!(pool.match_prefix(&[BH_1_4, SH_5_8, 42]).unwrap(), 2);
    for h in handles {
        pool.release(h).unwrap();
    }
    assert_eq!(pool.size(), 0);
}

/// A range past the complete blocks is `OutOfRange` before anything is sized by `count`: a wild
/// count must not make the binding allocate its output arrays first (`vec![_; 1 << 40]` of
/// handles is 8 TiB, and a failed allocation aborts the process instead of returning).
#[test]
fn register_sequence_checks_the_range_before_allocating() {
    let registry = Registry::new().unwrap();
    let pool = registry.pool("gpu").unwrap();
    let seq = Sequence::from_tokens(&tokens(1..=10), 4, ROUTER_SALT).unwrap(); // 2 complete blocks
    for (first, count) in [(0, 1usize << 40), (0, usize::MAX), (1, usize::MAX), (2, usize::MAX / 8),
                           (3, 0), (usize::MAX, 1), (usize::MAX, usize::MAX)] {
        assert_eq!(pool.register_sequence(&seq, first, count).unwrap_err().kind(),
                   ErrorKind::OutOfRange, "first {} count {}", first, count);
    }
    assert_eq!(pool.size(), 0, "a rejected range registers nothing");
    // The edges that are in range still work.
    assert!(pool.register_sequence(&seq, 2, 0).unwrap().is_empty());
    assert!(pool.register_sequence(&seq, 0, 0).unwrap().is_empty());
    let handles = pool.register_sequence(&seq, 1, 1).unwrap();
    assert_eq!(handles.len(), 1);
    pool.release(handles[0].unwrap()).unwrap();
}
