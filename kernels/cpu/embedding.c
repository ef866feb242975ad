/* Token embeddings on the CPU: a row gather, and its gradient added row by row in token order
 * (a token repeated in a batch adds its rows in the order they appear). */
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/ops.h"

void op_embedding_forward(float *y, const int32_t *ids, const float *table, int N, int D, int V) {
  for (int64_t n = 0; n < N; n++) {
    if (ids[n] < 0 || ids[n] >= V)
      pt_fatal("embedding: token id %d outside [0, %d)", ids[n], V);
    memcpy(y + n * D, table + (int64_t)ids[n] * D, sizeof(float) * (size_t)D);
  }
}

void op_embedding_backward(float *dtable, const int32_t *ids, const float *dy, int N, int D) {
  for (int64_t n = 0; n < N; n++) {
    float *row = dtable + (int64_t)ids[n] * D;
    const float *d = dy + n * D;
    for (int64_t i = 0; i < D; i++) row[i] += d[i];
  }
}
