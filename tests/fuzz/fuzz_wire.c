/* libFuzzer target for the wire decoders: the first byte picks the decoder (vLLM, SGLang,
 * Dynamo JSON, Dynamo msgpack), the rest is the payload. Invariants: a decode either succeeds
 * with events whose arrays and strings can all be read, or fails with KVREG_EPROTO and an
 * offset inside the payload; nothing else. A vLLM batch that decodes is encoded again (as
 * kvreg events) and must decode to the same number of hashes. Every event's extended fields
 * are read (the Dynamo ones too: multimodal objects within their offsets, state_source's
 * bytes); a batch of any format the decoder can re-encode must decode again from its
 * re-encoding to as many events, and re-encode to the same bytes (a fixed point). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvreg_wire.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint32_t kFormats[4] = {KVREG_WIRE_VLLM, KVREG_WIRE_SGLANG, KVREG_WIRE_DYNAMO_JSON,
                                     KVREG_WIRE_DYNAMO_MSGPACK};

/* Every decoded value is read into this, so a bad pointer is touched (ASan reports it). */
static volatile uint64_t fuzz_sink;

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_wire: %s\n", what);
        abort();
    }
}

/* The decoded hashes as Remove events (any medium the encoder knows), re-encoded. */
static void reencode(const kvreg_wire_event *w, size_t n)
{
    size_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += w[k].n_block_hashes;
    if (total == 0 || total > 4096)
        return;
    kvreg_event *ev = calloc(total, sizeof *ev);
    check(ev != NULL, "out of memory");
    size_t i = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < w[k].n_block_hashes; j++, i++) {
            ev[i].kind = KVREG_EVENT_REMOVE;
            ev[i].sequence_hash = w[k].block_hashes[j];
            ev[i].medium = w[k].medium < KVREG_MEDIUM_COUNT ? w[k].medium : 0;
        }
    kvreg_wire_encoder *enc;
    kvreg_wire_decoder *dec;
    check(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM) == KVREG_OK, "encoder_new");
    check(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, total) == KVREG_OK, "set");
    check(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM) == KVREG_OK, "decoder_new");
    const uint8_t *p;
    size_t len, used, m;
    const kvreg_wire_event *back;
    check(kvreg_wire_encode(enc, ev, total, 1.0, &used, &p, &len) == KVREG_OK, "re-encode");
    check(used == total, "re-encode took every event");
    check(kvreg_wire_decode(dec, p, len, &back, &m, NULL) == KVREG_OK, "re-decode");
    size_t again = 0;
    for (size_t k = 0; k < m; k++)
        again += back[k].n_block_hashes;
    check(again == total, "re-decoded hash count");
    kvreg_wire_decoder_free(dec);
    kvreg_wire_encoder_free(enc);
    free(ev);
}

/* The extended fields of every event, read through. */
static uint64_t read_ext(const kvreg_wire_decoder *dec, size_t n)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        kvreg_wire_event_ext x;
        x.struct_size = sizeof x;
        check(kvreg_wire_decoder_event_ext(dec, k, &x) == KVREG_OK, "event_ext");
        const char *strs[] = {x.tag, x.cache_salt, x.kv_cache_spec_kind, x.locality,
                              x.ownership, x.session_id};
        for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
            sum += strs[i] ? strlen(strs[i]) : 0;
        for (size_t i = 0; i < x.n_pair_token_ids; i++)
            sum += x.pair_token_ids[i];
        for (size_t i = 0; i < x.extra_keys_len; i++)
            sum += x.extra_keys[i];
        check(x.n_pair_token_ids % 2 == 0, "pairs come in twos");
        sum += x.residency_domain ? strlen(x.residency_domain) : 0;
        for (size_t i = 0; i < x.state_source_len; i++)
            sum += x.state_source[i];
        check(x.n_mm_offsets % 2 == 0, "mm offsets come in pairs");
        for (size_t i = 0; i < x.n_mm_offsets; i++)
            sum += x.mm_offsets[i];
        for (size_t i = 0; i < x.n_mm_objects; i++) {
            const kvreg_wire_mm_object *m = &x.mm_objects[i];
            check(2 * (m->first_offset + m->n_offsets) <= x.n_mm_offsets, "mm object offsets");
            sum += m->mm_hash + m->block;
        }
    }
    return sum;
}

/* Re-encoding is a fixed point: decode(reencode(x)) re-encodes to the same bytes. */
static void reencode_fixed_point(kvreg_wire_decoder *dec, uint32_t format, size_t n)
{
    const uint8_t *p;
    size_t len;
    int rc = kvreg_wire_decoder_reencode(dec, &p, &len);
    if (rc != KVREG_OK) {
        check(rc == KVREG_ESTATE, "reencode: status other than OK / ESTATE");
        return;
    }
    uint8_t *copy = malloc(len ? len : 1);
    check(copy != NULL, "out of memory");
    memcpy(copy, p, len);
    kvreg_wire_decoder *again;
    check(kvreg_wire_decoder_new(&again, format) == KVREG_OK, "decoder_new");
    const kvreg_wire_event *w;
    size_t m;
    check(kvreg_wire_decode(again, copy, len, &w, &m, NULL) == KVREG_OK, "re-encoding decodes");
    check(m == n, "re-encoding has as many events");
    const uint8_t *p2;
    size_t len2;
    check(kvreg_wire_decoder_reencode(again, &p2, &len2) == KVREG_OK, "re-encodes again");
    check(len2 == len && memcmp(p2, copy, len) == 0, "re-encoding is a fixed point");
    kvreg_wire_decoder_free(again);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t format = kFormats[data[0] % 4];
    kvreg_wire_decoder *dec;
    if (kvreg_wire_decoder_new(&dec, format) != KVREG_OK)
        abort();
    const kvreg_wire_event *w;
    size_t n, off = SIZE_MAX;
    int rc = kvreg_wire_decode(dec, data + 1, size - 1, &w, &n, &off);
    if (rc == KVREG_OK) {
        uint64_t sum = 0;
        for (size_t k = 0; k < n; k++) {
            for (size_t i = 0; i < w[k].n_block_hashes; i++)
                sum += w[k].block_hashes[i] + (w[k].tokens_hashes ? w[k].tokens_hashes[i] : 0);
            for (size_t i = 0; i < w[k].n_token_ids; i++)
                sum += w[k].token_ids[i];
            sum += w[k].medium_name ? strlen(w[k].medium_name) : 0;
            sum += w[k].lora_name ? strlen(w[k].lora_name) : 0;
        }
        fuzz_sink += sum + read_ext(dec, n);
        reencode_fixed_point(dec, format, n);
        if (format == KVREG_WIRE_VLLM)
            reencode(w, n);
    } else {
        check(rc == KVREG_EPROTO, "status other than OK / EPROTO");
        check(off <= size - 1, "error offset past the payload");
        check(kvreg_wire_decoder_error(dec)[0] != '\0', "no error text");
    }
    kvreg_wire_decoder_free(dec);
    return 0;
}
