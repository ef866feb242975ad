#include "observe/tensorboard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

#define MAX_SCALARS 1024

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The length of the file's leading records of steps <= keep (stopping at the first later or
 * damaged one): what a run resuming after step `keep` continues from. */
static long kept_prefix(FILE *f, int64_t keep) {
  long good = 0;
  unsigned char *buf = NULL, head[12];
  for (;;) {
    if (fread(head, 1, 12, f) != 12) break;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)head[i] << (8 * i);
    if (len > (1u << 30)) break;
    unsigned char *nb = realloc(buf, (size_t)len + 16);
    if (!nb) pt_fatal("out of memory reading a TensorBoard events file");
    buf = nb;
    memcpy(buf, head, 12);
    int64_t step;
    if (fread(buf + 12, 1, (size_t)len + 4, f) != (size_t)len + 4 ||
        tb_record_read(buf, (size_t)len + 16, &step) == 0 || step > keep)
      break;
    good += (long)len + 16;
  }
  free(buf);
  return good;
}

int tensorboard_open(pt_tensorboard *t, const char *dir, int64_t start_step, char *err,
                     size_t errsz) {
  memset(t, 0, sizeof *t);
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, TENSORBOARD_FILE);
  t->f = fopen(path, start_step > 0 ? "r+b" : "wb");
  if (!t->f && start_step > 0 && errno == ENOENT) t->f = fopen(path, "wb");
  if (!t->f) {
    snprintf(err, errsz, "--tensorboard: cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  long keep = start_step > 0 ? kept_prefix(t->f, start_step) : 0;
  if (fflush(t->f) != 0 || ftruncate(fileno(t->f), keep) != 0 || fseek(t->f, keep, SEEK_SET) != 0) {
    snprintf(err, errsz, "--tensorboard: cannot cut %s back to step %lld: %s", path,
             (long long)start_step, strerror(errno));
    fclose(t->f);
    t->f = NULL;
    return -1;
  }
  if (keep == 0) { /* TensorBoard reads a file by its first event's version */
    tb_event_file_version(&t->ev, wall_now());
    tb_record_append(&t->rec, &t->ev);
  }
  return 0;
}

static void write_pending(pt_tensorboard *t) {
  if (fwrite(t->rec.data, 1, t->rec.len, t->f) != t->rec.len || fflush(t->f) != 0)
    pt_fatal("cannot write the TensorBoard events file: %s", strerror(errno));
  t->rec.len = 0;
}

void tensorboard_text(pt_tensorboard *t, int64_t step, const char *tag, const char *text) {
  size_t n = strlen(text) + 16;
  char *md = malloc(n);
  if (!md) pt_fatal("out of memory writing TensorBoard text");
  snprintf(md, n, "```\n%s\n```", text);
  tb_event_text(&t->ev, wall_now(), step, tag, md);
  free(md);
  tb_record_append(&t->rec, &t->ev);
  write_pending(t);
}

typedef struct {
  tb_scalar v[MAX_SCALARS];
  char tags[MAX_SCALARS][48];
  int n;
} scalar_list;

static void add(scalar_list *l, double value, const char *fmt, int stage) {
  if (l->n == MAX_SCALARS) return;
  snprintf(l->tags[l->n], sizeof l->tags[0], fmt, stage);
  l->v[l->n] = (tb_scalar){l->tags[l->n], value};
  l->n++;
}

void tensorboard_step(pt_tensorboard *t, const pt_step_metrics *m) {
  static scalar_list l; /* rank 0's one writer; too big for the stack */
  l.n = 0;
  add(&l, m->loss, "train/loss", 0);
  add(&l, m->lr, "train/lr", 0);
  add(&l, m->grad_norm, "train/grad_norm", 0);
  add(&l, (double)m->skipped_steps, "train/skipped_steps", 0);
  add(&l, m->tokens_per_s, "perf/tokens_per_s", 0);
  add(&l, m->step_ms, "perf/step_ms", 0);
  if (m->mfu >= 0) add(&l, m->mfu, "perf/mfu", 0);
  if (m->seq_len > 0) add(&l, (double)m->seq_len, "train/seq_len", 0);
  if (m->has_eval) add(&l, m->eval_loss, "eval/loss", 0);
  if (m->n_stages > 0) add(&l, m->bubble_mean, "pipeline/bubble_mean", 0);
  for (int s = 0; s < m->n_stages; s++) {
    add(&l, m->bubble[s], "pipeline/bubble/stage_%d", s);
    add(&l, m->peak_bytes[s] / (1024.0 * 1024.0), "memory/peak_MiB/stage_%d", s);
    if (m->gpu_bytes) add(&l, m->gpu_bytes[s] / (1024.0 * 1024.0), "memory/gpu_MiB/stage_%d", s);
  }
  tb_event_scalars(&t->ev, wall_now(), m->step, l.v, l.n);
  tb_record_append(&t->rec, &t->ev);
  write_pending(t);
}

int tensorboard_close(pt_tensorboard *t) {
  int rc = t->f && fclose(t->f) != 0 ? -1 : 0;
  tb_bytes_free(&t->ev);
  tb_bytes_free(&t->rec);
  memset(t, 0, sizeof *t);
  return rc;
}
