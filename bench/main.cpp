// kvreg-bench: the seed peer's six workloads (../shared/peers/seed-rust) run through libkvreg's
// public C API, one JSON line per workload on stdout. Flags, defaults, token generation, JSON
// fields and hash_checksum values match the peer; see bench/README.md.
#include "bench.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern char **environ;

namespace {

using bench::Opts;

const char *const kWorkloads[] = {"hash", "register_release", "two_pools", "shared_prefix",
                                  "threads", "hold", "hold_tokens"};

const char kUsage[] =
    "usage: kvreg-bench --workload NAME [options]\n"
    "\n"
    "workloads: hash register_release two_pools shared_prefix threads hold hold_tokens selftest all\n"
    "  append (not in all): --len single-token appends vs one extend of them, fresh sequences\n"
    "  wire (not in all; needs the wire feature): --seqs chains of --len tokens registered and\n"
    "    removed as vLLM KVEventBatch payloads, encode and decode events/s against msgpack-c\n"
    "    writing / reading the same integers (encode_over_limit, decode_over_limit)\n"
    "  (all = the benchmark workloads, each in a fresh child process so that peak_rss_kb is\n"
    "   per workload; add --in-process to run them in this process. hold_tokens is hold with\n"
    "   KVREG_OPT_KEEP_TOKENS = 1 plus a second pool holding the same blocks)\n"
    "  kvreg-only (no seed-peer counterpart, not in all):\n"
    "  disjoint          T threads, each its own pool and its own tokens (no shared prefix);\n"
    "                    --delivery inline (counting callback) or poll (a consumer thread on\n"
    "                    kvreg_registry_poll_wait); also 1 thread after: scaling_ratio\n"
    "  hol               a callback sleeps 50 ms on thread A; thread B's --calls calls that emit\n"
    "                    no event are timed one by one (p50/p99/max)\n"
    "  pool_free         kvreg_pool_free of a 1-block pool alone, then beside a --big-pool block pool\n"
    "  many_pools        one thread, --pools pools each registering the same --seqs sequences (2000),\n"
    "                    every block once more (EEXIST), then releasing; also with 2 pools: pools_ratio\n"
    "  scaling_limit     the machine's 2-thread ceiling by what threads share (a counter per op,\n"
    "                    64 locks, both), for ops costing what kvreg's do; beside disjoint's ratio\n"
    "  index             the router-side index on a Mooncake --trace split over --workers (8):\n"
    "                    queries and events against a plain open-addressing table, 2 vs 1 thread\n"
    "  index_k1          Dynamo's gen-2 indexer benchmark rebuilt: the conversation --trace over\n"
    "                    --workers (1000) x --dup (7) workers, open loop over --windows, one event\n"
    "                    thread and one query thread (--cores 2: pinned apart, 1: on one CPU)\n"
    "  index_k2          Dynamo's gen-3 / CKF shape: the --trace copied --trace-dup (20) times,\n"
    "                    --length-factor (4) blocks per hash id, --workers (16) LRU caches of\n"
    "                    --capacity (16384) blocks (Removed events), open loop over --windows\n"
    "  index_load        a restore's load: the conversation --trace's blocks stored by --workers (1)\n"
    "                    engines (ENGINE mode), applied into a fresh index vs kvreg_index_load of\n"
    "                    its dump, --reps times each: load_over_apply\n"
    "\n"
    "size options (as seed-peer; defaults depend on the workload):\n"
    "  --seqs S          sequences              (hash 2000, *_release/two_pools/shared_prefix 20000, threads 2048)\n"
    "  --len L           tokens per sequence    (hash 4096, append 1000000, others 512)\n"
    "  --block B         tokens per block       (16)\n"
    "  --prefix P        shared prefix tokens   (256; shared_prefix, threads)\n"
    "  --threads T       worker threads         (2; threads)\n"
    "  --rounds R        passes over the set    (8; threads)\n"
    "  --batch K         sequences held at once (8; threads)\n"
    "  --groups G        distinct prefixes      (8; threads)\n"
    "  --blocks N        blocks to hold         (1000000; hold)\n"
    "  --delivery M      inline | poll          (inline; disjoint)\n"
    "  --calls N         timed no-event calls   (1000; hol)\n"
    "  --big-pool N      blocks in the big pool (2000000; pool_free)\n"
    "  --pools P         pools holding every hash (16; many_pools)\n"
    "  --work-ns W       private ns per op      (0: kvreg's own, measured; scaling_limit)\n"
    "  --limit-ops N     ops per thread         (4000000; scaling_limit; --reps runs each)\n"
    "  --trace FILE      Mooncake JSONL trace, plain or gzip (data/traces/conversation_trace.jsonl.gz; index)\n"
    "  --workers N       index workers          (8; index; 1000: index_k1; 16: index_k2)\n"
    "  --windows MS,...  index_k1 sweep windows (30000,18455,11352,6983,4296,2643,1626,1000;\n"
    "                    index_k2: 24000,12000,6000,3000,1500,750)\n"
    "  --trace-dup N     index_k2 copies of the trace, disjoint hash ids (20)\n"
    "  --length-factor N index_k2 blocks per trace hash id (4)\n"
    "  --capacity N      index_k2 blocks per worker, LRU (16384)\n"
    "  --dup N           index_k1 replays of each worker (7)\n"
    "  --answer A        index_k1/k2 query: depths (kvreg_index_query_depths, every worker's depth,\n"
    "                    Dynamo's answer; default) or matches (kvreg_index_query_hashes, ranked)\n"
    "  --cores N         index_k1/k2 CPUs for its two threads (2)\n"
    "  --reps R          timing repetitions     (5; hash, append, index_load)\n"
    "  --shards N        the registry's lock shards, KVREG_OPT_SHARDS (library default: 64)\n"
    "  --reserve-blocks auto|N  KVREG_OPT_RESERVE_BLOCKS: auto, the blocks the workload holds at\n"
    "                    its peak (register_release, two_pools, shared_prefix); N, that many (0)\n"
    "other:\n"
    "  --seed X          PRNG seed (splitmix64) (0x5EED000000000001)\n"
    "  --salt X          hash salt / xxh3 seed  (1337)\n"
    "  --check-order     the event callback tracks per-hash live counts (reports anomalies)\n"
    "  --no-warm         register_release: skip the second (warm) pass\n"
    "  --threads-scaling threads: also run with 1 thread after; adds ops_per_s_1thread, scaling_ratio\n"
    "  --expect W=HEX    fail workload W unless its hash_checksum is HEX (repeatable)\n"
    "  --rt-threads N    accepted for compatibility; kvreg has no runtime threads (rt_threads: 0)\n";

uint64_t parse_u64(const std::string &s) {
    std::string t;
    for (char c : s)
        if (c != '_') t += c;
    int base = 10;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
        base = 16;
        t = t.substr(2);
    }
    if (t.empty() || t[0] == '-' || t[0] == '+') throw std::invalid_argument(s + ": not a number");
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(t.c_str(), &end, base);
    if (errno != 0 || end == nullptr || *end != '\0') throw std::invalid_argument(s + ": not a number");
    return v;
}

// Returns false for --help. Throws std::invalid_argument on a bad command line.
bool parse_args(const std::vector<std::string> &args, Opts &o, bool &in_process) {
    for (size_t i = 0; i < args.size(); i++) {
        std::string name = args[i];
        std::string inline_val;
        bool has_inline = false;
        const size_t eq = name.find('=');
        if (name.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_val = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_inline = true;
        }
        auto val = [&]() -> std::string {
            if (has_inline) return inline_val;
            if (++i >= args.size()) throw std::invalid_argument(name + " needs a value");
            return args[i];
        };
        auto num = [&]() { return static_cast<size_t>(parse_u64(val())); };
        if (name == "-h" || name == "--help") return false;
        else if (name == "--workload" || name == "-w") o.workload = val();
        else if (name == "--seqs" || name == "-S") o.seqs = static_cast<long long>(num());
        else if (name == "--len" || name == "-L") o.len = static_cast<long long>(num());
        else if (name == "--block" || name == "-B") o.block = num();
        else if (name == "--prefix" || name == "-P") o.prefix = num();
        else if (name == "--threads" || name == "-T") o.threads = num();
        else if (name == "--rounds") o.rounds = num();
        else if (name == "--batch") o.batch = num();
        else if (name == "--groups") o.groups = num();
        else if (name == "--blocks" || name == "-N") o.blocks = num();
        else if (name == "--reps") o.reps = num();
        else if (name == "--shards") o.shards = static_cast<uint32_t>(num());
        else if (name == "--reserve-blocks") {
            const std::string v = val();
            o.reserve_auto = v == "auto";
            o.reserve_blocks = o.reserve_auto ? 0 : parse_u64(v);
        }
        else if (name == "--seed") o.seed = parse_u64(val()), o.seed_given = true;
        else if (name == "--salt") o.salt = parse_u64(val());
        else if (name == "--rt-threads") o.rt_threads = num();
        else if (name == "--check-order") o.check_order = true;
        else if (name == "--no-warm") o.warm = false;
        else if (name == "--threads-scaling") o.threads_scaling = true;
        else if (name == "--in-process") in_process = true;
        else if (name == "--delivery") o.delivery = val();
        else if (name == "--calls") o.calls = num();
        else if (name == "--work-ns") o.work_ns = std::stod(val());
        else if (name == "--limit-ops") o.limit_ops = num();
        else if (name == "--big-pool") o.big_pool = num();
        else if (name == "--pools") o.pools = num();
        else if (name == "--trace") o.trace = val();
        else if (name == "--workers") o.index_workers = num();
        else if (name == "--windows") o.windows = val(), o.windows_given = true;
        else if (name == "--trace-dup") o.trace_dup = num();
        else if (name == "--length-factor") o.length_factor = num();
        else if (name == "--capacity") o.capacity = num();
        else if (name == "--dup") o.dup = num();
        else if (name == "--answer") {
            const std::string a = val();
            if (a != "depths" && a != "matches") throw std::invalid_argument("--answer is depths or matches");
            o.k1_matches = a == "matches";
        } else if (name == "--cores") o.cores = num();
        else if (name == "--forward")
            throw std::invalid_argument("--forward is not supported: kvreg delivers events inline to the "
                                        "counting callback (use POLL mode in your own consumer instead)");
        else if (name == "--expect") {
            const std::string v = val();
            const size_t at = v.find('=');
            if (at == std::string::npos || at == 0) throw std::invalid_argument("--expect needs WORKLOAD=HEX");
            o.expect.emplace_back(v.substr(0, at), parse_u64("0x" + v.substr(at + 1)));
        } else
            throw std::invalid_argument("unknown argument: " + args[i]);
    }
    if (o.workload.empty()) throw std::invalid_argument("--workload is required");
    if (o.block == 0 || o.block > UINT32_MAX) throw std::invalid_argument("--block must be 1 .. 2^32-1");
    return true;
}

// Returns 1 = verified, 0 = not verified, -1 = unknown workload.
int run_one(const Opts &o) {
    bool ok = false;
    std::string line;
    const std::string &w = o.workload;
    if (w == "hash") line = bench::wl_hash(o, ok);
    else if (w == "register_release") line = bench::wl_register_release(o, ok);
    else if (w == "two_pools") line = bench::wl_two_pools(o, ok);
    else if (w == "shared_prefix") line = bench::wl_shared_prefix(o, ok);
    else if (w == "threads") line = bench::wl_threads(o, ok);
    else if (w == "hold") line = bench::wl_hold(o, false, ok);
    else if (w == "hold_tokens") line = bench::wl_hold(o, true, ok);
    else if (w == "selftest") line = bench::wl_selftest(o, ok);
    else if (w == "disjoint") line = bench::wl_disjoint(o, ok);
    else if (w == "hol") line = bench::wl_hol(o, ok);
    else if (w == "pool_free") line = bench::wl_pool_free(o, ok);
    else if (w == "many_pools") line = bench::wl_many_pools(o, ok);
    else if (w == "scaling_limit") line = bench::wl_scaling_limit(o, ok);
    else if (w == "append") line = bench::wl_append(o, ok);
#ifdef KVREG_BENCH_WIRE
    else if (w == "wire") line = bench::wl_wire(o, ok);
#endif
    else if (w == "index") line = bench::wl_index(o, ok);
    else if (w == "index_k1") line = bench::wl_index_k1(o, ok);
    else if (w == "index_k2") line = bench::wl_index_k2(o, ok);
    else if (w == "index_load") line = bench::wl_index_load(o, ok);
    else return -1;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    return ok ? 1 : 0;
}

// Each workload in a fresh child (same flags, --workload replaced), like the peer.
bool run_children(const std::vector<std::string> &args) {
    bool all_ok = true;
    for (const char *w : kWorkloads) {
        std::vector<std::string> child{"kvreg-bench"};
        for (size_t i = 0; i < args.size(); i++) {
            if (args[i] == "--workload" || args[i] == "-w") {
                i++;
                continue;
            }
            if (args[i].rfind("--workload=", 0) == 0) continue;
            child.push_back(args[i]);
        }
        child.push_back("--workload");
        child.push_back(w);
        std::vector<char *> argv;
        for (std::string &a : child) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_t pid = 0;
        std::fflush(stdout);
        const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
        int status = 0;
        if (rc != 0 || waitpid(pid, &status, 0) != pid) {
            std::fprintf(stderr, "kvreg-bench: cannot run workload %s: %s\n", w, std::strerror(rc ? rc : errno));
            all_ok = false;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "kvreg-bench: workload %s failed (status %d)\n", w, status);
            all_ok = false;
        }
    }
    return all_ok;
}

} // namespace

namespace bench {

std::string wl_selftest(const Opts &, bool &ok) {
    ok = check_vectors();
    JsonLine j;
    head(j, "selftest", 0, 0.0, EventCounts{});
    j.str("vector", "tokens 1..=10, block 4, salt 1337")
        .str("library_version", kvreg_version_string())
        .b("verified", ok);
    return j.finish();
}

} // namespace bench

int main(int argc, char **argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    Opts o;
    bool in_process = false;
    try {
        if (!parse_args(args, o, in_process)) {
            std::fputs(kUsage, stderr);
            return 0;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n%s", e.what(), kUsage);
        return 2;
    }

    // The hash rule is checked on every start; nothing is measured with a wrong rule.
    if (!bench::check_vectors()) return 3;

    bool all_ok = true;
    if (o.workload == "all") {
        if (in_process) {
            for (const char *w : kWorkloads) {
                Opts one = o;
                one.workload = w;
                all_ok &= run_one(one) == 1;
            }
        } else {
            all_ok = run_children(args);
        }
    } else {
        const int r = run_one(o);
        if (r < 0) {
            std::fprintf(stderr, "error: unknown workload: %s\n%s", o.workload.c_str(), kUsage);
            return 2;
        }
        all_ok = r == 1;
    }
    if (!all_ok) {
        std::fprintf(stderr, "error: verification failed (see \"verified\" fields)\n");
        return 1;
    }
    return 0;
}
