// A publisher instance id: a random nonzero 64-bit number each kvreg_publisher_start() draws,
// so that a subscriber can tell a restarted publisher from the one it knew whatever seq the
// new one sends (see kvreg_net.h, "Publisher instance"). Carried as the text
// "kvreg-instance=<16 lowercase hex digits>":
//   - in the topic frame of the replay end marker (always: every upstream consumer ignores
//     that frame, vLLM's and SGLang's markers leave it empty);
//   - appended to the topic of live and replayed batches as "<topic>|kvreg-instance=<hex>"
//     only with KVREG_PUB_OPT_TOPIC_INSTANCE (breaks llm-d's "kv@<pod>@<model>" parsing).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace kvreg::net {

inline constexpr std::string_view kInstanceKey = "kvreg-instance=";
inline constexpr char kInstanceSep = '|';

inline std::string instance_tag(uint64_t id) {
    static const char hex[] = "0123456789abcdef";
    std::string s(kInstanceKey);
    for (int i = 15; i >= 0; i--) s.push_back(hex[(id >> (i * 4)) & 0xf]);
    return s;
}

// The id in an exact "kvreg-instance=<16 hex>" string; 0 when it is not one.
inline uint64_t parse_instance_tag(std::string_view s) {
    if (s.size() != kInstanceKey.size() + 16 || s.substr(0, kInstanceKey.size()) != kInstanceKey) return 0;
    uint64_t v = 0;
    for (char c : s.substr(kInstanceKey.size())) {
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | static_cast<uint64_t>(d);
    }
    return v;
}

// A topic that ends with "|kvreg-instance=<hex>": the id, and topic shortened to the part
// before it. 0 (topic unchanged) otherwise.
inline uint64_t strip_topic_instance(std::string_view &topic) {
    const size_t tag = kInstanceKey.size() + 16;
    if (topic.size() < tag + 1 || topic[topic.size() - tag - 1] != kInstanceSep) return 0;
    const uint64_t id = parse_instance_tag(topic.substr(topic.size() - tag));
    if (id) topic = topic.substr(0, topic.size() - tag - 1);
    return id;
}

inline uint64_t new_instance() {
    std::random_device rd;
    uint64_t v = 0;
    while (v == 0) v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    return v;
}

} // namespace kvreg::net
