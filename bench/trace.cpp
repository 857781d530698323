// Mooncake traces (FAST'25 JSONL, plain or gzip) for the index workloads.
#include "bench.hpp"

#if KVREG_BENCH_ZLIB
#include <zlib.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace bench {

namespace {

// The value after "key": as an unsigned integer, or 0 when the line has no such key.
uint64_t field_u64(const std::string &line, const char *key) {
    const size_t at = line.find(key);
    if (at == std::string::npos) return 0;
    const size_t colon = line.find(':', at);
    return colon == std::string::npos ? 0 : std::strtoull(line.c_str() + colon + 1, nullptr, 10);
}

// The fields the workloads need from one Mooncake JSON line. Returns false for a line without
// hash_ids.
bool parse_line(const std::string &line, TraceRequest &r) {
    const size_t hi = line.find("\"hash_ids\"");
    if (hi == std::string::npos) return false;
    r.timestamp_ms = field_u64(line, "\"timestamp\"");
    r.output_length = field_u64(line, "\"output_length\"");
    r.ids.clear();
    const char *p = line.c_str() + line.find('[', hi) + 1;
    while (*p && *p != ']') {
        char *end = nullptr;
        const unsigned long long v = std::strtoull(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        r.ids.push_back(v);
        p = end;
    }
    return true;
}

} // namespace

std::vector<TraceRequest> read_trace(const std::string &path, const char *workload) {
    auto fail = [&](const char *why) {
        std::fprintf(stderr, "kvreg-bench: %s: cannot read trace %s: %s (--trace FILE)\n", workload, path.c_str(), why);
        std::exit(2);
    };
    std::vector<TraceRequest> reqs;
    TraceRequest r;
#if KVREG_BENCH_ZLIB
    gzFile f = gzopen(path.c_str(), "rb"); // reads plain files as they are
    if (!f) fail(std::strerror(errno));
    std::string line;
    char buf[1 << 16];
    while (gzgets(f, buf, sizeof buf)) {
        line += buf;
        if (line.back() != '\n' && !gzeof(f)) continue; // a line longer than buf
        if (parse_line(line, r)) reqs.push_back(r);
        line.clear();
    }
    int err = Z_OK;
    const char *msg = gzerror(f, &err);
    if (err != Z_OK && err != Z_STREAM_END) fail(msg);
    gzclose(f);
#else
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(std::strerror(errno));
    std::string line;
    if (in.peek() == 0x1f) fail("gzip input, and kvreg-bench was built without zlib (install zlib1g-dev)");
    while (std::getline(in, line))
        if (parse_line(line, r)) reqs.push_back(r);
#endif
    if (reqs.empty()) fail("no request with hash_ids");
    return reqs;
}

} // namespace bench
