#include "wire/mp_write.hpp"

namespace kvreg::wire {

int mp_buf_grow(MpBuf *b, size_t need) noexcept {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->size < need) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return -1;
        }
        cap *= 2;
    }
    char *p = static_cast<char *>(std::realloc(b->data, cap));
    if (!p) {
        b->failed = true;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

} // namespace kvreg::wire
