// The replica's durable consumer, made (again) by requests whose answers are awaited only when
// needed (see consumer.hpp, DurableState): a restore sends the old durable's deletion with the
// snapshot's first chunk and the creation with its last, so that the server does both while
// the replica loads; start() then finds them answered (make_durable).
#include "nats/consumer.hpp"

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

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

namespace {
// A creation's answer that names no error (api_ok) and carries start (the "opt_start_seq" or
// "deliver_policy" member sent).
bool created(const std::string &a, const std::string &start) {
    if (!api_ok(a, "consumer_create_response")) return false;
    const size_t at = a.find(start);
    const char after = at == std::string::npos || at + start.size() >= a.size() ? '\0' : a[at + start.size()];
    return after == ',' || after == '}';
}
} // namespace

std::string Consumer::durable_subject(DurableStep step) const {
    return std::string("$JS.API.CONSUMER.") + (step == DurableStep::kCreate ? "DURABLE.CREATE." : "DELETE.") + stream_ +
           "." + durable_;
}

std::string Consumer::durable_start() const {
    return durable_seq_ ? "\"opt_start_seq\":" + std::to_string(durable_seq_) : std::string("\"deliver_policy\":\"all\"");
}

bool Consumer::send_durable(DurableStep step, uint64_t start_seq) {
    const std::string subject = durable_subject(step);
    const std::string req = step == DurableStep::kCreate ? durable_request(start_seq) : std::string();
    if (natsConnection_PublishRequest(conn_.nc, subject.c_str(), inbox_.c_str(), req.data(),
                                      static_cast<int>(req.size())) != NATS_OK)
        return false;
    durable_answers_++;
    durable_state_ = step == DurableStep::kCreate ? DurableState::kCreating : DurableState::kDeleting;
    durable_seq_ = start_seq;
    return true;
}

bool Consumer::await_durable() {
    // Every answer outstanding, in the order sent; the state follows the last request. A
    // deletion always counts as done (a durable that was not there is gone too).
    const std::string start = durable_start();
    bool made = false;
    for (; durable_answers_ > 0; durable_answers_--) {
        natsMsg *m = nullptr;
        if (natsSubscription_NextMsg(&m, sub_, 5000) != NATS_OK) return false; // no answer, or no JetStream
        const OwnedMsg own = own_msg(m);
        const std::string a = msg_text(m);
        made = created(a, start);
    }
    if (durable_state_ == DurableState::kDeleting) durable_state_ = DurableState::kDeleted;
    if (durable_state_ == DurableState::kCreating) durable_state_ = made ? DurableState::kMade : DurableState::kNone;
    return true;
}

bool Consumer::request_durable(DurableStep step, uint64_t start_seq) {
    // natsConnection_Request writes the request at once (a publish waits for libnats' flusher
    // thread, up to 1 ms) and takes its answer on libnats' own inbox.
    const std::string subject = durable_subject(step);
    const std::string req = step == DurableStep::kCreate ? durable_request(start_seq) : std::string();
    natsMsg *m = nullptr;
    if (natsConnection_Request(&m, conn_.nc, subject.c_str(), req.data(), static_cast<int>(req.size()), 5000) != NATS_OK)
        return false;
    const OwnedMsg own = own_msg(m);
    const std::string a = msg_text(m);
    durable_seq_ = start_seq;
    durable_state_ = step == DurableStep::kDelete ? DurableState::kDeleted
                     : created(a, durable_start())  ? DurableState::kMade
                                                    : DurableState::kNone;
    return true;
}

bool Consumer::make_durable(uint64_t start_seq) {
    // What is outstanding is answered first. Then, unless the durable is already made from
    // start_seq: the old one deleted (unless resuming, or deleted already), then the new one
    // created, each request answered before the next goes: one server answers a client's
    // requests in order, but a cluster may apply a deletion after a creation sent behind it.
    if (durable_answers_ > 0 && !await_durable()) return false;
    if (durable_state_ == DurableState::kMade && durable_seq_ == start_seq) return true;
    if (!resume_ && durable_state_ != DurableState::kDeleted && !request_durable(DurableStep::kDelete, 0)) return false;
    return request_durable(DurableStep::kCreate, start_seq) && durable_state_ == DurableState::kMade;
}

} // namespace kvreg::nats
