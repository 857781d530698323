/* Suite net: the publisher and subscriber under failures injected through functions this
 * program defines itself (export_dynamic: the library's calls come here, and each hands the
 * others on to the real one).
 *
 *  - zmq_ctx_term interrupted by a signal. It waits for the context's sockets to close; a
 *    signal ends the wait with -1 and EINTR, and libzmq's contract is to call it again. Both
 *    ignored that: the context and its I/O thread lived on past kvreg_publisher_free, and
 *    libzmq later released queued replay batches into the freed publisher (a review
 *    reproduced the use-after-free under ASan, a signal every 20 us during the free). Here the
 *    armed call fails with EINTR, as an interrupted wait does. Checked: the library called
 *    again, so libzmq's term ran, and the context's threads are gone (the threads in
 *    /proc/self/task are as many as before the object was made).
 *  - pthread_create failing for the publisher's own thread (std::thread's, told apart from
 *    libzmq's by the library its start routine is in): start fails with KVREG_ENOMEM, and the topic is the one configured, so
 *    that the start retried tags it once (it used to keep the failed start's tag and add a
 *    second). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>

#include <cmocka.h>
#include <kvreg.h>
#include <kvreg_net.h>

#include "net_fixture.h"

static int interrupt_next; /* the next call fails with EINTR */
static int calls, real_calls;

int zmq_ctx_term(void *ctx);
int zmq_ctx_term(void *ctx) {
    static int (*real)(void *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "zmq_ctx_term");
    calls++;
    if (interrupt_next) {
        interrupt_next = 0;
        errno = EINTR;
        return -1;
    }
    real_calls++;
    return real(ctx);
}

static int fail_std_thread; /* the next std::thread the library makes fails */

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    Dl_info info;
    if (fail_std_thread && dladdr(*(void **)&fn, &info) && info.dli_fname && strstr(info.dli_fname, "libstdc++")) {
        fail_std_thread = 0;
        return EAGAIN;
    }
    return real(t, attr, fn, arg);
}

static int threads(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void publisher_free_interrupted(void **state) {
    (void)state;
    const int before = threads();
    net_pub p;
    net_pub_open(&p, 1, NULL, 1000, 0);
    net_pub_register(&p, 20);
    net_pub_settle(&p);
    assert_true(threads() > before); /* the context's I/O thread and the publisher's */
    calls = real_calls = 0;
    interrupt_next = 1;
    net_pub_close(&p);
    assert_int_equal(calls, 2);      /* interrupted, then called again */
    assert_int_equal(real_calls, 1);
    assert_int_equal(threads(), before);
}

static void subscriber_free_interrupted(void **state) {
    (void)state;
    const int before = threads();
    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    assert_int_equal(kvreg_subscriber_add(sub, "tcp://127.0.0.1:*", NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_subscriber_run(sub, 0), KVREG_OK);
    assert_true(threads() > before);
    calls = real_calls = 0;
    interrupt_next = 1;
    kvreg_subscriber_free(sub);
    assert_int_equal(calls, 2);
    assert_int_equal(real_calls, 1);
    assert_int_equal(threads(), before);
}

static void failed_start_tags_topic_once(void **state) {
    (void)state;
    kvreg_registry *reg = net_poll_registry(0);
    kvreg_publisher *pub = NULL;
    assert_int_equal(kvreg_publisher_new(&pub, reg), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*"), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, "kv@pod@model"), KVREG_OK);
    assert_int_equal(kvreg_publisher_set(pub, KVREG_PUB_OPT_TOPIC_INSTANCE, 1), KVREG_OK);
    const int before = threads();
    fail_std_thread = 1;
    assert_int_equal(kvreg_publisher_start(pub), KVREG_ENOMEM);
    assert_int_equal(fail_std_thread, 0); /* the failure came from the injected one */
    assert_int_equal(threads(), before);  /* nothing left running */
    char topic[128];
    size_t len = 0;
    assert_int_equal(kvreg_publisher_get_string(pub, KVREG_PUB_TOPIC, topic, sizeof topic, &len), KVREG_OK);
    assert_string_equal(topic, "kv@pod@model");
    uint64_t instance = 1;
    assert_int_equal(kvreg_publisher_stat(pub, KVREG_PUB_STAT_INSTANCE, &instance), KVREG_OK);
    assert_int_equal(instance, 0); /* no instance ran */
    assert_int_equal(kvreg_publisher_start(pub), KVREG_OK);
    assert_int_equal(kvreg_publisher_stat(pub, KVREG_PUB_STAT_INSTANCE, &instance), KVREG_OK);
    char want[128];
    snprintf(want, sizeof want, "kv@pod@model|kvreg-instance=%016llx", (unsigned long long)instance);
    assert_int_equal(kvreg_publisher_get_string(pub, KVREG_PUB_TOPIC, topic, sizeof topic, &len), KVREG_OK);
    assert_string_equal(topic, want);
    kvreg_publisher_free(pub);
    kvreg_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(publisher_free_interrupted),
        cmocka_unit_test(subscriber_free_interrupted),
        cmocka_unit_test(failed_start_tags_topic_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
