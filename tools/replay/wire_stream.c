/* Stream files, the writer (kvreg-replay --wire-out FILE); the format is defined in
 * tools/events/stream_file.h, the reader is tools/events/stream_file.c. */
#include "../events/stream_file.h"

#include <errno.h>

FILE *stream_file_create(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    if (fwrite(STREAM_FILE_MAGIC, 1, STREAM_FILE_MAGIC_LEN, f) != STREAM_FILE_MAGIC_LEN ||
        fflush(f) != 0) {
        int e = errno;
        fclose(f);
        errno = e;
        return NULL;
    }
    return f;
}

int stream_file_append(FILE *f, const uint8_t *payload, size_t len)
{
    if (len > STREAM_FILE_MAX_PAYLOAD) {
        errno = EFBIG;
        return -1;
    }
    const uint8_t head[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
                             (uint8_t)(len >> 24)};
    /* flushed per payload, so a write error (a full disk) is seen at the payload it hits */
    if (fwrite(head, 1, 4, f) != 4 || fwrite(payload, 1, len, f) != len || fflush(f) != 0)
        return -1;
    return 0;
}
