//! Status codes become `Error`s with the right kind, code and message.

use kvreg::{
    hash_blocks, Block, BlockDesc, Delivery, Error, ErrorKind, Registry, Sequence, ROUTER_SALT,
};

fn first_block() -> BlockDesc<'static> {
    BlockDesc::from(&hash_blocks(&[1, 2, 3, 4], 4, ROUTER_SALT).unwrap()[0])
}

#[test]
fn registering_twice_in_one_pool_is_eexist() {
    let registry = Registry::new().unwrap();
    let pool = registry.pool("gpu").unwrap();
    let desc = first_block();
    let handle = pool.register(&desc).unwrap();
    let err = pool.register(&desc).unwrap_err();
    assert_eq!((err.kind(), err.code()), (ErrorKind::AlreadyExists, -5));
    assert_eq!(pool.refcount(handle).unwrap(), 1, "a failed register changes nothing");

    // The documented way to take another reference.
    assert_eq!(pool.acquire(desc.sequence_hash).unwrap(), handle);
    assert_eq!(pool.refcount(handle).unwrap(), 2);
    assert_eq!(pool.acquire(42).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn released_and_foreign_handles_are_estale() {
    let registry = Registry::new().unwrap();
    let gpu = registry.pool("gpu").unwrap();
    let host = registry.pool("host").unwrap();
    let desc = first_block();
    let on_gpu = gpu.register(&desc).unwrap();
    let _on_host = host.register(&desc).unwrap();

    let foreign = host.release(on_gpu).unwrap_err();
    assert_eq!((foreign.kind(), foreign.code()), (ErrorKind::Stale, -7));
    gpu.release(on_gpu).unwrap();
    assert_eq!(gpu.release(on_gpu).unwrap_err().kind(), ErrorKind::Stale);
    assert_eq!(gpu.block_info(on_gpu).unwrap_err().kind(), ErrorKind::Stale);
    assert_eq!(gpu.refcount(on_gpu).unwrap_err().kind(), ErrorKind::Stale);
    assert_eq!(gpu.release(Block::from_raw(0x1234_5678)).unwrap_err().kind(), ErrorKind::Stale);

    // A handle of another registry is foreign too.
    let other = Registry::new().unwrap();
    let other_pool = other.pool("gpu").unwrap();
    let elsewhere = other_pool.register(&desc).unwrap();
    assert_eq!(host.release(elsewhere).unwrap_err().kind(), ErrorKind::Stale);
}

#[test]
fn error_display_and_std_error() {
    let err = Error::from_code(-5);
    let shown = err.to_string();
    assert!(shown.contains(err.message()) && shown.contains("-5"), "{}", shown);
    assert_ne!(err.message(), "unknown error");
    assert_ne!(Error::from_code(-7).message(), err.message());
    let as_std: &dyn std::error::Error = &err;
    assert_eq!(as_std.to_string(), shown);

    let unknown = Error::from_code(-1000);
    assert_eq!(unknown.kind(), ErrorKind::Other(-1000));
    assert_eq!(unknown.message(), "unknown error");
    let kinds = [
        (-1, ErrorKind::InvalidArgument),
        (-2, ErrorKind::OutOfMemory),
        (-3, ErrorKind::OutOfRange),
        (-4, ErrorKind::InvalidState),
        (-5, ErrorKind::AlreadyExists),
        (-6, ErrorKind::NotFound),
        (-7, ErrorKind::Stale),
        (-8, ErrorKind::Busy),
        (-9, ErrorKind::Overflow),
    ];
    for (code, kind) in kinds {
        assert_eq!(ErrorKind::from_code(code), kind);
    }
}

#[test]
fn bad_descriptions_and_options() {
    let registry = Registry::new().unwrap();
    let pool = registry.pool("gpu").unwrap();
    let desc = first_block();
    let short = desc.with_tokens(&[1, 2, 3], 4);
    assert_eq!(pool.register(&short).unwrap_err().kind(), ErrorKind::InvalidState);
    let long = desc.with_tokens(&[1, 2, 3, 4, 5], 4);
    assert_eq!(pool.register(&long).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(pool.size(), 0);

    assert_eq!(registry.pool("a\0b").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(hash_blocks(&[1, 2], 0, 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Sequence::new(0, 0).unwrap_err().kind(), ErrorKind::InvalidArgument);

    let bad_shards = Registry::builder().shards(3).build().unwrap_err();
    assert_eq!(bad_shards.kind(), ErrorKind::InvalidArgument);
    // One shard holds 16,776,960 blocks: one more cannot be reserved.
    let too_many = Registry::builder().shards(1).reserve_blocks(16_776_961).build().unwrap_err();
    assert_eq!(too_many.kind(), ErrorKind::InvalidArgument);
    assert!(Registry::builder().reserve_blocks(1000).build().is_ok());
    let bad_capacity = Registry::builder().delivery(Delivery::Poll).poll_capacity(0).build();
    assert_eq!(bad_capacity.unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn pool_limit_is_eoverflow() {
    // The limit belongs to the library (KVREG_MAX_POOLS: 255, growing to 65535), so the test
    // finds it rather than assuming it.
    let registry = Registry::new().unwrap();
    let mut pools = Vec::new();
    let err = loop {
        match registry.pool("p") {
            Ok(pool) => pools.push(pool),
            Err(e) => break e,
        }
        assert!(pools.len() <= 1 << 20, "no pool limit reached");
    };
    assert_eq!(err.kind(), ErrorKind::Overflow);
    assert!(pools.len() >= 255, "limit {}", pools.len());
    let mut ids: Vec<u32> = pools.iter().map(|p| p.id()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=pools.len() as u32).collect::<Vec<_>>(), "ids 1 ..= limit, once each");
    pools.pop();
    assert!(registry.pool("fits again").is_ok());
}

#[test]
fn contains_is_a_result_not_a_bool() {
    // Errors used to come back as `false`; now the answer and the status are separate.
    let registry = Registry::new().unwrap();
    let pool = registry.pool("gpu").unwrap();
    let desc = first_block();
    let in_pool: Result<bool, Error> = pool.contains(desc.sequence_hash);
    let in_registry: Result<bool, Error> = registry.contains(desc.sequence_hash);
    assert_eq!((in_pool, in_registry), (Ok(false), Ok(false)));
    let handle = pool.register(&desc).unwrap();
    assert_eq!(pool.contains(desc.sequence_hash), Ok(true));
    assert_eq!(registry.contains(desc.sequence_hash), Ok(true));
    pool.release(handle).unwrap();
    assert_eq!(registry.contains(desc.sequence_hash), Ok(false));
}
