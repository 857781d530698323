// Endpoint rules shared by the publisher and the subscriber: vLLM's bind-or-connect choice and
// its per-data-parallel-rank endpoint, plus copying a string out through the C API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvreg::net {

// vLLM binds when the endpoint has a wildcard host ("*", "::") or is local (ipc, inproc), and
// connects otherwise: an engine with "tcp://router:5557" dials a router that bound.
bool endpoint_binds(std::string_view endpoint) noexcept;

// vLLM's offset_endpoint_port: tcp port + rank, "<endpoint>_dp<rank>" for ipc and inproc,
// unchanged for rank 0 and for a tcp port that is not a number. false: the port would pass
// 65535. Throws std::bad_alloc.
bool offset_endpoint(std::string_view endpoint, uint32_t rank, std::string &out);

// C-API string output: NUL-terminated into buf[0..cap), *len = length. KVREG_ERANGE (nothing
// written) when it does not fit.
int copy_out(const std::string &s, char *buf, size_t cap, size_t *len) noexcept;

// llm-d's parseTopic: "kv@<pod>@<model>" has exactly three '@'-parts; else pod = topic.
void parse_topic(std::string_view topic, std::string &pod, std::string &model);

} // namespace kvreg::net
