// kvreg-bench helpers: /proc readers, the JSON line writer, status checks.
#include "bench.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench {

double pct(const std::vector<double> &sorted, double p) {
    if (sorted.empty()) return 0.0;
    size_t r = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    r = std::clamp<size_t>(r, 1, sorted.size());
    return sorted[r - 1];
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return pct(v, 50.0);
}

static uint64_t status_field_kb(const char *name) {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) return 0;
    char line[256];
    uint64_t v = 0;
    const size_t n = std::strlen(name);
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strncmp(line, name, n) == 0 && line[n] == ':') {
            v = std::strtoull(line + n + 1, nullptr, 10);
            break;
        }
    }
    std::fclose(f);
    return v;
}

uint64_t peak_rss_kb() { return status_field_kb("VmHWM"); }
uint64_t rss_kb() { return status_field_kb("VmRSS"); }

void JsonLine::key(const char *k) {
    if (!first_) buf_ += ',';
    first_ = false;
    buf_ += '"';
    buf_ += k;
    buf_ += "\":";
}

JsonLine &JsonLine::str(const char *k, const std::string &v) {
    key(k);
    buf_ += '"';
    for (char c : v) {
        if (c == '"' || c == '\\') {
            buf_ += '\\';
            buf_ += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
            buf_ += esc;
        } else {
            buf_ += c;
        }
    }
    buf_ += '"';
    return *this;
}

JsonLine &JsonLine::u(const char *k, uint64_t v) {
    key(k);
    buf_ += std::to_string(v);
    return *this;
}

// Same digits as the peer's JsonLine::f, so the two outputs read alike.
JsonLine &JsonLine::f(const char *k, double v) {
    key(k);
    char num[64];
    if (!std::isfinite(v)) {
        buf_ += "null";
        return *this;
    }
    if (std::fabs(v) >= 1e6 || (v == std::trunc(v) && std::fabs(v) < 1e15))
        std::snprintf(num, sizeof num, "%.1f", v);
    else if (std::fabs(v) >= 1.0)
        std::snprintf(num, sizeof num, "%.4f", v);
    else
        std::snprintf(num, sizeof num, "%.6f", v);
    buf_ += num;
    return *this;
}

JsonLine &JsonLine::b(const char *k, bool v) {
    key(k);
    buf_ += v ? "true" : "false";
    return *this;
}

// JSON numbers lose precision above 2^53 in most readers, hence hex strings.
JsonLine &JsonLine::hex(const char *k, uint64_t v) {
    char h[24];
    std::snprintf(h, sizeof h, "%016" PRIx64, v);
    return str(k, h);
}

void check_rc(int rc, const char *what) {
    if (rc != KVREG_OK) {
        std::fprintf(stderr, "kvreg-bench: %s failed: %s (%d)\n", what, kvreg_strerror(rc), rc);
        std::exit(2);
    }
}

bool checksum_expected(const Opts &o, const std::string &name, uint64_t checksum) {
    for (const auto &[n, v] : o.expect) {
        if (n != name) continue;
        if (v == checksum) return true;
        std::fprintf(stderr,
                     "kvreg-bench: %s: hash_checksum %016" PRIx64 " but expected %016" PRIx64 "\n",
                     name.c_str(), checksum, v);
        return false;
    }
    return true;
}

void head(JsonLine &j, const char *name, uint64_t ops, double seconds, const EventCounts &c) {
    j.str("workload", name)
        .u("ops", ops)
        .f("seconds", seconds)
        .f("ns_per_op", ops > 0 ? seconds * 1e9 / static_cast<double>(ops) : 0.0)
        .u("events_register", c.registers)
        .u("events_remove", c.removes)
        .u("peak_rss_kb", peak_rss_kb());
}

} // namespace bench
