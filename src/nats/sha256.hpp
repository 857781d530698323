// SHA-256 (FIPS 180-4), for the object store's digest of a snapshot: the NATS object store
// names an object's content by "SHA-256=<base64url>", and any client checks it on reading.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvreg::nats {

class Sha256 {
  public:
    Sha256() noexcept;
    void update(const void *data, size_t len) noexcept;
    std::array<uint8_t, 32> finish() noexcept; // once; the object is spent after

  private:
    void block(const uint8_t *p) noexcept;
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t used_ = 0;
    uint64_t total_ = 0;
};

} // namespace kvreg::nats
