/*
 * dlopen: use libkvreg without linking it, as a plugin or a language binding would. Load
 * libkvreg.so.0 (or the path given as the first argument), check its runtime version, resolve
 * the functions we need with dlsym, and do a register/release round trip with events.
 * kvreg.h is still included, for the types and to type-check the resolved pointers.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <kvreg.h>

#include "check.h"

/* The functions we use, as pointers. */
static const char *(*p_strerror)(int);
static unsigned (*p_version_number)(void);
static int (*p_config_new)(kvreg_config **);
static int (*p_config_set_event_fn)(kvreg_config *, kvreg_event_fn, void *, kvreg_destroy_fn);
static void (*p_config_free)(kvreg_config *);
static int (*p_registry_new)(kvreg_registry **, const kvreg_config *);
static void (*p_registry_free)(kvreg_registry *);
static int (*p_registry_contains)(const kvreg_registry *, uint64_t, int *);
static int (*p_pool_new)(kvreg_pool **, kvreg_registry *, const char *);
static int (*p_hash_blocks)(const uint32_t *, size_t, uint32_t, uint64_t, kvreg_block_info *,
                            size_t, size_t *);
static int (*p_register)(kvreg_pool *, const kvreg_pool_block_desc *, kvreg_block *);
static int (*p_release)(kvreg_pool *, kvreg_block);

/* ISO C has no conversion from void * to a function pointer; POSIX guarantees the
 * representations match, so copy the bytes. */
static void resolve(void *lib, const char *name, void *fn_ptr, size_t size)
{
    void *sym = dlsym(lib, name);
    if (!sym) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(1);
    }
    memcpy(fn_ptr, &sym, size);
}

/* The sizeof() is never evaluated (no link to libkvreg), but it makes the compiler check
 * that our pointer has exactly the type of the header's declaration. */
#define RESOLVE(lib, ptr, fn) \
    ((void)sizeof(1 ? (ptr) : &(fn)), resolve((lib), #fn, (void *)&(ptr), sizeof(ptr)))

/* Our own status check: CHECK_OK would call kvreg_strerror, which we do not link. */
#define CALL_OK(call)                                                                      \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != KVREG_OK) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, p_strerror(rc_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static void count(const kvreg_event *events, size_t n, void *user_data)
{
    unsigned *kinds = user_data; /* [0] Register, [1] Remove */
    size_t i;
    for (i = 0; i < n; i++)
        kinds[events[i].kind == KVREG_EVENT_REGISTER ? 0 : 1]++;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "libkvreg.so.0";
    const uint32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    kvreg_block_info info[2];
    kvreg_pool_block_desc d = KVREG_POOL_BLOCK_DESC_INIT;
    kvreg_config *cfg;
    kvreg_registry *reg;
    int present = 0;
    kvreg_pool *pool;
    kvreg_block h;
    unsigned kinds[2] = {0, 0};
    size_t n;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return 1;
    }
    RESOLVE(lib, p_strerror, kvreg_strerror);
    RESOLVE(lib, p_version_number, kvreg_version_number);
    /* A binding must refuse a library older than the header it was written against. */
    printf("loaded %s: version %u (header %u)\n", path, p_version_number(),
           (unsigned)KVREG_VERSION_NUMBER);
    CHECK(p_version_number() == KVREG_VERSION_NUMBER);

    RESOLVE(lib, p_config_new, kvreg_config_new);
    RESOLVE(lib, p_config_set_event_fn, kvreg_config_set_event_fn);
    RESOLVE(lib, p_config_free, kvreg_config_free);
    RESOLVE(lib, p_registry_new, kvreg_registry_new);
    RESOLVE(lib, p_registry_free, kvreg_registry_free);
    RESOLVE(lib, p_registry_contains, kvreg_registry_contains);
    RESOLVE(lib, p_pool_new, kvreg_pool_new);
    RESOLVE(lib, p_hash_blocks, kvreg_hash_blocks);
    RESOLVE(lib, p_register, kvreg_pool_register);
    RESOLVE(lib, p_release, kvreg_pool_release);

    CALL_OK(p_config_new(&cfg));
    CALL_OK(p_config_set_event_fn(cfg, count, kinds, NULL));
    CALL_OK(p_registry_new(&reg, cfg));
    p_config_free(cfg);
    CALL_OK(p_pool_new(&pool, reg, "gpu"));

    /* Seed vector of tests/vectors/public.json: tokens 1..4, block size 4, salt 1337. */
    CALL_OK(p_hash_blocks(tokens, 8, 4, KVREG_ROUTER_SALT, info, 2, &n));
    CHECK(n == 2 && info[0].sequence_hash == UINT64_C(14643705804678351452));

    d.sequence_hash = info[0].sequence_hash;
    d.block_hash = info[0].block_hash;
    CALL_OK(p_register(pool, &d, &h));
    CALL_OK(p_registry_contains(reg, d.sequence_hash, &present));
    CHECK(kinds[0] == 1 && present == 1);
    CALL_OK(p_release(pool, h));
    CALL_OK(p_registry_contains(reg, d.sequence_hash, &present));
    CHECK(kinds[1] == 1 && present == 0);
    printf("round trip: %u Register, %u Remove\n", kinds[0], kinds[1]);

    p_registry_free(reg);
    CHECK(dlclose(lib) == 0);
    printf("dlopen: ok\n");
    return 0;
}
