/* A library built without the `wire` feature: the same functions exist and say so. */
#include <kvreg_wire.h>
#include <stdio.h>

int main(void)
{
    kvreg_wire_encoder *enc = (kvreg_wire_encoder *)&enc;
    kvreg_wire_decoder *dec = (kvreg_wire_decoder *)&dec;
    const kvreg_wire_event *ev;
    size_t n;
    uint64_t v;
    int bad = 0;
    bad |= kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM) != KVREG_ENOTSUP || enc != NULL;
    bad |= kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM) != KVREG_ENOTSUP || dec != NULL;
    bad |= kvreg_wire_decode(NULL, "", 0, &ev, &n, NULL) != KVREG_ENOTSUP;
    bad |= kvreg_wire_decoder_stat(NULL, KVREG_WIRE_STAT_EVENTS, &v) != KVREG_ENOTSUP;
    kvreg_wire_encoder_free(NULL);
    kvreg_wire_decoder_free(NULL);
    if (bad)
        fprintf(stderr, "wire stubs: a function did not return KVREG_ENOTSUP\n");
    return bad;
}
