/* data/data_order.h: which window (or record) sample k of the run reads under data.order.
 *
 * The data are n windows (token data: n = floor((N - 1) / T) non-overlapping windows of T + 1
 * tokens starting at multiples of T; record data: n = R records). Sample k = s*G + j (step s,
 * sequence j of the global batch G) belongs to epoch e = k / n at position r = k mod n and reads
 * window perm(seed, e, r). perm(seed, e, .) is a bijection of [0, n): a 4-round keyed Feistel
 * network over the smallest even-bit power of two >= n, cycle-walked back into [0, n) (the domain
 * is < 4n, so a lookup takes under 4 walks on average), keyed by (seed, e, round) through
 * splitmix64. Each lookup is O(1) memory: nothing of size n is stored. A pure function of its
 * arguments: every stage, every layout and a resumed run read the same windows. */
#ifndef PT_DATA_ORDER_H
#define PT_DATA_ORDER_H

#include <stdint.h>

/* The window of position r (0 <= r < n) in epoch `epoch` of a seeded shuffle of n >= 1 windows. */
int64_t data_order_perm(uint64_t seed, uint64_t epoch, int64_t r, int64_t n);
/* The window sample k = step*G + j reads: sequential (shuffled 0) k mod n, or shuffled
 * data_order_perm(seed, k / n, k mod n). Exact for any step (128-bit intermediate). */
int64_t data_order_window(int shuffled, uint64_t seed, int64_t step, int64_t G, int64_t j,
                          int64_t n);

#endif
