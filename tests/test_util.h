/* tests/test_util.h: a check macro that counts failures and the summary every test prints. */
#ifndef PT_TEST_UTIL_H
#define PT_TEST_UTIL_H

#include <stdio.h>

static int g_checks, g_failed;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    g_checks++;                                                       \
    if (!(cond)) {                                                    \
      g_failed++;                                                     \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
    }                                                                 \
  } while (0)

/* Prints "NAME: N passed, M failed" and returns the exit status. */
static inline int test_summary(const char *name) {
  printf("%s: %d passed, %d failed\n", name, g_checks - g_failed, g_failed);
  return g_failed ? 1 : 0;
}

#endif
