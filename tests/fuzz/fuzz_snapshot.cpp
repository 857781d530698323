// libFuzzer target for a NATS replica's snapshot body read in pieces (src/nats/snapshot.cpp,
// SnapshotLoader), as a restore gets it from the object store: the bytes are whatever was
// written to the bucket. Byte 0: bit 0 the index's hashes (set: OWN, else ENGINE); bit 1
// reseals the position's checksum and bit 2 the dump's (when the position parses far enough
// to say where they are), so the fuzzer explores past them; bits 3-7 the piece size (1 + 97 x
// value: a chunk may end anywhere). The body follows. The object info's stream sequence is
// taken from the body itself, so inputs get past that check. Properties: no crash, no leak;
// a rejected body leaves the index empty, its status and reason set; an accepted one gives as
// many positions as its position table says and an index whose digest can be taken;
// self_checked() only for a version 2 body whose position checksum matches (recomputed
// here), and refused_self_checked() (a restore stops reading there) only for such a body that
// is then refused. Internal: links the static library.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/hash.hpp"
#include "kvreg_index.h"
#include "nats/snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

#define MUST(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "fuzz_snapshot: %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)

uint64_t get(const std::string &b, size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | static_cast<uint8_t>(b[at + static_cast<size_t>(i)]);
    return v;
}

void put64(std::string &b, size_t at, uint64_t v) {
    for (size_t i = 0; i < 8; i++) b[at + i] = static_cast<char>(v >> (8 * i));
}

uint64_t stat(const kvreg_index *idx, uint32_t which) {
    uint64_t v = 0;
    MUST(kvreg_index_stat(idx, which, &v) == KVREG_OK);
    return v;
}

// The position's length as the body's own fields give it (0: they do not add up).
size_t head_len(const std::string &b) {
    if (b.size() < 32 || std::memcmp(b.data(), kvreg::nats::kSnapMagic, 8) != 0) return 0;
    const uint64_t version = get(b, 8, 4), n = get(b, 24, 8);
    if (version != 1 && version != 2) return 0;
    const uint64_t tail = version == 2 ? 16 : 8;
    if (n > (b.size() - 32) / 32) return 0;
    const uint64_t len = 32 + 32 * n + tail;
    return len <= b.size() ? static_cast<size_t>(len) : 0;
}

} // namespace

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    std::string body(reinterpret_cast<const char *>(data + 1), size - 1);
    const size_t head = head_len(body);
    const bool v2 = head && get(body, 8, 4) == 2;
    if ((data[0] & 2) && v2) put64(body, head - 8, kvreg::checksum64(body.data(), head - 8));
    if ((data[0] & 4) && head && body.size() >= head + 8)
        put64(body, body.size() - 8, kvreg::checksum64(body.data() + head, body.size() - head - 8));
    const bool head_sum_ok = v2 && get(body, head - 8, 8) == kvreg::checksum64(body.data(), head - 8);
    const size_t piece = 1 + 97 * static_cast<size_t>(data[0] >> 3);
    const uint64_t seq = body.size() >= 24 ? get(body, 16, 8) : 0;

    kvreg_index_config *cfg = nullptr;
    MUST(kvreg_index_config_new(&cfg) == KVREG_OK);
    if (data[0] & 1) MUST(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN) == KVREG_OK);
    kvreg_index *idx = nullptr;
    MUST(kvreg_index_new(&idx, cfg) == KVREG_OK);
    kvreg_index_config_free(cfg);
    {
        kvreg::nats::SnapshotLoader ld(idx, body.size(), seq);
        bool fed = true;
        for (size_t at = 0; at < body.size() && fed; at += piece)
            fed = ld.feed(body.data() + at, std::min(piece, body.size() - at));
        MUST(!ld.self_checked() || head_sum_ok); // never without a matching position checksum
        kvreg::nats::SnapPosition pos;
        const bool refused_early = ld.refused_self_checked();
        const int rc = ld.finish(pos);
        MUST(!refused_early || (ld.self_checked() && rc != KVREG_OK)); // a restore stops reading there
        if (rc == KVREG_OK) {
            MUST(fed);
            MUST(head != 0 && pos.workers.size() == get(body, 24, 8));
            MUST(pos.stream_seq == seq);
            uint64_t d = 0;
            MUST(kvreg_index_digest(idx, &d) == KVREG_OK);
        } else {
            MUST(rc == KVREG_EPROTO || rc == KVREG_EINVAL || rc == KVREG_ENOTSUP || rc == KVREG_ENOMEM ||
                 rc == KVREG_EOVERFLOW);
            MUST(!ld.why().empty());
            MUST(stat(idx, KVREG_INDEX_STAT_WORKERS) == 0);
            MUST(stat(idx, KVREG_INDEX_STAT_ENTRIES) == 0);
        }
    }
    kvreg_index_free(idx);
    return 0;
}
