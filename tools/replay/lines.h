/*
 * lines: reads a text file line by line, plain or gzip-compressed (the traces ship as
 * .jsonl.gz). With zlib, gzip input is recognised by its magic bytes, whatever the name, and
 * anything else is read as it is; without zlib only plain input is read, and a gzip file is
 * refused with a message saying how to get support for it.
 */
#ifndef KVREG_REPLAY_LINES_H
#define KVREG_REPLAY_LINES_H

#include <stddef.h>
#include <sys/types.h>

typedef struct line_reader line_reader;

/* "-" is stdin. NULL on failure, with a message on stderr naming path. */
line_reader *lines_open(const char *path);
/* The next line (with its '\n', NUL-terminated; *len excludes the NUL) in a buffer owned by
 * the reader, valid until the next call. 1: a line; 0: end of input; -1: read error or a
 * corrupt compressed stream (message printed). */
int lines_next(line_reader *r, char **line, size_t *len);
/* Fraction of the (compressed) file read so far, 0..1; 0 when the size is unknown. */
double lines_progress(const line_reader *r);
/* Size of the file on disk in bytes, or -1 when it is not a regular file. */
long long lines_size(const line_reader *r);
void lines_close(line_reader *r);

#endif
