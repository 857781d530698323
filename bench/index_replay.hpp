// The open-loop replay both index workloads time (index_k1, Dynamo's gen-2 indexer benchmark;
// index_k2, its gen-3 / CKF shape): a corpus of queries and Stored / Removed events with due
// times, replayed on a fresh index once per window, with the check of every 100th answer
// against a reference model. index_replay.cpp; the corpora are built by wl_index_k1.cpp and
// wl_index_k2.cpp.
#pragma once

#include "bench.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct ReplayEvent {
    double due;      // fraction of the trace's span
    uint32_t req;    // the request it follows (its events come right after its query)
    uint32_t worker; // unique worker (before duplication)
    uint32_t first, count; // its hashes: Corpus::hashes[first .. first + count)
    int removed;     // 0: Stored (parent below), 1: Removed
    int has_parent;
    uint64_t parent;
};

struct ReplayQuery {
    double due;
    uint32_t req;
};

struct ReplayCorpus {
    std::vector<std::vector<uint64_t>> prompts; // router hashes per request
    std::vector<uint64_t> hashes;               // every event's hashes, back to back
    std::vector<ReplayEvent> events;            // in due order (one replica)
    std::vector<ReplayQuery> queries;           // in due order (one replica)
    uint64_t query_blocks = 0, stored_blocks = 0, removed_blocks = 0;
    uint64_t resident = 0;                      // (hash, worker) pairs at the end, one replica
};

struct ReplaySetup {
    const char *workload; // "index_k1" / "index_k2"
    size_t workers;       // unique workers
    size_t dup;           // replicas of each worker's timeline (Dynamo's -d)
    size_t cores;         // 2: event and query threads pinned apart; 1: both on CPU 0
    bool matches;         // time kvreg_index_query_hashes instead of _depths
};

// Every 100th query of an untimed replay in due order checked (both query functions) against
// a model of each worker's blocks; returns the mismatches, counts the answers checked.
uint64_t replay_check(const ReplayCorpus &c, const ReplaySetup &s, uint64_t &checked);

struct WindowResult {
    double elapsed = 0;                           // first due time to the last op done
    std::vector<double> service, q_late, e_late;  // seconds
    uint64_t answer_sum = 0;
};

// One window: a fresh index, the corpus replayed open loop into window_s seconds.
WindowResult replay_window(const ReplayCorpus &c, const ReplaySetup &s, double window_s);

double quantile(std::vector<double> &v, double p); // p in 0 .. 1; sorts v

// The windows of --windows (ms) in seconds; exits with a message when none is positive.
std::vector<double> parse_windows(const std::string &ms, const char *workload);

// The fields both workloads report for one window (j must have its head already).
void replay_fields(JsonLine &j, const ReplayCorpus &c, const ReplaySetup &s, double window, WindowResult &r,
                   uint64_t checked, uint64_t mismatches);

} // namespace bench
