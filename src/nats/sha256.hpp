// SHA-256 (FIPS 180-4), for the object store's digest of a snapshot: the NATS object store
// names an object's content by "SHA-256=<base64url>", and any client checks it on reading.
// On x86-64 CPUs with the SHA extensions the blocks go through them (about 6x the portable
// rounds: a restore hashes the whole snapshot, 11 ms of a 40 ms restore for 3 MB before).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvreg::nats {

class Sha256 {
  public:
    // cpu false: the portable rounds even where the CPU has SHA extensions (tests compare).
    explicit Sha256(bool cpu = true) noexcept;
    bool accelerated() const noexcept { return ni_; }
    void update(const void *data, size_t len) noexcept;
    std::array<uint8_t, 32> finish() noexcept; // once; the object is spent after

  private:
    void blocks(const uint8_t *p, size_t n) noexcept; // n 64-byte blocks
    void block(const uint8_t *p) noexcept;            // the portable rounds, one block
    uint32_t h_[8];
    bool ni_;                                         // the CPU's SHA extensions (x86-64)
    uint8_t buf_[64];
    size_t used_ = 0;
    uint64_t total_ = 0;
};

} // namespace kvreg::nats
