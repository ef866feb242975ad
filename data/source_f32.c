/* data/source_f32.c: data.format f32, records of `inputs` then `targets` float32. */
#include "data/source.h"

#include <stdio.h>
#include <string.h>

#include "data/data_order.h"

static int f32_open(pt_data *d, const pt_spec *spec, const char *path, char *err, size_t errsz) {
  size_t rec = sizeof(float) * (size_t)(d->inputs + d->targets);
  d->length = (int64_t)(d->map_bytes / rec);
  if (d->map_bytes % rec != 0 || d->length == 0) {
    snprintf(err, errsz, "%s: %zu bytes is not a whole number of %zu-byte records (%d inputs + "
             "%d targets float32)", path, d->map_bytes, rec, d->inputs, d->targets);
    return -1;
  }
  return 0;
}

/* T and span are 1: a row is one record. */
static void f32_read_row(const pt_data *d, int64_t step, int64_t G, int64_t j, int T, int span,
                         int64_t r, void *inputs, void *targets) {
  int64_t rec = data_order_window(d->shuffled, d->seed, step, G, j, d->length);
  const float *src = (const float *)d->map + rec * (d->inputs + d->targets);
  memcpy((float *)inputs + r * d->inputs, src, sizeof(float) * d->inputs);
  for (int t = 0; t < d->targets; t++) {
    float v = src[d->inputs + t];
    if (d->as_class)
      ((int32_t *)targets)[r * d->targets + t] = (int32_t)v;
    else
      ((float *)targets)[r * d->targets + t] = v;
  }
}

const data_source data_source_f32 = {
    .name = "f32",
    .open = f32_open,
    .read_row = f32_read_row,
};
