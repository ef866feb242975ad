/* data/data_batch.c: a micro-batch's rows (data/data.h), through the format's source or the
 * document packing. */
#include "data/data.h"

#include "data/data_pack.h"
#include "data/data_rows.h"
#include "data/source.h"

void data_fill_rows(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T, int span,
                    void *inputs, void *targets) {
  for (int r = 0; r < B; r++) {
    if (d->n_seqs > 0)
      data_pack_fill_row(d, data_pack_sequence(d, step, G, j0 + r), T,
                         (int32_t *)inputs + (int64_t)r * T, (int32_t *)targets + (int64_t)r * T);
    else
      d->src->read_row(d, step, G, j0 + r, T, span, r, inputs, targets);
  }
}

/* Replica d's micro-batch m is rows (d M + m) B ... of the global batch (docs/training.md). */
static int64_t first_row(const pt_data *d, int64_t replica, int64_t mb) {
  return (replica * d->M + mb) * d->B;
}

void data_micro_batch(const pt_data *d, int64_t step, int64_t replica, int64_t mb, int T,
                      void *inputs, void *targets) {
  data_fill_rows(d, step, d->G, first_row(d, replica, mb), d->B, T, d->T, inputs, targets);
}

void data_micro_batch_docs(const pt_data *d, int64_t step, int64_t replica, int64_t mb,
                           int32_t *doc_start, int32_t *positions) {
  data_pack_fill_docs(d, step, d->G, first_row(d, replica, mb), d->B, d->T, doc_start,
                      positions);
}

/* The real targets are a function of the data and the step only, so every rank (and the
 * sequential run) divides by the same count. */
int64_t data_step_targets(const pt_data *d, int64_t step, int T) {
  if (!d->n_seqs) return d->G * T;
  return data_pack_real_targets(d, step, d->G, 0, d->G, d->T);
}

int data_eval_due(const pt_spec *spec, int64_t step) {
  const spec_data *d = &spec->data;
  if (!d->eval_path[0]) return 0;
  return (d->eval_every > 0 && step % d->eval_every == 0) || step == spec->train.steps;
}
