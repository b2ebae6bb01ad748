/* test.h — a minimal test harness: CHECK macros that count and report failures with
 * file:line, and a runner. Every test binary prints its totals and exits non-zero on any
 * failure. */
#ifndef QTK_TEST_H
#define QTK_TEST_H

#include "qtk.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#  define QTK_TEST_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define QTK_TEST_PRINTF(a, b)
#endif

extern long test_checks, test_failures;
extern const char *test_current;

#define TEST_FAILMSG(...)                                                                                       \
    do {                                                                                                        \
        test_failures++;                                                                                        \
        if (test_failures <= 50) {                                                                              \
            fprintf(stderr, "FAIL %s (%s:%d): ", test_current, __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                                       \
            fputc('\n', stderr);                                                                                \
        }                                                                                                       \
    } while (0)

#define CHECK(cond)                                                                                             \
    do {                                                                                                        \
        test_checks++;                                                                                          \
        if (!(cond)) TEST_FAILMSG("%s", #cond);                                                                 \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                    \
    do {                                                                                                        \
        test_checks++;                                                                                          \
        if (!(cond)) TEST_FAILMSG(__VA_ARGS__);                                                                 \
    } while (0)

#define CHECK_EQ_U(a, b)                                                                                        \
    do {                                                                                                        \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);                          \
        test_checks++;                                                                                          \
        if (a_ != b_) TEST_FAILMSG("%s == %s: got %llu (0x%llx), expected %llu (0x%llx)", #a, #b, a_, a_, b_, b_); \
    } while (0)

/* Same f32 bit pattern. */
#define CHECK_BITS(a, b)                                                                                        \
    do {                                                                                                        \
        float a_ = (a), b_ = (b);                                                                               \
        uint32_t ua_, ub_;                                                                                      \
        memcpy(&ua_, &a_, 4);                                                                                   \
        memcpy(&ub_, &b_, 4);                                                                                   \
        test_checks++;                                                                                          \
        if (ua_ != ub_) TEST_FAILMSG("%s == %s: got %.9g (0x%08x), expected %.9g (0x%08x)", #a, #b, (double)a_, ua_, \
                                     (double)b_, ub_);                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                                          \
    do {                                                                                                        \
        qtk_status st_ = (expr);                                                                                \
        test_checks++;                                                                                          \
        if (st_ != QTK_OK) TEST_FAILMSG("%s: %s: %s", #expr, qtk_status_name(st_), qtk_last_error());            \
    } while (0)

/* Status equals `want` and the last error message contains `sub`. */
#define CHECK_ERR(expr, want, sub)                                                                              \
    do {                                                                                                        \
        qtk_status st_ = (expr);                                                                                \
        test_checks++;                                                                                          \
        if (st_ != (want)) TEST_FAILMSG("%s: got %s (%s), expected %s", #expr, qtk_status_name(st_),             \
                                        qtk_last_error(), qtk_status_name(want));                               \
        else if (!strstr(qtk_last_error(), (sub)))                                                              \
            TEST_FAILMSG("%s: message '%s' lacks '%s'", #expr, qtk_last_error(), (sub));                         \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

int test_run(const char *suite, const test_case *cases, size_t n, int argc, char **argv);

#define TEST_MAIN(suite, ...)                                                                                   \
    int main(int argc, char **argv) {                                                                           \
        static const test_case cases_[] = {__VA_ARGS__};                                                        \
        return test_run(suite, cases_, sizeof cases_ / sizeof cases_[0], argc, argv);                           \
    }
#define T(fn) {#fn, fn}

/* Deterministic random numbers for tests. */
uint64_t trand_u64(uint64_t *s);
float trand_uniform(uint64_t *s, float lo, float hi);
float trand_normal(uint64_t *s);

#endif
