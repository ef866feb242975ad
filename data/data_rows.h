/* data/data_rows.h: rows of a step's global batch with the geometry given, not the spec's: what
 * data_micro_batch computes with (data/data.h has the row and window formulas), for tests. */
#ifndef PT_DATA_ROWS_H
#define PT_DATA_ROWS_H

#include <stdint.h>

#include "data/data.h"

/* Rows j0 .. j0+B-1 of step `step` of a global batch of G rows, in data_micro_batch's layouts:
 * T tokens a row from windows `span` (>= T) apart (token row j of step s starts at
 * o = ((s*G + j) * span) mod (N - span); span = T: the plain rows), or a record a row. With
 * data.documents, packed rows (data/data_pack.h). */
void data_fill_rows(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T, int span,
                    void *inputs, void *targets);

#endif
