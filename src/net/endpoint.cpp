// Endpoint rules (see net_endpoint.hpp).
#include "net/endpoint.hpp"

#include <cstring>

#include "kvreg.h"

namespace kvreg::net {

namespace {
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
} // namespace

bool endpoint_binds(std::string_view ep) noexcept {
    return ep.find('*') != std::string_view::npos || ep.find("::") != std::string_view::npos ||
           starts_with(ep, "ipc://") || starts_with(ep, "inproc://");
}

bool offset_endpoint(std::string_view ep, uint32_t rank, std::string &out) {
    out.assign(ep);
    if (rank == 0) return true;
    if (starts_with(ep, "ipc://") || starts_with(ep, "inproc://")) {
        out += "_dp" + std::to_string(rank);
        return true;
    }
    const size_t colon = ep.rfind(':');
    if (!starts_with(ep, "tcp://") || colon == std::string_view::npos || colon < 6) return true;
    const std::string_view port = ep.substr(colon + 1);
    if (port.empty() || port.size() > 5) return true; // "*" and the like: nothing to offset
    uint32_t p = 0;
    for (char c : port) {
        if (c < '0' || c > '9') return true;
        p = p * 10 + static_cast<uint32_t>(c - '0');
    }
    if (p + static_cast<uint64_t>(rank) > 65535) return false;
    out.assign(ep.substr(0, colon + 1));
    out += std::to_string(p + rank);
    return true;
}

int copy_out(const std::string &s, char *buf, size_t cap, size_t *len) noexcept {
    if (len) *len = s.size();
    if (cap < s.size() + 1) return KVREG_ERANGE;
    std::memcpy(buf, s.c_str(), s.size() + 1);
    return KVREG_OK;
}

void parse_topic(std::string_view topic, std::string &pod, std::string &model) {
    const size_t a = topic.find('@');
    const size_t b = a == std::string_view::npos ? a : topic.find('@', a + 1);
    if (a != std::string_view::npos && b != std::string_view::npos &&
        topic.find('@', b + 1) == std::string_view::npos) {
        pod.assign(topic.substr(a + 1, b - a - 1));
        model.assign(topic.substr(b + 1));
    } else {
        pod.assign(topic);
        model.clear();
    }
}

} // namespace kvreg::net
