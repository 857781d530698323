// The object store's digest (src/nats/sha256.cpp, objstore.cpp): SHA-256 against the FIPS 180-2
// example vectors and base64url against hand-worked RFC 4648 examples. Internal: links the
// static library.
#include <cstdio>
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

static std::string hex(const std::string &data, size_t split) {
    kvreg::nats::Sha256 h;
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
    for (size_t split : {0u, 1u, 63u, 64u, 65u, 1000u}) {
        check("sha256('')", hex("", split), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        check("sha256(abc)", hex(abc, split), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        check("sha256(448 bits)", hex(two, split), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        check("sha256(a x 1e6)", hex(million, split), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
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
