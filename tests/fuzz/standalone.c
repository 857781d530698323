/* Replays fuzz inputs without libFuzzer (as libgit2's fuzzers/standalone_driver.c does), so
 * the checked-in corpus runs as an ordinary test with any compiler.
 * Usage: kvreg-fuzz-replay FILE|DIR...  */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long len;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "cannot read %s\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

static int replay(const char *path, unsigned *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "no such input: %s\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    struct dirent *e;
    int rc = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char sub[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        if (replay(sub, count) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (replay(argv[i], &count) != 0)
            rc = 1;
    if (count == 0) {
        fprintf(stderr, "no fuzz inputs given\n");
        return 1;
    }
    printf("replayed %u fuzz inputs, all consistent with the model\n", count);
    return rc;
}
