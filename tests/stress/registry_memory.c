/* Memory comes back when the live set shrinks: register 2,000,000 blocks, release them all,
 * and the allocator's bytes in use (glibc mallinfo2, which counts every live malloc of the
 * process) fall back to within a small margin of where they were before. Then the same slots
 * serve new blocks, and the old handles stay stale.
 *
 * The test's own arrays are allocated before the first measurement, so the difference is the
 * registry's alone. */
#include <kvreg.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2000000u
#define FAIL(...) do { fprintf(stderr, "registry_memory FAIL: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static size_t in_use(void) { return mallinfo2().uordblks; }

/* ASan and valgrind replace malloc, and their mallinfo2 counts nothing: asked before the
 * million registrations, which take 15 s under valgrind only to be skipped. */
static int allocator_counts(void) {
    const size_t before = in_use();
    void *volatile p = malloc(1 << 16);
    const size_t during = in_use();
    free(p);
    return during > before;
}

int main(void) {
    if (!allocator_counts()) {
        printf("SKIP: no allocator statistics here (sanitizer or valgrind allocator)\n");
        return 77;
    }
    kvreg_block *h = malloc(N * sizeof *h);
    kvreg_block_desc *d = calloc(N, sizeof *d);
    int *st = malloc(N * sizeof *st);
    if (!h || !d || !st) FAIL("test arrays");
    for (unsigned i = 0; i < N; i++) {
        d[i].sequence_hash = 0x9E3779B97F4A7C15ull * (i + 1);
        d[i].block_hash = i;
    }
    kvreg_registry *reg;
    kvreg_pool *pool;
    if (kvreg_registry_new(&reg, NULL) || kvreg_pool_new(&pool, reg, "gpu")) FAIL("setup");
    const size_t base = in_use();
    size_t n = 0;
    if (kvreg_register_batch(pool, d, N, h, st, &n) || n != N) FAIL("register %zu", n);
    const size_t peak = in_use();
    if (kvreg_release_batch(pool, h, N, st, &n) || n != N) FAIL("release %zu", n);
    const size_t after = in_use();
    /* The allocator counts (asked above): 2,000,000 registrations that hold nothing are a bug. */
    if (peak <= base) FAIL("bytes in use did not grow (%zu before, %zu after registering)", base, peak);
    const size_t grown = peak - base, kept = after > base ? after - base : 0;
    printf("registry_memory: %u blocks: +%zu bytes held, %zu kept after releasing all (%.2f%%)\n", N,
           grown, kept, 100.0 * (double)kept / (double)grown);
    if (grown < (size_t)N * 40) FAIL("the registry grew by only %zu bytes for %u blocks?", grown, N);
    if (kept * 20 > grown) FAIL("%zu of %zu bytes kept after every block was released", kept, grown);
    /* The slots serve again; the old handles name nothing. */
    kvreg_block again;
    if (kvreg_register(pool, &d[7], &again)) FAIL("register again");
    for (unsigned i = 0; i < N; i += 997) {
        kvreg_block_info info;
        if (kvreg_block_get_info(pool, h[i], &info) != KVREG_ESTALE) FAIL("old handle %u accepted", i);
    }
    if (kvreg_release(pool, again)) FAIL("release again");
    kvreg_registry_free(reg);
    free(h);
    free(d);
    free(st);
    return 0;
}
