#include "lines.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if REPLAY_HAVE_ZLIB
#include <zlib.h>
#endif

#define CHUNK (64 * 1024)

struct line_reader {
    const char *path;
    int fd;
#if REPLAY_HAVE_ZLIB
    gzFile gz;
#endif
    char *chunk;            /* what the last read returned */
    size_t chunk_len, pos;
    char *line;             /* the line being assembled */
    size_t line_cap;
    long long size;
    long long consumed;     /* file bytes read, for progress without zlib */
    int at_start;
};

line_reader *lines_open(const char *path)
{
    struct stat st;
    line_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->chunk = malloc(CHUNK))) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        free(r);
        return NULL;
    }
    r->path = path;
    r->at_start = 1;
    r->fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY);
    if (r->fd < 0) {
        fprintf(stderr, "kvreg-replay: cannot open %s: %s\n", path, strerror(errno));
        free(r->chunk);
        free(r);
        return NULL;
    }
    r->size = (fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode)) ? (long long)st.st_size : -1;
#if REPLAY_HAVE_ZLIB
    /* gzdopen reads gzip streams and, transparently, anything else as it is. */
    r->gz = gzdopen(r->fd, "rb");
    if (!r->gz) {
        fprintf(stderr, "kvreg-replay: cannot open %s: out of memory\n", path);
        close(r->fd);
        free(r->chunk);
        free(r);
        return NULL;
    }
#endif
    return r;
}

/* Refill the chunk: bytes read, 0 at the end, -1 after printing an error. */
static long fill(line_reader *r)
{
#if REPLAY_HAVE_ZLIB
    int n = gzread(r->gz, r->chunk, CHUNK), errnum = Z_OK;
    const char *msg = gzerror(r->gz, &errnum);
    if (n < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
        fprintf(stderr, "kvreg-replay: %s: read error: %s\n", r->path,
                errnum == Z_ERRNO ? strerror(errno) : msg);
        return -1;
    }
    if (n == 0 && errnum == Z_BUF_ERROR) { /* the gzip stream stops in the middle */
        fprintf(stderr, "kvreg-replay: %s: the compressed data ends early (truncated file?)\n",
                r->path);
        return -1;
    }
    return n;
#else
    ssize_t n;
    do
        n = read(r->fd, r->chunk, CHUNK);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        fprintf(stderr, "kvreg-replay: %s: read error: %s\n", r->path, strerror(errno));
        return -1;
    }
    if (r->at_start && n >= 2 && (unsigned char)r->chunk[0] == 0x1f &&
        (unsigned char)r->chunk[1] == 0x8b) {
        fprintf(stderr, "kvreg-replay: %s is gzip-compressed and this build cannot read it "
                        "(zlib was not found when it was configured: install zlib1g-dev and "
                        "reconfigure, or run: zcat %s | kvreg-replay -)\n", r->path, r->path);
        return -1;
    }
    r->consumed += n;
    return (long)n;
#endif
}

int lines_next(line_reader *r, char **line, size_t *len)
{
    size_t n = 0;
    for (;;) {
        const char *start = r->chunk + r->pos;
        size_t avail = r->chunk_len - r->pos;
        const char *nl = memchr(start, '\n', avail);
        size_t take = nl ? (size_t)(nl - start) + 1 : avail;
        if (n + take + 1 > r->line_cap) {
            size_t cap = r->line_cap ? r->line_cap : 4096;
            char *p;
            while (cap < n + take + 1)
                cap *= 2;
            if (!(p = realloc(r->line, cap))) {
                fprintf(stderr, "kvreg-replay: %s: out of memory for a long line\n", r->path);
                return -1;
            }
            r->line = p;
            r->line_cap = cap;
        }
        memcpy(r->line + n, start, take);
        n += take;
        r->pos += take;
        if (nl)
            break;
        {
            long got = fill(r);
            r->at_start = 0;
            if (got < 0)
                return -1;
            r->chunk_len = (size_t)got;
            r->pos = 0;
            if (got == 0)
                break;
        }
    }
    if (n == 0)
        return 0;
    r->line[n] = '\0';
    *line = r->line;
    *len = n;
    return 1;
}

double lines_progress(const line_reader *r)
{
    long long pos;
    if (r->size <= 0)
        return 0.0;
#if REPLAY_HAVE_ZLIB
    pos = (long long)gzoffset(r->gz);
#else
    pos = r->consumed;
#endif
    return pos <= 0 ? 0.0 : (double)pos / (double)r->size;
}

long long lines_size(const line_reader *r)
{
    return r->size;
}

void lines_close(line_reader *r)
{
    if (!r)
        return;
#if REPLAY_HAVE_ZLIB
    gzclose_r(r->gz); /* closes the descriptor too */
#else
    close(r->fd);
#endif
    free(r->chunk);
    free(r->line);
    free(r);
}
