// The snapshot body (see snapshot.hpp). Little-endian, fixed width:
//   "KVRGNSNP" u32 version u32 0  u64 stream_seq  u64 n_workers
//   n_workers x { u64 worker_id  u32 dp_rank  u32 0  u64 instance  u64 next_seq }
//   u64 dump_len  [version 2: u64 XXH3-64 of every byte before it]  dump_len bytes of
//   kvreg_index_dump
#include "nats/snapshot.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "core/hash.hpp"
#include "index/handle.hpp"

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
    put64(out, 0); // the dump's length, and the position's checksum: known after the dump
    put64(out, 0);
    const int rc = kvreg_index_dump(idx, append_chunk, &out);
    if (rc != KVREG_OK) return rc;
    const uint64_t n = out.size() - len_at - 16;
    for (int i = 0; i < 8; i++) out[len_at + static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
    const uint64_t sum = kvreg::checksum64(out.data(), len_at + 8);
    for (int i = 0; i < 8; i++) out[len_at + 8 + static_cast<size_t>(i)] = static_cast<char>(sum >> (8 * i));
    return KVREG_OK;
}

SnapshotLoader::SnapshotLoader(kvreg_index *idx, uint64_t size, uint64_t expect_seq)
    : idx_(idx->impl), size_(size), expect_seq_(expect_seq) {}

bool SnapshotLoader::reject(int rc, std::string why) noexcept {
    rc_ = rc;
    why_.swap(why);
    abandon();
    return false;
}

void SnapshotLoader::abandon() noexcept {
    if (loader_) loader_->abandon();
}

bool SnapshotLoader::feed(const char *data, size_t len) noexcept {
    try {
        return take(data, len);
    } catch (const std::bad_alloc &) {
        return reject(KVREG_ENOMEM, "out of memory");
    }
}

bool SnapshotLoader::take(const char *data, size_t len) {
    if (rc_ != KVREG_OK) return false;
    if (size_ < 40) return reject(KVREG_EPROTO, "not a kvreg snapshot (shorter than its position)");
    if (!loader_) {
        // The position: 32 bytes, then 32 per worker (the count is in the first 32), then the
        // dump's length. Kept until it is whole (a chunk may end anywhere in it).
        constexpr size_t kFixed = 32;
        const size_t want = head_len_ ? static_cast<size_t>(head_len_) : kFixed;
        const size_t k = std::min(len, want - head_.size());
        head_.append(data, k);
        data += k;
        len -= k;
        if (head_.size() < want) return true;
        if (!head_len_) {
            if (std::memcmp(head_.data(), kSnapMagic, sizeof kSnapMagic) != 0)
                return reject(KVREG_EPROTO, "not a kvreg snapshot (magic)");
            Reader v{head_, 8};
            version_ = static_cast<uint32_t>(v.get(4));
            if (version_ != kSnapVersion && version_ != kSnapVersionNoHeadSum)
                return reject(KVREG_EPROTO, "snapshot version " + std::to_string(version_) + " is not 1 or 2");
            const size_t tail = version_ == kSnapVersion ? 16 : 8; // dump length [, checksum]
            if (size_ < kFixed + tail) return reject(KVREG_EPROTO, "not a kvreg snapshot (shorter than its position)");
            Reader r{head_, 24};
            const uint64_t n = r.get(8);
            if (n > (size_ - kFixed - tail) / 32) return reject(KVREG_EPROTO, "snapshot's worker table is truncated");
            head_len_ = kFixed + 32 * n + tail;
            return take(data, len); // the rest of the position
        }
        if (!parse_head()) return false;
    }
    if (len == 0) return true;
    const int rc = loader_->feed(reinterpret_cast<const unsigned char *>(data), len);
    return rc == KVREG_OK || reject(rc, std::string("the index dump does not load: ") + kvreg_strerror(rc));
}

bool SnapshotLoader::parse_head() {
    Reader r{head_, 16};
    if (version_ == kSnapVersion) {
        Reader sum{head_, static_cast<size_t>(head_len_) - 8};
        if (sum.get(8) != kvreg::checksum64(head_.data(), static_cast<size_t>(head_len_) - 8))
            return reject(KVREG_EPROTO, "snapshot's position does not match its checksum");
    }
    pos_.stream_seq = r.get(8);
    if (pos_.stream_seq != expect_seq_)
        return reject(KVREG_EPROTO, "body and object info name different stream sequences");
    pos_.workers.resize(r.get(8));
    for (auto &w : pos_.workers) {
        w.worker = r.get(8);
        w.rank = static_cast<uint32_t>(r.get(4));
        r.get(4);
        w.instance = r.get(8);
        w.next = r.get(8);
    }
    const uint64_t dump_len = r.get(8);
    if (dump_len != size_ - head_len_) return reject(KVREG_EPROTO, "snapshot's index dump is truncated");
    loader_ = std::make_unique<kvreg::index::Index::Loader>(idx_, dump_len); // checks the dump's checksum
    return true;
}

int SnapshotLoader::finish(SnapPosition &pos) {
    if (rc_ != KVREG_OK) return rc_;
    if (!loader_) {
        reject(KVREG_EPROTO, "snapshot's worker table is truncated");
        return rc_;
    }
    if (const int rc = loader_->finish(); rc != KVREG_OK) {
        reject(rc, std::string("the index dump does not load: ") + kvreg_strerror(rc));
        return rc_;
    }
    pos.stream_seq = pos_.stream_seq;
    pos.workers.swap(pos_.workers);
    return KVREG_OK;
}

} // namespace kvreg::nats
