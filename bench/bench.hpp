// kvreg-bench: shared declarations. The workloads mirror ../shared/peers/seed-rust (the seed
// design's benchmark peer): same flags, same token generation, same JSON fields and checksums,
// so the two programs can be run side by side (bench/compare.sh).
//
// Everything goes through the public C API (kvreg.h); xxHash is used directly only for the
// independent reference hashes and the raw-limit timings of the `hash` workload.
#ifndef KVREG_BENCH_HPP
#define KVREG_BENCH_HPP

#include <kvreg.h>

#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <time.h>

namespace bench {

// ------------------------------------------------------------------ options (main.cpp)
struct Opts {
    std::string workload;
    long long seqs = -1; // -1: the workload's default
    long long len = -1;
    size_t block = 16;
    size_t prefix = 256;
    size_t threads = 2;
    size_t blocks = 1000000;
    size_t rounds = 8;
    size_t batch = 8;
    size_t groups = 8;
    size_t reps = 5;
    uint32_t shards = 0; // --shards: KVREG_OPT_SHARDS (0: the library's default)
    // --reserve-blocks: KVREG_OPT_RESERVE_BLOCKS. auto: the blocks the workload holds at its
    // peak (register_release, two_pools, shared_prefix: what an engine knows of its KV cache);
    // N: that many, in every workload's registries. 0: none (the default).
    bool reserve_auto = false;
    uint64_t reserve_blocks = 0;
    uint64_t seed = UINT64_C(0x5EED000000000001);
    uint64_t salt = 1337;
    size_t rt_threads = 1;  // accepted for flag compatibility; kvreg has no runtime threads
    bool check_order = false;
    bool warm = true;
    bool threads_scaling = false;
    // kvreg-only workloads (wl_scaling.cpp): disjoint --delivery, hol --calls, pool_free --big-pool.
    std::string delivery = "inline";
    size_t calls = 1000;
    size_t big_pool = 2000000;
    size_t pools = 16; // kvreg-only `many_pools` (wl_pools.cpp): pools holding every hash
    // kvreg-only `scaling_limit` (wl_limit.cpp): per-operation private work (0: kvreg's own
    // one-thread disjoint ns/op, measured in the same run) and operations per thread.
    double work_ns = 0;
    uint64_t limit_ops = 4000000;
    // kvreg-only `index` (wl_index.cpp): the Mooncake trace and the number of workers.
    std::string trace = KVREG_BENCH_TRACE; // data/traces/conversation_trace.jsonl.gz (meson)
    size_t index_workers = 0; // 0: the workload's default (index 8, index_k1 1000)
    // kvreg-only `index_k1` (wl_index_k1.cpp): Dynamo's gen-2 indexer benchmark rebuilt.
    std::string windows = "30000,18455,11352,6983,4296,2643,1626,1000"; // ms, Dynamo's sweep
    size_t dup = 7;   // each worker's timeline replayed this many times (Dynamo's -d)
    bool k1_matches = false; // --answer matches: ranked kvreg_index_match answers (default depths)
    // kvreg-only `index_k2` (wl_index_k2.cpp): the gen-3 / CKF shape (few workers, evictions).
    size_t trace_dup = 20;     // copies of the trace, disjoint hash ids (--trace-duplication-factor)
    size_t length_factor = 4;  // blocks per trace hash id (--trace-length-factor)
    size_t capacity = 16384;   // blocks per worker, LRU
    bool windows_given = false; // --windows given (index_k2's default windows differ)
    size_t cores = 2; // 2: event and query threads pinned to CPUs 0 and 1; 1: both on CPU 0
    bool seed_given = false;
    // --expect NAME=HEX: the workload fails (verified false) unless its checksum equals HEX.
    std::vector<std::pair<std::string, uint64_t>> expect;

    size_t seqs_or(size_t d) const { return seqs < 0 ? d : static_cast<size_t>(seqs); }
    size_t len_or(size_t d) const { return len < 0 ? d : static_cast<size_t>(len); }
};

// ------------------------------------------------------------------ transfer.cpp
// One-way cache-line transfer between the first two CPUs this process may use, in ns: the
// median of `reps` runs of `round_trips` ping-pongs. 0 with fewer than two CPUs.
double core_transfer_ns(uint32_t round_trips = 20000, uint32_t reps = 5);

// ------------------------------------------------------------------ util.cpp
// Nearest-rank percentile (p in 0 .. 100) of sorted values; 0 when there are none.
double pct(const std::vector<double> &sorted, double p);
// The nearest-rank median (the lower of the two middle values).
double median(std::vector<double> v);
// splitmix64 (Steele, Lea, Flood 2014); a token is the HIGH 32 bits of one output, as in the peer.
struct SplitMix64 {
    uint64_t state;
    explicit SplitMix64(uint64_t seed) : state(seed) {}
    uint64_t next_u64() {
        state += UINT64_C(0x9E3779B97F4A7C15);
        uint64_t z = state;
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        return z ^ (z >> 31);
    }
    uint32_t next_token() { return static_cast<uint32_t>(next_u64() >> 32); }
    void fill(uint32_t *out, size_t n) {
        for (size_t i = 0; i < n; i++) out[i] = next_token();
    }
};

uint64_t peak_rss_kb(); // VmHWM
uint64_t rss_kb();      // VmRSS

inline double now_s() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// CPU seconds so far of CLOCK_THREAD_CPUTIME_ID (this thread) or CLOCK_PROCESS_CPUTIME_ID
// (every thread of the process); 0 if the clock cannot be read.
inline double cpu_s(clockid_t which) {
    timespec ts{};
    if (clock_gettime(which, &ts) != 0) return 0.0;
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One JSON object on one line, fields in insertion order, numbers formatted like the peer's.
class JsonLine {
  public:
    JsonLine &str(const char *k, const std::string &v);
    JsonLine &u(const char *k, uint64_t v);
    JsonLine &f(const char *k, double v);
    JsonLine &b(const char *k, bool v);
    JsonLine &hex(const char *k, uint64_t v); // u64 hashes as 16-digit hex strings
    std::string finish() const { return buf_ + "}"; }

  private:
    void key(const char *k);
    std::string buf_ = "{";
    bool first_ = true;
};

// Fails loudly (message on stderr, exit 2) on a library error where none is expected.
void check_rc(int rc, const char *what);

// --expect handling: true when no expectation is set for `name` or the checksum matches.
bool checksum_expected(const Opts &o, const std::string &name, uint64_t checksum);

// ------------------------------------------------------------------ reference.cpp
// Independent implementation of the hash rule straight on libxxhash: never through kvreg.
uint64_t ref_block_hash(const uint32_t *tokens, size_t n, uint64_t salt);
uint64_t ref_chain_hash(uint64_t parent, uint64_t block_hash, uint64_t salt);
// Dynamo's own vectors (tokens 1..=10, block 4, salt 1337): library hashes must match them.
bool check_vectors();

// ------------------------------------------------------------------ inputs.cpp
// A set of token sequences, each cut into full blocks described for kvreg_register_batch.
// Token storage is owned here; descs point into it (the registry never retains caller input).
struct SeqSet {
    size_t n_seqs = 0;
    size_t len = 0;
    size_t block = 0;
    size_t per_seq = 0;            // full blocks per sequence = len / block
    std::vector<uint32_t> tokens;  // n_seqs * len, sequence s at s * len
    std::vector<kvreg_block_desc> descs; // n_seqs * per_seq, sequence s at s * per_seq
    uint64_t checksum = 0;         // wrapping sum of every block's sequence hash
    bool ref_ok = true;            // library hashes equal the independent reference
    const kvreg_block_desc *seq(size_t s) const { return descs.data() + s * per_seq; }
};

// S sequences of L random tokens, drawn one sequence after another (peer: gen_random_sequences).
SeqSet gen_random(const Opts &o, size_t s, size_t l);
// `groups` prefixes of P tokens drawn first, then each sequence's L-P tail; sequence i uses
// prefix i % groups (peer: gen_prefixed_sequences).
SeqSet gen_prefixed(const Opts &o, size_t s, size_t l, size_t p, size_t groups);
// Number of distinct sequence hashes and their wrapping sum.
std::pair<uint64_t, uint64_t> distinct_hashes(const SeqSet &set);

// ------------------------------------------------------------------ events.cpp
struct EventCounts {
    uint64_t registers = 0;
    uint64_t removes = 0;
    uint64_t register_batches = 0;  // callback invocations carrying at least one Register
    uint64_t callbacks = 0;         // callback invocations
    uint64_t max_per_callback = 0;  // most events in one callback call
    uint64_t register_hash_sum = 0; // wrapping sum of Register events' sequence hashes
    uint64_t remove_hash_sum = 0;
    uint64_t register_without_tokens = 0;
    uint64_t order_dup_register = 0;  // --check-order: Register for a hash already live
    uint64_t order_orphan_remove = 0; // --check-order: Remove for a hash not live
    uint64_t id_gaps = 0;             // event_id not exactly previous + 1
    // Another registry's counts (disjoint's isolated run): sums, and the larger maximum.
    void add(const EventCounts &o);
};

struct Counter; // opaque: the callback's state

// A registry with a counting callback delivered INLINE, so event cost is inside every timing.
class Harness {
  public:
    // peak_blocks: the most blocks the workload will hold at once (for --reserve-blocks auto).
    Harness(const Opts &o, bool keep_tokens, uint64_t peak_blocks = 0);
    ~Harness();
    Harness(const Harness &) = delete;
    Harness &operator=(const Harness &) = delete;

    kvreg_registry *reg() const { return reg_; }
    kvreg_pool *new_pool(const char *name);
    EventCounts counts() const;
    uint64_t stat(uint32_t which) const;
    // Trailer fields shared by every workload (rt_threads, order_* with --check-order).
    void finish(JsonLine &j) const;

  private:
    const Opts &opts_;
    kvreg_registry *reg_ = nullptr;
    Counter *counter_ = nullptr;
    uint64_t reserved_ = 0; // KVREG_OPT_RESERVE_BLOCKS set (0: none)
    double new_s_ = 0;      // kvreg_registry_new's time
};

// Head fields every line starts with (same order as the peer).
void head(JsonLine &j, const char *name, uint64_t ops, double seconds, const EventCounts &c);

// ------------------------------------------------------------------ regops.cpp
// Register sequence s of set with one kvreg_register_batch (the seed: one Publisher per
// sequence); returns how many were registered.
size_t register_seq(kvreg_pool *pool, const SeqSet &set, size_t s, kvreg_block *out, int *status);
// One kvreg_release_batch over n handles (the seed: dropping those block states); returns
// how many were released.
size_t release_all(kvreg_pool *pool, const kvreg_block *handles, size_t n);
// What a sequence worker did (threads, disjoint).
struct Tally {
    uint64_t attempts = 0, registered = 0, dups = 0, other = 0, released = 0;
    uint64_t calls = 0; // kvreg_register_batch + kvreg_release_batch calls
    void add(const Tally &o);
};
// The barrier that releases a timed run's workers. Its completion step runs once every worker
// and the timing thread have arrived, before any is released, and reads the clock there: read
// by the timing thread after the barrier instead, the clock could start late by however long
// that thread waits for a core while the workers already run (with as many workers as cores,
// a scheduler tick or more), and the run would look faster than it was.
struct StartClock {
    double *t0;
    void operator()() noexcept { *t0 = now_s(); }
};
using StartBarrier = std::barrier<StartClock>;

// One worker thread of `threads` and `disjoint`: after `start`, R rounds over sequences
// (first + j) % set.n_seqs for j in [0, u), K at a time: register each (one batch call per
// sequence), then release the batch (one call). EEXIST (the same prefix twice in a batch)
// counts as a dup, any other failure as other.
void seq_worker(kvreg_pool *pool, const SeqSet &set, size_t first, size_t u, size_t rounds, size_t k,
                StartBarrier &start, Tally &out);
// The seed waits for its async cleanup ("drain"); kvreg is synchronous, so this is only the
// timed check that the pools (and the registry, if asked) are empty.
bool drained(const Harness &h, const std::vector<kvreg_pool *> &pools, bool registry, double &secs);
// Exactly n Register and n Remove events, for hashes summing to hash_sum, all with tokens,
// event ids without gaps, no callback call over KVREG_EVENTS_PER_CALL events.
bool events_match(const EventCounts &c, uint64_t n, uint64_t hash_sum);
double per_block_ns(double secs, uint64_t n);

// ------------------------------------------------------------------ trace.cpp
// One request of a Mooncake trace (FAST'25 JSONL): what the index workloads read.
struct TraceRequest {
    uint64_t timestamp_ms = 0;
    uint64_t output_length = 0;
    std::vector<uint64_t> ids; // hash_ids: one per 512-token block of the prompt
};
// Every request line of the trace at path, plain or gzip (recognised by its magic bytes). A
// missing or unreadable trace, or gzip without zlib, ends the program with a message.
std::vector<TraceRequest> read_trace(const std::string &path, const char *workload);

// ------------------------------------------------------------------ workloads
// Each returns its JSON line and sets ok to the line's `verified`.
std::string wl_hash(const Opts &o, bool &ok);
std::string wl_register_release(const Opts &o, bool &ok);
std::string wl_two_pools(const Opts &o, bool &ok);
std::string wl_shared_prefix(const Opts &o, bool &ok);
std::string wl_threads(const Opts &o, bool &ok);
std::string wl_hold(const Opts &o, bool keep_tokens, bool &ok);
std::string wl_selftest(const Opts &o, bool &ok);
// kvreg-only (no seed-peer counterpart; wl_scaling.cpp): disjoint-hash scaling, head-of-line
// latency behind a slow callback, kvreg_pool_free beside a big pool.
std::string wl_disjoint(const Opts &o, bool &ok);
// The disjoint runs alone (o.threads threads, then one; o.delivery), for wl_scaling_limit.
struct DisjointResult {
    double ops_per_s_t = 0, ops_per_s_1 = 0;
    double ops_per_s_isolated = 0; // INLINE: the T threads, each with a registry of its own
    uint64_t checksum = 0; // of the input, as disjoint's hash_checksum
    double transfer_ns = 0; // core_transfer_ns() just before the runs
};
DisjointResult disjoint_measure(const Opts &o, bool &ok);
// wl_limit.cpp: the machine's two-thread ceiling by what the threads share (kvreg-only).
std::string wl_scaling_limit(const Opts &o, bool &ok);
std::string wl_hol(const Opts &o, bool &ok);
// wl_pools.cpp: one thread, every hash held by --pools pools (kvreg-only).
std::string wl_many_pools(const Opts &o, bool &ok);
std::string wl_pool_free(const Opts &o, bool &ok);
std::string wl_append(const Opts &o, bool &ok);
// wl_wire.cpp (built with the library's `wire` feature): vLLM encode/decode vs msgpack-c alone.
std::string wl_wire(const Opts &o, bool &ok);
std::string wl_index(const Opts &o, bool &ok);
std::string wl_index_k1(const Opts &o, bool &ok);
std::string wl_index_k2(const Opts &o, bool &ok);
std::string wl_index_load(const Opts &o, bool &ok);

} // namespace bench

#endif
