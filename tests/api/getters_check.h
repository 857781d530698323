/* The checks every object's _get / _get_string must pass (docs/config.md, kvreg.h "One
 * configuration pattern"), driven by a table per object written by hand from the header
 * docs: each option's default, then a value the setter accepts, read back. The object is
 * reached through four small wrappers (ops), one set per object type. */
#ifndef KVREG_TEST_GETTERS_CHECK_H
#define KVREG_TEST_GETTERS_CHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <kvreg.h>

typedef struct {
    int (*get)(const void *obj, uint32_t option, uint64_t *value);
    int (*set)(void *obj, uint32_t option, uint64_t value);
    int (*get_string)(const void *obj, uint32_t option, char *buf, size_t cap, size_t *len);
    int (*set_string)(void *obj, uint32_t option, const char *value);
} getter_ops;

/* GETTER_OPS(ops, kvreg_publisher): the getter_ops `ops` over kvreg_publisher_get, _set,
 * _get_string and _set_string (the handles go through void *). */
#define GETTER_OPS(ops, prefix)                                                                   \
    static int ops##_get(const void *o, uint32_t opt, uint64_t *v) { return prefix##_get(o, opt, v); } \
    static int ops##_set(void *o, uint32_t opt, uint64_t v) { return prefix##_set(o, opt, v); }   \
    static int ops##_get_string(const void *o, uint32_t opt, char *buf, size_t cap, size_t *len) \
    {                                                                                             \
        return prefix##_get_string(o, opt, buf, cap, len);                                        \
    }                                                                                             \
    static int ops##_set_string(void *o, uint32_t opt, const char *s)                             \
    {                                                                                             \
        return prefix##_set_string(o, opt, s);                                                    \
    }                                                                                             \
    static const getter_ops ops = {ops##_get, ops##_set, ops##_get_string, ops##_set_string}

typedef struct {
    uint32_t option;
    uint64_t def; /* the documented default */
    uint64_t other; /* a value the setter accepts, not the default */
} u64_case;

typedef struct {
    uint32_t option;
    const char *def;   /* the documented default; NULL: KVREG_ENOENT */
    const char *other; /* a value the setter accepts */
} str_case;

/* Every option of the table: its default, then set and read back. Then the unknown options
 * (EINVAL, *value untouched) and NULL arguments. */
static void check_u64(const getter_ops *ops, void *obj, const u64_case *c, size_t n,
                      const uint32_t *unknown, size_t n_unknown)
{
    size_t i;
    uint64_t v;
    for (i = 0; i < n; i++) {
        v = 0xdeadbeefu;
        assert_int_equal(ops->get(obj, c[i].option, &v), KVREG_OK);
        if (v != c[i].def) fail_msg("option %u: default %llu, expected %llu", (unsigned)c[i].option,
                                    (unsigned long long)v, (unsigned long long)c[i].def);
    }
    for (i = 0; i < n; i++) {
        assert_int_not_equal(c[i].def, c[i].other); /* the table itself */
        assert_int_equal(ops->set(obj, c[i].option, c[i].other), KVREG_OK);
    }
    /* read back after every set: one option's set does not land in another's field */
    for (i = 0; i < n; i++) {
        v = 0xdeadbeefu;
        assert_int_equal(ops->get(obj, c[i].option, &v), KVREG_OK);
        if (v != c[i].other) fail_msg("option %u: read %llu after setting %llu", (unsigned)c[i].option,
                                      (unsigned long long)v, (unsigned long long)c[i].other);
    }
    for (i = 0; i < n_unknown; i++) {
        v = 99;
        assert_int_equal(ops->get(obj, unknown[i], &v), KVREG_EINVAL);
        assert_int_equal(v, 99);
    }
    assert_int_equal(ops->get(obj, c[0].option, NULL), KVREG_EINVAL);
    assert_int_equal(ops->get(NULL, c[0].option, &v), KVREG_EINVAL);
}

/* One string read, compared with want (NULL: KVREG_ENOENT). */
static void check_string(const getter_ops *ops, const void *obj, uint32_t option, const char *want)
{
    char buf[256];
    size_t len = 12345;
    memset(buf, 'x', sizeof buf);
    if (!want) {
        assert_int_equal(ops->get_string(obj, option, buf, sizeof buf, &len), KVREG_ENOENT);
        assert_int_equal(buf[0], 'x');
        return;
    }
    assert_int_equal(ops->get_string(obj, option, buf, sizeof buf, &len), KVREG_OK);
    assert_string_equal(buf, want);
    assert_int_equal(len, strlen(want));
}

/* The buffer rules on a string of n >= 1 bytes: the length always, the bytes only with room
 * for them and their NUL. */
static void check_too_small(const getter_ops *ops, const void *obj, uint32_t option, const char *want)
{
    char buf[256];
    size_t len = 12345;
    const size_t n = strlen(want);
    assert_true(n >= 1 && n + 1 <= sizeof buf);
    memset(buf, 'x', sizeof buf);
    assert_int_equal(ops->get_string(obj, option, buf, n, &len), KVREG_ERANGE); /* no room for NUL */
    assert_int_equal(len, n);
    assert_int_equal(buf[0], 'x');
    len = 12345;
    assert_int_equal(ops->get_string(obj, option, NULL, 0, &len), KVREG_ERANGE); /* ask the length */
    assert_int_equal(len, n);
    assert_int_equal(ops->get_string(obj, option, buf, n + 1, &len), KVREG_OK); /* exact fit */
    assert_int_equal(buf[n], '\0');
    assert_memory_equal(buf, want, n);
    assert_int_equal(buf[n + 1], 'x');
    assert_int_equal(ops->get_string(obj, option, buf, sizeof buf, NULL), KVREG_EINVAL);
    assert_int_equal(ops->get_string(obj, option, NULL, 1, &len), KVREG_EINVAL);
    assert_int_equal(ops->get_string(NULL, option, buf, sizeof buf, &len), KVREG_EINVAL);
}

static void check_strings(const getter_ops *ops, void *obj, const str_case *c, size_t n,
                          const uint32_t *unknown, size_t n_unknown)
{
    size_t i;
    char buf[16];
    size_t len = 7;
    for (i = 0; i < n; i++) check_string(ops, obj, c[i].option, c[i].def);
    for (i = 0; i < n; i++) assert_int_equal(ops->set_string(obj, c[i].option, c[i].other), KVREG_OK);
    for (i = 0; i < n; i++) {
        check_string(ops, obj, c[i].option, c[i].other);
        check_too_small(ops, obj, c[i].option, c[i].other);
    }
    for (i = 0; i < n_unknown; i++) {
        memset(buf, 'x', sizeof buf);
        assert_int_equal(ops->get_string(obj, unknown[i], buf, sizeof buf, &len), KVREG_EINVAL);
        assert_int_equal(buf[0], 'x');
    }
}

#endif
