/* kvreg_features() reports exactly the KVREG_WITH_* defines src/api/errors.cpp was compiled
 * with (absent means 0). Linked with that one source file, built once per combination by
 * tests/unit/meson.build; EXPECTED is the answer written out. */
#include <kvreg.h>
#include <stdio.h>

int main(void) {
    if (kvreg_features() != (unsigned)EXPECTED) {
        fprintf(stderr, "kvreg_features() = %u, expected %u\n", kvreg_features(), (unsigned)EXPECTED);
        return 1;
    }
    return 0;
}
