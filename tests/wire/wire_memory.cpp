// The decoders' memory is bounded by their input (issue 36): for hostile and for valid payloads
// the peak of the bytes the library holds while decoding stays under the documented bound,
// KVREG_WIRE_DECODE_MEMORY_FACTOR bytes per input byte plus a constant (kvreg_wire.h).
//
// Counts live bytes through a replaced global operator new / delete (each block carries its
// size in a header), so it links the static internal library: the shared one would keep its
// own allocations out of reach. Single-threaded: plain counters.
//
// Usage: kvreg-wire-memory            the test (inputs of 256 KiB)
//        kvreg-wire-memory BYTES      print the peak for each input of BYTES bytes (measuring)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <kvreg_wire.h>

// Built once against 0.4's header too, to show the bug this test was written for.
#ifndef KVREG_WIRE_DEC_OPT_MAX_PAYLOAD
#define KVREG_WIRE_DECODE_MEMORY_FACTOR 32u
#define KVREG_WIRE_DECODE_MEMORY_BASE (64u * 1024u)
#define KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS 65536u
#define kvreg_wire_decoder_set(dec, opt, value) ((void)(dec), (void)(value), KVREG_OK)
#endif

// Every operator new below returns malloc memory, so free() is the matching release; GCC cannot
// see that through the replacement and warns about the pairing.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
size_t g_live = 0, g_peak = 0;
constexpr size_t kHeader = alignof(std::max_align_t);

void *counted_alloc(size_t n) noexcept
{
    auto *p = static_cast<unsigned char *>(std::malloc(n + kHeader));
    if (!p)
        return nullptr;
    std::memcpy(p, &n, sizeof n);
    g_live += n;
    if (g_live > g_peak)
        g_peak = g_live;
    return p + kHeader;
}
void counted_free(void *q) noexcept
{
    if (!q)
        return;
    auto *p = static_cast<unsigned char *>(q) - kHeader;
    size_t n;
    std::memcpy(&n, p, sizeof n);
    g_live -= n;
    std::free(p);
}
} // namespace

void *operator new(size_t n)
{
    if (void *p = counted_alloc(n))
        return p;
    throw std::bad_alloc();
}
void *operator new[](size_t n)
{
    if (void *p = counted_alloc(n))
        return p;
    throw std::bad_alloc();
}
void *operator new(size_t n, const std::nothrow_t &) noexcept { return counted_alloc(n); }
void *operator new[](size_t n, const std::nothrow_t &) noexcept { return counted_alloc(n); }
void operator delete(void *p) noexcept { counted_free(p); }
void operator delete[](void *p) noexcept { counted_free(p); }
void operator delete(void *p, size_t) noexcept { counted_free(p); }
void operator delete[](void *p, size_t) noexcept { counted_free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { counted_free(p); }

namespace {

int g_failures = 0;

// Bytes the library held at its peak while a fresh decoder of `format` decoded `in` (the
// decoder's own allocation included). *rc gets the status.
size_t peak_of(uint32_t format, const std::vector<uint8_t> &in, int *rc)
{
    const size_t base = g_live;
    g_peak = base;
    kvreg_wire_decoder *dec = nullptr;
    if (kvreg_wire_decoder_new(&dec, format) != KVREG_OK) {
        std::fprintf(stderr, "decoder_new failed\n");
        std::exit(1);
    }
    // the largest payload the tests use is allowed (the default limit may be lower)
    kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, in.size() + 16);
    const kvreg_wire_event *ev;
    size_t n, off = 0;
    *rc = kvreg_wire_decode(dec, in.data(), in.size(), &ev, &n, &off);
    kvreg_wire_decoder_free(dec);
    return g_peak - base;
}

void be32(std::vector<uint8_t> &v, uint32_t x)
{
    for (int s = 24; s >= 0; s -= 8)
        v.push_back(static_cast<uint8_t>(x >> s));
}
void mp_str(std::vector<uint8_t> &v, const char *s)
{
    size_t n = std::strlen(s);
    v.push_back(static_cast<uint8_t>(0xa0 | n)); // the names used here are < 32 bytes
    v.insert(v.end(), s, s + n);
}

// msgpack: nested array32 headers, each claiming as many elements as bytes remain after it,
// then zero bytes: the input that made the tree parser reserve bookkeeping per level.
std::vector<uint8_t> nested_msgpack_headers(size_t size, unsigned levels)
{
    std::vector<uint8_t> v;
    for (unsigned k = 0; k < levels; k++) {
        v.push_back(0xdd);
        be32(v, static_cast<uint32_t>(size - v.size() - 4));
    }
    v.resize(size, 0x00);
    return v;
}

// JSON: levels of '[' then "0,0,0,..." (a syntax error at the end: never closed).
std::vector<uint8_t> nested_json(size_t size, unsigned levels)
{
    std::vector<uint8_t> v(levels, '[');
    while (v.size() + 2 <= size)
        v.push_back('0'), v.push_back(',');
    v.push_back('0');
    return v;
}

// A valid Dynamo msgpack RouterEvent: removed with as many fixint hashes as fit.
std::vector<uint8_t> dynamo_removed_msgpack(size_t size)
{
    std::vector<uint8_t> v;
    v.push_back(0x81), mp_str(v, "event");
    v.push_back(0x81), mp_str(v, "data");
    v.push_back(0x81), mp_str(v, "removed");
    v.push_back(0x81), mp_str(v, "block_hashes");
    v.push_back(0xdd);
    size_t n = size - v.size() - 4;
    be32(v, static_cast<uint32_t>(n));
    v.resize(v.size() + n, 0x01);
    return v;
}

// The same as JSON: {"event":{"data":{"removed":{"block_hashes":[1,1,...]}}}}.
std::vector<uint8_t> dynamo_removed_json(size_t size)
{
    std::string s = "{\"event\":{\"data\":{\"removed\":{\"block_hashes\":[1";
    while (s.size() + 2 + 6 <= size)
        s += ",1";
    s += "]}}}}";
    return std::vector<uint8_t>(s.begin(), s.end());
}

// A valid Dynamo JSON array of the smallest RouterEvents: {"event":{"data":"cleared"}}.
std::vector<uint8_t> dynamo_many_events_json(size_t size)
{
    const std::string one = "{\"event\":{\"data\":\"cleared\"}}";
    std::string s = "[" + one;
    while (s.size() + 1 + one.size() + 1 <= size)
        s += "," + one;
    s += "]";
    return std::vector<uint8_t>(s.begin(), s.end());
}

// The same in msgpack (21 bytes each), as many as the event limit allows.
std::vector<uint8_t> dynamo_many_events_msgpack(size_t size)
{
    std::vector<uint8_t> ev;
    ev.push_back(0x81), mp_str(ev, "event"), ev.push_back(0x81), mp_str(ev, "data");
    mp_str(ev, "cleared");
    size_t n = (size - 5) / ev.size();
    if (n > KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS)
        n = KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS;
    std::vector<uint8_t> v;
    v.push_back(0xdd);
    be32(v, static_cast<uint32_t>(n));
    for (size_t k = 0; k < n; k++)
        v.insert(v.end(), ev.begin(), ev.end());
    return v;
}

// Dynamo msgpack removed events with one hash each, as many as the event limit allows (the
// hash buffers grow across events: no reallocation per event, no doubling past the bound).
std::vector<uint8_t> dynamo_many_removed_msgpack(size_t size)
{
    std::vector<uint8_t> ev;
    ev.push_back(0x81), mp_str(ev, "event"), ev.push_back(0x81), mp_str(ev, "data");
    ev.push_back(0x81), mp_str(ev, "removed"), ev.push_back(0x81), mp_str(ev, "block_hashes");
    ev.push_back(0x91), ev.push_back(0x07);
    size_t n = (size - 5) / ev.size();
    if (n > KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS)
        n = KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS;
    std::vector<uint8_t> v;
    v.push_back(0xdd);
    be32(v, static_cast<uint32_t>(n));
    for (size_t k = 0; k < n; k++)
        v.insert(v.end(), ev.begin(), ev.end());
    return v;
}

// A valid vLLM batch of the smallest stored events: ["BlockStored", [1]] (14 bytes each), as
// many as the event limit allows (the default limit bounds their count).
std::vector<uint8_t> vllm_many_events(size_t size)
{
    std::vector<uint8_t> ev;
    ev.push_back(0x92), mp_str(ev, "BlockStored"), ev.push_back(0x91), ev.push_back(0x01);
    size_t n = (size - 16) / ev.size();
    if (n > KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS)
        n = KVREG_WIRE_DEC_DEFAULT_MAX_EVENTS;
    std::vector<uint8_t> v;
    v.push_back(0x93), v.push_back(0x00), v.push_back(0xdd);
    be32(v, static_cast<uint32_t>(n));
    for (size_t k = 0; k < n; k++)
        v.insert(v.end(), ev.begin(), ev.end());
    v.push_back(0x00);
    return v;
}

// A valid vLLM batch: one stored event whose block_hashes are fixints filling the payload.
std::vector<uint8_t> vllm_many_hashes(size_t size)
{
    std::vector<uint8_t> v;
    v.push_back(0x93), v.push_back(0x00), v.push_back(0x91);
    v.push_back(0x92), mp_str(v, "BlockStored");
    v.push_back(0xdd);
    size_t n = size - v.size() - 4 - 1;
    be32(v, static_cast<uint32_t>(n));
    v.resize(v.size() + n, 0x01);
    v.push_back(0x00);
    return v;
}

struct Case {
    const char *name;
    uint32_t format;
    std::vector<uint8_t> (*make)(size_t);
    int want_rc;
};

std::vector<uint8_t> nested_mp(size_t s) { return nested_msgpack_headers(s, 31); }
std::vector<uint8_t> nested_js(size_t s) { return nested_json(s, 31); }

const Case kCases[] = {
    {"nested msgpack headers (Dynamo)", KVREG_WIRE_DYNAMO_MSGPACK, nested_mp, KVREG_EPROTO},
    {"nested msgpack headers (vLLM)", KVREG_WIRE_VLLM, nested_mp, KVREG_EPROTO},
    {"nested JSON arrays (Dynamo)", KVREG_WIRE_DYNAMO_JSON, nested_js, KVREG_EPROTO},
    {"Dynamo removed, fixint hashes (msgpack)", KVREG_WIRE_DYNAMO_MSGPACK, dynamo_removed_msgpack,
     KVREG_OK},
    {"Dynamo removed, 1-digit hashes (JSON)", KVREG_WIRE_DYNAMO_JSON, dynamo_removed_json,
     KVREG_OK},
    {"Dynamo smallest events (JSON)", KVREG_WIRE_DYNAMO_JSON, dynamo_many_events_json, KVREG_OK},
    {"Dynamo smallest events (msgpack)", KVREG_WIRE_DYNAMO_MSGPACK, dynamo_many_events_msgpack,
     KVREG_OK},
    {"Dynamo removed events, one hash each", KVREG_WIRE_DYNAMO_MSGPACK,
     dynamo_many_removed_msgpack, KVREG_OK},
    {"vLLM smallest stored events", KVREG_WIRE_VLLM, vllm_many_events, KVREG_OK},
    {"vLLM fixint hashes", KVREG_WIRE_VLLM, vllm_many_hashes, KVREG_OK},
};

} // namespace

int main(int argc, char **argv)
{
    // valgrind substitutes its own operator new for the one above but not every delete, so
    // the counts (and the frees) would be wrong: memcheck of the decoders is the other wire
    // tests' job under valgrind.
    const char *preload = std::getenv("LD_PRELOAD");
    if (preload && std::strstr(preload, "vgpreload")) {
        std::printf("SKIP: under valgrind, whose operator new replaces the counting one\n");
        return 77;
    }
    const bool measure = argc > 1;
    const size_t size = measure ? std::strtoull(argv[1], nullptr, 10) : 256 * 1024;
    for (const Case &c : kCases) {
        std::vector<uint8_t> in = c.make(size);
        int rc;
        size_t peak = peak_of(c.format, in, &rc);
        const size_t bound = KVREG_WIRE_DECODE_MEMORY_FACTOR * in.size() + KVREG_WIRE_DECODE_MEMORY_BASE;
        std::printf("%-42s %9zu bytes in: peak %11zu bytes (%.1f per input byte), rc %d%s\n",
                    c.name, in.size(), peak, static_cast<double>(peak) / in.size(), rc,
                    peak > bound ? "  OVER THE BOUND" : "");
        if (measure)
            continue;
        if (peak > bound) {
            std::fprintf(stderr, "FAIL %s: peak %zu > bound %zu\n", c.name, peak, bound);
            g_failures++;
        }
        if (rc != c.want_rc) {
            std::fprintf(stderr, "FAIL %s: status %d, want %d\n", c.name, rc, c.want_rc);
            g_failures++;
        }
    }
    return g_failures ? 1 : 0;
}
