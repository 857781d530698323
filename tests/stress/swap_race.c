/* kvreg_registry_set_event_fn under load: producers (more than this host's cores) register and
 * release without pause into a slow callback, so the delivery role passes between them by
 * hand-over, while setter threads replace the callback again and again (step 6 of the protocol
 * in src/events/event_log.hpp). Every callback's user_data is its own, with a destroy.
 *
 * Checked: event ids contiguous across all callbacks and every event delivered once; a
 * callback never called after its destroy ran, nor after the set_fn that replaced it returned,
 * nor twice at once; destroy never while its callback runs, exactly once for every user_data,
 * and never for the callback the set_fn in progress installs; nested calls from inside the
 * callback (register/release; set_fn and flush refused with KVREG_EBUSY).
 *
 * A review found a swap that could put the old callback back and destroy the new one; it
 * took three threads each delayed at one exact point, which this test (without such delays)
 * does not reach: it guards the protocol's promises, including under ThreadSanitizer (CI).
 * Usage: kvreg-swap-race [seconds (default 2; KVREG_STRESS_SECONDS)] */
#define _POSIX_C_SOURCE 200809L
#include <kvreg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PRODUCERS 5
#define SETTERS 3
#define SPIN_US_PER_EVENT 2
#define MAX_UD (1 << 18)

typedef struct ud {
    int id;
    atomic_int destroyed, running, replaced; /* replaced: the set_fn replacing it returned */
} ud;

static ud *uds[MAX_UD];
static atomic_int n_uds;
static kvreg_registry *reg;
static kvreg_pool *pools[PRODUCERS], *nested_pool;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;     /* the id check */
static pthread_mutex_t set_mu = PTHREAD_MUTEX_INITIALIZER; /* setters one at a time: "replaced" is exact */
static uint64_t next_id, delivered;                        /* under mu */
static atomic_ullong produced;
static atomic_int stop_flag, errors;
static atomic_long swaps;
static _Atomic(ud *) installing; /* the user_data of the set_fn in progress */
static ud *current;              /* under set_mu */

#define ERR(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        atomic_fetch_add(&errors, 1);                                                              \
    } while (0)

static void spin_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static int put(kvreg_pool *pool, uint64_t h) {
    kvreg_pool_block_desc d = KVREG_POOL_BLOCK_DESC_INIT;
    d.sequence_hash = h;
    d.block_hash = h ^ 0x5555;
    kvreg_block b;
    if (kvreg_pool_register(pool, &d, &b) != KVREG_OK) return -1;
    atomic_fetch_add(&produced, 1);
    if (kvreg_pool_release(pool, b) != KVREG_OK) return -1;
    atomic_fetch_add(&produced, 1);
    return 0;
}

static void on_events(const kvreg_event *ev, size_t n, void *p) {
    ud *u = p;
    if (atomic_load(&u->destroyed)) ERR("callback %d called after its destroy\n", u->id);
    if (atomic_load(&u->replaced)) ERR("callback %d called after the set_fn replacing it returned\n", u->id);
    if (atomic_fetch_add(&u->running, 1) != 0) ERR("callback %d running twice at once\n", u->id);
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].event_id != next_id)
            ERR("event id %llu, expected %llu\n", (unsigned long long)ev[i].event_id, (unsigned long long)next_id);
        next_id = ev[i].event_id + 1;
    }
    delivered += n;
    pthread_mutex_unlock(&mu);
    static atomic_ulong calls;
    const unsigned long c = atomic_fetch_add(&calls, 1);
    if (c % 7 == 0) { /* nested calls: delivered by this thread after this call returns */
        if (kvreg_registry_set_event_fn(reg, on_events, u, NULL) != KVREG_EBUSY) ERR("nested set_fn not EBUSY\n");
        if (kvreg_registry_flush(reg) != KVREG_EBUSY) ERR("nested flush not EBUSY\n");
        if (put(nested_pool, UINT64_C(0xABC000000000) + c) != 0) ERR("nested register/release\n");
    }
    spin_us(SPIN_US_PER_EVENT * (long)(n < 50 ? n : 50));
    atomic_fetch_sub(&u->running, 1);
}

static void on_destroy(void *p) {
    ud *u = p;
    if (atomic_load(&u->running)) ERR("destroy of %d while its callback runs\n", u->id);
    if (atomic_fetch_add(&u->destroyed, 1) != 0) ERR("destroy of %d twice\n", u->id);
    if (atomic_load(&installing) == u) ERR("destroy of %d, the callback its set_fn installs\n", u->id);
}

static ud *new_ud(void) {
    const int i = atomic_fetch_add(&n_uds, 1);
    if (i >= MAX_UD) return NULL;
    ud *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    u->id = i;
    uds[i] = u;
    return u;
}

static void *producer(void *arg) {
    const int idx = (int)(intptr_t)arg;
    for (uint64_t i = 0; !atomic_load(&stop_flag); i++) {
        if (put(pools[idx], ((uint64_t)(idx + 1) << 32) | (i % 64)) != 0) {
            ERR("register/release\n");
            break;
        }
        if (idx == 0 && (i & 1023) == 0 && kvreg_registry_flush(reg) != KVREG_OK) ERR("flush\n");
    }
    return NULL;
}

/* Replace the callback with a new user_data; afterwards the old one must never be called. */
static int swap_in(void) {
    ud *u = new_ud();
    if (!u) return -1;
    pthread_mutex_lock(&set_mu);
    atomic_store(&installing, u);
    const int rc = kvreg_registry_set_event_fn(reg, on_events, u, on_destroy);
    if (rc != KVREG_OK) ERR("set_fn: %d\n", rc);
    atomic_store(&current->replaced, 1);
    current = u;
    atomic_store(&installing, NULL);
    pthread_mutex_unlock(&set_mu);
    atomic_fetch_add(&swaps, 1);
    return 0;
}

static void *setter(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop_flag)) {
        if (swap_in() != 0) break;
        /* a pause of up to 200 us between swaps (a clock read, not a sleep) */
        spin_us((long)(rand_r(&seed) % 200));
    }
    return NULL;
}

int main(int argc, char **argv) {
    long seconds = 2;
    const char *env = getenv("KVREG_STRESS_SECONDS");
    if (env) seconds = atol(env);
    if (argc > 1) seconds = atol(argv[1]);
    ud *first = new_ud();
    kvreg_config *cfg = NULL;
    if (!first || kvreg_config_new(&cfg) != KVREG_OK ||
        kvreg_config_set_event_fn(cfg, on_events, first, on_destroy) != KVREG_OK ||
        kvreg_registry_new(&reg, cfg) != KVREG_OK) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    kvreg_config_free(cfg); /* the registry holds the only reference: destroy runs in set_fn */
    current = first;
    for (int i = 0; i < PRODUCERS; i++) {
        char name[8] = {'P', (char)('0' + i), 0};
        if (kvreg_pool_new(&pools[i], reg, name) != KVREG_OK) return 1;
    }
    if (kvreg_pool_new(&nested_pool, reg, "nested") != KVREG_OK) return 1;
    pthread_t pt[PRODUCERS], st[SETTERS];
    for (int i = 0; i < PRODUCERS; i++) pthread_create(&pt[i], NULL, producer, (void *)(intptr_t)i);
    for (int i = 0; i < SETTERS; i++) pthread_create(&st[i], NULL, setter, (void *)(uintptr_t)(i + 1));
    const time_t end = time(NULL) + seconds;
    while (time(NULL) < end && atomic_load(&errors) < 20) {
        const struct timespec tick = {0, 50 * 1000000L}; /* the run's length, not a synchronisation */
        nanosleep(&tick, NULL);
    }
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < SETTERS; i++) pthread_join(st[i], NULL);
    for (int i = 0; i < PRODUCERS; i++) pthread_join(pt[i], NULL);
    if (swap_in() != 0) ERR("last swap\n"); /* with nothing running: then only it is called */
    if (kvreg_registry_flush(reg) != KVREG_OK) ERR("flush\n");
    pthread_mutex_lock(&mu);
    const uint64_t got = delivered;
    pthread_mutex_unlock(&mu);
    if (got != atomic_load(&produced))
        ERR("delivered %llu of %llu events\n", (unsigned long long)got, (unsigned long long)atomic_load(&produced));
    int live = 0;
    for (int i = 0; i < atomic_load(&n_uds); i++) live += !atomic_load(&uds[i]->destroyed);
    if (live != 1 || atomic_load(&current->destroyed)) ERR("%d user_data not destroyed before the free, want 1\n", live);
    for (int i = 0; i < PRODUCERS; i++) kvreg_pool_free(pools[i]);
    kvreg_pool_free(nested_pool);
    kvreg_registry_free(reg);
    for (int i = 0; i < atomic_load(&n_uds); i++) {
        if (atomic_load(&uds[i]->destroyed) != 1) ERR("user_data %d destroyed %d times\n", i, atomic_load(&uds[i]->destroyed));
        free(uds[i]);
    }
    printf("%ld swaps, %llu events, %d errors\n", atomic_load(&swaps), (unsigned long long)got, atomic_load(&errors));
    if (atomic_load(&swaps) < 2) {
        fprintf(stderr, "fewer than 2 swaps: nothing was tested\n");
        return 1;
    }
    return atomic_load(&errors) ? 1 : 0;
}
