/* data/source_u16.c: data.format u16, one little-endian uint16 per token. */
#include "data/source.h"

static int64_t u16_token(const uint8_t *map, int64_t i) {
  return map[2 * i] | (map[2 * i + 1] << 8);
}

const data_source data_source_u16 = DATA_TOKEN_SOURCE("u16", 2, u16_token);
