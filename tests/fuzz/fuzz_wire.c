/* libFuzzer target for the wire decoders: the first byte picks the decoder (vLLM, SGLang,
 * Dynamo JSON, Dynamo msgpack), the rest is the payload. Invariants: a decode either succeeds
 * with events whose arrays and strings can all be read, or fails with KVREG_EPROTO and an
 * offset inside the payload; nothing else. A vLLM batch that decodes is encoded again (as
 * kvreg events) and must decode to the same number of hashes. */
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
        fuzz_sink += sum;
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
