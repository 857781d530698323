// The object store's digest (src/nats/sha256.cpp, objstore.cpp): SHA-256 against the FIPS 180-2
// example vectors and base64url against hand-worked RFC 4648 examples. Internal: links the
// static library.
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>

#include "nats/objstore.hpp"
#include "nats/sha256.hpp"

static int failures = 0;

static void check(const char *what, const std::string &got, const char *want) {
    if (got != want) {
        std::fprintf(stderr, "%s: got %s, want %s\n", what, got.c_str(), want);
        failures++;
    }
}

static std::string hex(const std::string &data, size_t split, bool cpu = true) {
    kvreg::nats::Sha256 h(cpu);
    // Fed in two parts, so the buffering across update() calls is exercised too.
    split = split > data.size() ? data.size() : split;
    h.update(data.data(), split);
    h.update(data.data() + split, data.size() - split);
    const auto d = h.finish();
    std::string out;
    char b[3];
    for (uint8_t c : d) {
        std::snprintf(b, sizeof b, "%02x", c);
        out += b;
    }
    return out;
}

int main() {
    const std::string abc = "abc", two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    const std::string million(1000000, 'a');
    // Both the CPU's SHA extensions (where it has them) and the portable rounds.
    for (bool cpu : {true, false})
        for (size_t split : {0u, 1u, 63u, 64u, 65u, 1000u}) {
            check("sha256('')", hex("", split, cpu), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
            check("sha256(abc)", hex(abc, split, cpu), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
            check("sha256(448 bits)", hex(two, split, cpu),
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
            check("sha256(a x 1e6)", hex(million, split, cpu),
                  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        }
    // Varied bytes and every length up to five blocks (padding into one or two blocks, blocks
    // fed whole and split): the two implementations must agree.
    std::string bytes(5 * 64 + 1, '\0');
    uint32_t x = 12345;
    for (auto &c : bytes) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
    for (size_t len = 0; len <= bytes.size(); len++) {
        const std::string d = bytes.substr(0, len);
        if (hex(d, len / 3) != hex(d, len / 2, false)) {
            std::fprintf(stderr, "length %zu: the CPU path and the portable path differ\n", len);
            failures++;
        }
    }
    // Hand-checked with Python's hashlib: sha256(bytes(range(256)) * 2).
    std::string ramp(512, '\0');
    for (size_t i = 0; i < ramp.size(); i++) ramp[i] = static_cast<char>(i & 0xff);
    for (bool cpu : {true, false})
        check("sha256(0..255 x 2)", hex(ramp, 100, cpu), "110009dcee21620b166f3abfecb5eff7a873be729d1c2d53822e7acc5f34eb9b");
    std::printf("SHA extensions %s\n", kvreg::nats::Sha256().accelerated() ? "used" : "not available: portable rounds only");
    using kvreg::nats::base64url;
    auto b64 = [](const char *s) { return base64url(reinterpret_cast<const uint8_t *>(s), std::strlen(s)); };
    check("base64url(f)", b64("f"), "Zg==");
    check("base64url(fo)", b64("fo"), "Zm8=");
    check("base64url(foo)", b64("foo"), "Zm9v");
    const uint8_t hi[3] = {0xfb, 0xff, 0xbf};
    check("base64url(fb ff bf)", base64url(hi, 3), "-_-_");
    // The digest of "abc" in the object store's form: the SHA-256 above, base64url.
    check("digest(abc)", kvreg::nats::sha256_digest(abc), "SHA-256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0=");
    return failures ? 1 : 0;
}
