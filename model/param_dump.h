/* model/param_dump.h: a raw dump of a process's parameters, for comparing runs exactly.
 * Format (little-endian): per tensor, u32 name length, name bytes, u8 tied_copy, i64 numel,
 * numel float32. Not a checkpoint: no optimizer state, no manifest. */
#ifndef PT_PARAM_DUMP_H
#define PT_PARAM_DUMP_H

#include "model/model.h"

/* Writes PREFIX.<rank>.bin; fatal error if the file cannot be written. */
void param_dump_write(const pt_model *m, const char *prefix, int rank);

#endif
