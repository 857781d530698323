// The replica's durable consumer, made (again) by requests sent without waiting for their
// answers (see consumer.hpp, send_durable): start() sends them as soon as it knows where the
// durable starts, a restore already while the snapshot's last chunk loads, and awaits the
// answers only when the durable is needed, so that the server makes it meanwhile.
#include "nats/consumer.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace kvreg::nats {

namespace {
void append_json_string(std::string &out, const std::string &s) {
    out += '"';
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char u[8];
            std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += u;
        } else {
            out += c;
        }
    }
    out += '"';
}
} // namespace

std::string Consumer::durable_request(uint64_t start_seq) const {
    // The one definition of the durable's settings: explicit acks, redelivered for ever
    // (a replica must see every message), from the stream's start or start_seq.
    const uint64_t ack_wait_ns = ack_wait_ms_ > static_cast<uint64_t>(INT64_MAX) / 1000000
                                     ? static_cast<uint64_t>(INT64_MAX)
                                     : ack_wait_ms_ * 1000000;
    std::string j = "{\"stream_name\":";
    append_json_string(j, stream_);
    j += ",\"config\":{\"durable_name\":";
    append_json_string(j, durable_);
    char nums[200];
    if (start_seq)
        std::snprintf(nums, sizeof nums, ",\"deliver_policy\":\"by_start_sequence\",\"opt_start_seq\":%" PRIu64, start_seq);
    else
        std::snprintf(nums, sizeof nums, ",\"deliver_policy\":\"all\"");
    j += nums;
    std::snprintf(nums, sizeof nums,
                  ",\"ack_policy\":\"explicit\",\"ack_wait\":%" PRIu64 ",\"max_deliver\":-1,\"max_ack_pending\":%" PRIu64
                  ",\"replay_policy\":\"instant\"",
                  ack_wait_ns, max_ack_pending_);
    j += nums;
    if (!filter_.empty()) {
        j += ",\"filter_subject\":";
        append_json_string(j, filter_);
    }
    j += "}}";
    return j;
}

bool Consumer::send_durable(uint64_t start_seq) {
    const std::string api = "$JS.API.CONSUMER.", tail = stream_ + "." + durable_;
    // Unless resuming, the old durable goes first: the server answers a client's requests
    // in the order they came, so the creation finds it gone.
    if (!resume_) {
        if (natsConnection_PublishRequest(conn_.nc, (api + "DELETE." + tail).c_str(), inbox_.c_str(), nullptr, 0) !=
            NATS_OK)
            return false;
        durable_answers_++;
    }
    const std::string req = durable_request(start_seq);
    if (natsConnection_PublishRequest(conn_.nc, (api + "DURABLE.CREATE." + tail).c_str(), inbox_.c_str(), req.data(),
                                      static_cast<int>(req.size())) != NATS_OK)
        return false;
    durable_answers_++;
    durable_sent_ = true;
    durable_seq_ = start_seq;
    return true;
}

bool Consumer::await_durable() {
    // Every answer outstanding, in order; the verdict is the last creation's: its answer
    // (a consumer_create_response) names no error and carries this durable's start.
    bool made = false;
    char start[64];
    if (durable_seq_)
        std::snprintf(start, sizeof start, "\"opt_start_seq\":%" PRIu64, durable_seq_);
    else
        std::snprintf(start, sizeof start, "\"deliver_policy\":\"all\"");
    for (; durable_answers_ > 0; durable_answers_--) {
        natsMsg *m = nullptr;
        if (natsSubscription_NextMsg(&m, sub_, 5000) != NATS_OK) return false; // no answer in the request time
        const int len = natsMsg_GetDataLength(m);
        const std::string a(natsMsg_GetData(m) ? natsMsg_GetData(m) : "", len > 0 ? static_cast<size_t>(len) : 0);
        natsMsg_Destroy(m);
        if (a.find("\"io.nats.jetstream.api.v1.consumer_create_response\"") != std::string::npos)
            made = a.find("\"error\"") == std::string::npos && a.find(start) != std::string::npos;
    }
    durable_sent_ = false;
    return made;
}

} // namespace kvreg::nats
