/* engine/data.h: training data and which sample each step reads.
 *
 * Token data (format bytes: one token per byte; u16 / u32: little-endian uint16 / uint32 per
 * token), N tokens:
 * sequence j of step s starts at o = ((s*G + j) * T) mod (N - T); inputs tokens[o, o+T),
 * targets tokens[o+1, o+T+1). With data.order: shuffled, o = T * w where w is the window
 * data_order_window picks (engine/data_order.h), records likewise. Record data (f32: records of
 * `inputs` then `targets` float32): sample j of step s is record (s*G + j) mod R, with T = 1.
 * With data.documents, row j of step s is packed sequence (s*G + j) mod n_seqs instead, or the
 * one data_order_window picks when shuffled (engine/data_pack.h).
 * G is the global batch (data_parallel * micro_batches * micro_batch_size). The file is mapped
 * read-only; a pt_data is immutable after data_open and may be shared. Per process, nothing
 * collective: a pipelined run opens it on its first and last stages only (every stage with
 * data.documents); the opener owns it (data_close). */
#ifndef PT_DATA_H
#define PT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

typedef enum { DATA_BYTES, DATA_U16, DATA_F32, DATA_U32 } pt_data_format;

typedef struct {
  pt_data_format format;
  const uint8_t *map;
  size_t map_bytes;
  int64_t n_tokens;  /* token formats */
  int64_t n_records; /* f32 */
  int inputs, targets;
  /* data.documents (engine/data_pack.h): n_seqs packed sequences, seq_start[n_seqs + 1] (owned);
   * n_seqs 0 without documents */
  int64_t n_seqs, doc_eos;
  int64_t *seq_start;
  int shuffled;      /* data.order: shuffled (engine/data_order.h) */
  uint64_t seed;     /* train.seed, the shuffle's key */
} pt_data;

/* Opens spec->data; checks length (at least T+1 tokens / 1 record) and token ids < vocab.
 * Returns 0, or -1 with a one-line message in err naming the file and the fix. */
int data_open(pt_data *d, const pt_spec *spec, char *err, size_t errsz);
/* Opens data.eval's file the same way (never shuffled); a zeroed d and 0 when there is none. */
int data_open_eval(pt_data *d, const pt_spec *spec, char *err, size_t errsz);
void data_close(pt_data *d);
/* Token i of token data (i < n_tokens). */
int64_t data_token(const pt_data *d, int64_t i);
/* Writes rows j0 .. j0+B-1 of step s: tokens -> int32 inputs[B*T] and targets[B*T];
 * f32 -> float inputs[B*inputs] and targets (float [B*targets], or int32 class ids when
 * as_class is set). With data.documents, tokens come from the packing (engine/data_pack.h):
 * ignored targets are DATA_TARGET_IGNORE. */
void data_fill(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T, void *inputs,
               void *targets, int as_class);
/* data_fill with sequences of T tokens placed as if they had `span` (>= T): token sequence j of
 * step s starts at o = ((s*G + j) * span) mod (N - span) and takes the first T tokens (inputs
 * [B*T], targets [B*T]). train.seq_len_schedule reads the step's T_s at model.seq_len spacing.
 * Record data: as data_fill. */
void data_fill_prefix(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T,
                      int span, void *inputs, void *targets, int as_class);

#endif
