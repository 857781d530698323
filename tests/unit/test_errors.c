/* Status strings, versions, configuration validation, and NULL/zero arguments to every
 * registry and pool function (each gets a clear code, never a crash). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdio.h>
#include <string.h>

/* The status codes are ABI: kvreg.h says "Values are stable; new codes are only ever added".
 * The expected values are written out as numbers, not taken from the macros, so a changed
 * macro fails here. */
static void test_status_code_values(void **state) {
    (void)state;
    assert_int_equal(KVREG_OK, 0);
    assert_int_equal(KVREG_EINVAL, -1);
    assert_int_equal(KVREG_ENOMEM, -2);
    assert_int_equal(KVREG_ERANGE, -3);
    assert_int_equal(KVREG_ESTATE, -4);
    assert_int_equal(KVREG_EEXIST, -5);
    assert_int_equal(KVREG_ENOENT, -6);
    assert_int_equal(KVREG_ESTALE, -7);
    assert_int_equal(KVREG_EBUSY, -8);
    assert_int_equal(KVREG_EOVERFLOW, -9);
    assert_int_equal(KVREG_ENOTSUP, -10);
    assert_int_equal(KVREG_EPROTO, -11);
}

/* kvreg_strerror: "Static, never NULL; "unknown error" for codes it does not know." Every code
 * 0 .. -11 (by number) has its own text; the numbers around them are unknown. */
static void test_strerror_names_every_code(void **state) {
    (void)state;
    const char *unknown = kvreg_strerror(-12345);
    assert_non_null(unknown);
    assert_string_equal(unknown, "unknown error");
    assert_string_equal(kvreg_strerror(1), "unknown error");
    assert_string_equal(kvreg_strerror(-12), "unknown error"); /* the next code, when added, goes here */
    assert_string_equal(kvreg_strerror(INT32_MIN), "unknown error");
    assert_string_equal(kvreg_strerror(INT32_MAX), "unknown error");
    for (int code = 0; code >= -11; code--) {
        const char *s = kvreg_strerror(code);
        assert_non_null(s);
        assert_true(s[0] != '\0');
        assert_string_not_equal(s, "unknown error");
        for (int other = 0; other > code; other--) assert_string_not_equal(s, kvreg_strerror(other));
        assert_ptr_equal(kvreg_strerror(code), s); /* static: the same string every time */
    }
}

/* The runtime version against the header's, and the number against the string: the two are
 * generated separately (kvreg_version.h.in), so a template slip shows. */
/* kvreg_features: only the defined bits, and the same answer every time (which bits are set
 * depends on how the library was built: -DKVREG_WITH_WIRE / -DKVREG_WITH_ZMQ). */
static void test_features_bits(void **state) {
    (void)state;
    const unsigned f = kvreg_features();
    assert_int_equal(KVREG_FEATURE_WIRE, 1);
    assert_int_equal(KVREG_FEATURE_ZMQ, 2);
    assert_int_equal(f & ~(KVREG_FEATURE_WIRE | KVREG_FEATURE_ZMQ), 0);
    assert_int_equal(kvreg_features(), f);
}

static void test_versions_match_header(void **state) {
    (void)state;
    unsigned major = 0, minor = 0, patch = 0;
    char tail = 0;
    assert_int_equal(kvreg_version_number(), KVREG_VERSION_NUMBER);
    assert_string_equal(kvreg_version_string(), KVREG_VERSION_STRING);
    assert_int_equal(sscanf(kvreg_version_string(), "%u.%u.%u%c", &major, &minor, &patch, &tail), 3);
    assert_true(minor < 100 && patch < 100); /* MAJOR*10000 + MINOR*100 + PATCH is unambiguous */
    assert_int_equal(kvreg_version_number(), major * 10000 + minor * 100 + patch);
    assert_int_equal(KVREG_VERSION_MAJOR, major);
    assert_int_equal(KVREG_VERSION_MINOR, minor);
    assert_int_equal(KVREG_VERSION_PATCH, patch);
}

static void test_config_validation(void **state) {
    (void)state;
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(NULL, KVREG_OPT_SHARDS, 4), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, 9999, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, (UINT64_C(1) << 32) + 1), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 3), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 8192), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 4096), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(NULL, NULL, NULL, NULL), KVREG_EINVAL);
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_registry_new(NULL, cfg), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_registry_free(reg);
    kvreg_config_free(cfg);
    kvreg_config_free(NULL);
    kvreg_registry_free(NULL);
}

static void test_null_arguments_everywhere(void **state) {
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_block h = 0;
    kvreg_block_desc d;
    kvreg_block_info info;
    uint64_t v = 0;
    size_t n = 0;
    uint32_t rc = 0;
    kvreg_event ev[1];
    memset(&d, 0, sizeof d);
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(NULL, reg, "x"), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_new(&pool, NULL, "x"), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_new(&pool, reg, "x"), KVREG_OK);

    assert_int_equal(kvreg_registry_contains(NULL, 1, &(int){0}), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_stat(NULL, KVREG_STAT_HASHES, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_HASHES, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_stat(reg, 999, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_poll(NULL, ev, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_poll(reg, NULL, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_set_event_fn(NULL, NULL, NULL, NULL), KVREG_EINVAL);

    assert_int_equal(kvreg_register(NULL, &d, &h), KVREG_EINVAL);
    assert_int_equal(kvreg_register(pool, NULL, &h), KVREG_EINVAL);
    assert_int_equal(kvreg_register(pool, &d, NULL), KVREG_EINVAL);
    d.n_tokens = 4; /* tokens claimed but NULL */
    assert_int_equal(kvreg_register(pool, &d, &h), KVREG_EINVAL);
    d.n_tokens = 0;
    assert_int_equal(kvreg_register_sequence_block(pool, NULL, 0, &h), KVREG_EINVAL);
    assert_int_equal(kvreg_register_sequence(pool, NULL, 0, 1, &h, NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_register_batch(NULL, &d, 1, &h, NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_register_batch(pool, &d, 1, NULL, NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire(NULL, 1, &h), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire(pool, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire_prefix(pool, NULL, 1, &h, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire_prefix(pool, &v, 1, &h, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_release(NULL, h), KVREG_EINVAL);
    assert_int_equal(kvreg_release_batch(pool, NULL, 1, NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_contains(NULL, 1, &(int){0}), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_match(pool, NULL, 1, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_match(pool, &v, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_match(pool, NULL, 0, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_block_get_info(NULL, h, &info), KVREG_EINVAL);
    assert_int_equal(kvreg_block_get_info(pool, h, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_block_refcount(pool, h, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_block_refcount(pool, 12345, &rc), KVREG_ESTALE);
    assert_int_equal(kvreg_block_tokens(pool, h, NULL, 4, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_block_tokens(pool, h, NULL, 0, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_id(NULL), 0);
    assert_string_equal(kvreg_pool_name(NULL), "");
    assert_int_equal(kvreg_pool_size(NULL), 0);
    kvreg_pool_free(NULL);

    /* nothing above changed anything */
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &v), KVREG_OK);
    assert_int_equal(v, 0);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_NEXT_EVENT_ID, &v), KVREG_OK);
    assert_int_equal(v, 0);
    kvreg_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_code_values),
        cmocka_unit_test(test_strerror_names_every_code),
        cmocka_unit_test(test_versions_match_header),
        cmocka_unit_test(test_features_bits),
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_null_arguments_everywhere),
    };
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
