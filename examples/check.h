/*
 * check.h: the one helper the examples share. An example is also a test, so a failed
 * expectation must fail the run even in release builds, where assert() is compiled out.
 */
#ifndef KVREG_EXAMPLES_CHECK_H
#define KVREG_EXAMPLES_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* A libkvreg call that must return KVREG_OK. */
#define CHECK_OK(call)                                                                     \
    do {                                                                                   \
        int check_rc_ = (call);                                                            \
        if (check_rc_ != KVREG_OK) {                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,           \
                    kvreg_strerror(check_rc_));                                            \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#endif
