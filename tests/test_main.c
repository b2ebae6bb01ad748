/* test_main.c — the runner behind TEST_MAIN. */
#include "test.h"

#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

long test_checks, test_failures;
const char *test_current = "";

int test_run(const char *suite, const test_case *cases, size_t n, int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    bool times = getenv("QTK_TEST_TIMES") != NULL; /* each case's wall time, to stderr */
    size_t ran = 0;
    for (size_t i = 0; i < n; i++) {
        if (only && !strstr(cases[i].name, only)) continue;
        test_current = cases[i].name;
        long before = test_failures;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cases[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (times)
            fprintf(stderr, "  %-40s %8.2f s\n", cases[i].name,
                    (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        ran++;
        if (test_failures != before) fprintf(stderr, "  %s: %ld failure(s)\n", cases[i].name, test_failures - before);
    }
    printf("%s: %zu tests, %ld checks, %ld failures\n", suite, ran, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

uint64_t trand_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float trand_uniform(uint64_t *s, float lo, float hi) {
    double u = (double)(trand_u64(s) >> 11) * 0x1p-53;
    return (float)(lo + (hi - lo) * u);
}

float trand_normal(uint64_t *s) {
    double u = (double)(trand_u64(s) >> 11) * 0x1p-53, v = (double)(trand_u64(s) >> 11) * 0x1p-53;
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
