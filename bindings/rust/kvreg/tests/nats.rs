//! kvreg::nats against a real nats-server this test starts (JetStream, a temporary store,
//! 127.0.0.1, an ephemeral port). Prints why and returns early when the library was built
//! without NATS; without nats-server too, except with CI=true, where that fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvreg::nats::{self, Index, NatsConsumer, NatsPublisher};
use kvreg::{hash_blocks, BlockDesc, Delivery, Error, ErrorKind, Registry, ROUTER_SALT};

struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Poll cond until it holds, bounded (no sleep stands for synchronisation).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {}", what);
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn find_server() -> Option<PathBuf> {
    if let Ok(env) = std::env::var("KVREG_NATS_SERVER") {
        return Some(PathBuf::from(env)).filter(|p| p.is_file());
    }
    let path = std::env::var("PATH").unwrap_or_default() + ":/usr/sbin:/usr/local/sbin";
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join("nats-server")).find(|p| p.is_file())
}

fn server() -> Option<Server> {
    if !nats::available() {
        println!("skipped: this libkvreg was built without NATS (kvreg::nats::available() is false)");
        return None;
    }
    let exe = match find_server() {
        Some(exe) => exe,
        None => {
            assert!(std::env::var("CI").as_deref() != Ok("true"),
                    "nats-server not found; CI=true, so this is a failure");
            println!("skipped: nats-server not found (apt-get install nats-server)");
            return None;
        }
    };
    // One directory per server: the tests run in parallel, each with its own server.
    static SERVERS: AtomicUsize = AtomicUsize::new(0);
    let n = SERVERS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kvreg-rs-nats-{}-{}", std::process::id(), n));
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new(exe)
        .args(["-js", "-sd"]).arg(dir.join("store"))
        .args(["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir"]).arg(&dir)
        .arg("-l").arg(dir.join("log"))
        .spawn().expect("start nats-server");
    let ports = dir.join(format!("nats-server_{}.ports", child.id()));
    let mut s = Server { child, dir, url: String::new() };
    let mut port = None;
    wait_for("nats-server's ports file", || {
        let text = std::fs::read_to_string(&ports).unwrap_or_default();
        port = text.find("127.0.0.1:").and_then(|i| {
            text[i + 10..].split(|c: char| !c.is_ascii_digit()).next()?.parse::<u16>().ok()
        });
        port.is_some()
    });
    s.url = format!("nats://127.0.0.1:{}", port.unwrap());
    Some(s)
}

#[test]
fn publish_then_consume() {
    let s = match server() {
        Some(s) => s,
        None => return,
    };
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let gpu = registry.pool("gpu").unwrap();
    let mut publisher = NatsPublisher::new(&registry).unwrap();
    publisher.set_string(nats::KVREG_NATS_URL, &s.url).unwrap();
    publisher.set_string(nats::KVREG_NATS_STREAM, "RS").unwrap();
    publisher.set_string(nats::KVREG_NATS_SUBJECT_PREFIX, "rs.ev").unwrap();
    publisher.set(nats::KVREG_NATS_PUB_OPT_WORKER_ID, 4).unwrap();
    publisher.set(nats::KVREG_NATS_PUB_OPT_BATCH_US, 0).unwrap();
    // A fresh server answers before its JetStream is up: start until it works (bounded).
    wait_for("the publisher to start", || publisher.start().is_ok());
    assert_eq!(publisher.set(nats::KVREG_NATS_PUB_OPT_WORKER_ID, 1).unwrap_err().kind(),
               ErrorKind::InvalidState);
    let tokens: Vec<u32> = (200..212).collect();
    let infos = hash_blocks(&tokens, 4, ROUTER_SALT).unwrap();
    let mut blocks = Vec::new();
    for (i, info) in infos.iter().enumerate() {
        let mut d = BlockDesc::from(info);
        d.tokens = &tokens[4 * i..4 * i + 4];
        blocks.push(gpu.register(&d).unwrap());
    }
    wait_for("3 events published and acknowledged", || {
        publisher.stat(nats::KVREG_NATS_PUB_STAT_EVENTS_HANDLED).unwrap() >= 3
            && publisher.stat(nats::KVREG_NATS_PUB_STAT_IN_FLIGHT).unwrap() == 0
    });
    let target = publisher.stat(nats::KVREG_NATS_PUB_STAT_BATCHES).unwrap();
    assert!(target >= 1);

    let index = Index::new(&[(nats::KVREG_INDEX_OPT_HASHES, nats::KVREG_INDEX_HASHES_OWN)]).unwrap();
    let mut consumer = NatsConsumer::new(&index).unwrap();
    consumer.set_string(nats::KVREG_NATS_URL, &s.url).unwrap();
    consumer.set_string(nats::KVREG_NATS_STREAM, "RS").unwrap();
    consumer.set_string(nats::KVREG_NATS_DURABLE, "rs-replica").unwrap();
    consumer.set(nats::KVREG_NATS_CON_OPT_FETCH_BATCH, 16).unwrap();
    consumer.set_string(nats::KVREG_NATS_SNAPSHOT_BUCKET, "RSSNAP").unwrap();
    assert_eq!(consumer.run(0).unwrap_err().kind(), ErrorKind::InvalidState); // not started
    consumer.start().unwrap();
    assert_eq!(consumer.worker(4, 0).unwrap(), None);
    wait_for("the batches applied", || {
        consumer.run(50).unwrap();
        consumer.worker(4, 0).unwrap().map(|(_, next)| next) == Some(target)
    });
    assert_eq!(index.stat(nats::KVREG_INDEX_STAT_ENTRIES).unwrap(), 3); // 3 blocks of worker 4
    assert_eq!(consumer.stat(nats::KVREG_NATS_CON_STAT_BATCHES).unwrap(), target);
    for stat in [nats::KVREG_NATS_CON_STAT_DUPLICATES, nats::KVREG_NATS_CON_STAT_LOST,
                 nats::KVREG_NATS_CON_STAT_MALFORMED] {
        assert_eq!(consumer.stat(stat).unwrap(), 0);
    }
    // A replica made from this one's dump is the same replica; a corrupt dump is refused.
    let dump = index.dump().unwrap();
    let mut copy = Index::new(&[(nats::KVREG_INDEX_OPT_HASHES, nats::KVREG_INDEX_HASHES_OWN)]).unwrap();
    copy.load(&dump).unwrap();
    assert_eq!(copy.digest().unwrap(), index.digest().unwrap());
    assert_eq!(copy.load(&dump).unwrap_err().kind(), ErrorKind::InvalidState);
    let mut corrupt = dump.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 1;
    let mut bad = Index::new(&[(nats::KVREG_INDEX_OPT_HASHES, nats::KVREG_INDEX_HASHES_OWN)]).unwrap();
    assert_eq!(bad.load(&corrupt).unwrap_err().kind(), ErrorKind::Protocol);
    let mut shared = index.clone(); // the consumer holds a handle too
    assert_eq!(shared.load(&dump).unwrap_err().kind(), ErrorKind::InvalidState);
    // A replica started on this one's snapshot has its index at once.
    assert!(consumer.snapshot().unwrap() > 0);
    let index2 = Index::new(&[(nats::KVREG_INDEX_OPT_HASHES, nats::KVREG_INDEX_HASHES_OWN)]).unwrap();
    let mut consumer2 = NatsConsumer::new(&index2).unwrap();
    consumer2.set_string(nats::KVREG_NATS_URL, &s.url).unwrap();
    consumer2.set_string(nats::KVREG_NATS_STREAM, "RS").unwrap();
    consumer2.set_string(nats::KVREG_NATS_DURABLE, "rs-replica-2").unwrap();
    consumer2.set_string(nats::KVREG_NATS_SNAPSHOT_BUCKET, "RSSNAP").unwrap();
    consumer2.start().unwrap();
    assert_eq!(consumer2.stat(nats::KVREG_NATS_CON_STAT_RESTORED).unwrap(), 1);
    assert_eq!(index2.digest().unwrap(), index.digest().unwrap());
    drop(index); // the consumer keeps its own handle
    for b in blocks {
        gpu.release(b).unwrap();
    }
    publisher.stop().unwrap();
    assert_eq!(publisher.stat(nats::KVREG_NATS_PUB_STAT_ACKED).unwrap(),
               publisher.stat(nats::KVREG_NATS_PUB_STAT_BATCHES).unwrap());
}

#[test]
fn start_without_server_fails() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let publisher = NatsPublisher::new(&registry);
    if !nats::available() {
        assert_eq!(publisher.err().unwrap().kind(), ErrorKind::NotSupported);
        println!("skipped: this libkvreg was built without NATS; only NotSupported checked");
        return;
    }
    let mut publisher = publisher.unwrap();
    publisher.set_string(nats::KVREG_NATS_URL, "nats://127.0.0.1:1").unwrap();
    publisher.set(nats::KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS, 200).unwrap();
    assert_eq!(publisher.start().unwrap_err().kind(), ErrorKind::Protocol);
    assert_eq!(publisher.set_string(nats::KVREG_NATS_URL, "a\0b").unwrap_err().kind(),
               ErrorKind::InvalidArgument);
}

/// Runs f on its own thread and gives its result, or fails the test after 10 s (a run that
/// was never stopped would otherwise hang the suite).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("timed out: {}", what))
}

/// `run(-1)` runs "until stopped" (kvreg_nats.h): `stop` from another thread must be able to
/// end it, so `run` takes `&self` and a second concurrent `run` is `Busy` (the library allows
/// one runner at a time and does not check it itself).
#[test]
fn a_running_consumer_is_stopped_from_another_thread() {
    let s = match server() {
        Some(s) => s,
        None => return,
    };
    // The stream the consumer reads must exist: a publisher's start creates it.
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let mut publisher = NatsPublisher::new(&registry).unwrap();
    publisher.set_string(nats::KVREG_NATS_URL, &s.url).unwrap();
    publisher.set_string(nats::KVREG_NATS_STREAM, "RSSTOP").unwrap();
    publisher.set_string(nats::KVREG_NATS_SUBJECT_PREFIX, "rs.stop").unwrap();
    wait_for("the publisher to start", || publisher.start().is_ok());

    let index = Index::new(&[]).unwrap();
    let mut consumer = NatsConsumer::new(&index).unwrap();
    consumer.set_string(nats::KVREG_NATS_URL, &s.url).unwrap();
    consumer.set_string(nats::KVREG_NATS_STREAM, "RSSTOP").unwrap();
    consumer.set_string(nats::KVREG_NATS_DURABLE, "rs-stop").unwrap();
    consumer.start().unwrap();
    let consumer = Arc::new(consumer);

    // The runner: run(-1) until stopped (retrying while this thread's run(0) below has the
    // consumer).
    let runner = {
        let consumer = Arc::clone(&consumer);
        let (tx, rx) = mpsc::channel::<Result<(), Error>>();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            let r = loop {
                match consumer.run(-1) {
                    Err(e) if e.kind() == ErrorKind::Busy && Instant::now() < deadline => continue,
                    r => break r,
                }
            };
            tx.send(r).unwrap();
        });
        rx
    };
    // Once the runner is in run(-1), another run is refused rather than racing it.
    wait_for("the runner to be in run(-1)", || {
        matches!(consumer.run(0), Err(e) if e.kind() == ErrorKind::Busy)
    });
    consumer.stat(nats::KVREG_NATS_CON_STAT_MESSAGES).unwrap(); // any thread, during a run
    consumer.stop().unwrap();
    runner.recv_timeout(Duration::from_secs(10)).expect("stop() ended run(-1)").unwrap();

    // A stop before the run ends the next run (the header's "current (or next) run").
    consumer.stop().unwrap();
    let c = Arc::clone(&consumer);
    within("a stopped run(-1)", move || c.run(-1)).unwrap();
    // The runner is gone: runs work again, and the consumer is exclusive once more.
    consumer.run(0).unwrap();
    let mut consumer = Arc::try_unwrap(consumer).ok().expect("the runner dropped its handle");
    assert_eq!(consumer.worker(1, 0).unwrap(), None);
    publisher.stop().unwrap();
}

/// A publisher (from `new` until it is dropped) is its registry's only poller: the library
/// refuses other polls and a second publisher with KVREG_EBUSY, which the binding reports as
/// `ErrorKind::Busy`. Events stay queued for the publisher meanwhile. Needs no server.
#[test]
fn a_publisher_is_its_registrys_only_poller() {
    let registry = Registry::builder().delivery(Delivery::Poll).keep_tokens(true).build().unwrap();
    let publisher = match NatsPublisher::new(&registry) {
        Ok(p) => p,
        Err(e) => {
            assert!(!nats::available());
            assert_eq!(e.kind(), ErrorKind::NotSupported);
            println!("skipped: this libkvreg was built without NATS");
            return;
        }
    };
    let gpu = registry.pool("gpu").unwrap();
    let info = hash_blocks(&[1, 2, 3, 4], 4, ROUTER_SALT).unwrap()[0];
    let block = gpu.register(&BlockDesc::from(&info).with_tokens(&[1, 2, 3, 4], 4)).unwrap();
    registry.flush().unwrap();
    // An event is queued, so none of these may wait: each is Busy at once (or, without the
    // library's check, returns the event the publisher owns).
    assert_eq!(registry.poll().unwrap_err().kind(), ErrorKind::Busy);
    assert_eq!(registry.poll_max(1).unwrap_err().kind(), ErrorKind::Busy);
    assert_eq!(registry.poll_wait(1, None).unwrap_err().kind(), ErrorKind::Busy);
    assert_eq!(registry.poll_wait(8, Some(Duration::ZERO)).unwrap_err().kind(), ErrorKind::Busy);
    assert_eq!(NatsPublisher::new(&registry).err().expect("a second publisher").kind(),
               ErrorKind::Busy);
    // Freed, the publisher gives the events back; the one it never took is still queued.
    drop(publisher);
    let events = registry.poll().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].sequence_hash, info.sequence_hash);
    gpu.release(block).unwrap();
    NatsPublisher::new(&registry).unwrap();
}

/// A publisher keeps its registry alive and a consumer its index: dropping every other handle
/// first frees nothing the library still uses.
#[test]
fn a_publisher_and_a_consumer_keep_what_they_use() {
    let registry = Registry::builder().delivery(Delivery::Poll).build().unwrap();
    let weak = registry.downgrade();
    let publisher = match NatsPublisher::new(&registry) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::NotSupported);
            return;
        }
    };
    drop(registry);
    assert!(weak.upgrade().is_some(), "the publisher holds its registry");
    publisher.stat(nats::KVREG_NATS_PUB_STAT_BATCHES).unwrap();
    drop(publisher);
    assert!(weak.upgrade().is_none(), "freed with the publisher");

    let index = Index::new(&[]).unwrap();
    let consumer = NatsConsumer::new(&index).unwrap();
    let mut other = index.clone();
    drop(index);
    // The consumer still holds the index: loading into it (which needs the only handle) is
    // refused until the consumer is gone.
    let dump = other.dump().unwrap();
    assert_eq!(other.load(&dump).unwrap_err().kind(), ErrorKind::InvalidState);
    assert_eq!(consumer.run(0).unwrap_err().kind(), ErrorKind::InvalidState); // not started
    drop(consumer);
    other.load(&dump).unwrap();
}
