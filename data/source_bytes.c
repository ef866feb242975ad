/* data/source_bytes.c: data.format bytes, one token per byte. */
#include "data/source.h"

static int64_t bytes_token(const uint8_t *map, int64_t i) { return map[i]; }

const data_source data_source_bytes = DATA_TOKEN_SOURCE("bytes", 1, bytes_token);
