// NOT COMMITTED. Stand-in for the wire branch's codec so the transport can be tested.
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <vector>
#include "kvreg_wire.h"

struct kvreg_wire_encoder { std::vector<uint8_t> buf; uint64_t dp = 0, max = 1024; };
struct kvreg_wire_decoder { std::vector<kvreg_wire_event> ev; std::vector<uint64_t> hashes; std::string err; uint64_t b=0,r=0,e=0; };

template <class T> static void put(std::vector<uint8_t> &b, T v) { const uint8_t *p = reinterpret_cast<const uint8_t *>(&v); b.insert(b.end(), p, p + sizeof v); }
template <class T> static bool get(const uint8_t *&p, const uint8_t *end, T &v) { if (size_t(end - p) < sizeof v) return false; std::memcpy(&v, p, sizeof v); p += sizeof v; return true; }

extern "C" {
KVREG_API int kvreg_wire_encoder_new(kvreg_wire_encoder **out, uint32_t) noexcept { *out = new (std::nothrow) kvreg_wire_encoder(); return *out ? 0 : KVREG_ENOMEM; }
KVREG_API void kvreg_wire_encoder_free(kvreg_wire_encoder *e) noexcept { delete e; }
KVREG_API int kvreg_wire_encoder_set(kvreg_wire_encoder *e, uint32_t o, uint64_t v) noexcept { if (o == 1) e->dp = v; if (o == 2) e->max = v; return 0; }
KVREG_API int kvreg_wire_encoder_set_lora_name(kvreg_wire_encoder *, const char *) noexcept { return 0; }
KVREG_API int kvreg_wire_encode(kvreg_wire_encoder *e, const kvreg_event *ev, size_t n, double ts, size_t *used, const uint8_t **payload, size_t *len) noexcept {
    if (n > e->max) n = e->max;
    e->buf.clear(); e->buf.push_back('K'); e->buf.push_back('V');
    put<uint32_t>(e->buf, uint32_t(n));
    for (size_t i = 0; i < n; i++) { put<uint8_t>(e->buf, uint8_t(ev[i].kind)); put<uint8_t>(e->buf, uint8_t(ev[i].medium)); put<uint8_t>(e->buf, uint8_t(ev[i].has_parent)); put(e->buf, ev[i].sequence_hash); put(e->buf, ev[i].parent_sequence_hash); }
    if (ts < 0) ts = double(time(nullptr));
    put(e->buf, ts); put<int64_t>(e->buf, int64_t(e->dp));
    *used = n; *payload = e->buf.data(); *len = e->buf.size(); return 0;
}
KVREG_API int kvreg_wire_decoder_new(kvreg_wire_decoder **out, uint32_t) noexcept { *out = new (std::nothrow) kvreg_wire_decoder(); return *out ? 0 : KVREG_ENOMEM; }
KVREG_API void kvreg_wire_decoder_free(kvreg_wire_decoder *d) noexcept { delete d; }
KVREG_API int kvreg_wire_decode(kvreg_wire_decoder *d, const void *payload, size_t len, const kvreg_wire_event **events, size_t *n_events, size_t *off) noexcept {
    const uint8_t *p = static_cast<const uint8_t *>(payload), *end = p + len; uint32_t n = 0;
    if (len < 2 || p[0] != 'K' || p[1] != 'V') { d->err = "not a stub payload"; d->r++; if (off) *off = 0; return KVREG_EPROTO; }
    p += 2;
    if (!get(p, end, n) || n > len) { d->err = "short"; d->r++; return KVREG_EPROTO; }
    d->ev.assign(n, kvreg_wire_event{}); d->hashes.assign(n, 0);
    for (uint32_t i = 0; i < n; i++) { uint8_t k, m, hp; uint64_t h, par;
        if (!get(p, end, k) || !get(p, end, m) || !get(p, end, hp) || !get(p, end, h) || !get(p, end, par)) { d->err = "short"; d->r++; return KVREG_EPROTO; }
        d->hashes[i] = h; kvreg_wire_event &w = d->ev[i]; w.type = k; w.medium = m; w.has_parent = hp; w.parent_block_hash = par; w.n_block_hashes = 1; }
    double ts; int64_t dp; if (!get(p, end, ts) || !get(p, end, dp) || p != end) { d->err = "short"; d->r++; return KVREG_EPROTO; }
    for (uint32_t i = 0; i < n; i++) { d->ev[i].block_hashes = &d->hashes[i]; d->ev[i].ts = ts; d->ev[i].dp_rank = dp; d->ev[i].has_dp_rank = 1; }
    *events = d->ev.data(); *n_events = n; d->b++; d->e += n; d->err.clear(); return 0;
}
KVREG_API const char *kvreg_wire_decoder_error(const kvreg_wire_decoder *d) noexcept { return d->err.c_str(); }
KVREG_API int kvreg_wire_decoder_stat(const kvreg_wire_decoder *, uint32_t, uint64_t *v) noexcept { *v = 0; return 0; }
}
