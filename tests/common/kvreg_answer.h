/* Test helpers: the yes/no queries folded back into one int (1, 0 or the negative status), so
 * a test can assert both channels of kvreg_pool_contains / kvreg_registry_contains in one line.
 * *present is preset to a value the library never writes (7), so an answer left unwritten on
 * success shows up as 7 instead of passing for "absent". */
#ifndef KVREG_ANSWER_H
#define KVREG_ANSWER_H

#include <kvreg.h>

static inline int kvt_pool_has(const kvreg_pool *pool, uint64_t sequence_hash) {
    int present = 7;
    const int rc = kvreg_pool_contains(pool, sequence_hash, &present);
    return rc < 0 ? rc : present;
}

static inline int kvt_registry_has(const kvreg_registry *reg, uint64_t sequence_hash) {
    int present = 7;
    const int rc = kvreg_registry_contains(reg, sequence_hash, &present);
    return rc < 0 ? rc : present;
}

#endif
