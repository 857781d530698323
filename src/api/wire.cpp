// The C API of kvreg_wire.h (built with the `wire` feature; api_wire_stub.cpp otherwise).
#include "kvreg_wire.h"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <new>
#include <string>

#include "api/guard.hpp"
#include "api/string_out.hpp"
#include "wire/decode.hpp"
#include "wire/encode.hpp"
#include "wire/utf8.hpp"
#include "wire/mp_write.hpp"
#include "wire/plan.hpp"
#include "wire/reencode.hpp"

using namespace kvreg::wire;

struct kvreg_wire_encoder {
    uint32_t format;
    size_t max_events = 1024;
    uint32_t block_size = 0;
    EncodeOptions opts;
    MpWriter out;
    Plan plan;
};

struct kvreg_wire_decoder {
    uint32_t format;
    DecodeLimits limits;
    DecodedBatch batch;
    MpWriter reencoded;
    std::string error;
    uint64_t stats[5] = {};
};

extern "C" {

KVREG_API int kvreg_wire_encoder_new(kvreg_wire_encoder **out, uint32_t format) noexcept {
    if (!out || format < KVREG_WIRE_VLLM || format > KVREG_WIRE_DYNAMO_MSGPACK)
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    auto *enc = new kvreg_wire_encoder{};
    enc->format = format;
    *out = enc;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_wire_encoder_free(kvreg_wire_encoder *enc) noexcept { delete enc; }

KVREG_API int kvreg_wire_encoder_set(kvreg_wire_encoder *enc, uint32_t option,
                                     uint64_t value) noexcept {
    if (!enc)
        return KVREG_EINVAL;
    switch (option) {
    case KVREG_WIRE_OPT_DP_RANK:
        if (value > INT32_MAX)
            return KVREG_EINVAL;
        enc->opts.dp_rank = value;
        return KVREG_OK;
    case KVREG_WIRE_OPT_MAX_EVENTS:
        if (value < 1 || value > SIZE_MAX)
            return KVREG_EINVAL;
        enc->max_events = static_cast<size_t>(value);
        return KVREG_OK;
    case KVREG_WIRE_OPT_WORKER_ID:
        enc->opts.worker_id = value;
        return KVREG_OK;
    case KVREG_WIRE_OPT_BLOCK_SIZE:
        if (value > UINT32_MAX)
            return KVREG_EINVAL;
        enc->block_size = static_cast<uint32_t>(value);
        return KVREG_OK;
    case KVREG_WIRE_OPT_NEXT_EVENT_ID:
        enc->opts.next_event_id = value;
        enc->opts.last_first = KVREG_EVENT_ID_SNAPSHOT; // the caller's value wins
        return KVREG_OK;
    case KVREG_WIRE_OPT_EVENT_IDS:
        if (value != KVREG_WIRE_EVENT_IDS_CONTIGUOUS && value != KVREG_WIRE_EVENT_IDS_KVREG)
            return KVREG_EINVAL;
        enc->opts.kvreg_ids = value == KVREG_WIRE_EVENT_IDS_KVREG;
        enc->opts.last_first = KVREG_EVENT_ID_SNAPSHOT;
        return KVREG_OK;
    default:
        return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_wire_encoder_get(const kvreg_wire_encoder *enc, uint32_t option,
                                     uint64_t *value) noexcept {
    if (!enc || !value)
        return KVREG_EINVAL;
    switch (option) {
    case KVREG_WIRE_OPT_DP_RANK: *value = enc->opts.dp_rank; return KVREG_OK;
    case KVREG_WIRE_OPT_MAX_EVENTS: *value = enc->max_events; return KVREG_OK;
    case KVREG_WIRE_OPT_WORKER_ID: *value = enc->opts.worker_id; return KVREG_OK;
    case KVREG_WIRE_OPT_BLOCK_SIZE: *value = enc->block_size; return KVREG_OK;
    case KVREG_WIRE_OPT_NEXT_EVENT_ID: *value = enc->opts.next_event_id; return KVREG_OK;
    case KVREG_WIRE_OPT_EVENT_IDS:
        *value = enc->opts.kvreg_ids ? KVREG_WIRE_EVENT_IDS_KVREG : KVREG_WIRE_EVENT_IDS_CONTIGUOUS;
        return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_wire_encoder_set_lora_name(kvreg_wire_encoder *enc,
                                               const char *lora_name) noexcept {
    return kvreg_wire_encoder_set_string(enc, KVREG_WIRE_LORA_NAME, lora_name);
}

KVREG_API int kvreg_wire_encoder_get_string(const kvreg_wire_encoder *enc, uint32_t option,
                                            char *buf, size_t cap, size_t *len) noexcept {
    if (!enc || option != KVREG_WIRE_LORA_NAME)
        return KVREG_EINVAL;
    if (!enc->opts.has_lora)
        return len ? KVREG_ENOENT : KVREG_EINVAL;
    return kvreg::string_out(enc->opts.lora_name.c_str(), buf, cap, len);
}

KVREG_API int kvreg_wire_encoder_set_string(kvreg_wire_encoder *enc, uint32_t option,
                                            const char *lora_name) noexcept {
    if (!enc || option != KVREG_WIRE_LORA_NAME || (lora_name && !kvreg::wire::valid_utf8(lora_name)))
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    if (lora_name) {
        std::string copy(lora_name);
        enc->opts.lora_name.swap(copy);
    } else {
        enc->opts.lora_name.clear();
    }
    enc->opts.has_lora = lora_name != nullptr;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_wire_encode(kvreg_wire_encoder *enc, const kvreg_event *events, size_t n,
                                double ts, size_t *n_consumed, const uint8_t **payload,
                                size_t *payload_len) noexcept {
    if (!enc || !n_consumed || !payload || !payload_len || (!events && n > 0))
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    bool vllm = enc->format == KVREG_WIRE_VLLM || enc->format == KVREG_WIRE_VLLM_LEGACY;
    PlanRules rules{vllm, vllm ? enc->block_size : 0};
    plan_events(events, n, enc->max_events, rules, enc->plan);
    if (enc->plan.n_events == 0 && enc->plan.stop != KVREG_OK) {
        *n_consumed = 0;
        return enc->plan.stop;
    }
    if (ts < 0)
        ts = std::chrono::duration<double>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    enc->out.clear();
    if (vllm)
        encode_vllm(enc->out, enc->plan, events, ts, enc->opts,
                    enc->format == KVREG_WIRE_VLLM_LEGACY);
    else
        encode_dynamo(enc->out, enc->plan, events, enc->opts,
                      enc->format == KVREG_WIRE_DYNAMO_JSON);
    if (!enc->out.ok())
        return KVREG_ENOMEM;
    *n_consumed = enc->plan.n_events;
    *payload = enc->out.data();
    *payload_len = enc->out.size();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_wire_decoder_new(kvreg_wire_decoder **out, uint32_t format) noexcept {
    if (!out || format < KVREG_WIRE_VLLM || format > KVREG_WIRE_SGLANG)
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    auto *dec = new kvreg_wire_decoder{};
    dec->format = format;
    *out = dec;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_wire_decoder_free(kvreg_wire_decoder *dec) noexcept { delete dec; }

KVREG_API int kvreg_wire_decode(kvreg_wire_decoder *dec, const void *payload, size_t len,
                                const kvreg_wire_event **events, size_t *n_events,
                                size_t *error_offset) noexcept {
    if (!dec || !events || !n_events || (!payload && len > 0))
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    static const uint8_t empty = 0;
    const uint8_t *p = payload ? static_cast<const uint8_t *>(payload) : &empty;
    bool ok;
    size_t off = 0;
    const char *why = nullptr;
    if (len > dec->limits.max_payload) {
        // judged by its size alone: nothing of it is read
        ok = false, off = dec->limits.max_payload;
        why = "the payload is larger than the decoder's max_payload";
        dec->batch.clear();
    } else if (dec->format == KVREG_WIRE_DYNAMO_JSON ||
               dec->format == KVREG_WIRE_DYNAMO_MSGPACK) {
        DecodeError err;
        ok = decode_dynamo(p, len, dec->format == KVREG_WIRE_DYNAMO_JSON, dec->batch, err,
                           dec->limits);
        off = err.offset, why = err.why;
    } else {
        MpReader r(p, len);
        ok = decode_vllm(r, dec->batch, dec->limits);
        off = r.error_offset(), why = r.error();
    }
    if (!ok) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "byte %zu: ", off);
        dec->error.assign(buf).append(why ? why : "malformed payload");
        dec->stats[KVREG_WIRE_STAT_REJECTED]++;
        if (error_offset)
            *error_offset = off;
        return KVREG_EPROTO;
    }
    dec->error.clear();
    dec->stats[KVREG_WIRE_STAT_BATCHES]++;
    dec->stats[KVREG_WIRE_STAT_EVENTS] += dec->batch.events.size();
    dec->stats[KVREG_WIRE_STAT_SKIPPED] += dec->batch.skipped;
    *events = dec->batch.events.empty() ? nullptr : dec->batch.events.data();
    *n_events = dec->batch.events.size();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API int kvreg_wire_decoder_set(kvreg_wire_decoder *dec, uint32_t option,
                                     uint64_t value) noexcept {
    if (!dec)
        return KVREG_EINVAL;
    switch (option) {
    case KVREG_WIRE_DEC_OPT_MAX_PAYLOAD:
        if (value < 1 || value > UINT32_MAX || value > SIZE_MAX)
            return KVREG_EINVAL;
        dec->limits.max_payload = static_cast<size_t>(value);
        return KVREG_OK;
    case KVREG_WIRE_DEC_OPT_MAX_DEPTH:
        if (value < 1 || value > MpReader::kMaxDepthCap)
            return KVREG_EINVAL;
        dec->limits.max_depth = static_cast<unsigned>(value);
        return KVREG_OK;
    case KVREG_WIRE_DEC_OPT_MAX_EVENTS:
        if (value < 1 || value > SIZE_MAX)
            return KVREG_EINVAL;
        dec->limits.max_events = static_cast<size_t>(value);
        return KVREG_OK;
    default:
        return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_wire_decoder_event_ext(const kvreg_wire_decoder *dec, size_t index,
                                           kvreg_wire_event_ext *ext) noexcept {
    if (!dec || !ext || ext->struct_size < offsetof(kvreg_wire_event_ext, tag))
        return KVREG_EINVAL;
    if (index >= dec->batch.events.size())
        return KVREG_ERANGE;
    dec->batch.ext(index, *ext);
    return KVREG_OK;
}

KVREG_API int kvreg_wire_decoder_reencode(kvreg_wire_decoder *dec, const uint8_t **payload,
                                          size_t *payload_len) noexcept {
    if (!dec || !payload || !payload_len)
        return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    if (dec->format == KVREG_WIRE_DYNAMO_JSON || dec->format == KVREG_WIRE_DYNAMO_MSGPACK) {
        if (!dynamo_reencodable(dec->batch))
            return KVREG_ESTATE;
        reencode_dynamo(dec->batch, dec->reencoded, dec->format == KVREG_WIRE_DYNAMO_JSON);
    } else {
        if (!reencodable(dec->batch))
            return KVREG_ESTATE;
        reencode_vllm(dec->batch, dec->reencoded);
    }
    if (!dec->reencoded.ok())
        return KVREG_ENOMEM;
    *payload = dec->reencoded.data();
    *payload_len = dec->reencoded.size();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API const char *kvreg_wire_decoder_error(const kvreg_wire_decoder *dec) noexcept {
    return dec ? dec->error.c_str() : "";
}

KVREG_API int kvreg_wire_decoder_stat(const kvreg_wire_decoder *dec, uint32_t stat,
                                      uint64_t *value) noexcept {
    if (!dec || !value || stat < KVREG_WIRE_STAT_BATCHES || stat > KVREG_WIRE_STAT_SKIPPED)
        return KVREG_EINVAL;
    *value = dec->stats[stat];
    return KVREG_OK;
}

KVREG_API int kvreg_wire_decoder_get(const kvreg_wire_decoder *dec, uint32_t option,
                                     uint64_t *value) noexcept {
    if (!dec || !value)
        return KVREG_EINVAL;
    switch (option) {
    case KVREG_WIRE_DEC_OPT_MAX_PAYLOAD: *value = dec->limits.max_payload; return KVREG_OK;
    case KVREG_WIRE_DEC_OPT_MAX_DEPTH: *value = dec->limits.max_depth; return KVREG_OK;
    case KVREG_WIRE_DEC_OPT_MAX_EVENTS: *value = dec->limits.max_events; return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

} // extern "C"
