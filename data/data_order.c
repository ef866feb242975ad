/* data/data_order.c: data.order's permutation (data/data_order.h). */
#include "data/data_order.h"

/* splitmix64's finaliser: a well-mixed 64-bit function of x. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum { FEISTEL_ROUNDS = 4 };

/* One pass of the Feistel network over 2*half bits: a bijection of [0, 2^(2 half)). */
static uint64_t feistel(uint64_t x, int half, const uint64_t *keys) {
  uint64_t mask = (1ULL << half) - 1, l = x >> half, r = x & mask;
  for (int i = 0; i < FEISTEL_ROUNDS; i++) {
    uint64_t t = l ^ (mix64(r ^ keys[i]) & mask);
    l = r;
    r = t;
  }
  return (l << half) | r;
}

int64_t data_order_perm(uint64_t seed, uint64_t epoch, int64_t r, int64_t n) {
  if (n <= 1) return 0;
  int half = 1;
  while (half < 32 && (1ULL << (2 * half)) < (uint64_t)n) half++;
  uint64_t keys[FEISTEL_ROUNDS];
  uint64_t base = mix64(seed ^ mix64(epoch ^ 0x5eed0fda7a0deULL));
  for (int i = 0; i < FEISTEL_ROUNDS; i++) keys[i] = mix64(base + (uint64_t)i);
  /* Cycle walking: the walk from r stays in r's cycle of the bijection, and the first value
   * below n reached is unique to r, so the result is a bijection of [0, n). */
  uint64_t x = (uint64_t)r;
  do x = feistel(x, half, keys);
  while (x >= (uint64_t)n);
  return (int64_t)x;
}

int64_t data_order_window(int shuffled, uint64_t seed, int64_t step, int64_t G, int64_t j,
                          int64_t n) {
  unsigned __int128 k = (unsigned __int128)step * (unsigned __int128)G + (unsigned __int128)j;
  int64_t r = (int64_t)(k % (unsigned __int128)n);
  if (!shuffled) return r;
  unsigned __int128 e = k / (unsigned __int128)n;
  return data_order_perm(seed, (uint64_t)e ^ (uint64_t)(e >> 64), r, n);
}
