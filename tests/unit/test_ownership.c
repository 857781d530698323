/* Who owns a callback's user_data, and freeing a registry from its own callback.
 *
 * kvreg.h (kvreg_config_set_event_fn): "on success the config owns it, and every registry
 * built from the config shares it; destroy runs exactly once, when the last of them lets go
 * (the config freed or given another callback, each such registry freed or given another
 * callback)". kvreg_registry_set_event_fn: refused "KVREG_EBUSY when called from inside a
 * callback, KVREG_EINVAL in POLL mode ...: in each case the caller keeps user_data".
 * kvreg_registry_free: "Called from inside the registry's own callback it prints a message
 * and aborts the process"; that is checked in a forked child so the test runner survives. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct owner {
    int events;    /* events delivered with this user_data */
    int destroyed; /* destroy(user_data) calls */
} owner;

static void count_fn(const kvreg_event *ev, size_t n, void *ud) {
    (void)ev;
    ((owner *)ud)->events += (int)n;
}

static void count_destroy(void *ud) { ((owner *)ud)->destroyed++; }

static kvreg_block_desc desc_of(uint64_t h) {
    kvreg_block_desc d;
    memset(&d, 0, sizeof d);
    d.sequence_hash = h;
    d.block_hash = h + 1;
    return d;
}

/* Register (and keep) one new hash in a fresh pool of reg: one Register event. */
static void emit_one(kvreg_registry *reg, uint64_t h) {
    kvreg_pool *p = NULL;
    kvreg_block b = 0;
    kvreg_block_desc d = desc_of(h);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    assert_int_equal(kvreg_register(p, &d, &b), KVREG_OK);
}

static kvreg_config *config_with(owner *o) {
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, count_fn, o, count_destroy), KVREG_OK);
    return cfg;
}

/* ---- one config, three registries ------------------------------------------------------- */
static void test_config_then_registries_freed(void **state) {
    (void)state;
    owner a = {0, 0};
    kvreg_registry *r[3] = {NULL, NULL, NULL};
    kvreg_config *cfg = config_with(&a);
    for (int i = 0; i < 3; i++) assert_int_equal(kvreg_registry_new(&r[i], cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(a.destroyed, 0);
    for (int i = 0; i < 3; i++) emit_one(r[i], 10 + (uint64_t)i);
    assert_int_equal(a.events, 3); /* all three deliver to the shared user_data */
    kvreg_registry_free(r[0]);
    assert_int_equal(a.destroyed, 0);
    kvreg_registry_free(r[1]);
    assert_int_equal(a.destroyed, 0);
    emit_one(r[2], 20); /* the last one still delivers */
    assert_int_equal(a.events, 4);
    kvreg_registry_free(r[2]);
    assert_int_equal(a.destroyed, 1);
}

static void test_registries_then_config_freed(void **state) {
    (void)state;
    owner a = {0, 0};
    kvreg_registry *r[3] = {NULL, NULL, NULL};
    kvreg_config *cfg = config_with(&a);
    for (int i = 0; i < 3; i++) assert_int_equal(kvreg_registry_new(&r[i], cfg), KVREG_OK);
    for (int i = 0; i < 3; i++) {
        kvreg_registry_free(r[i]);
        assert_int_equal(a.destroyed, 0); /* the config still holds it */
    }
    /* and the config can still build a registry with it */
    assert_int_equal(kvreg_registry_new(&r[0], cfg), KVREG_OK);
    emit_one(r[0], 1);
    assert_int_equal(a.events, 1);
    kvreg_registry_free(r[0]);
    assert_int_equal(a.destroyed, 0);
    kvreg_config_free(cfg);
    assert_int_equal(a.destroyed, 1);
}

/* Replacing the callback of one registry drops only that registry's reference. */
static void test_replace_on_one_registry(void **state) {
    (void)state;
    owner a = {0, 0}, b = {0, 0};
    kvreg_registry *r[3] = {NULL, NULL, NULL};
    kvreg_config *cfg = config_with(&a);
    for (int i = 0; i < 3; i++) assert_int_equal(kvreg_registry_new(&r[i], cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_registry_set_event_fn(r[0], count_fn, &b, count_destroy), KVREG_OK);
    assert_int_equal(a.destroyed, 0); /* r[1] and r[2] still share a */
    emit_one(r[0], 1);
    emit_one(r[1], 2);
    assert_int_equal(b.events, 1);
    assert_int_equal(a.events, 1);
    /* clearing it on another registry: still shared by r[2] */
    assert_int_equal(kvreg_registry_set_event_fn(r[1], NULL, NULL, NULL), KVREG_OK);
    assert_int_equal(a.destroyed, 0);
    kvreg_registry_free(r[1]);
    assert_int_equal(a.destroyed, 0);
    kvreg_registry_free(r[2]);
    assert_int_equal(a.destroyed, 1);
    assert_int_equal(b.destroyed, 0);
    kvreg_registry_free(r[0]);
    assert_int_equal(b.destroyed, 1);
    assert_int_equal(a.destroyed, 1);
}

/* The config given another callback lets go of the first; registries built before keep it. */
static void test_replace_on_the_config(void **state) {
    (void)state;
    owner a = {0, 0}, b = {0, 0};
    kvreg_registry *r1 = NULL, *r2 = NULL;
    kvreg_config *cfg = config_with(&a);
    assert_int_equal(kvreg_registry_new(&r1, cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, count_fn, &b, count_destroy), KVREG_OK);
    assert_int_equal(a.destroyed, 0); /* r1 holds it */
    assert_int_equal(kvreg_registry_new(&r2, cfg), KVREG_OK);
    emit_one(r1, 1);
    emit_one(r2, 2);
    assert_int_equal(a.events, 1);
    assert_int_equal(b.events, 1);
    kvreg_registry_free(r1);
    assert_int_equal(a.destroyed, 1);
    assert_int_equal(kvreg_config_set_event_fn(cfg, NULL, NULL, NULL), KVREG_OK);
    assert_int_equal(b.destroyed, 0); /* r2 holds it */
    kvreg_config_free(cfg);
    kvreg_registry_free(r2);
    assert_int_equal(b.destroyed, 1);
    assert_int_equal(a.destroyed, 1);
}

/* ---- refused set_event_fn: the caller keeps user_data ----------------------------------- */
static void test_refused_in_poll_mode(void **state) {
    (void)state;
    owner x = {0, 0};
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_registry_set_event_fn(reg, count_fn, &x, count_destroy), KVREG_EINVAL);
    assert_int_equal(x.destroyed, 0);
    emit_one(reg, 1); /* queued for poll, never handed to count_fn */
    kvreg_registry_free(reg);
    assert_int_equal(x.destroyed, 0);
    assert_int_equal(x.events, 0);
}

/* ---- fn NULL with user_data: accepted, so owned, so destroyed ---------------------------- */
/* A call that succeeds takes user_data even when it clears the callback: destroy runs (at
 * once: nothing calls it). It was never run (the user_data leaked). */
static void test_cleared_with_user_data_destroyed(void **state) {
    (void)state;
    owner x = {0, 0}, y = {0, 0};
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, NULL, &x, count_destroy), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_registry_set_event_fn(reg, NULL, &y, count_destroy), KVREG_OK);
    emit_one(reg, 1); /* counted and dropped: no callback */
    kvreg_registry_free(reg);
    assert_int_equal(x.destroyed, 1);
    assert_int_equal(y.destroyed, 1);
    assert_int_equal(x.events + y.events, 0);
}

typedef struct nested {
    kvreg_registry *reg;
    owner self;       /* the installed callback's user_data */
    owner offered;    /* what the callback tries to install */
    int status;       /* what kvreg_registry_set_event_fn answered */
    int tries;
} nested;

static void replace_from_inside(const kvreg_event *ev, size_t n, void *ud) {
    nested *s = ud;
    (void)ev;
    s->self.events += (int)n;
    s->status = kvreg_registry_set_event_fn(s->reg, count_fn, &s->offered, count_destroy);
    s->tries++;
}

static void nested_destroy(void *ud) { ((nested *)ud)->self.destroyed++; }

static void test_refused_from_inside_a_callback(void **state) {
    (void)state;
    nested s;
    kvreg_config *cfg = NULL;
    memset(&s, 0, sizeof s);
    s.status = 12345;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, replace_from_inside, &s, nested_destroy), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&s.reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    emit_one(s.reg, 1);
    assert_int_equal(s.tries, 1);
    assert_int_equal(s.status, KVREG_EBUSY);
    assert_int_equal(s.offered.destroyed, 0);
    /* refused means not installed: the next event still goes to the first callback */
    emit_one(s.reg, 2);
    assert_int_equal(s.tries, 2);
    assert_int_equal(s.status, KVREG_EBUSY);
    assert_int_equal(s.self.events, 2);
    assert_int_equal(s.offered.events, 0);
    assert_int_equal(s.self.destroyed, 0);
    kvreg_registry_free(s.reg);
    assert_int_equal(s.self.destroyed, 1);
    assert_int_equal(s.offered.destroyed, 0); /* never the library's */
}

/* ---- kvreg_registry_free from a callback -------------------------------------------------- */
static void free_own_registry(const kvreg_event *ev, size_t n, void *ud) {
    (void)ev;
    (void)n;
    kvreg_registry_free(*(kvreg_registry **)ud);
}

/* Runs in the child: returns only if kvreg_registry_free did not abort. */
static void child_frees_from_callback(void) {
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL;
    kvreg_block b = 0;
    kvreg_block_desc d = desc_of(7);
    if (kvreg_config_new(&cfg) != KVREG_OK || kvreg_config_set_event_fn(cfg, free_own_registry, &reg, NULL) != KVREG_OK ||
        kvreg_registry_new(&reg, cfg) != KVREG_OK || kvreg_pool_new(&p, reg, "p") != KVREG_OK)
        _exit(3);
    kvreg_config_free(cfg);
    (void)kvreg_register(p, &d, &b); /* its Register event runs free_own_registry */
}

static void test_free_from_own_callback_aborts(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        (void)setrlimit(RLIMIT_CORE, &no_core); /* the abort is expected: no core file */
        close(fds[0]);
        if (dup2(fds[1], STDERR_FILENO) < 0) _exit(4);
        child_frees_from_callback();
        _exit(0); /* kvreg_registry_free returned: the parent reports it */
    }
    close(fds[1]);
    char err[4096];
    size_t len = 0;
    while (len < sizeof err - 1) { /* until EOF: the child is gone */
        const ssize_t got = read(fds[0], err + len, sizeof err - 1 - len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        len += (size_t)got;
    }
    err[len] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status)) print_error("child exited with %d; its stderr:\n%s\n", WEXITSTATUS(status), err);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    if (!strstr(err, "kvreg_registry_free")) print_error("child's stderr:\n%s\n", err);
    assert_non_null(strstr(err, "kvreg_registry_free"));
}

/* Only the registry's own callback is refused: another registry may be freed from it. */
typedef struct other {
    kvreg_registry *victim;
    int freed;
} other;

static void free_other_registry(const kvreg_event *ev, size_t n, void *ud) {
    other *o = ud;
    (void)ev;
    (void)n;
    if (o->victim) {
        kvreg_registry_free(o->victim);
        o->victim = NULL;
        o->freed++;
    }
}

static void test_free_of_another_registry_from_a_callback(void **state) {
    (void)state;
    other o = {NULL, 0};
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_registry_new(&o.victim, NULL), KVREG_OK);
    emit_one(o.victim, 1); /* it holds a pool and a block when it is freed */
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, free_other_registry, &o, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    emit_one(reg, 1);
    assert_int_equal(o.freed, 1);
    kvreg_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_then_registries_freed),
        cmocka_unit_test(test_registries_then_config_freed),
        cmocka_unit_test(test_replace_on_one_registry),
        cmocka_unit_test(test_replace_on_the_config),
        cmocka_unit_test(test_refused_in_poll_mode),
        cmocka_unit_test(test_refused_from_inside_a_callback),
        cmocka_unit_test(test_cleared_with_user_data_destroyed),
        cmocka_unit_test(test_free_from_own_callback_aborts),
        cmocka_unit_test(test_free_of_another_registry_from_a_callback),
    };
    return cmocka_run_group_tests_name("ownership", tests, NULL, NULL);
}
