/* data/data_pack.c: the document packing (data/data_pack.h). */
#include "data/data_pack.h"

#include "data/data_order.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "data/source.h"

/* Appends the start of a new packed sequence at file index i. */
static void push_start(pt_data *d, int64_t *cap, int64_t i) {
  if (d->n_seqs + 2 > *cap) {
    *cap = *cap ? 2 * *cap : 1024;
    d->seq_start = realloc(d->seq_start, sizeof(int64_t) * (size_t)*cap);
    if (!d->seq_start) pt_fatal("out of memory packing %lld documents", (long long)d->n_seqs);
  }
  d->seq_start[d->n_seqs++] = i;
}

/* One scan over the documents [a, b): greedy whole documents, long ones cut into pieces of C.
 * fill is what the current sequence (started at seq_start[n_seqs-1]) holds so far. */
int data_pack_build(pt_data *d, int64_t eos, int T, char *err, size_t errsz) {
  int64_t C = (int64_t)T + 1, cap = 0, fill = 0, N = d->length, longest = 0;
  d->doc_eos = eos;
  d->n_seqs = 0;
  for (int64_t a = 0; a < N;) {
    int64_t b = a;
    while (b < N && data_token(d, b) != eos) b++;
    b = b < N ? b + 1 : N; /* the document [a, b) with its EOS */
    longest = b - a > longest ? b - a : longest;
    for (int64_t len = b - a; len > 0;) {
      if (d->n_seqs == 0 || fill + len > C) { /* does not fit: a new sequence at a */
        push_start(d, &cap, a);
        fill = 0;
      }
      int64_t piece = len < C ? len : C;
      fill += piece, a += piece, len -= piece;
    }
  }
  if (longest < 2) { /* a lone EOS predicts nothing: no step could have a loss */
    snprintf(err, errsz, "every document is a lone EOS token (%lld), so nothing is left to "
             "predict; check data.documents.eos", (long long)eos);
    return -1;
  }
  d->seq_start[d->n_seqs] = N;
  return 0;
}

int64_t data_pack_sequence(const pt_data *d, int64_t step, int64_t G, int64_t j) {
  return data_order_window(d->shuffled, d->seed, step, G, j, d->n_seqs);
}

/* Tokens of packed sequence q that are real (the rest of the T+1 is padding). */
static int64_t seq_used(const pt_data *d, int64_t q) {
  return d->seq_start[q + 1] - d->seq_start[q];
}

void data_pack_fill_row(const pt_data *d, int64_t q, int T, int32_t *inputs, int32_t *targets) {
  int64_t o = d->seq_start[q], used = seq_used(d, q);
  for (int t = 0; t < T; t++) {
    int32_t x = t < used ? (int32_t)data_token(d, o + t) : (int32_t)d->doc_eos;
    inputs[t] = x;
    int keep = t + 1 < used && x != d->doc_eos;
    targets[t] = keep ? (int32_t)data_token(d, o + t + 1) : DATA_TARGET_IGNORE;
  }
}

void data_pack_docs_row(const pt_data *d, int64_t q, int T, int32_t *doc_start,
                        int32_t *positions) {
  int64_t o = d->seq_start[q], used = seq_used(d, q);
  int32_t start = 0;
  for (int t = 0; t < T; t++) {
    if (t > 0 && (t == used || (t < used && data_token(d, o + t - 1) == d->doc_eos))) start = t;
    if (doc_start) doc_start[t] = start;
    if (positions) positions[t] = t - start;
  }
}

int64_t data_pack_real_targets(const pt_data *d, int64_t step, int64_t G, int64_t j0, int64_t B,
                               int T) {
  int64_t n = 0;
  for (int64_t j = j0; j < j0 + B; j++) {
    int64_t q = data_pack_sequence(d, step, G, j), o = d->seq_start[q], used = seq_used(d, q);
    int64_t last = used - 1 < T ? used - 1 : T; /* targets t < last have a next token */
    for (int64_t t = 0; t < last; t++) n += data_token(d, o + t) != d->doc_eos;
  }
  return n;
}

void data_pack_fill_docs(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T,
                         int32_t *doc_start, int32_t *positions) {
  for (int r = 0; r < B; r++)
    data_pack_docs_row(d, data_pack_sequence(d, step, G, j0 + r), T,
                       doc_start + (int64_t)r * T, positions + (int64_t)r * T);
}
