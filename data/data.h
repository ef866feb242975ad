/* data/data.h: training data, and which rows each micro-batch of each step reads.
 *
 * What the engine asks of its data: a micro-batch (inputs and targets), with data.documents its
 * doc_start and positions, and the step's real-target count; data.eval's micro-batches the same
 * way. Everything is a pure function of (seed, step, row): every stage, layout, engine and a
 * resumed run read the same rows.
 *
 * The file's format (data.format) is one entry of the source table (data/source.h: bytes, u16,
 * u32 tokens; f32 records), resolved once by data_init / data_open. Token data, N tokens:
 * row j of step s starts at o = ((s*G + j) * T) mod (N - T); inputs tokens[o, o+T), targets
 * tokens[o+1, o+T+1). With data.order: shuffled, o = T * w where w is the window
 * data_order_window picks (data/data_order.h). Record data (f32: records of `inputs` then
 * `targets` float32): row j of step s is record (s*G + j) mod R (or the shuffled pick), T = 1.
 * With data.documents, row j of step s is packed sequence (s*G + j) mod n_seqs instead, or the
 * one data_order_window picks when shuffled (data/data_pack.h).
 *
 * Geometry (from the spec): a micro-batch is B rows (train.micro_batch_size) of T tokens
 * (model.seq_len; 1 for records); a step's global batch is G = data_parallel * M * B rows
 * (M = train.micro_batches), and micro-batch mb of replica d is rows (d*M + mb)*B .. + B - 1.
 *
 * The file is mapped read-only; a pt_data is immutable after data_open and may be shared. Per
 * process, nothing collective: a pipelined run opens it on its first and last stages only (every
 * stage with data.documents); the others hold data_init's geometry alone. The opener owns it
 * (data_close). */
#ifndef PT_DATA_H
#define PT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

/* A target that is no prediction (data.documents: padding, a document's end): the loss kernels'
 * LOSS_IGNORE (kernels/loss.h; engine/part.c checks that the two agree). */
#define DATA_TARGET_IGNORE (-1)

struct data_source;

typedef struct pt_data {
  const struct data_source *src; /* data.format's entry (data/source.h); NULL before data_init */
  const uint8_t *map;            /* the file, NULL where this process reads none */
  size_t map_bytes;
  int64_t length;   /* the file's units: tokens, or records */
  int inputs, targets; /* f32: floats per record */
  /* data.documents (data/data_pack.h): n_seqs packed sequences, seq_start[n_seqs + 1] (owned);
   * n_seqs 0 without documents */
  int64_t n_seqs, doc_eos;
  int64_t *seq_start;
  int shuffled;      /* data.order: shuffled (data/data_order.h) */
  uint64_t seed;     /* train.seed, the shuffle's key */
  int B, T;          /* a micro-batch: rows, tokens per row (the most: model.seq_len, or 1) */
  int64_t M, G;      /* micro-batches per replica and step; rows per step over all replicas */
  int as_class;      /* targets are int32 class ids (cross_entropy), else float32 */
} pt_data;

/* The geometry and data.format's source, no file: what a process that reads no data holds
 * (data_step_targets works on it; data_close is safe). Nothing can fail: spec_load checked. */
void data_init(pt_data *d, const pt_spec *spec);
/* data_init, then maps spec->data; checks length (at least T+1 tokens / 1 record) and token ids
 * < vocab, and packs documents (data.documents). Returns 0, or -1 with a one-line message in err
 * naming the file and the fix. */
int data_open(pt_data *d, const pt_spec *spec, char *err, size_t errsz);
/* Opens data.eval's file the same way (data.eval.format; never shuffled, never documents); a
 * data_init'ed d and 0 when there is none. */
int data_open_eval(pt_data *d, const pt_spec *spec, char *err, size_t errsz);
void data_close(pt_data *d);

/* Micro-batch mb of replica `replica` of step `step` (0-based; an eval file's batch i is read as
 * step i): int32 token inputs[B*T] and targets[B*T] (DATA_TARGET_IGNORE where ignored), or
 * float32 record inputs[B*inputs] and targets [B*targets] (int32 class ids when as_class).
 * T (<= d->T) is this step's tokens per row (train.seq_len_schedule): windows keep d->T spacing
 * and the row takes their first T tokens. Called where the stage's inputs or targets are needed
 * (a pipeline's first and last stages). */
void data_micro_batch(const pt_data *d, int64_t step, int64_t replica, int64_t mb, int T,
                      void *inputs, void *targets);
/* data.documents: micro-batch mb of replica `replica` of step `step`: doc_start[B*T] (the row
 * index where each token's document begins) and positions[B*T] (the token's index in its
 * document), row by row. Every stage calls it (the attention masks by document). */
void data_micro_batch_docs(const pt_data *d, int64_t step, int64_t replica, int64_t mb,
                           int32_t *doc_start, int32_t *positions);
/* The targets step `step`'s global batch is scored on: G*T (T: this step's tokens per row), or
 * with data.documents the targets that are not DATA_TARGET_IGNORE (0 is possible: bad input).
 * The same on every process, opened or not (with documents every process opens the data). */
int64_t data_step_targets(const pt_data *d, int64_t step, int T);

/* Whether the run evaluates after step `step` (1-based): data.eval set, and step a multiple of
 * data.eval.every (> 0) or the run's last step. */
int data_eval_due(const pt_spec *spec, int64_t step);

#endif
