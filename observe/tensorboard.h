/* observe/tensorboard.h: --tensorboard DIR, the run's scalars and texts as a TensorBoard events
 * file (observe/tb_event.h), written by rank 0 only.
 *
 * The file is DIR/events.out.tfevents.pipetrain, one per directory, so a resumed run finds it:
 * opened after a checkpoint of step S it keeps the records of steps <= S and drops the rest (the
 * steps the earlier run went on to past its checkpoint, and a record torn by a crash), then
 * appends; TensorBoard thus shows each step once. A run that starts at step 0 starts the file
 * over. Every write is flushed. */
#ifndef PT_TENSORBOARD_H
#define PT_TENSORBOARD_H

#include <stdio.h>

#include "observe/metrics.h"
#include "observe/tb_event.h"

typedef struct {
  FILE *f;
  tb_bytes ev, rec; /* reused buffers: one Event, its record */
} pt_tensorboard;

#define TENSORBOARD_FILE "events.out.tfevents.pipetrain"

/* Opens the file in DIR (which must exist) for a run that continues after start_step; 0, or -1
 * with a one-line err naming the path. */
int tensorboard_open(pt_tensorboard *t, const char *dir, int64_t start_step, char *err,
                     size_t errsz);
/* A text summary (shown as Markdown; text is put in a code block). */
void tensorboard_text(pt_tensorboard *t, int64_t step, const char *tag, const char *text);
/* One step's scalars, from the --metrics record: train/loss, train/lr, train/grad_norm,
 * perf/tokens_per_s, perf/step_ms, train/skipped_steps, and when known perf/mfu,
 * pipeline/bubble_mean, pipeline/bubble/stage_N, memory/peak_MiB/stage_N, on GPUs
 * memory/gpu_MiB/stage_N (the record's gpu_memory_bytes), train/seq_len, eval/loss. */
void tensorboard_step(pt_tensorboard *t, const pt_step_metrics *m);
/* Closes the file; 0, or -1 when the last writes failed. */
int tensorboard_close(pt_tensorboard *t);

#endif
