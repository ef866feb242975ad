/* data/data_pack.h: token data packed into whole documents (data.documents: {eos: TOKEN}).
 *
 * Documents are the runs of tokens ended by the EOS token (the last may be unterminated).
 * data_open builds the packing once, deterministically, the same on every rank (one O(N) scan):
 * packed sequences of T+1 tokens (inputs T, targets shifted by one) filled greedily with whole
 * documents in file order. A document that does not fit in what is left of the current sequence
 * starts the next one (the rest is padding: EOS tokens marked as padding); a document longer
 * than T+1 tokens is cut into pieces of T+1 (the last piece starts a sequence like a document).
 * A packed sequence is therefore one contiguous range of the file, seq_start[k] ..
 * seq_start[k+1], followed by padding.
 *
 * Per token t of a row (docs/training.md "Packed documents"):
 *   target     the next token, or DATA_TARGET_IGNORE (-1): at padding, at the row's last real
 *              token when nothing follows it in the row, and at an EOS (its next token starts
 *              another document). The last token of a document predicts its EOS (kept).
 *   doc_start  the row index where t's document begins (padding is one document of its own)
 *   position   t - doc_start[t]
 * Row j of step s reads packed sequence data_pack_sequence(d, s*G + j). */
#ifndef PT_DATA_PACK_H
#define PT_DATA_PACK_H

#include <stdint.h>

#include "data/data.h"

/* Builds d->seq_start (d->n_seqs packed sequences) for sequences of T tokens; 0, or -1 with a
 * one-line message (no document of two tokens or more: nothing to predict; the caller adds the
 * file name; out of memory is fatal). Called by data_open when spec->data.documents. */
int data_pack_build(pt_data *d, int64_t eos, int T, char *err, size_t errsz);
/* The packed sequence that row j of step s reads: k mod n_seqs for the global sequence index
 * k = s*G + j (computed without overflow). A pure function of k: a permutation of k
 * (data.order) goes here. */
int64_t data_pack_sequence(const pt_data *d, int64_t step, int64_t G, int64_t j);
/* Row of packed sequence q: int32 inputs[T], targets[T] (DATA_TARGET_IGNORE where ignored). */
void data_pack_fill_row(const pt_data *d, int64_t q, int T, int32_t *inputs, int32_t *targets);
/* Row of packed sequence q: doc_start[T] and positions[T] (either may be NULL). */
void data_pack_docs_row(const pt_data *d, int64_t q, int T, int32_t *doc_start,
                        int32_t *positions);
/* Rows j0 .. j0+B-1 of step s: doc_start[B*T] and positions[B*T], row by row. */
void data_pack_fill_docs(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T,
                         int32_t *doc_start, int32_t *positions);
/* Targets that are not ignored in rows j0 .. j0+B-1 of step s (G rows a step). */
int64_t data_pack_real_targets(const pt_data *d, int64_t step, int64_t G, int64_t j0, int64_t B,
                               int T);

#endif
