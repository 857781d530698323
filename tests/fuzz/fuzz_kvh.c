/* libFuzzer target: the input bytes are decoded by the kvh checked driver into a registry
 * configuration and a sequence of API calls (bad arguments, stale, foreign and near-miss
 * handles, freed pools included); any difference from the reference model aborts. */
#include <stddef.h>
#include <stdint.h>

#include "kvh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvh_src src = {0};
    src.data = data;
    src.len = size;
    kvh *h = kvh_new(&src, "fuzz input");
    if (!h)
        return 0;
    while (kvh_step(h))
        ;
    kvh_free(h);
    return 0;
}
