/*
 * test.h — minimal test harness (sds test_cond + libuv-style typed asserts).
 * Usage: TEST(name) { ASSERT(cond); ASSERT_NEAR(a, b, tol); } ...
 *        int main(void) { RUN(name); return TEST_REPORT(); }
 * Each failing assertion prints file:line and both values; the process exits non-zero if any
 * assertion failed, and prints "N passed, N failed".
 */
#ifndef VQ_TEST_H
#define VQ_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failed_ = 0, test_checks_ = 0, tests_run_ = 0, tests_bad_ = 0;

#define TEST(name) static void name(void)
#define RUN(name) \
    do { \
        int f0_ = test_failed_; \
        tests_run_++; \
        name(); \
        if (test_failed_ != f0_) { \
            tests_bad_++; \
            fprintf(stderr, "FAIL %s\n", #name); \
        } else fprintf(stderr, "ok   %s\n", #name); \
    } while (0)
#define TEST_REPORT() \
    (printf("%d passed, %d failed\n", tests_run_ - tests_bad_, tests_bad_), tests_bad_ ? 1 : 0)

#define ASSERT(c) \
    do { \
        test_checks_++; \
        if (!(c)) { \
            test_failed_++; \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c); \
        } \
    } while (0)
#define ASSERT_EQ_INT(a, b) \
    do { \
        long long a_ = (long long)(a), b_ = (long long)(b); \
        test_checks_++; \
        if (a_ != b_) { \
            test_failed_++; \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, __LINE__, #a, #b, \
                    a_, b_); \
        } \
    } while (0)
#define ASSERT_NEAR(a, b, tol) \
    do { \
        double a_ = (double)(a), b_ = (double)(b); \
        test_checks_++; \
        if (!(fabs(a_ - b_) <= (tol))) { \
            test_failed_++; \
            fprintf(stderr, "%s:%d: |%s - %s| <= %g failed: %.9g vs %.9g\n", __FILE__, __LINE__, \
                    #a, #b, (double)(tol), a_, b_); \
        } \
    } while (0)
#define ASSERT_GE(a, b) \
    do { \
        double a_ = (double)(a), b_ = (double)(b); \
        test_checks_++; \
        if (!(a_ >= b_)) { \
            test_failed_++; \
            fprintf(stderr, "%s:%d: %s >= %s failed: %.9g vs %.9g\n", __FILE__, __LINE__, #a, #b, \
                    a_, b_); \
        } \
    } while (0)
#define ASSERT_LE(a, b) ASSERT_GE(b, a)
#define ASSERT_STATUS(st, want) ASSERT_EQ_INT(st, want)

#endif
