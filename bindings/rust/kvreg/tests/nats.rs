//! kvreg::nats against a real nats-server this test starts (JetStream, a temporary store,
//! 127.0.0.1, an ephemeral port). Prints why and returns early when the library was built
//! without NATS; without nats-server too, except with CI=true, where that fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kvreg::nats::{self, Index, NatsConsumer, NatsPublisher};
use kvreg::{hash_blocks, BlockDesc, Delivery, ErrorKind, Registry, ROUTER_SALT};

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
    let dir = std::env::temp_dir().join(format!("kvreg-rs-nats-{}", std::process::id()));
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
