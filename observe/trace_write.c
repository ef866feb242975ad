/* Gathering every rank's spans on rank 0 and writing the Chrome trace (see trace.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "observe/trace_layout.h"
#include "observe/trace_write.h"

/* Spans travel as doubles; names and categories as indices into this table. The first
 * N_COMPUTE names are written with the micro-batch glued on ("F3"), the next up to N_PER_MB with
 * a space ("recv act 3"). */
static const char *const NAMES[] = {"F", "B", "I", "W", "recv act", "recv grad", "send act",
                                    "send grad", "wait", "load", "tied grads",
                                    "data-parallel grads", "optimizer", "flush", "offload",
                                    "prefetch"};
static const char *const CATS[] = {"forward", "backward", "backward_input", "backward_weight",
                                   "receive", "send", "wait", "load", "allreduce", "optimizer",
                                   "copy"};
enum { N_NAMES = sizeof NAMES / sizeof NAMES[0], N_CATS = sizeof CATS / sizeof CATS[0], FIELDS = 8,
       N_COMPUTE = 4, N_PER_MB = 8 };

static int index_of(const char *const *table, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcmp(table[i], s)) return i;
  pt_fatal("trace: unknown span name or category '%s'", s);
}

/* Offset of this rank's clock to rank 0's: the best (lowest round trip) of 8 ping-pongs. */
double trace_measure_offset(pt_comm *world) {
  int rank = comm_rank(world), size = comm_size(world);
  double offset = 0.0;
  for (int r = 1; r < size; r++) {
    double best_rtt = 1e30;
    for (int k = 0; k < 8; k++) {
      double msg[2];
      pt_request q = {0};
      if (rank == r) {
        double t1 = pt_now_s();
        comm_send_host_async(world, &t1, sizeof t1, 0, PT_TAG_CLOCK_PING + k, &q), comm_wait(&q);
        comm_recv_host_async(world, msg, sizeof msg, 0, PT_TAG_CLOCK_PONG + k, &q), comm_wait(&q);
        double t2 = pt_now_s();
        if (t2 - t1 < best_rtt) best_rtt = t2 - t1, offset = msg[0] - 0.5 * (t1 + t2);
      } else if (rank == 0) {
        comm_recv_host_async(world, msg, sizeof(double), r, PT_TAG_CLOCK_PING + k, &q);
        comm_wait(&q);
        msg[0] = pt_now_s();
        comm_send_host_async(world, msg, sizeof msg, r, PT_TAG_CLOCK_PONG + k, &q), comm_wait(&q);
      }
    }
  }
  return offset;
}

static cJSON *span_event(const double *f, int rank) {
  cJSON *e = cJSON_CreateObject(), *args;
  int name = (int)f[0], mb = (int)f[2];
  char label[48];
  if (mb >= 0 && name < N_PER_MB)
    snprintf(label, sizeof label, "%s%s%d", NAMES[name], name < N_COMPUTE ? "" : " ", mb);
  else snprintf(label, sizeof label, "%s", NAMES[name]);
  cJSON_AddStringToObject(e, "name", label);
  cJSON_AddStringToObject(e, "cat", CATS[(int)f[1]]);
  cJSON_AddStringToObject(e, "ph", "X");
  cJSON_AddNumberToObject(e, "ts", f[4] * 1e6);
  cJSON_AddNumberToObject(e, "dur", (f[5] - f[4]) * 1e6);
  cJSON_AddNumberToObject(e, "pid", rank);
  /* copies: track 1; as the device ran it: track 2 */
  cJSON_AddNumberToObject(e, "tid", f[7] ? 2 : !strcmp(CATS[(int)f[1]], "copy"));
  args = cJSON_AddObjectToObject(e, "args");
  if (mb >= 0) cJSON_AddNumberToObject(args, "mb", mb);
  cJSON_AddNumberToObject(args, "step", f[3]);
  if (f[6] >= 0) cJSON_AddNumberToObject(args, "chunk", f[6]);
  return e;
}

/* The name of a rank's track 2, the compute as its device ran it. */
static cJSON *device_track_name(int rank) {
  cJSON *e = cJSON_CreateObject(), *args;
  cJSON_AddStringToObject(e, "name", "thread_name");
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", rank);
  cJSON_AddNumberToObject(e, "tid", 2);
  args = cJSON_AddObjectToObject(e, "args");
  cJSON_AddStringToObject(args, "name", "gpu");
  return e;
}

static cJSON *track_name(int rank, int stages) {
  cJSON *e = cJSON_CreateObject(), *args;
  char label[64];
  snprintf(label, sizeof label, "rank %d (stage %d, replica %d)", rank, rank % stages, rank / stages);
  cJSON_AddStringToObject(e, "name", "process_name");
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", rank);
  args = cJSON_AddObjectToObject(e, "args");
  cJSON_AddStringToObject(args, "name", label);
  return e;
}

typedef struct {
  int size;
  const pt_plan *plan;
  const pt_model *model;
  const char *schedule;
  double origin;
} trace_info;

static void write_json(const char *path, const double *all, const int *counts,
                       const trace_info *info) {
  int size = info->size, stages = info->plan->n_stages;
  double t_origin = info->origin;
  cJSON *root = cJSON_CreateObject(), *ev = cJSON_AddArrayToObject(root, "traceEvents");
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
  cJSON_AddStringToObject(meta, "schedule", info->schedule);
  cJSON_AddNumberToObject(meta, "stages", stages);
  cJSON_AddNumberToObject(meta, "micro_batches", info->plan->micro_batches);
  trace_layout_to_json(meta, info->plan, info->model);
  int off = 0;
  for (int r = 0; r < size; r++) {
    cJSON_AddItemToArray(ev, track_name(r, stages));
    for (int i = 0; i < counts[r] / FIELDS; i++)
      if (all[off + i * FIELDS + 7]) {
        cJSON_AddItemToArray(ev, device_track_name(r));
        break;
      }
    for (int i = 0; i < counts[r] / FIELDS; i++) {
      double f[FIELDS];
      memcpy(f, all + off + i * FIELDS, sizeof f);
      f[4] -= t_origin, f[5] -= t_origin; /* start the timeline at 0 */
      cJSON_AddItemToArray(ev, span_event(f, r));
    }
    off += counts[r];
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  FILE *f = fopen(path, "w");
  if (!text || !f || fputs(text, f) < 0 || fclose(f) != 0)
    pt_fatal("%s: cannot write the trace: %s", path, strerror(errno));
  free(text);
}

void trace_write(const pt_trace *t, pt_comm *world, const pt_plan *plan, const pt_model *m,
                 const char *schedule, const char *path) {
  int size = comm_size(world), n = 0;
  double *mine = pt_calloc((size_t)t->n * FIELDS + 1, sizeof(double));
  for (int i = 0; i < t->n; i++) {
    const pt_span *s = &t->spans[i];
    if (s->ticket >= 0) continue; /* a device span whose times never came (trace_resolve) */
    double *f = mine + n;
    f[0] = index_of(NAMES, N_NAMES, s->name), f[1] = index_of(CATS, N_CATS, s->cat);
    f[2] = s->mb, f[3] = (double)s->step, f[4] = s->t0 + t->offset_s, f[5] = s->t1 + t->offset_s;
    f[6] = s->chunk, f[7] = s->device;
    n += FIELDS;
  }
  int *counts = pt_calloc((size_t)size, sizeof(int)), total = 0;
  comm_allgather_int(world, n, counts);
  for (int r = 0; r < size; r++) total += counts[r];
  double *all = pt_calloc((size_t)total + 1, sizeof(double)), origin = 1e300;
  comm_allgatherv_f64(world, mine, n, all, counts);
  for (int i = 0; i < total; i += FIELDS) origin = all[i + 4] < origin ? all[i + 4] : origin;
  trace_info info = {size, plan, m, schedule, total ? origin : 0.0};
  if (comm_rank(world) == 0) write_json(path, all, counts, &info);
  free(mine), free(counts), free(all);
}
