/* data/source_u32.c: data.format u32, one little-endian uint32 per token. */
#include "data/source.h"

static int64_t u32_token(const uint8_t *map, int64_t i) {
  const uint8_t *p = map + 4 * i;
  return (int64_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                   ((uint32_t)p[3] << 24));
}

const data_source data_source_u32 = DATA_TOKEN_SOURCE("u32", 4, u32_token);
