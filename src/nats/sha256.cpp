// SHA-256 as FIPS 180-4 specifies it (see sha256.hpp for why it is here).
#include "nats/sha256.hpp"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define KVREG_SHA_NI 1
#endif

namespace kvreg::nats {

namespace {
constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

#ifdef KVREG_SHA_NI
// Whether the CPU has the SHA extensions (CPUID leaf 7: EBX bit 29) and SSSE3 / SSE4.1 (leaf
// 1: ECX bits 9 and 19), which the rounds below use besides.
bool cpu_has_sha() noexcept {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b & (1u << 29)) != 0;
}

// n blocks with the SHA extensions. They keep the state as two vectors, ABEF and CDGH (word 3
// first), and run two rounds per sha256rnds2 with the message words plus constants in the low
// half of its third operand; sha256msg1 / msg2 compute the message schedule four words at a
// time: w[t] = msg2(msg1(w[t-16..t-13], w[t-12]) + w[t-7..t-4], w[t-2..t-1]).
__attribute__((target("sha,sse4.1"))) void blocks_ni(uint32_t h[8], const uint8_t *p, size_t n) noexcept {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(h));           // a b c d
    __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + 4));      // e f g h
    t = _mm_shuffle_epi32(t, 0xB1);                                               // b a d c
    s1 = _mm_shuffle_epi32(s1, 0x1B);                                             // h g f e
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                       // f e b a: ABEF
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                            // h g d c: CDGH
    for (; n; n--, p += 64) {
        const __m128i abef = s0, cdgh = s1;
        __m128i w[4];
        for (int i = 0; i < 4; i++)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16 * i)), bswap);
        for (int g = 0; g < 16; g++) { // 4 rounds a group; w[g % 4] holds words 4g .. 4g+3
            if (g >= 4) {
                // words 4g.. from w[g-4] (now in w[g % 4]), w[g-3], w[g-2] and w[g-1]
                __m128i x = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
                w[g % 4] = _mm_sha256msg2_epu32(x, w[(g + 3) % 4]);
            }
            __m128i m = _mm_add_epi32(w[g % 4], _mm_loadu_si128(reinterpret_cast<const __m128i *>(kK + 4 * g)));
            s1 = _mm_sha256rnds2_epu32(s1, s0, m);
            m = _mm_shuffle_epi32(m, 0x0E);
            s0 = _mm_sha256rnds2_epu32(s0, s1, m);
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);                                              // a b e f
    s1 = _mm_shuffle_epi32(s1, 0xB1);                                             // g h c d
    s0 = _mm_blend_epi16(t, s1, 0xF0);                                            // a b c d
    s1 = _mm_alignr_epi8(s1, t, 8);                                               // e f g h
    _mm_storeu_si128(reinterpret_cast<__m128i *>(h), s0);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(h + 4), s1);
}
#endif
} // namespace

Sha256::Sha256(bool cpu) noexcept
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19},
#ifdef KVREG_SHA_NI
      ni_(cpu && cpu_has_sha()) {
}
#else
      ni_(false) {
    (void)cpu;
}
#endif

void Sha256::blocks(const uint8_t *p, size_t n) noexcept {
#ifdef KVREG_SHA_NI
    if (ni_) {
        blocks_ni(h_, p, n);
        return;
    }
#endif
    for (; n; n--, p += 64) block(p);
}

void Sha256::block(const uint8_t *p) noexcept {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
        const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
}

void Sha256::update(const void *data, size_t len) noexcept {
    const auto *p = static_cast<const uint8_t *>(data);
    total_ += len;
    if (used_) {
        const size_t take = len < 64 - used_ ? len : 64 - used_;
        std::memcpy(buf_ + used_, p, take);
        used_ += take, p += take, len -= take;
        if (used_ < 64) return;
        blocks(buf_, 1);
        used_ = 0;
    }
    blocks(p, len / 64);
    p += len / 64 * 64;
    len %= 64;
    std::memcpy(buf_, p, len);
    used_ = len;
}

std::array<uint8_t, 32> Sha256::finish() noexcept {
    const uint64_t bits = total_ * 8;
    buf_[used_++] = 0x80;
    if (used_ > 56) {
        std::memset(buf_ + used_, 0, 64 - used_);
        blocks(buf_, 1);
        used_ = 0;
    }
    std::memset(buf_ + used_, 0, 56 - used_);
    for (int i = 0; i < 8; i++) buf_[56 + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    blocks(buf_, 1);
    std::array<uint8_t, 32> out;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
    return out;
}

} // namespace kvreg::nats
