// kvreg-net-bench --workload nats: the NATS JetStream plane (kvreg_nats.h) against raw libnats,
// in one run, over one nats-server the workload starts itself (tests/nats/nats_fixture.c).
//   throughput  N kvreg events (16-token blocks in chains of 16, vLLM format) from one engine
//               (registry -> kvreg_nats_publisher -> stream) consumed by one replica, then by
//               three at once (kvreg_nats_consumer -> kvreg_index, each its own durable), as
//               events/s over publish + consume; raw: the same number of messages of the same
//               average size published asynchronously with a Nats-Msg-Id, then consumed by
//               one and by three pull consumers that only acknowledge. Target ratio >= 0.5.
//               Beside it: the engine's registrations alone (no publisher), the first
//               replica's setup time and thread CPU, and one more replica run after it (warm:
//               its index in pages the first one freed).
//               --nats-sized 1: the engine's registry reserves its blocks (before the clock)
//               and each replica's index expects its entries (inside it), as docs/nats.md
//               advises a deployment; the JSON's "sized" says which.
//   restore     every block of the conversation trace published as an engine sends it (vLLM
//               format, 16 tokens a block made from the block's id; replicas in ENGINE mode),
//               a replica rebuilding its index from the whole stream against a new replica
//               restoring a snapshot of that index (object store) until it is caught up; the
//               two digests must be equal; best of three each. Target restore/rebuild <= 0.2.
//               Both sides are timed the same way: from making the replica (connect, stream
//               and bucket checks, durable made) until it has applied the stream's last batch.
//               The fastest restore's start() in parts (KVREG_NATS_CON_STAT_START_US and its
//               RESTORE_READ_US, the reading with the loading done as chunks came, and of it
//               RESTORE_LOAD_US) and the fastest rebuild's start().
//               Then the same, each replica in a process of its own (`fresh_*`): a replica
//               that restarts, or a new one, is a new process, whose memory comes from the
//               kernel page by page, where the replicas above reuse what the ones before them
//               freed. Rebuild and restore alternate, best of three each; the child is this
//               program (--workload nats-replica), timed inside it the same way.
//   memory      per replica (the last rebuild and the last restore): the heap it holds once
//               caught up (ReplicaMemory) against its index's own
//               KVREG_INDEX_STAT_MEMORY_BYTES (issue 38: at most the index's plus buffers).
// One JSON line.
#include "net_nats.hpp"

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>
#include <nats/nats.h>

extern "C" {
#include "nats_fixture.h"
}

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bench.hpp"

extern char **environ; // posix_spawn's environment: this process's

namespace {

constexpr size_t kChain = 16, kBs = 16;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#define NB_CHECK(c)                                                                             \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            std::fprintf(stderr, "kvreg-net-bench nats: %s failed (line %d)\n", #c, __LINE__);  \
            std::exit(1);                                                                       \
        }                                                                                       \
    } while (0)

// A registry whose events wait in a poll queue of capacity events, and its one pool; with
// `reserve`, the registry sets aside room for that many blocks when it is made
// (KVREG_OPT_RESERVE_BLOCKS, as an engine whose KV cache has a fixed size would).
void new_registry(size_t capacity, kvreg_registry **reg, kvreg_pool **pool, size_t reserve = 0) {
    kvreg_config *cfg = nullptr;
    NB_CHECK(kvreg_config_new(&cfg) == KVREG_OK);
    if (reserve) NB_CHECK(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, reserve) == KVREG_OK);
    NB_CHECK(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL) == KVREG_OK);
    NB_CHECK(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, capacity) == KVREG_OK);
    NB_CHECK(kvreg_registry_new(reg, cfg) == KVREG_OK);
    kvreg_config_free(cfg);
    NB_CHECK(kvreg_pool_new(pool, *reg, "gpu") == KVREG_OK);
}

struct Engine {
    kvreg_registry *reg = nullptr;
    kvreg_pool *pool = nullptr;
    kvreg_nats_publisher *pub = nullptr;
    Engine(const char *url, const char *stream, const char *prefix, uint64_t format, size_t capacity,
           size_t reserve = 0) {
        new_registry(capacity, &reg, &pool, reserve);
        NB_CHECK(kvreg_nats_publisher_new(&pub, reg) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_set_string(pub, KVREG_NATS_URL, url) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_set_string(pub, KVREG_NATS_STREAM, stream) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_set_string(pub, KVREG_NATS_SUBJECT_PREFIX, prefix) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_FORMAT, format) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_BLOCK_SIZE, kBs) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_LINGER_MS, 600000) == KVREG_OK);
        NB_CHECK(kvreg_nats_publisher_start(pub) == KVREG_OK);
    }
    uint64_t finish() { // every event published and acknowledged; the batches made
        NB_CHECK(kvreg_nats_publisher_stop(pub) == KVREG_OK);
        uint64_t batches = 0, unacked = 1;
        kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_BATCHES, &batches);
        kvreg_nats_publisher_stat(pub, KVREG_NATS_PUB_STAT_BATCHES_UNACKED, &unacked);
        NB_CHECK(unacked == 0);
        return batches;
    }
    ~Engine() {
        kvreg_nats_publisher_free(pub);
        kvreg_registry_free(reg);
    }
};

struct Replica {
    kvreg_index *idx = nullptr;
    kvreg_nats_consumer *con = nullptr;
    // expected: KVREG_INDEX_OPT_EXPECTED_ENTRIES (0: the default, start small and grow)
    Replica(const char *url, const char *stream, const char *durable, bool own_hashes, const char *bucket,
            bool restore = true, uint64_t expected = 0) {
        kvreg_index_config *cfg = nullptr;
        NB_CHECK(kvreg_index_config_new(&cfg) == KVREG_OK);
        if (expected) NB_CHECK(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, expected) == KVREG_OK);
        if (own_hashes) NB_CHECK(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN) == KVREG_OK);
        NB_CHECK(kvreg_index_new(&idx, cfg) == KVREG_OK);
        kvreg_index_config_free(cfg);
        NB_CHECK(kvreg_nats_consumer_new(&con, idx) == KVREG_OK);
        NB_CHECK(kvreg_nats_consumer_set_string(con, KVREG_NATS_URL, url) == KVREG_OK);
        NB_CHECK(kvreg_nats_consumer_set_string(con, KVREG_NATS_STREAM, stream) == KVREG_OK);
        NB_CHECK(kvreg_nats_consumer_set_string(con, KVREG_NATS_DURABLE, durable) == KVREG_OK);
        if (bucket) NB_CHECK(kvreg_nats_consumer_set_string(con, KVREG_NATS_SNAPSHOT_BUCKET, bucket) == KVREG_OK);
        NB_CHECK(kvreg_nats_consumer_set(con, KVREG_NATS_CON_OPT_RESTORE, restore ? 1 : 0) == KVREG_OK);
        NB_CHECK(kvreg_nats_consumer_start(con) == KVREG_OK);
    }
    void catch_up(uint64_t batches) { // worker 0 rank 0 applied through seq batches - 1
        const double deadline = now_s() + 600;
        for (;;) {
            uint64_t inst = 0, next = 0;
            if (kvreg_nats_consumer_worker(con, 0, 0, &inst, &next) == KVREG_OK && next >= batches) return;
            NB_CHECK(now_s() < deadline);
            kvreg_nats_consumer_run(con, 0); // one round trip for what is ready: no tail wait
        }
    }
    ~Replica() {
        kvreg_nats_consumer_free(con);
        kvreg_index_free(idx);
    }
};

// The engine's own work: chains of kChain blocks of kBs tokens, hashed and registered.
void register_chains(kvreg_pool *pool, size_t chains) {
    std::vector<uint32_t> tokens(kChain * kBs);
    kvreg_block_info info[kChain];
    kvreg_block_desc descs[kChain];
    kvreg_block handles[kChain];
    for (size_t c = 0; c < chains; c++) {
        for (size_t i = 0; i < tokens.size(); i++) tokens[i] = static_cast<uint32_t>(c * 7919 + i);
        size_t nb = 0;
        NB_CHECK(kvreg_hash_blocks(tokens.data(), tokens.size(), kBs, KVREG_ROUTER_SALT, info, kChain, &nb) == KVREG_OK);
        for (size_t b = 0; b < kChain; b++) {
            std::memset(&descs[b], 0, sizeof descs[b]);
            descs[b].sequence_hash = info[b].sequence_hash;
            descs[b].block_hash = info[b].block_hash;
            descs[b].parent_sequence_hash = info[b].parent_sequence_hash;
            descs[b].has_parent = info[b].has_parent;
            descs[b].block_size = kBs;
            descs[b].tokens = tokens.data() + b * kBs;
            descs[b].n_tokens = kBs;
        }
        NB_CHECK(kvreg_register_batch(pool, descs, kChain, handles, nullptr, nullptr) == KVREG_OK);
    }
}

// The same registrations into a registry with no publisher (its poll queue holds every event,
// undrained): what publishing adds to the engine is publish_s less this. Run after the
// publishing engine, so in memory it freed: if anything, this is the smaller of the two.
double engine_only(size_t chains, size_t capacity, size_t reserve) {
    kvreg_registry *reg = nullptr;
    kvreg_pool *pool = nullptr;
    new_registry(capacity, &reg, &pool, reserve);
    const double t0 = now_s();
    register_chains(pool, chains);
    const double t = now_s() - t0;
    uint64_t dropped = 1;
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_DROPPED, &dropped);
    NB_CHECK(dropped == 0);
    kvreg_registry_free(reg);
    return t;
}

double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Where a replica's consume time goes: making it (connect, stream and durable checks), and the
// CPU of the thread that runs it (fetch, decode, apply, ack) against its wall time.
struct ConsumeSplit {
    double setup_s = 0, thread_cpu_s = 0;
};

// Seconds for n replicas (each its own durable, on its own thread) to consume the stream;
// *split (may be null) gets the first replica's.
double consume_kvreg(const char *url, const char *stream, int n, uint64_t batches, uint64_t entries,
                     bool sized, ConsumeSplit *split = nullptr) {
    std::vector<std::thread> th;
    const double t0 = now_s();
    for (int i = 0; i < n; i++)
        th.emplace_back([=] {
            const std::string durable = "bench-" + std::to_string(n) + "-" + std::to_string(i);
            const double cpu0 = thread_cpu_s(), w0 = now_s();
            Replica r(url, stream, durable.c_str(), false, nullptr, true, sized ? entries : 0);
            const double made = now_s();
            r.catch_up(batches);
            if (i == 0 && split) {
                split->setup_s = made - w0;
                split->thread_cpu_s = thread_cpu_s() - cpu0;
            }
            uint64_t got = 0;
            kvreg_index_stat(r.idx, KVREG_INDEX_STAT_ENTRIES, &got);
            NB_CHECK(got == entries);
        });
    for (auto &t : th) t.join();
    return now_s() - t0;
}

// Raw libnats: n pull consumers that acknowledge each message, each on its own connection.
double consume_raw(const char *url, const char *subject, int n, uint64_t count) {
    std::vector<std::thread> th;
    const double t0 = now_s();
    for (int i = 0; i < n; i++)
        th.emplace_back([=] {
            natsConnection *nc = nullptr;
            jsCtx *js = nullptr;
            NB_CHECK(natsConnection_ConnectTo(&nc, url) == NATS_OK);
            NB_CHECK(natsConnection_JetStream(&js, nc, nullptr) == NATS_OK);
            natsSubscription *sub = nullptr;
            const std::string durable = "raw-" + std::to_string(n) + "-" + std::to_string(i);
            NB_CHECK(js_PullSubscribe(&sub, js, subject, durable.c_str(), nullptr, nullptr, nullptr) == NATS_OK);
            uint64_t got = 0;
            const double deadline = now_s() + 600;
            while (got < count) {
                natsMsgList list = {nullptr, 0};
                if (natsSubscription_Fetch(&list, sub, 256, 100, nullptr) == NATS_OK)
                    for (int k = 0; k < list.Count; k++, got++) natsMsg_Ack(list.Msgs[k], nullptr);
                natsMsgList_Destroy(&list);
                NB_CHECK(now_s() < deadline);
            }
            natsConnection_Close(nc); // first: libnats 3.4 may still deliver to sub (Conn::stop)
            natsSubscription_Destroy(sub);
            jsCtx_Destroy(js);
            natsConnection_Destroy(nc);
        });
    for (auto &t : th) t.join();
    return now_s() - t0;
}

double publish_raw(const char *url, const char *stream, const char *subject, uint64_t count, size_t size) {
    natsConnection *nc = nullptr;
    jsCtx *js = nullptr;
    jsStreamInfo *si = nullptr;
    NB_CHECK(natsConnection_ConnectTo(&nc, url) == NATS_OK);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 256; // the publisher's default window
    NB_CHECK(natsConnection_JetStream(&js, nc, &jo) == NATS_OK);
    const char *subj[1] = {subject};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = stream;
    sc.Subjects = subj;
    sc.SubjectsLen = 1;
    sc.Storage = js_FileStorage;
    NB_CHECK(js_AddStream(&si, js, &sc, nullptr, nullptr) == NATS_OK);
    jsStreamInfo_Destroy(si);
    std::string payload(size, 'Z');
    const double t0 = now_s();
    for (uint64_t i = 0; i < count; i++) {
        natsMsg *m = nullptr;
        const std::string id = "raw-" + std::to_string(i);
        NB_CHECK(natsMsg_Create(&m, subject, nullptr, payload.data(), static_cast<int>(size)) == NATS_OK);
        NB_CHECK(natsMsgHeader_Set(m, "Nats-Msg-Id", id.c_str()) == NATS_OK);
        NB_CHECK(js_PublishMsgAsync(js, &m, nullptr) == NATS_OK);
        natsMsg_Destroy(m);
    }
    NB_CHECK(js_PublishAsyncComplete(js, nullptr) == NATS_OK);
    const double t = now_s() - t0;
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return t;
}

// What one replica adds to this process, against its index's own figure: the bytes allocated
// and still in use once it is caught up (glibc's mallinfo2: the main arena, where the bench's
// thread allocates, plus every mmap'd block), less those before it was made. Resident memory
// would not say it: the replicas before it freed theirs into the heap, which this one reuses.
struct ReplicaMemory {
    uint64_t base = 0;
    static uint64_t in_use() {
        const struct mallinfo2 mi = mallinfo2();
        return static_cast<uint64_t>(mi.uordblks) + static_cast<uint64_t>(mi.hblkhd);
    }
    void start() { base = in_use(); }
    double growth_mb() const {
        const uint64_t now = in_use();
        return now >= base ? static_cast<double>(now - base) / (1024.0 * 1024.0) : 0;
    }
};

void delete_stream(const char *url, const char *stream) {
    natsConnection *nc = nullptr;
    jsCtx *js = nullptr;
    NB_CHECK(natsConnection_ConnectTo(&nc, url) == NATS_OK);
    NB_CHECK(natsConnection_JetStream(&js, nc, nullptr) == NATS_OK);
    NB_CHECK(js_DeleteStream(js, stream, nullptr, nullptr) == NATS_OK);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

// One replica in a child process (this program, --workload nats-replica): its JSON line.
struct FreshReplica {
    double s = 0;
    uint64_t start_us = 0, read_us = 0, load_us = 0, restored = 0, digest = 0;
};
FreshReplica fresh_replica(bool restore, const char *url, const std::string &durable, uint64_t batches) {
    int fds[2];
    NB_CHECK(pipe2(fds, O_CLOEXEC) == 0); // the child's stdout only (dup2 clears the flag on fd 1)
    posix_spawn_file_actions_t fa;
    NB_CHECK(posix_spawn_file_actions_init(&fa) == 0);
    NB_CHECK(posix_spawn_file_actions_adddup2(&fa, fds[1], 1) == 0);
    const std::string n = std::to_string(batches);
    std::vector<std::string> args = {"kvreg-net-bench", "--workload", "nats-replica", "--nats-replica",
                                     restore ? "restore" : "rebuild", "--nats-url", url, "--nats-durable",
                                     durable, "--nats-batches", n};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    NB_CHECK(posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    std::string out;
    char buf[512];
    for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) != 0;) {
        if (k < 0 && errno == EINTR) continue;
        NB_CHECK(k > 0);
        out.append(buf, static_cast<size_t>(k));
    }
    close(fds[0]);
    int status = 0;
    NB_CHECK(waitpid(pid, &status, 0) == pid);
    FreshReplica r;
    unsigned long long su = 0, ru = 0, lu = 0, rs = 0, d = 0;
    const size_t line = out.rfind("\n{"); // its JSON line: the last one
    const char *json = line == std::string::npos ? out.c_str() : out.c_str() + line + 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        std::sscanf(json, "{\"s\":%lf,\"start_us\":%llu,\"read_us\":%llu,\"load_us\":%llu,\"restored\":%llu,\"digest\":\"%llx\"}",
                    &r.s, &su, &ru, &lu, &rs, &d) != 6) {
        if (WIFSIGNALED(status)) std::fprintf(stderr, "kvreg-net-bench: nats-replica killed by signal %d\n", WTERMSIG(status));
        else std::fprintf(stderr, "kvreg-net-bench: nats-replica exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        std::fprintf(stderr, "its output: %s\n", out.c_str());
        std::exit(1);
    }
    r.start_us = su, r.read_us = ru, r.load_us = lu, r.restored = rs, r.digest = d;
    return r;
}

size_t average_size(const char *url, const char *stream, uint64_t batches) {
    natsConnection *nc = nullptr;
    jsCtx *js = nullptr;
    jsStreamInfo *si = nullptr;
    NB_CHECK(natsConnection_ConnectTo(&nc, url) == NATS_OK);
    NB_CHECK(natsConnection_JetStream(&js, nc, nullptr) == NATS_OK);
    NB_CHECK(js_GetStreamInfo(&si, js, stream, nullptr, nullptr) == NATS_OK);
    NB_CHECK(si->State.Msgs == batches);
    const size_t avg = static_cast<size_t>(si->State.Bytes / batches);
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return avg;
}

} // namespace

int nats_workload(size_t events, const char *trace, size_t reps, bool sized) {
    reps = std::max<size_t>(reps, 1);
    if (!kvreg_nats_available()) {
        std::printf("{\"workload\":\"nats\",\"skipped\":\"library built without NATS\"}\n");
        return 77;
    }
    nats_server srv;
    nats_server_start(&srv);
    const char *url = srv.url;

    // ---- throughput: one engine, vLLM format, chains of 16 blocks of 16 tokens. Best of reps
    // for each side, kvreg's and raw's passes alternating so both see the same machine load
    // (one pass of each moved the ratio between 0.27 and 0.55 from run to run); each rep
    // publishes into streams of its own, deleted after it.
    const size_t chains = (events + kChain - 1) / kChain;
    const uint64_t n_events = chains * kChain;
    double pub_s = 1e9, engine_s = 0, c1 = 1e9, c1_warm = 0, c3 = 1e9, raw_pub = 1e9, raw_c1 = 1e9, raw_c3 = 1e9;
    uint64_t batches = 0;
    size_t avg = 0;
    ConsumeSplit split1, warm;
    for (size_t rep = 0; rep < reps; rep++) {
        const std::string r = std::to_string(rep), stream = "KVREG_EVENTS_" + r;
        {
            Engine e(url, stream.c_str(), ("kvreg" + r + ".events").c_str(), KVREG_WIRE_VLLM, n_events * 2,
                     sized ? n_events : 0);
            const double t0 = now_s();
            register_chains(e.pool, chains);
            batches = e.finish(); // may differ by a few between reps (acks pace the batching)
            pub_s = std::min(pub_s, now_s() - t0);
        }
        if (rep == 0) engine_s = engine_only(chains, n_events * 2, sized ? n_events : 0);
        avg = average_size(url, stream.c_str(), batches); // the raw side sends as many, as big
        ConsumeSplit s1;
        if (const double t = consume_kvreg(url, stream.c_str(), 1, batches, n_events, sized, &s1); t < c1) {
            c1 = t;
            split1 = s1;
        }
        if (rep == 0) // the same replica again, in memory the first one freed: what first
                      // touching the index's pages costs is the difference (docs/nats.md)
            c1_warm = consume_kvreg(url, stream.c_str(), 1, batches, n_events, sized, &warm);
        c3 = std::min(c3, consume_kvreg(url, stream.c_str(), 3, batches, n_events, sized));
        const std::string raw_stream = "RAW_" + r, raw_subject = "raw" + r + ".x";
        raw_pub = std::min(raw_pub, publish_raw(url, raw_stream.c_str(), raw_subject.c_str(), batches, avg));
        raw_c1 = std::min(raw_c1, consume_raw(url, raw_subject.c_str(), 1, batches));
        raw_c3 = std::min(raw_c3, consume_raw(url, raw_subject.c_str(), 3, batches));
        delete_stream(url, stream.c_str()); // the server's store stays one rep's size
        delete_stream(url, raw_stream.c_str());
    }
    const double ev = static_cast<double>(n_events);
    const double k1 = ev / (pub_s + c1), k3 = ev / (pub_s + c3);
    const double r1 = ev / (raw_pub + raw_c1), r3 = ev / (raw_pub + raw_c3);

    // ---- restore: the conversation trace's every block, one engine, vLLM format as an engine
    // sends it (16 tokens a block, made from the block's id), the replicas in ENGINE mode
    const std::vector<bench::TraceRequest> reqs = bench::read_trace(trace, "nats");
    std::unordered_set<uint64_t> seen;
    uint64_t t_batches = 0, blocks = 0;
    {
        Engine e(url, "TRACE", "trace.events", KVREG_WIRE_VLLM, 1u << 22);
        std::vector<kvreg_block_desc> descs;
        std::vector<kvreg_block> handles;
        std::vector<uint32_t> tokens;
        for (const auto &r : reqs) {
            descs.clear();
            tokens.clear();
            for (size_t i = 0; i < r.ids.size(); i++)
                if (seen.insert(r.ids[i]).second)
                    for (size_t k = 0; k < kBs; k++) tokens.push_back(static_cast<uint32_t>(r.ids[i] * kBs + k));
            size_t t = 0;
            for (size_t i = 0; i < r.ids.size(); i++) {
                if (descs.size() * kBs == tokens.size()) break;
                if (tokens[t] != static_cast<uint32_t>(r.ids[i] * kBs)) continue; // an id seen before
                kvreg_block_desc d;
                std::memset(&d, 0, sizeof d);
                d.sequence_hash = r.ids[i] + 1;
                d.block_hash = d.sequence_hash ^ 0x9e3779b97f4a7c15ull;
                d.has_parent = i > 0;
                d.parent_sequence_hash = i > 0 ? r.ids[i - 1] + 1 : 0;
                d.block_size = kBs;
                d.tokens = tokens.data() + t;
                d.n_tokens = kBs;
                descs.push_back(d);
                t += kBs;
            }
            handles.resize(descs.size());
            if (!descs.empty())
                NB_CHECK(kvreg_register_batch(e.pool, descs.data(), descs.size(), handles.data(), nullptr, nullptr) == KVREG_OK);
            blocks += descs.size();
        }
        t_batches = e.finish();
    }
    // Best of three each (a new durable every time), as the machine may be shared.
    // Memory: the last of each three (the same process state each time: the replicas before
    // it freed).
    double rebuild_s = 1e9, snap_s = 0, restore_s = 1e9;
    uint64_t rebuild_start_us = 0, restore_start_us = 0, restore_read_us = 0, restore_load_us = 0;
    double rebuild_heap_mb = 0, restore_heap_mb = 0, rebuild_index_mb = 0, restore_index_mb = 0;
    uint64_t d_rebuild = 0, d_restore = 0, restored = 1;
    for (int rep = 0; rep < 3; rep++) {
        const std::string durable = "rebuild-" + std::to_string(rep);
        ReplicaMemory mem;
        mem.start();
        const double t0 = now_s();
        Replica a(url, "TRACE", durable.c_str(), false, "BENCH_SNAP", false); // from the stream
        a.catch_up(t_batches);
        if (const double t = now_s() - t0; t < rebuild_s) {
            rebuild_s = t;
            kvreg_nats_consumer_stat(a.con, KVREG_NATS_CON_STAT_START_US, &rebuild_start_us);
        }
        rebuild_heap_mb = mem.growth_mb();
        uint64_t ib = 0;
        kvreg_index_stat(a.idx, KVREG_INDEX_STAT_MEMORY_BYTES, &ib);
        rebuild_index_mb = static_cast<double>(ib) / (1024.0 * 1024.0);
        uint64_t r = 1;
        kvreg_nats_consumer_stat(a.con, KVREG_NATS_CON_STAT_RESTORED, &r);
        NB_CHECK(r == 0);
        if (rep == 0) {
            const double t1 = now_s();
            NB_CHECK(kvreg_nats_consumer_snapshot(a.con, nullptr) == KVREG_OK);
            snap_s = now_s() - t1;
        }
        NB_CHECK(kvreg_index_digest(a.idx, &d_rebuild) == KVREG_OK);
    }
    for (int rep = 0; rep < 3; rep++) {
        const std::string durable = "restore-" + std::to_string(rep);
        ReplicaMemory mem;
        mem.start();
        const double t2 = now_s();
        Replica b(url, "TRACE", durable.c_str(), false, "BENCH_SNAP");
        b.catch_up(t_batches);
        if (const double t = now_s() - t2; t < restore_s) {
            restore_s = t;
            kvreg_nats_consumer_stat(b.con, KVREG_NATS_CON_STAT_START_US, &restore_start_us);
            kvreg_nats_consumer_stat(b.con, KVREG_NATS_CON_STAT_RESTORE_READ_US, &restore_read_us);
            kvreg_nats_consumer_stat(b.con, KVREG_NATS_CON_STAT_RESTORE_LOAD_US, &restore_load_us);
        }
        restore_heap_mb = mem.growth_mb();
        uint64_t ib = 0;
        kvreg_index_stat(b.idx, KVREG_INDEX_STAT_MEMORY_BYTES, &ib);
        restore_index_mb = static_cast<double>(ib) / (1024.0 * 1024.0);
        uint64_t r = 0;
        kvreg_nats_consumer_stat(b.con, KVREG_NATS_CON_STAT_RESTORED, &r);
        restored &= r;
        NB_CHECK(kvreg_index_digest(b.idx, &d_restore) == KVREG_OK);
        NB_CHECK(d_restore == d_rebuild);
    }
    // The same, each replica a new process (a restarted one): rebuild and restore alternate.
    FreshReplica fresh_rebuild, fresh_restore;
    fresh_rebuild.s = fresh_restore.s = 1e9;
    bool fresh_same = true;
    for (int rep = 0; rep < 3; rep++) {
        const FreshReplica a = fresh_replica(false, url, "fresh-rebuild-" + std::to_string(rep), t_batches);
        const FreshReplica b = fresh_replica(true, url, "fresh-restore-" + std::to_string(rep), t_batches);
        fresh_same = fresh_same && a.digest == d_rebuild && b.digest == d_rebuild && a.restored == 0 && b.restored == 1;
        if (a.s < fresh_rebuild.s) fresh_rebuild = a;
        if (b.s < fresh_restore.s) fresh_restore = b;
    }
    nats_server_destroy(&srv);
    nats_Close();
    const bool verified = d_rebuild == d_restore && restored == 1 && fresh_same;
    std::printf("{\"workload\":\"nats\",\"sized\":%d,\"events\":%llu,\"messages\":%llu,\"avg_message_bytes\":%zu,"
                "\"publish_s\":%.3f,\"engine_only_s\":%.3f,\"consume_1_s\":%.3f,\"consume_3_s\":%.3f,"
                "\"consume_1_setup_s\":%.3f,\"consume_1_thread_cpu_s\":%.3f,\"consume_1_warm_s\":%.3f,"
                "\"consume_1_warm_thread_cpu_s\":%.3f,\"raw_publish_s\":%.3f,\"raw_consume_1_s\":%.3f,\"raw_consume_3_s\":%.3f,"
                "\"events_per_s_1\":%.0f,\"raw_events_per_s_1\":%.0f,\"ratio_1\":%.2f,"
                "\"events_per_s_3\":%.0f,\"raw_events_per_s_3\":%.0f,\"ratio_3\":%.2f,"
                "\"trace_blocks\":%llu,\"trace_messages\":%llu,\"rebuild_s\":%.3f,\"snapshot_write_s\":%.3f,"
                "\"restore_s\":%.3f,\"restore_ratio\":%.3f,\"rebuild_start_ms\":%.2f,\"restore_start_ms\":%.2f,"
                "\"restore_read_ms\":%.2f,\"restore_load_ms\":%.2f,\"rebuild_heap_growth_mb\":%.1f,"
                "\"rebuild_index_mb\":%.1f,\"restore_heap_growth_mb\":%.1f,\"restore_index_mb\":%.1f,"
                "\"fresh_rebuild_s\":%.3f,\"fresh_restore_s\":%.3f,\"fresh_restore_ratio\":%.3f,"
                "\"fresh_rebuild_start_ms\":%.2f,\"fresh_restore_start_ms\":%.2f,\"fresh_restore_read_ms\":%.2f,"
                "\"fresh_restore_load_ms\":%.2f,\"verified\":%s}\n",
                sized ? 1 : 0, static_cast<unsigned long long>(n_events), static_cast<unsigned long long>(batches), avg, pub_s, engine_s, c1,
                c3, split1.setup_s, split1.thread_cpu_s, c1_warm, warm.thread_cpu_s, raw_pub, raw_c1, raw_c3, k1, r1, k1 / r1, k3, r3, k3 / r3,
                static_cast<unsigned long long>(blocks), static_cast<unsigned long long>(t_batches), rebuild_s, snap_s,
                restore_s, restore_s / rebuild_s, static_cast<double>(rebuild_start_us) * 1e-3,
                static_cast<double>(restore_start_us) * 1e-3, static_cast<double>(restore_read_us) * 1e-3,
                static_cast<double>(restore_load_us) * 1e-3, rebuild_heap_mb, rebuild_index_mb, restore_heap_mb, restore_index_mb,
                fresh_rebuild.s, fresh_restore.s, fresh_restore.s / fresh_rebuild.s,
                static_cast<double>(fresh_rebuild.start_us) * 1e-3, static_cast<double>(fresh_restore.start_us) * 1e-3,
                static_cast<double>(fresh_restore.read_us) * 1e-3, static_cast<double>(fresh_restore.load_us) * 1e-3,
                verified ? "true" : "false");
    return verified ? 0 : 1;
}

int nats_replica_process(const char *mode, const char *url, const char *durable, uint64_t batches) {
    const bool restore = mode && !std::strcmp(mode, "restore");
    if (!url || !durable || !batches || (!restore && (!mode || std::strcmp(mode, "rebuild") != 0))) {
        std::fprintf(stderr, "kvreg-net-bench: nats-replica needs --nats-replica rebuild|restore, --nats-url, "
                             "--nats-durable and --nats-batches\n");
        return 2;
    }
    double s = 0;
    uint64_t start_us = 0, read_us = 0, load_us = 0, restored = 0, digest = 0;
    {
        // libnats' one-time initialisation (its threads, OpenSSL: about 1.5 ms here), which a
        // process pays once, at its start, whatever it then does: before the clock, as in the
        // in-process replicas, which find it done.
        NB_CHECK(nats_Open(-1) == NATS_OK);
        const double t0 = now_s();
        Replica r(url, "TRACE", durable, false, "BENCH_SNAP", restore);
        r.catch_up(batches);
        s = now_s() - t0;
        kvreg_nats_consumer_stat(r.con, KVREG_NATS_CON_STAT_START_US, &start_us);
        kvreg_nats_consumer_stat(r.con, KVREG_NATS_CON_STAT_RESTORE_READ_US, &read_us);
        kvreg_nats_consumer_stat(r.con, KVREG_NATS_CON_STAT_RESTORE_LOAD_US, &load_us);
        kvreg_nats_consumer_stat(r.con, KVREG_NATS_CON_STAT_RESTORED, &restored);
        NB_CHECK(kvreg_index_digest(r.idx, &digest) == KVREG_OK);
    }
    nats_Close();
    std::printf("{\"s\":%.6f,\"start_us\":%llu,\"read_us\":%llu,\"load_us\":%llu,\"restored\":%llu,\"digest\":\"%llx\"}\n", s,
                static_cast<unsigned long long>(start_us), static_cast<unsigned long long>(read_us),
                static_cast<unsigned long long>(load_us), static_cast<unsigned long long>(restored),
                static_cast<unsigned long long>(digest));
    return 0;
}
