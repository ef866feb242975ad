/* data.order: shuffled. The permutation is a bijection of [0, n) for many n (1, 2, primes, powers
 * of two and their neighbours), differs between epochs and between seeds, and the window of
 * sample k = s*G + j follows epoch k / n, position k mod n; sequential order is k mod n. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_order.h"

static int failures;
#define CHECK(c, ...)                                                                  \
  do {                                                                                 \
    if (!(c)) {                                                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
      fprintf(stderr, __VA_ARGS__);                                                    \
      fprintf(stderr, "\n");                                                           \
      failures++;                                                                      \
    }                                                                                  \
  } while (0)

/* Fills out[n] with the permutation; 1 when every value is in range and hit exactly once. */
static int is_bijection(uint64_t seed, uint64_t epoch, int64_t n, int64_t *out) {
  char *seen = calloc((size_t)n, 1);
  int ok = 1;
  for (int64_t r = 0; r < n; r++) {
    int64_t w = data_order_perm(seed, epoch, r, n);
    out[r] = w;
    if (w < 0 || w >= n || seen[w]) ok = 0;
    else seen[w] = 1;
  }
  free(seen);
  return ok;
}

static int64_t differing(const int64_t *a, const int64_t *b, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; i++) d += a[i] != b[i];
  return d;
}

int main(void) {
  static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 63, 64, 65, 97, 127, 128,
                               255, 256, 257, 1000, 1021, 1024, 4099, 65536, 100003};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int64_t n = ns[i];
    int64_t *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n),
            *c = malloc(sizeof *c * (size_t)n);
    CHECK(is_bijection(1234, 0, n, a), "n=%lld epoch 0 is not a bijection", (long long)n);
    CHECK(is_bijection(1234, 1, n, b), "n=%lld epoch 1 is not a bijection", (long long)n);
    CHECK(is_bijection(99, 0, n, c), "n=%lld seed 99 is not a bijection", (long long)n);
    /* Different keys: for n >= 16 the orders must differ in many places (a random pair agrees in ~1
     * place; agreeing on half of n would be a broken key schedule). */
    if (n >= 16) {
      CHECK(differing(a, b, n) > n / 2, "n=%lld: epochs 0 and 1 differ in only %lld places",
            (long long)n, (long long)differing(a, b, n));
      CHECK(differing(a, c, n) > n / 2, "n=%lld: seeds 1234 and 99 differ in only %lld places",
            (long long)n, (long long)differing(a, c, n));
      CHECK(differing(a, a, n) == 0, "n=%lld: not deterministic", (long long)n);
    }
    /* The step rule: sample k = s G + j reads perm(seed, k / n, k mod n). */
    int64_t G = 6;
    for (int64_t s = 0; s < 3 * n / G + 2 && s < 50; s++)
      for (int64_t j = 0; j < G; j++) {
        int64_t k = s * G + j;
        int64_t w = data_order_window(1, 1234, s, G, j, n);
        int64_t want = k / n == 0   ? a[k % n]
                       : k / n == 1 ? b[k % n]
                                    : data_order_perm(1234, (uint64_t)(k / n), k % n, n);
        CHECK(w == want, "n=%lld step %lld j %lld: window %lld, want %lld", (long long)n,
              (long long)s, (long long)j, (long long)w, (long long)want);
        CHECK(data_order_window(0, 1234, s, G, j, n) == k % n, "sequential order is not k mod n");
      }
    free(a), free(b), free(c);
  }
  /* Huge n and step counts: in range, no overflow. */
  int64_t big = (int64_t)1 << 62;
  int64_t w = data_order_window(1, 7, INT64_MAX / 2, 1024, 3, big + 5);
  CHECK(w >= 0 && w < big + 5, "huge n: window %lld out of range", (long long)w);
  if (failures) return 1;
  printf("data_order: ok\n");
  return 0;
}
