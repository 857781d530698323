// kvreg-net-bench: the ZeroMQ publisher and subscriber against their baselines, in one run
// (ratios, not absolute numbers, are the result; the machine may be shared).
//   pubsub   kvreg events/s from registry to subscriber callback over tcp 127.0.0.1
//            (POLL queue -> encoder -> PUB -> SUB -> decoder -> callback), against raw
//            libzmq PUB/SUB moving the same payload bytes (pre-encoded, no decode).
//            Target: ratio >= 0.7. ceiling_ratio: the same events made by one thread on a
//            registry without any consumer, against raw: the pipeline cannot beat it.
//            (producer_only_events_per_s)
//   register_release  register + release ops/s of one thread, with a started publisher (and
//            a subscriber thread reading it) against a plain registry without one.
//            Target: ratio >= 0.8.
//   attacked-replay  (issue 36) live kvreg events/s reaching a subscriber, and the resident
//            memory of the process holding the publisher, with and without 30 replay
//            requesters (another process) that each ask for the whole ring and never read,
//            in one run. Targets: ratio >= 0.9; growth over the unattacked run <= 64 MiB.
//            cpu_ratio: the process's CPU seconds per pass, unattacked over attacked (what the
//            requesters cost us, less sensitive than wall time to a busy machine).
//            The ring keeps one register_release pass (filled first); batches of 64 events.
//   nats     (not in `all`; built with the library's NATS) the JetStream plane against raw
//            libnats and a replica's restore against its rebuild: bench/net_nats.cpp.
//            --nats-events N (default 200000), --trace FILE (default: the conversation trace).
//   attacked  (issue 36) every attack of the issue, one row each, in one run: the row above
//            (the publisher's side), then the subscriber's: 50,000 topics, 50 x 20 MB, a
//            replay peer repeating one batch, an unanswered gap then 200 x 1 MB (and then 1 MB
//            without end, measured once the held bound is reached), 4 MiB nested
//            msgpack headers for the decoder (SubAttacker says what each sends). Each row:
//            the attacked process's resident growth over its unattacked pass (target <= 64
//            MiB, or the configured bound + 64) and the well-behaved stream's events/s
//            attacked / unattacked (target >= 0.9). JSON line per row; the table on stderr.
//            Where the time went, per pass (CPU seconds, min over reps): cpu_s (this process),
//            sub_thread_cpu_s (the thread in kvreg_subscriber_run), other_cpu_s (this process
//            less that thread and the producing/waiting main thread: the publisher's thread and
//            libzmq's I/O threads), peer_cpu_s_attacked (the attacker's process), each also
//            _attacked; cpu_ratio and sub_thread_cpu_ratio are unattacked / attacked.
//            Not part of "all" (it takes about a minute).
// --workload NAME: run only pubsub, register_release, attacked-replay, attacked or nats
// (default: all but attacked and nats). nats-replica is nats's own child (one replica in a
// process of its own: --nats-replica rebuild|restore --nats-url URL --nats-durable NAME
// --nats-batches N), not for use by hand.
// --max-events N: kvreg events per batch (the publisher's KVREG_PUB_OPT_MAX_EVENTS; the raw
// side moves the payloads that setting gives), default 1024.
// --rcv-bytes N: pubsub's subscriber gets KVREG_SUB_OPT_RCV_BYTES N (0: no byte bound, so
// libzmq reads ahead as many messages as it likes, as the raw side's does); default the
// library's, which with its MAX_MSG_SIZE lets libzmq read 4 messages ahead. Small batches
// (--max-events 16) show what that costs a publisher sending as fast as it can.
// Output: one JSON line per workload. Usage: kvreg-net-bench [--seqs N] [--len N] [--reps N]
//   [--max-events N] [--rcv-bytes N] [--workload NAME] [--nats-events N] [--nats-sized 0|1]
#include <kvreg.h>
#include <kvreg_net.h>
#include <zmq.h>

#include "bench.hpp" // median
#if KVREG_NET_BENCH_NATS
#include "net_nats.hpp"
#endif

#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint32_t kBlock = 16;

// CPU seconds of the calling thread / of the whole process: on a shared machine wall time
// measures the neighbours too; CPU time measures what our threads did.
double cpu_s(clockid_t which) {
    timespec ts;
    clock_gettime(which, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const char *what, int rc) {
    std::fprintf(stderr, "kvreg-net-bench: %s: %s\n", what, kvreg_strerror(rc));
    std::exit(1);
}
void check(int rc, const char *what) {
    if (rc != KVREG_OK) die(what, rc);
}

// n_seqs random sequences of len tokens, hashed into blocks (no shared prefixes).
struct Input {
    std::vector<uint32_t> tokens;
    std::vector<kvreg_block_desc> descs;
    size_t per_seq = 0, n_seqs = 0;
};

Input make_input(size_t n_seqs, size_t len) {
    Input in;
    in.n_seqs = n_seqs;
    in.per_seq = len / kBlock;
    in.tokens.resize(n_seqs * len);
    uint64_t st = 0x5EED;
    for (auto &t : in.tokens) {
        st += 0x9E3779B97F4A7C15ull;
        uint64_t z = st;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        t = static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
    }
    std::vector<kvreg_block_info> info(in.per_seq);
    for (size_t s = 0; s < n_seqs; s++) {
        size_t nb = 0;
        check(kvreg_hash_blocks(&in.tokens[s * len], len, kBlock, KVREG_ROUTER_SALT, info.data(), info.size(), &nb),
              "hash");
        for (size_t b = 0; b < nb; b++) {
            kvreg_block_desc d{};
            d.sequence_hash = info[b].sequence_hash;
            d.block_hash = info[b].block_hash;
            d.parent_sequence_hash = info[b].parent_sequence_hash;
            d.has_parent = info[b].has_parent;
            d.block_size = kBlock;
            d.tokens = &in.tokens[s * len + b * kBlock];
            d.n_tokens = kBlock;
            in.descs.push_back(d);
        }
    }
    return in;
}

// Register every sequence (one batch call each), then release them: 2 ops per block. Returns
// wall seconds; *thread_cpu (may be null) gets the calling thread's CPU seconds.
double register_release(kvreg_pool *pool, const Input &in, double *thread_cpu = nullptr) {
    std::vector<kvreg_block> h(in.descs.size());
    const double c = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    const double t = now_s();
    for (size_t s = 0; s < in.n_seqs; s++)
        check(kvreg_register_batch(pool, &in.descs[s * in.per_seq], in.per_seq, &h[s * in.per_seq], nullptr, nullptr),
              "register");
    for (size_t s = 0; s < in.n_seqs; s++)
        check(kvreg_release_batch(pool, &h[s * in.per_seq], in.per_seq, nullptr, nullptr), "release");
    if (thread_cpu) *thread_cpu = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c;
    return now_s() - t;
}

kvreg_registry *poll_registry() {
    kvreg_config *cfg = nullptr;
    check(kvreg_config_new(&cfg), "config");
    check(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), "config");
    check(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 1u << 24), "config");
    kvreg_registry *reg = nullptr;
    check(kvreg_registry_new(&reg, cfg), "registry");
    kvreg_config_free(cfg);
    return reg;
}

// What the subscriber thread delivered, and a wait for a count of it. The waiting thread
// sleeps on cv: a thread spinning on the count took a share of the 2 cores from the threads
// measured, and more of it the longer a pass ran (under an attack, its CPU grew by about half).
struct SubCount {
    std::atomic<uint64_t> events{0};
    std::atomic<uint64_t> want{UINT64_MAX}; // wake the waiter once events reaches it
    uint64_t hashes = 0;
    std::mutex mu;
    std::condition_variable cv;
};

void on_batch(const kvreg_sub_batch *b, void *ud) {
    auto *c = static_cast<SubCount *>(ud);
    if (b->publisher != 0) return; // an attacker's endpoint (attacked): not the measured stream
    uint64_t h = 0;
    for (size_t i = 0; i < b->n_events; i++) h += b->events[i].n_block_hashes;
    c->hashes += h;
    // seq_cst with wait_events(): either this sees its want or it sees these events.
    if (c->events.fetch_add(h) + h >= c->want.load()) {
        std::lock_guard<std::mutex> hold(c->mu);
        c->cv.notify_all();
    }
}

// Block until c has delivered `events` or timeout_s passes; false on the timeout.
bool wait_events(SubCount &c, uint64_t events, double timeout_s) {
    c.want.store(events);
    std::unique_lock<std::mutex> hold(c.mu);
    const bool ok = c.cv.wait_for(hold, std::chrono::duration<double>(timeout_s),
                                  [&] { return c.events.load() >= events; });
    c.want.store(UINT64_MAX);
    return ok;
}

// A publisher on reg with a subscriber thread counting block hashes (= kvreg events).
struct Link {
    kvreg_publisher *pub = nullptr;
    kvreg_subscriber *sub = nullptr;
    SubCount count;
    std::atomic<bool> stop{false};
    std::thread th;

    // ring > 0: the publisher also serves replays from a ring of that many batches.
    // extra: more (endpoint, replay endpoint or "") pairs the subscriber reads (attackers);
    // sub_opts: (option, value) pairs set on the subscriber first.
    explicit Link(kvreg_registry *reg, size_t max_events, bool with_sub = true, size_t ring = 0,
                  const std::vector<std::pair<std::string, std::string>> &extra = {},
                  const std::vector<std::pair<uint32_t, uint64_t>> &sub_opts = {}) {
        check(kvreg_publisher_new(&pub, reg), "publisher");
        check(kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*"), "endpoint");
        if (ring) {
            check(kvreg_publisher_set_string(pub, KVREG_PUB_REPLAY_ENDPOINT, "tcp://127.0.0.1:*"), "replay");
            check(kvreg_publisher_set(pub, KVREG_PUB_OPT_BUFFER_STEPS, ring), "ring");
        }
        check(kvreg_publisher_set(pub, KVREG_PUB_OPT_HWM, 0), "hwm");
        check(kvreg_publisher_set(pub, KVREG_PUB_OPT_MAX_EVENTS, max_events), "max events");
        check(kvreg_publisher_start(pub), "start");
        char ep[256];
        check(kvreg_publisher_endpoint(pub, KVREG_PUB_ENDPOINT, ep, sizeof ep, nullptr), "endpoint");
        if (!with_sub) return;
        check(kvreg_subscriber_new(&sub), "subscriber");
        check(kvreg_subscriber_set(sub, KVREG_SUB_OPT_RCVHWM, 0), "rcvhwm");
        for (const auto &[opt, v] : sub_opts) check(kvreg_subscriber_set(sub, opt, v), "subscriber option");
        check(kvreg_subscriber_add(sub, ep, nullptr, nullptr), "add");
        for (const auto &[e, r] : extra)
            check(kvreg_subscriber_add(sub, e.c_str(), r.empty() ? nullptr : r.c_str(), nullptr), "add attacker");
        check(kvreg_subscriber_set_batch_fn(sub, on_batch, &count), "batch fn");
        th = std::thread([this] {
            while (!stop.load(std::memory_order_acquire)) kvreg_subscriber_run(sub, 50);
        });
    }
    // Register probe blocks until the subscriber sees one (PUB/SUB's slow joiner).
    void sync(kvreg_pool *pool) {
        const double deadline = now_s() + 10;
        for (uint64_t k = 1; count.events.load(std::memory_order_acquire) == 0; k++) {
            if (now_s() > deadline) die("subscriber never connected", KVREG_ESTATE);
            kvreg_block_desc d{};
            d.sequence_hash = d.block_hash = (1ull << 63) | k;
            kvreg_block b;
            check(kvreg_register(pool, &d, &b), "probe");
            check(kvreg_release(pool, b), "probe");
            std::this_thread::sleep_for(std::chrono::milliseconds(5)); // pacing the probes only
        }
    }
    void wait_for(uint64_t events, double timeout_s) {
        if (!wait_events(count, events, timeout_s)) {
            std::fprintf(stderr, "kvreg-net-bench: %llu of %llu events\n",
                         static_cast<unsigned long long>(count.events.load()),
                         static_cast<unsigned long long>(events));
            die("events missing at the subscriber", KVREG_ESTATE);
        }
    }
    ~Link() {
        kvreg_publisher_free(pub);
        stop.store(true, std::memory_order_release);
        if (th.joinable()) th.join();
        kvreg_subscriber_free(sub);
    }
};

// Raw libzmq PUB -> SUB of pre-encoded payloads; seconds from first send to last receive.
double raw_zmq(const std::vector<std::string> &payloads, double &cpu) {
    void *ctx = zmq_ctx_new();
    void *pub = zmq_socket(ctx, ZMQ_PUB);
    void *sub = zmq_socket(ctx, ZMQ_SUB);
    int zero = 0;
    zmq_setsockopt(pub, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(sub, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(pub, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_bind(pub, "tcp://127.0.0.1:*") != 0) die("raw bind", KVREG_EINVAL);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(pub, ZMQ_LAST_ENDPOINT, ep, &len);
    zmq_connect(sub, ep);
    auto send = [&](const std::string &topic, uint64_t seq, const std::string &p) {
        unsigned char s8[8];
        for (int i = 7; i >= 0; i--, seq >>= 8) s8[i] = static_cast<unsigned char>(seq);
        zmq_send(pub, topic.data(), topic.size(), ZMQ_SNDMORE);
        zmq_send(pub, s8, 8, ZMQ_SNDMORE);
        zmq_send(pub, p.data(), p.size(), 0);
    };
    zmq_msg_t m;
    zmq_msg_init(&m);
    auto recv_one = [&](int flags) {
        int more = 1, got = 0;
        while (more) {
            if (zmq_msg_recv(&m, sub, got ? 0 : flags) < 0) return false;
            got = 1;
            more = zmq_msg_more(&m);
        }
        return true;
    };
    for (;;) { // slow joiner: probes until one arrives
        send("probe", 0, "");
        zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 5) > 0 && recv_one(0)) break;
    }
    while (recv_one(ZMQ_DONTWAIT)) {
    }
    const double t = now_s();
    const double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    std::thread rx([&] {
        for (size_t i = 0; i < payloads.size(); i++) recv_one(0);
    });
    const std::string topic;
    for (size_t i = 0; i < payloads.size(); i++) send(topic, i, payloads[i]);
    rx.join();
    const double dt = now_s() - t;
    cpu = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    zmq_msg_close(&m);
    zmq_close(pub);
    zmq_close(sub);
    zmq_ctx_term(ctx);
    return dt;
}

// The payloads the publisher would make for the events of one register_release pass.
std::vector<std::string> encode_pass(const Input &in, size_t max_events, double &encode_s) {
    kvreg_registry *reg = poll_registry();
    kvreg_pool *pool = nullptr;
    check(kvreg_pool_new(&pool, reg, "G1"), "pool");
    register_release(pool, in);
    kvreg_wire_encoder *enc = nullptr;
    check(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), "encoder");
    check(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, max_events), "encoder");
    encode_s = 0;
    std::vector<kvreg_event> ev(KVREG_EVENTS_PER_CALL);
    std::vector<std::string> out;
    for (;;) {
        size_t n = 0;
        check(kvreg_registry_poll(reg, ev.data(), ev.size(), &n), "poll");
        if (!n) break;
        for (size_t off = 0; off < n;) {
            size_t used = 0, len = 0;
            const uint8_t *p = nullptr;
            const double t = now_s();
            check(kvreg_wire_encode(enc, &ev[off], n - off, -1.0, &used, &p, &len), "encode");
            encode_s += now_s() - t;
            out.emplace_back(reinterpret_cast<const char *>(p), len);
            off += used;
        }
    }
    kvreg_wire_encoder_free(enc);
    kvreg_registry_free(reg);
    return out;
}

// Seconds to decode every payload once (the subscriber's share of the codec work).
double decode_all(const std::vector<std::string> &payloads) {
    kvreg_wire_decoder *dec = nullptr;
    check(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), "decoder");
    const double t = now_s();
    for (const auto &p : payloads) {
        const kvreg_wire_event *ev;
        size_t n;
        check(kvreg_wire_decode(dec, p.data(), p.size(), &ev, &n, nullptr), "decode");
    }
    const double dt = now_s() - t;
    kvreg_wire_decoder_free(dec);
    return dt;
}

// ---------------------------------------------------------------------------- attacked-replay
uint64_t rss_kib() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmRSS: %lu kB", &kib) == 1) break;
    std::fclose(f);
    return kib;
}

// The requesters, in a child process forked before this one starts any thread or ZeroMQ
// context (what they hold must not count in our resident memory). Commands on a pipe:
// "go <endpoint>" opens kRequesters DEALERs (a receive queue of one message, a 4 KB kernel
// buffer), each asking for everything from seq 0, and never reads; "stop" closes them. Each
// command is acknowledged with one byte.
constexpr int kRequesters = 30;

struct Attacker {
    pid_t pid = -1;
    int cmd = -1, ack = -1;

    static void child(int cmd_fd, int ack_fd) {
        FILE *in = fdopen(cmd_fd, "r");
        void *ctx = zmq_ctx_new();
        std::vector<void *> socks;
        char line[512];
        while (in && std::fgets(line, sizeof line, in)) {
            line[std::strcspn(line, "\n")] = 0;
            if (!std::strncmp(line, "go ", 3)) {
                for (int i = 0; i < kRequesters; i++) {
                    void *s = zmq_socket(ctx, ZMQ_DEALER);
                    const int one = 1, zero = 0, small = 4096;
                    zmq_setsockopt(s, ZMQ_RCVHWM, &one, sizeof one);
                    zmq_setsockopt(s, ZMQ_RCVBUF, &small, sizeof small);
                    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
                    zmq_connect(s, line + 3);
                    const unsigned char start[8] = {0};
                    zmq_send(s, "", 0, ZMQ_SNDMORE);
                    zmq_send(s, start, 8, 0);
                    socks.push_back(s);
                }
            } else if (!std::strcmp(line, "stop")) {
                for (void *s : socks) zmq_close(s);
                socks.clear();
            }
            if (write(ack_fd, "k", 1) != 1) break;
        }
        for (void *s : socks) zmq_close(s);
        zmq_ctx_term(ctx);
        _exit(0);
    }
    void start() {
        int c[2], a[2];
        if (pipe(c) != 0 || pipe(a) != 0) die("pipe", KVREG_ENOMEM);
        pid = fork();
        if (pid < 0) die("fork", KVREG_ENOMEM);
        if (pid == 0) {
            close(c[1]);
            close(a[0]);
            child(c[0], a[1]);
        }
        close(c[0]);
        close(a[1]);
        cmd = c[1];
        ack = a[0];
    }
    void send(const std::string &line) {
        const std::string l = line + "\n";
        char k;
        if (write(cmd, l.data(), l.size()) != static_cast<ssize_t>(l.size()) || read(ack, &k, 1) != 1)
            die("attacker", KVREG_ESTATE);
    }
    void finish() {
        if (pid <= 0) return;
        close(cmd);
        close(ack);
        waitpid(pid, nullptr, 0);
        pid = -1;
    }
};

// A stat of the publisher; false when the library does not have it (an older build).
bool pub_stat(kvreg_publisher *pub, uint32_t stat, uint64_t *v) { return kvreg_publisher_stat(pub, stat, v) == KVREG_OK; }

// One row of the attacked table.
struct Row {
    std::string attack;
    double growth_mib, target_mib, ratio, paired;
    std::string outcome;
};

// The median over reps of plain[r] / attacked[r]: each rep runs its unattacked pass and its
// attacked one back to back, so the VM's drift (an unattacked 40 ms pass moved 35-70 ms from
// one rep to the next here) mostly cancels within a pair, where a ratio of the two bests
// compares passes from different moments. Both are reported.
double paired_median(const std::vector<double> &plain, const std::vector<double> &attacked) {
    std::vector<double> r;
    for (size_t i = 0; i < plain.size() && i < attacked.size(); i++) r.push_back(plain[i] / attacked[i]);
    return bench::median(r); // kvreg-bench's (bench/util.cpp): the lower middle value
}

void attacked_replay(const Input &in, size_t reps, Attacker &att, std::vector<Row> *rows = nullptr) {
    constexpr size_t kMaxEvents = 64;
    const uint64_t events = 2 * in.descs.size();
    const size_t ring = (events + kMaxEvents - 1) / kMaxEvents; // about one pass of batches
    kvreg_registry *reg = poll_registry();
    kvreg_pool *pool = nullptr;
    check(kvreg_pool_new(&pool, reg, "G1"), "pool");
    auto *owned = new Link(reg, kMaxEvents, true, ring); // freed before the registry
    Link &link = *owned;
    link.sync(pool);
    char rep_ep[256];
    check(kvreg_publisher_endpoint(link.pub, KVREG_PUB_REPLAY_ENDPOINT, rep_ep, sizeof rep_ep, nullptr), "replay");
    // One pass to fill the ring: the state every measured pass starts from.
    uint64_t base = link.count.events.load();
    register_release(pool, in);
    link.wait_for(base + events, 120);

    // One timed pass: seconds until the subscriber has every event. A sampler thread reads
    // the resident memory and the publisher's queued replay bytes every 2 ms meanwhile (in
    // both kinds of pass alike), for their peaks.
    // Growth is measured from r0 (for the attacked pass: before the requests were sent).
    auto pass = [&](uint64_t r0, uint64_t &growth_kib, uint64_t &queued_peak, double &cpu) {
        std::atomic<bool> done{false};
        uint64_t peak = r0, qpeak = 0;
        std::thread sampler([&] {
            while (!done.load(std::memory_order_acquire)) {
                peak = std::max(peak, rss_kib());
                uint64_t q = 0;
                if (pub_stat(link.pub, KVREG_PUB_STAT_REPLAY_QUEUED_BYTES, &q)) qpeak = std::max(qpeak, q);
                std::this_thread::sleep_for(std::chrono::milliseconds(2)); // sampling period
            }
        });
        base = link.count.events.load();
        const double t = now_s();
        const double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        register_release(pool, in);
        link.wait_for(base + events, 120);
        const double dt = now_s() - t;
        cpu = std::min(cpu, cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0); // the sampler's share is alike in both
        done.store(true, std::memory_order_release);
        sampler.join();
        growth_kib = std::max(growth_kib, std::max({peak, rss_kib(), r0}) - r0);
        queued_peak = std::max(queued_peak, qpeak);
        return dt;
    };
    double cpu_plain = 1e9, cpu_attacked = 1e9;
    uint64_t growth_plain = 0, growth_attacked = 0, queued_peak = 0, busy = 0, before_kib = 0, during_kib = 0;
    std::vector<double> plain_s, attacked_s;
    for (size_t r = 0; r < reps; r++) {
        uint64_t unused = 0;
        plain_s.push_back(pass(rss_kib(), growth_plain, unused, cpu_plain));
        const uint64_t r_go = rss_kib();
        before_kib = std::max(before_kib, r_go);
        // Every request taken: answered busy, whole or gone, or holding a slot (an older
        // library, without the busy and slot stats, answers each one whole at once). A
        // finished answer whose bytes are still queued counts twice: close enough to start.
        auto taken = [&]() {
            uint64_t b = 0, s = 0, g = 0;
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_BUSY, &b);
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_SERVED, &s);
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_GONE, &g);
            return b + s + g;
        };
        const uint64_t taken0 = taken();
        uint64_t busy0 = 0;
        pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_BUSY, &busy0);
        att.send(std::string("go ") + rep_ep);
        const double deadline = now_s() + 30;
        for (;;) {
            uint64_t a = 0;
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_ACTIVE, &a);
            if (taken() - taken0 + a >= kRequesters) break;
            if (now_s() > deadline) die("replay requests not taken", KVREG_ESTATE);
            std::this_thread::sleep_for(std::chrono::milliseconds(1)); // polling a condition
        }
        uint64_t b = 0;
        pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_BUSY, &b);
        busy += b - busy0;
        if (getenv("KVREG_BENCH_VERBOSE")) {
            uint64_t q = 0, a = 0, g = 0, rb = 0;
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAY_QUEUED_BYTES, &q);
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_ACTIVE, &a);
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_GONE, &g);
            pub_stat(link.pub, KVREG_PUB_STAT_REPLAY_BATCHES, &rb);
            std::fprintf(stderr, "attack: queued %lu active %lu gone %lu batches %lu\n", static_cast<unsigned long>(q),
                         static_cast<unsigned long>(a), static_cast<unsigned long>(g), static_cast<unsigned long>(rb));
        }
        attacked_s.push_back(pass(r_go, growth_attacked, queued_peak, cpu_attacked));
        during_kib = std::max(during_kib, rss_kib());
        att.send("stop");
        // The slots come back once ZeroMQ has dropped what it queued for them.
        const double until = now_s() + 30;
        uint64_t a = 0;
        while (pub_stat(link.pub, KVREG_PUB_STAT_REPLAYS_ACTIVE, &a) && a > 0 && now_s() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1)); // polling a condition
    }
    const double best_plain = *std::min_element(plain_s.begin(), plain_s.end());
    const double best_attacked = *std::min_element(attacked_s.begin(), attacked_s.end());
    const double paired = paired_median(plain_s, attacked_s);
    std::printf("{\"workload\":\"attacked-replay\",\"requesters\":%d,\"events\":%llu,\"ring_batches\":%zu,"
                "\"events_per_s\":%.0f,\"events_per_s_attacked\":%.0f,\"ratio\":%.3f,\"ratio_paired\":%.3f,\"target\":0.9,"
                "\"cpu_ratio\":%.3f,\"rss_growth_mib\":%.1f,\"rss_growth_attacked_mib\":%.1f,\"growth_over_unattacked_mib\":%.1f,"
                "\"rss_before_mib\":%.1f,\"rss_attacked_mib\":%.1f,\"target_mib\":64,"
                "\"replays_busy\":%llu,\"replay_queued_peak_mib\":%.1f}\n",
                kRequesters, static_cast<unsigned long long>(events), ring, events / best_plain,
                events / best_attacked, best_plain / best_attacked, paired, cpu_plain / cpu_attacked, growth_plain / 1024.0,
                growth_attacked / 1024.0,
                (static_cast<double>(growth_attacked) - static_cast<double>(growth_plain)) / 1024.0,
                before_kib / 1024.0, during_kib / 1024.0, static_cast<unsigned long long>(busy),
                queued_peak / 1048576.0);
    if (rows)
        rows->push_back({"30 replay requesters that never read (publisher side)",
                         (static_cast<double>(growth_attacked) - static_cast<double>(growth_plain)) / 1024.0, 64,
                         best_plain / best_attacked, paired, std::to_string(busy) + " requests answered busy"});
    delete owned;
    kvreg_registry_free(reg);
}

// ---------------------------------------------------------------------------- attacked
// The subscriber's attacks of issue 36, each while the well-behaved publisher streams one
// register_release pass to the same subscriber. The hostile peer is a child process forked
// before any thread or ZeroMQ context exists here (what it holds is not ours). Commands on a
// pipe, one line each, each answered with one line:
//   "open"        bind an XPUB (no send limit) and a ROUTER on 127.0.0.1 ephemeral ports;
//                 answers "<xpub> <router>"
//   "go KIND"     wait (bounded) for the subscription, then attack; answers "sent" once the
//                 attack's messages are queued (dup keeps answering replays until "stop")
//   "stop"        close the sockets; answers "ok"
// KINDs: topics (50,000 topics, one small batch each), flood (the same 50,000 batches on one
// topic, seq 0, 1, 2, ...: a busy publisher, the topics row's control), bigmsg (50 x 20 MB), dup (a live
// batch at seq 5, then every replay request answered by repeating seq 0, 20 every 5 ms,
// never ending; the live seq jumps ahead every 100 ms so gaps recur), held (a live batch at
// seq 5 whose replay is never answered, then 200 live batches of 1 MB), nested (20 payloads
// of 4 MiB: 31 nested msgpack array32 headers each claiming every byte after it, then
// zeros, for the decoder).
// One vLLM batch of one Register (the attackers' small payload); made before any fork.
std::string one_batch() {
    kvreg_wire_encoder *enc = nullptr;
    check(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), "encoder");
    kvreg_event ev{};
    ev.kind = KVREG_EVENT_REGISTER;
    ev.sequence_hash = ev.block_hash = 42;
    const uint32_t tokens[kBlock] = {};
    ev.tokens = tokens;
    ev.n_tokens = kBlock;
    size_t used = 0, len = 0;
    const uint8_t *p = nullptr;
    check(kvreg_wire_encode(enc, &ev, 1, 1.5, &used, &p, &len), "encode");
    std::string out(reinterpret_cast<const char *>(p), len);
    kvreg_wire_encoder_free(enc);
    return out;
}

struct SubAttacker {
    pid_t pid = -1;
    FILE *cmd = nullptr, *ans = nullptr;
    std::string small; // one valid vLLM batch (made before the fork)

    static void noop_free(void *, void *) {}
    static void send3(void *s, const std::string &topic, uint64_t seq, const void *p, size_t len, bool zero_copy) {
        unsigned char s8[8];
        for (int i = 7; i >= 0; i--, seq >>= 8) s8[i] = static_cast<unsigned char>(seq);
        zmq_send(s, topic.data(), topic.size(), ZMQ_SNDMORE);
        zmq_send(s, s8, 8, ZMQ_SNDMORE);
        if (!zero_copy) {
            zmq_send(s, p, len, 0);
            return;
        }
        zmq_msg_t m;
        zmq_msg_init_data(&m, const_cast<void *>(p), len, noop_free, nullptr);
        zmq_msg_send(&m, s, 0);
    }

    void child(int cmd_fd, int ans_fd) {
        FILE *in = fdopen(cmd_fd, "r");
        FILE *out = fdopen(ans_fd, "w");
        void *ctx = zmq_ctx_new();
        void *xpub = nullptr, *router = nullptr;
        std::vector<unsigned char> big(20u * 1000 * 1000, 0x5a), mb(1u << 20, 0x33), nested(4u << 20, 0);
        for (unsigned l = 0; l < 31; l++) { // each header claims every byte after it
            const uint32_t n = static_cast<uint32_t>(nested.size() - 5 * (l + 1));
            nested[5 * l] = 0xdd;
            for (int b = 0; b < 4; b++) nested[5 * l + 1 + b] = static_cast<unsigned char>(n >> (24 - 8 * b));
        }
        const std::string topic = "kv@attacker@model";
        char line[256];
        while (in && std::fgets(line, sizeof line, in)) {
            line[std::strcspn(line, "\n")] = 0;
            if (!std::strcmp(line, "open")) {
                const int zero = 0;
                xpub = zmq_socket(ctx, ZMQ_XPUB);
                router = zmq_socket(ctx, ZMQ_ROUTER);
                char e1[256], e2[256];
                size_t l1 = sizeof e1, l2 = sizeof e2;
                for (void *sk : {xpub, router}) {
                    zmq_setsockopt(sk, ZMQ_SNDHWM, &zero, sizeof zero);
                    zmq_setsockopt(sk, ZMQ_LINGER, &zero, sizeof zero);
                    zmq_bind(sk, "tcp://127.0.0.1:*");
                }
                zmq_getsockopt(xpub, ZMQ_LAST_ENDPOINT, e1, &l1);
                zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, e2, &l2);
                std::fprintf(out, "%s %s\n", e1, e2);
            } else if (!std::strncmp(line, "go ", 3)) {
                const std::string kind = line + 3;
                char sub[64];
                zmq_pollitem_t it = {xpub, 0, ZMQ_POLLIN, 0};
                if (zmq_poll(&it, 1, 10000) > 0) zmq_recv(xpub, sub, sizeof sub, 0);
                if (kind == "topics") {
                    for (int i = 0; i < 50000; i++)
                        send3(xpub, "kv@attacker-" + std::to_string(i) + "@model", 0, small.data(), small.size(), false);
                } else if (kind == "flood") {
                    for (uint64_t q = 0; q < 50000; q++) send3(xpub, topic, q, small.data(), small.size(), false);
                } else if (kind == "bigmsg") {
                    for (int i = 0; i < 50; i++) send3(xpub, topic, i, big.data(), big.size(), true);
                } else if (kind == "nested") {
                    for (int i = 0; i < 20; i++) send3(xpub, topic, i, nested.data(), nested.size(), true);
                } else if (kind == "held") {
                    send3(xpub, topic, 5, small.data(), small.size(), false);
                    for (uint64_t q = 6; q < 206; q++) send3(xpub, topic, q, mb.data(), mb.size(), true);
                } else if (kind == "held-sustained") {
                    std::fprintf(out, "sent\n"); // answered now: this one runs until "stop"
                    std::fflush(out);
                    sustain_loop(in, xpub, router, topic, mb);
                    xpub = router = nullptr;
                    std::fprintf(out, "ok\n");
                    std::fflush(out);
                    continue;
                } else if (kind == "dup") {
                    std::fprintf(out, "sent\n"); // answered now: this one runs until "stop"
                    std::fflush(out);
                    dup_loop(in, xpub, router, topic);
                    xpub = router = nullptr;
                    std::fprintf(out, "ok\n");
                    std::fflush(out);
                    continue;
                }
                std::fprintf(out, "sent\n");
            } else if (!std::strcmp(line, "stop")) {
                if (xpub) zmq_close(xpub);
                if (router) zmq_close(router);
                xpub = router = nullptr;
                std::fprintf(out, "ok\n");
            }
            std::fflush(out);
        }
        if (xpub) zmq_close(xpub);
        if (router) zmq_close(router);
        zmq_ctx_term(ctx);
        _exit(0);
    }

    // dup: serve replays by repeating one batch until "stop" comes on the command pipe (then
    // close the sockets).
    void dup_loop(FILE *in, void *xpub, void *router, const std::string &topic) {
        uint64_t live = 5;
        send3(xpub, topic, live, small.data(), small.size(), false);
        std::vector<std::vector<unsigned char>> ids;
        double next_live = now_s() + 0.1;
        for (;;) {
            zmq_pollitem_t items[2] = {{router, 0, ZMQ_POLLIN, 0}, {nullptr, fileno(in), ZMQ_POLLIN, 0}};
            zmq_poll(items, 2, 5);
            if (items[1].revents & ZMQ_POLLIN) break; // "stop"
            while (items[0].revents & ZMQ_POLLIN) {
                zmq_msg_t m;
                zmq_msg_init(&m);
                if (zmq_msg_recv(&m, router, ZMQ_DONTWAIT) < 0) break;
                const auto *d = static_cast<const unsigned char *>(zmq_msg_data(&m));
                ids.emplace_back(d, d + zmq_msg_size(&m));
                while (zmq_msg_more(&m)) zmq_msg_recv(&m, router, 0);
                zmq_msg_close(&m);
            }
            for (const auto &id : ids)
                for (int k = 0; k < 20; k++) {
                    unsigned char s8[8] = {0};
                    zmq_send(router, id.data(), id.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
                    zmq_send(router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
                    zmq_send(router, topic.data(), topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
                    zmq_send(router, s8, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
                    zmq_send(router, small.data(), small.size(), ZMQ_DONTWAIT);
                }
            if (now_s() >= next_live) { // a new gap, so that the attack goes on
                live += 2;
                send3(xpub, topic, live, small.data(), small.size(), false);
                next_live = now_s() + 0.1;
            }
        }
        char line[64];
        if (!std::fgets(line, sizeof line, in)) return;
        zmq_close(xpub);
        zmq_close(router);
    }

    // held-sustained: a live batch at seq 5 whose replay is never answered, then 1 MB batches
    // for as long as the subscriber takes them, until "stop" (then close the sockets). The
    // XPUB queues at most 8 messages and does not drop (XPUB_NODROP): when the subscriber
    // stops reading, this peer waits, as a real sender behind TCP does.
    void sustain_loop(FILE *in, void *xpub, void *router, const std::string &topic, std::vector<unsigned char> &mb) {
        const int hwm = 8, one = 1;
        zmq_setsockopt(xpub, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(xpub, ZMQ_XPUB_NODROP, &one, sizeof one);
        send3(xpub, topic, 5, small.data(), small.size(), false);
        for (uint64_t q = 6;;) {
            zmq_pollitem_t it = {nullptr, fileno(in), ZMQ_POLLIN, 0};
            if (zmq_poll(&it, 1, 0) > 0) break; // "stop"
            unsigned char s8[8];
            for (int i = 7; i >= 0; i--) s8[i] = static_cast<unsigned char>(q >> (56 - 8 * i));
            // The HWM is checked at a message's first frame: once that is taken, the rest is.
            if (zmq_send(xpub, topic.data(), topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
                zmq_poll(&it, 1, 1); // full: wait for the subscriber (or "stop")
                if (it.revents & ZMQ_POLLIN) break;
                continue;
            }
            zmq_send(xpub, s8, 8, ZMQ_SNDMORE);
            zmq_msg_t m;
            zmq_msg_init_data(&m, mb.data(), mb.size(), noop_free, nullptr);
            zmq_msg_send(&m, xpub, 0);
            q++;
        }
        char line[64];
        if (!std::fgets(line, sizeof line, in)) return;
        zmq_close(xpub);
        zmq_close(router);
    }

    void start() {
        int c[2], a[2];
        if (pipe(c) != 0 || pipe(a) != 0) die("pipe", KVREG_ENOMEM);
        pid = fork();
        if (pid < 0) die("fork", KVREG_ENOMEM);
        if (pid == 0) {
            close(c[1]);
            close(a[0]);
            child(c[0], a[1]);
        }
        close(c[0]);
        close(a[1]);
        cmd = fdopen(c[1], "w");
        ans = fdopen(a[0], "r");
    }
    std::string ask(const std::string &line) {
        if (getenv("KVREG_BENCH_VERBOSE")) std::fprintf(stderr, "attacker: %s\n", line.c_str());
        std::fprintf(cmd, "%s\n", line.c_str());
        std::fflush(cmd);
        char buf[600];
        if (!std::fgets(buf, sizeof buf, ans)) die("sub attacker", KVREG_ESTATE);
        buf[std::strcspn(buf, "\n")] = 0;
        return buf;
    }
    // The peer's CPU seconds so far (every thread of the child: /proc/PID/task/*/schedstat,
    // whose first field is nanoseconds on a CPU).
    double cpu_s() const {
        double total = 0;
        const std::string dir = "/proc/" + std::to_string(pid) + "/task";
        DIR *d = opendir(dir.c_str());
        if (!d) return 0;
        while (const dirent *e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            FILE *f = std::fopen((dir + "/" + e->d_name + "/schedstat").c_str(), "r");
            if (!f) continue;
            unsigned long long ns = 0;
            if (std::fscanf(f, "%llu", &ns) == 1) total += static_cast<double>(ns) / 1e9;
            std::fclose(f);
        }
        closedir(d);
        return total;
    }
    void finish() {
        if (pid <= 0) return;
        std::fclose(cmd);
        std::fclose(ans);
        waitpid(pid, nullptr, 0);
        pid = -1;
    }
};

uint64_t sub_stat(kvreg_subscriber *sub, uint32_t s) {
    uint64_t v = 0;
    kvreg_subscriber_stat(sub, s, &v);
    return v;
}

// One attack on the subscriber: an unattacked pass then an attacked one on the same link
// (the attacker's sockets bound and subscribed in both), best of reps each. Growth: the peak
// resident memory from the start of the pass until 1 s after it (late effects), over the
// memory before it; the row is the attacked growth over the unattacked one.
// until_stat: with an attack, the measured pass starts 100 ms after that subscriber stat is
// nonzero (the attack has reached the bound it is there to test; 0: at once).
void attacked_sub(const Input &in, size_t reps, SubAttacker &att, const char *kind, const char *label,
                  const std::vector<std::pair<uint32_t, uint64_t>> &opts, double target_mib,
                  std::vector<Row> &rows, uint32_t until_stat = 0) {
    const uint64_t events = 2 * in.descs.size();
    double cpu[2] = {1e9, 1e9}, sub_cpu[2] = {1e9, 1e9}, peer_cpu[2] = {1e9, 1e9},
           other_cpu[2] = {1e9, 1e9};
    uint64_t growth[2] = {0, 0};
    std::vector<double> pass_s[2];
    std::string outcome;
    for (size_t r = 0; r < reps; r++) {
        for (int attacked = 0; attacked < 2; attacked++) {
            std::istringstream eps(att.ask("open"));
            std::string xpub, router;
            eps >> xpub >> router;
            kvreg_registry *reg = poll_registry();
            kvreg_pool *pool = nullptr;
            check(kvreg_pool_new(&pool, reg, "G1"), "pool");
            auto *link = new Link(reg, 64, true, 0, {{xpub, router}}, opts);
            link->sync(pool);
            const uint64_t warm = link->count.events.load();
            register_release(pool, in); // warm: the state every measured pass starts from
            link->wait_for(warm + events, 20);
            const uint64_t r0 = rss_kib();
            std::atomic<bool> done{false};
            uint64_t peak = r0;
            std::thread sampler([&] {
                while (!done.load(std::memory_order_acquire)) {
                    peak = std::max(peak, rss_kib());
                    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // sampling period
                }
            });
            if (attacked) att.ask(std::string("go ") + kind);
            if (attacked && until_stat) {
                const double limit = now_s() + 20;
                while (sub_stat(link->sub, until_stat) == 0 && now_s() < limit)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1)); // polls another thread's counter
                if (sub_stat(link->sub, until_stat) == 0) die("attack did not reach its bound", KVREG_ESTATE);
                // What is already on its way when the bound is reached (libzmq's pipe, the
                // kernel's buffers) lands in the next few ms: the pass starts after it, in the
                // attack's steady state.
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            const uint64_t base = link->count.events.load();
            clockid_t sub_clock;
            const bool has_sub_clock = pthread_getcpuclockid(link->th.native_handle(), &sub_clock) == 0;
            const double sc0 = has_sub_clock ? cpu_s(sub_clock) : 0;
            const double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), p0 = att.cpu_s();
            const double t = now_s();
            const double m0 = cpu_s(CLOCK_THREAD_CPUTIME_ID); // this thread: produces, then waits
            register_release(pool, in);
            link->wait_for(base + events, 60);
            const double main_thread = cpu_s(CLOCK_THREAD_CPUTIME_ID) - m0;
            pass_s[attacked].push_back(now_s() - t);
            const double proc = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            cpu[attacked] = std::min(cpu[attacked], proc);
            const double sub_thread = has_sub_clock ? cpu_s(sub_clock) - sc0 : 0;
            sub_cpu[attacked] = std::min(sub_cpu[attacked], sub_thread);
            // The rest: the publisher's thread (its work is alike in both passes), libzmq's I/O
            // threads (the subscriber's receives the peer's bytes) and the memory sampler.
            other_cpu[attacked] = std::min(other_cpu[attacked], proc - sub_thread - main_thread);
            peer_cpu[attacked] = std::min(peer_cpu[attacked], att.cpu_s() - p0);
            std::this_thread::sleep_for(std::chrono::seconds(1)); // the window for late effects
            done.store(true, std::memory_order_release);
            sampler.join();
            growth[attacked] = std::max(growth[attacked], std::max(peak, rss_kib()) - r0);
            if (attacked) {
                char o[240];
                std::snprintf(o, sizeof o,
                              "notices: %llu evicted, %llu disconnects, %llu malformed (%llu pauses), %llu lost, "
                              "%llu held dropped",
                              static_cast<unsigned long long>(sub_stat(link->sub, KVREG_SUB_STAT_EVICTED)),
                              static_cast<unsigned long long>(sub_stat(link->sub, KVREG_SUB_STAT_DISCONNECTS)),
                              static_cast<unsigned long long>(sub_stat(link->sub, KVREG_SUB_STAT_MALFORMED)),
                              static_cast<unsigned long long>(sub_stat(link->sub, KVREG_SUB_STAT_MALFORMED_PAUSES)),
                              static_cast<unsigned long long>(sub_stat(link->sub, KVREG_SUB_STAT_LOST)),
                              static_cast<unsigned long long>(sub_stat(link->sub, KVREG_SUB_STAT_HELD_DROPPED)));
                outcome = o;
            }
            att.ask("stop");
            delete link;
            kvreg_registry_free(reg);
        }
    }
    const double over = (static_cast<double>(growth[1]) - static_cast<double>(growth[0])) / 1024.0;
    const double best[2] = {*std::min_element(pass_s[0].begin(), pass_s[0].end()),
                            *std::min_element(pass_s[1].begin(), pass_s[1].end())};
    const double paired = paired_median(pass_s[0], pass_s[1]);
    if (getenv("KVREG_BENCH_VERBOSE"))
        for (size_t r = 0; r < reps; r++)
            std::fprintf(stderr, "%s rep %zu: %.4f s plain, %.4f s attacked, ratio %.3f\n", kind, r, pass_s[0][r],
                         pass_s[1][r], pass_s[0][r] / pass_s[1][r]);
    std::printf("{\"workload\":\"attacked\",\"attack\":\"%s\",\"events\":%llu,\"events_per_s\":%.0f,"
                "\"events_per_s_attacked\":%.0f,\"ratio\":%.3f,\"ratio_paired\":%.3f,\"target\":0.9,"
                "\"rss_growth_mib\":%.1f,\"rss_growth_attacked_mib\":%.1f,\"growth_over_unattacked_mib\":%.1f,\"target_mib\":%.0f,"
                "\"cpu_ratio\":%.3f,\"sub_thread_cpu_ratio\":%.3f,\"cpu_s\":%.3f,\"cpu_s_attacked\":%.3f,"
                "\"sub_thread_cpu_s\":%.3f,\"sub_thread_cpu_s_attacked\":%.3f,\"other_cpu_s\":%.3f,"
                "\"other_cpu_s_attacked\":%.3f,\"peer_cpu_s_attacked\":%.3f,\"pass_s\":%.3f,\"pass_s_attacked\":%.3f}\n",
                kind, static_cast<unsigned long long>(events), events / best[0], events / best[1],
                best[0] / best[1], paired, growth[0] / 1024.0, growth[1] / 1024.0, over,
                target_mib, cpu[0] / cpu[1],
                sub_cpu[0] / sub_cpu[1], cpu[0], cpu[1], sub_cpu[0], sub_cpu[1], other_cpu[0], other_cpu[1], peer_cpu[1], best[0], best[1]);
    std::fflush(stdout);
    rows.push_back({label, over, target_mib, best[0] / best[1], paired, outcome});
}

// only: one row's KIND ("replay" for the publisher side), or nullptr for all of them.
void attacked(const Input &in, size_t reps, Attacker &att, SubAttacker &sub_att, const char *only) {
    std::vector<Row> rows;
    const auto row = [only](const char *kind) { return !only || !std::strcmp(only, kind); };
    if (row("replay")) attacked_replay(in, reps, att, &rows);
    if (row("topics"))
        attacked_sub(in, reps, sub_att, "topics", "50,000 topics", {}, 64, rows);
    // Not an attack: as many valid batches as the row above, from one publisher in order.
    // What remains of the topics row's cost beyond this one is the topics' own.
    if (row("flood"))
        attacked_sub(in, reps, sub_att, "flood", "control, not an attack: 50,000 batches in order on one topic", {}, 64,
                     rows);
    if (row("bigmsg"))
        attacked_sub(in, reps, sub_att, "bigmsg", "50 messages of 20 MB", {}, 64, rows);
    if (row("dup"))
        attacked_sub(in, reps, sub_att, "dup", "replay peer repeating one batch (timeout 500 ms)",
                     {{KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, 500}}, 64, rows);
    // The held batches are bounded by MAX_HELD_BYTES (32 MiB here; one publisher's share, the
    // default quarter, 8 MiB): that bound plus 64 MiB.
    if (row("held"))
        attacked_sub(in, reps, sub_att, "held", "unanswered gap, then 200 x 1 MB (MAX_HELD_BYTES 32 MiB, a publisher's share 8 MiB)",
                     {{KVREG_SUB_OPT_MAX_HELD_BYTES, UINT64_C(32) << 20}, {KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, 60000}},
                     32 + 64, rows);
    // The same peer sending without end, the pass measured once the held bound refused a
    // batch: what the attack costs while it lasts, after the one-time cost of filling the
    // bound (the row above).
    if (row("held-sustained"))
        attacked_sub(in, reps, sub_att, "held-sustained",
                     "unanswered gap, then 1 MB batches without end, measured from the bound on (MAX_HELD_BYTES 32 MiB, "
                     "share 8 MiB)",
                     {{KVREG_SUB_OPT_MAX_HELD_BYTES, UINT64_C(32) << 20}, {KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, 60000}},
                     32 + 64, rows, KVREG_SUB_STAT_HELD_DROPPED);
    // The attacker's stream holds its later payloads while its probe goes unanswered: the
    // held bound applies as in the row above.
    if (row("nested"))
        attacked_sub(in, reps, sub_att, "nested", "20 payloads of 4 MiB nested msgpack headers (MAX_HELD_BYTES 32 MiB)",
                     {{KVREG_SUB_OPT_MAX_HELD_BYTES, UINT64_C(32) << 20}}, 32 + 64, rows);
    std::fprintf(stderr, "\n| Attack | Growth over unattacked (MiB) | Target (MiB) | Well-behaved events/s attacked / "
                         "unattacked, bests (target 0.9) | The same, median of paired reps | What the attacked side "
                         "reported |\n|---|---|---|---|---|---|\n");
    for (const Row &r : rows)
        std::fprintf(stderr, "| %s | %.1f | %.0f | %.2f | %.2f | %s |\n", r.attack.c_str(), r.growth_mib, r.target_mib,
                     r.ratio, r.paired, r.outcome.c_str());
}

} // namespace

namespace {
void pubsub(const Input &in, uint64_t events, size_t reps, size_t max_events, uint64_t rcv_bytes);
void register_release_with(const Input &in, size_t reps, size_t max_events);
} // namespace

int main(int argc, char **argv) {
    size_t seqs = 2000, len = 512, reps = 3, max_events = 1024;
    uint64_t rcv_bytes = UINT64_MAX; // the library's default
    std::string workload = "all";
    size_t nats_events = 200000, nats_sized = 0;
    const char *trace = nullptr;
    const char *only_attack = nullptr;
    const char *nats_replica = nullptr, *nats_url = nullptr, *nats_durable = nullptr; // nats-replica's
    uint64_t nats_batches = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const size_t v = std::strtoull(argv[i + 1], nullptr, 10);
        if (!std::strcmp(argv[i], "--workload")) workload = argv[i + 1];
        else if (!std::strcmp(argv[i], "--nats-events")) nats_events = v;
        else if (!std::strcmp(argv[i], "--nats-sized")) nats_sized = v;
        else if (!std::strcmp(argv[i], "--trace")) trace = argv[i + 1];
        else if (!std::strcmp(argv[i], "--attack")) only_attack = argv[i + 1];
        else if (!std::strcmp(argv[i], "--nats-replica")) nats_replica = argv[i + 1];
        else if (!std::strcmp(argv[i], "--nats-url")) nats_url = argv[i + 1];
        else if (!std::strcmp(argv[i], "--nats-durable")) nats_durable = argv[i + 1];
        else if (!std::strcmp(argv[i], "--nats-batches")) nats_batches = v;
        else if (!std::strcmp(argv[i], "--seqs")) seqs = v;
        else if (!std::strcmp(argv[i], "--len")) len = v;
        else if (!std::strcmp(argv[i], "--reps")) reps = v;
        else if (!std::strcmp(argv[i], "--max-events")) max_events = v;
        else if (!std::strcmp(argv[i], "--rcv-bytes")) rcv_bytes = v;
        else {
            std::fprintf(stderr, "usage: kvreg-net-bench [--seqs N] [--len N] [--reps N] [--max-events N] [--rcv-bytes N]"
                                 " [--workload all|pubsub|register_release|attacked-replay|attacked|nats]"
                                 " [--nats-events N] [--nats-sized 0|1] [--trace FILE] [--attack KIND]\n");
            return 2;
        }
    }
    if (reps == 0) {
        std::fprintf(stderr, "kvreg-net-bench: --reps must be at least 1\n");
        return 2;
    }
#if KVREG_NET_BENCH_NATS
    if (workload == "nats-replica") return nats_replica_process(nats_replica, nats_url, nats_durable, nats_batches);
#else
    (void)nats_replica, (void)nats_url, (void)nats_durable, (void)nats_batches;
#endif
    if (workload == "nats") {
#if KVREG_NET_BENCH_NATS
        return nats_workload(nats_events, trace ? trace : KVREG_BENCH_TRACE, reps, nats_sized != 0);
#else
        (void)nats_events, (void)trace, (void)nats_sized;
        std::printf("{\"workload\":\"nats\",\"skipped\":\"built without NATS\"}\n");
        return 77;
#endif
    }
#if !KVREG_NET_BENCH_NATS
    (void)nats_events, (void)trace;
#endif
    const bool all = workload == "all";
    if (!all && workload != "pubsub" && workload != "register_release" && workload != "attacked-replay" &&
        workload != "attacked") {
        std::fprintf(stderr, "kvreg-net-bench: unknown workload %s\n", workload.c_str());
        return 2;
    }
    // Forked first, before any thread or ZeroMQ context exists here.
    Attacker attacker;
    if (all || workload == "attacked-replay" || workload == "attacked") attacker.start();
    SubAttacker sub_attacker;
    if (workload == "attacked") {
        sub_attacker.small = one_batch();
        sub_attacker.start();
    }
    if ((kvreg_features() & KVREG_FEATURE_ZMQ) == 0 || (kvreg_features() & KVREG_FEATURE_WIRE) == 0) {
        std::printf("{\"skipped\":\"library built without zmq or wire\"}\n");
        return 77;
    }
    const Input in = make_input(seqs, len);
    const uint64_t events = 2 * in.descs.size(); // one Register and one Remove per block
    if (all || workload == "attacked-replay") attacked_replay(in, reps, attacker);
    if (workload == "attacked") attacked(in, reps, attacker, sub_attacker, only_attack);
    sub_attacker.finish(); // first: its child holds a copy of the other's pipe
    attacker.finish();
    if (workload == "attacked-replay" || workload == "attacked") return 0;

    if (all || workload == "pubsub") pubsub(in, events, reps, max_events, rcv_bytes);
    if (all || workload == "register_release") register_release_with(in, reps, max_events);
    return 0;
}

namespace {

void pubsub(const Input &in, uint64_t events, size_t reps, size_t max_events, uint64_t rcv_bytes) {
    // pubsub: best of reps for each side, alternating so both see the same machine load.
    double encode_s = 0;
    const std::vector<std::string> payloads = encode_pass(in, max_events, encode_s);
    const double decode_s = decode_all(payloads);
    size_t bytes = 0;
    for (auto &p : payloads) bytes += p.size();
    double best_ours = 1e9, best_raw = 1e9, cpu_ours = 1e9, cpu_raw = 1e9, best_make = 1e9;
    for (size_t r = 0; r < reps; r++) {
        {
            // The ceiling: the same register_release on a registry with no consumer at all
            // (INLINE, no callback), the fastest one thread makes these events. Every event
            // of the pipeline below is made this way first, so it cannot move more per second.
            kvreg_registry *reg = nullptr;
            check(kvreg_registry_new(&reg, nullptr), "registry");
            kvreg_pool *pool = nullptr;
            check(kvreg_pool_new(&pool, reg, "G1"), "pool");
            best_make = std::min(best_make, register_release(pool, in));
            kvreg_registry_free(reg);
        }
        kvreg_registry *reg = poll_registry();
        kvreg_pool *pool = nullptr;
        check(kvreg_pool_new(&pool, reg, "G1"), "pool");
        {
            std::vector<std::pair<uint32_t, uint64_t>> opts;
            if (rcv_bytes != UINT64_MAX) opts.push_back({KVREG_SUB_OPT_RCV_BYTES, rcv_bytes});
            Link link(reg, max_events, true, 0, {}, opts);
            link.sync(pool);
            const uint64_t base = link.count.events.load();
            const double t = now_s();
            const double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
            double producer = 0;
            register_release(pool, in, &producer);
            link.wait_for(base + events, 60);
            best_ours = std::min(best_ours, now_s() - t);
            // the pipeline's CPU: everything but the producing thread's registry calls
            cpu_ours = std::min(cpu_ours, cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0 - producer);
        }
        kvreg_registry_free(reg);
        double c = 0;
        best_raw = std::min(best_raw, raw_zmq(payloads, c));
        cpu_raw = std::min(cpu_raw, c);
    }
    std::printf("{\"workload\":\"pubsub\",\"events\":%llu,\"max_events\":%zu,\"rcv_bytes\":%lld,\"batches\":%zu,"
                "\"payload_bytes\":%zu,\"events_per_s\":%.0f,\"raw_zmq_events_per_s\":%.0f,"
                "\"ratio\":%.3f,\"target\":0.7,\"encode_only_events_per_s\":%.0f,"
                "\"decode_only_events_per_s\":%.0f,\"cpu_ratio\":%.3f,"
                "\"producer_only_events_per_s\":%.0f,\"ceiling_ratio\":%.3f}\n",
                static_cast<unsigned long long>(events), max_events,
                rcv_bytes == UINT64_MAX ? -1LL : static_cast<long long>(rcv_bytes), payloads.size(), bytes,
                events / best_ours, events / best_raw, best_raw / best_ours, events / encode_s,
                events / decode_s, cpu_raw / cpu_ours, events / best_make, best_raw / best_make);
}

void register_release_with(const Input &in, size_t reps, size_t max_events) {
    // register_release with and without a publisher.
    double best_with = 1e9, best_without = 1e9, best_pub_only = 1e9;
    double cpu_with = 1e9, cpu_without = 1e9; // the registering thread's own CPU time
    double best_poll = 1e9, cpu_poll = 1e9;   // POLL delivery to a thread that only drains it
    for (size_t r = 0; r < reps; r++) {
        {
            kvreg_registry *reg = nullptr;
            check(kvreg_registry_new(&reg, nullptr), "registry"); // INLINE, no callback
            kvreg_pool *pool = nullptr;
            check(kvreg_pool_new(&pool, reg, "G1"), "pool");
            double c = 0;
            best_without = std::min(best_without, register_release(pool, in, &c));
            cpu_without = std::min(cpu_without, c);
            kvreg_registry_free(reg);
        }
        {
            kvreg_registry *reg = poll_registry();
            kvreg_pool *pool = nullptr;
            check(kvreg_pool_new(&pool, reg, "G1"), "pool");
            Link *link = new Link(reg, max_events);
            link->sync(pool);
            double c = 0;
            best_with = std::min(best_with, register_release(pool, in, &c));
            cpu_with = std::min(cpu_with, c);
            delete link;
            kvreg_registry_free(reg);
        }
        {
            kvreg_registry *reg = poll_registry();
            kvreg_pool *pool = nullptr;
            check(kvreg_pool_new(&pool, reg, "G1"), "pool");
            std::atomic<bool> stop{false};
            std::thread drain([&] {
                std::vector<kvreg_event> ev(KVREG_EVENTS_PER_CALL);
                size_t n;
                while (!stop.load(std::memory_order_acquire))
                    kvreg_registry_poll_wait(reg, ev.data(), ev.size(), &n, -1);
            });
            double c = 0;
            best_poll = std::min(best_poll, register_release(pool, in, &c));
            cpu_poll = std::min(cpu_poll, c);
            stop.store(true, std::memory_order_release);
            kvreg_registry_wakeup(reg);
            drain.join();
            kvreg_registry_free(reg);
        }
        {
            kvreg_registry *reg = poll_registry();
            kvreg_pool *pool = nullptr;
            check(kvreg_pool_new(&pool, reg, "G1"), "pool");
            Link *link = new Link(reg, max_events, false); // the engine's side alone
            best_pub_only = std::min(best_pub_only, register_release(pool, in));
            delete link;
            kvreg_registry_free(reg);
        }
    }
    const double ops = 2.0 * in.descs.size();
    std::printf("{\"workload\":\"register_release\",\"blocks\":%zu,\"ops_per_s_without\":%.0f,"
                "\"ops_per_s_with_publisher\":%.0f,\"ratio\":%.3f,\"target\":0.8,"
                "\"ops_per_s_publisher_no_subscriber\":%.0f,\"ratio_no_subscriber\":%.3f,"
                "\"thread_cpu_ratio\":%.3f,\"ops_per_s_poll_drain_only\":%.0f,"
                "\"thread_cpu_ratio_poll_drain_only\":%.3f}\n",
                in.descs.size(), ops / best_without, ops / best_with, best_without / best_with,
                ops / best_pub_only, best_without / best_pub_only, cpu_without / cpu_with,
                ops / best_poll, cpu_without / cpu_poll);
}

} // namespace
