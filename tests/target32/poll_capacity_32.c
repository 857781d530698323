/* On a 32-bit target size_t holds at most 2^32 - 1, so KVREG_OPT_POLL_CAPACITY = 2^32 (valid on
 * LP64) must be rejected instead of narrowing to a zero-capacity queue inside the event log.
 * Built with -m32 against the option parser's own source by run.sh (the whole library would need
 * 32-bit libxxhash); the expected codes are the header's documented ones. */
#include <kvreg.h>
#include <stdio.h>

int main(void) {
    kvreg_config *cfg = NULL;
    if (sizeof(size_t) != 4) {
        fprintf(stderr, "not a 32-bit build: sizeof(size_t) = %u\n", (unsigned)sizeof(size_t));
        return 1;
    }
    if (kvreg_config_new(&cfg) != KVREG_OK) return 1;
    const int too_big = kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, UINT64_C(1) << 32);
    const int largest = kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, (UINT64_C(1) << 32) - 1);
    kvreg_config_free(cfg);
    printf("32-bit: POLL_CAPACITY 2^32 -> %d (want %d), 2^32 - 1 -> %d (want %d)\n", too_big,
           KVREG_EINVAL, largest, KVREG_OK);
    return too_big == KVREG_EINVAL && largest == KVREG_OK ? 0 : 1;
}
