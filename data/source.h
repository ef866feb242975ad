/* data/source.h: the table of data sources, one entry per data.format.
 *
 * An entry says how its file's bytes become rows: open (check the mapped file, set d->length in
 * its units), read_row (one row of a step's global batch: its window, in file order or
 * data.order's), and for token streams token (id i of the file) and documents (data.documents
 * can pack it: data/data_pack.h reads tokens through `token`). The spec's format name resolves
 * to its entry once (data_source_find, from data_init). Adding a format: one file defining its
 * entry (a token format is DATA_TOKEN_SOURCE with its width and decoder, see source_u16.c) and
 * its line in the table (data/source.c), plus the name data.format accepts (spec/spec_names.c,
 * spec/spec.h; a record format also answers spec_data_is_records there, which the test
 * data_optim checks against the entry's width). */
#ifndef PT_DATA_SOURCE_H
#define PT_DATA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"
#include "spec/spec.h"

typedef struct data_source {
  const char *name;  /* data.format's spelling (spec_data_format_names) */
  int width;         /* bytes per token; 0 for records */
  int documents;     /* data.documents can pack it (a token stream) */
  /* Token i (i < d->length) of the mapped file map; NULL for records. */
  int64_t (*token)(const uint8_t *map, int64_t i);
  /* Checks the mapped file (d->map, d->map_bytes) against the spec and sets d->length; 0, or
   * -1 with a one-line message in err naming path and the fix. */
  int (*open)(pt_data *d, const pt_spec *spec, const char *path, char *err, size_t errsz);
  /* Row j of step s's global batch of G rows into row r of inputs and targets (the layouts of
   * data_micro_batch): T tokens of windows `span` apart (span >= T), or one record. */
  void (*read_row)(const pt_data *d, int64_t step, int64_t G, int64_t j, int T, int span,
                   int64_t r, void *inputs, void *targets);
} data_source;

/* Token i of d's token-stream file (i < d->length). */
static inline int64_t data_token(const pt_data *d, int64_t i) { return d->src->token(d->map, i); }

/* The entry named name (spec_data_format_names' spelling), NULL when none is. */
const data_source *data_source_find(const char *name);

/* The shared token-stream operations (data/source_tokens.c) that DATA_TOKEN_SOURCE entries use. */
int data_tokens_open(pt_data *d, const pt_spec *spec, const char *path, char *err,
                     size_t errsz);
void data_tokens_read_row(const pt_data *d, int64_t step, int64_t G, int64_t j, int T, int span,
                          int64_t r, void *inputs, void *targets);
#define DATA_TOKEN_SOURCE(NAME, WIDTH, TOKEN)                                                     \
  {.name = NAME, .width = WIDTH, .documents = 1, .token = TOKEN, .open = data_tokens_open,      \
   .read_row = data_tokens_read_row}

#endif
