// The snapshot body (see snapshot.hpp). Little-endian, fixed width:
//   "KVRGNSNP" u32 version u32 0  u64 stream_seq  u64 n_workers
//   n_workers x { u64 worker_id  u32 dp_rank  u32 0  u64 instance  u64 next_seq }
//   u64 dump_len  dump_len bytes of kvreg_index_dump
#include "nats/snapshot.hpp"

#include <cstring>

namespace kvreg::nats {

namespace {
void put64(std::string &s, uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (8 * i));
    s.append(b, 8);
}
void put32(std::string &s, uint32_t v) {
    char b[4];
    for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (8 * i));
    s.append(b, 4);
}
struct Reader {
    const std::string &s;
    size_t at = 0;
    bool ok = true;
    uint64_t get(int bytes) {
        if (!ok || s.size() - at < static_cast<size_t>(bytes)) {
            ok = false;
            return 0;
        }
        uint64_t v = 0;
        for (int i = 0; i < bytes; i++) v |= uint64_t(static_cast<uint8_t>(s[at + static_cast<size_t>(i)])) << (8 * i);
        at += static_cast<size_t>(bytes);
        return v;
    }
};

int append_chunk(const void *data, size_t len, void *ctx) {
    try {
        static_cast<std::string *>(ctx)->append(static_cast<const char *>(data), len);
        return 0;
    } catch (...) {
        return 1;
    }
}
} // namespace

int encode_snapshot(const SnapPosition &pos, const kvreg_index *idx, std::string &out) {
    out.assign(kSnapMagic, sizeof kSnapMagic);
    put32(out, kSnapVersion);
    put32(out, 0);
    put64(out, pos.stream_seq);
    put64(out, pos.workers.size());
    for (const auto &w : pos.workers) {
        put64(out, w.worker);
        put32(out, w.rank);
        put32(out, 0);
        put64(out, w.instance);
        put64(out, w.next);
    }
    const size_t len_at = out.size();
    put64(out, 0);
    const int rc = kvreg_index_dump(idx, append_chunk, &out);
    if (rc != KVREG_OK) return rc;
    const uint64_t n = out.size() - len_at - 8;
    for (int i = 0; i < 8; i++) out[len_at + static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
    return KVREG_OK;
}

int decode_snapshot(const std::string &body, uint64_t expect_seq, kvreg_index *idx, SnapPosition &pos,
                    std::string &why) {
    if (body.size() < 16 || std::memcmp(body.data(), kSnapMagic, sizeof kSnapMagic) != 0) {
        why = "not a kvreg snapshot (magic)";
        return KVREG_EPROTO;
    }
    Reader r{body, 8};
    const uint64_t version = r.get(4);
    r.get(4);
    if (version != kSnapVersion) {
        why = "snapshot version " + std::to_string(version) + " is not 1";
        return KVREG_EPROTO;
    }
    pos = SnapPosition{};
    pos.stream_seq = r.get(8);
    if (r.ok && pos.stream_seq != expect_seq) {
        why = "body and object info name different stream sequences";
        return KVREG_EPROTO;
    }
    const uint64_t n = r.get(8);
    if (!r.ok || n > (body.size() - r.at) / 32) {
        why = "snapshot's worker table is truncated";
        return KVREG_EPROTO;
    }
    pos.workers.resize(n);
    for (auto &w : pos.workers) {
        w.worker = r.get(8);
        w.rank = static_cast<uint32_t>(r.get(4));
        r.get(4);
        w.instance = r.get(8);
        w.next = r.get(8);
    }
    const uint64_t dump_len = r.get(8);
    if (!r.ok || dump_len != body.size() - r.at) {
        why = "snapshot's index dump is truncated";
        return KVREG_EPROTO;
    }
    const int rc = kvreg_index_load(idx, body.data() + r.at, dump_len);
    if (rc != KVREG_OK) {
        why = std::string("the index dump does not load: ") + kvreg_strerror(rc);
        return rc;
    }
    return KVREG_OK;
}

} // namespace kvreg::nats
