/* A stage's stashed activations in device frames and pinned host buffers
 * (engine/stage_offload.h). */
#include "engine/stage_offload.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/stage_store.h"

typedef struct {
  int n_frames, n_hosts;
  size_t bytes;         /* one frame (and one host buffer) */
  size_t *off;          /* [n]: layer li's tensor at frame + off[li]; (size_t)-1: not pooled */
  size_t *size;         /* [n]: its bytes */
  char **frame;         /* [n_frames] device memory */
  void **frame_ev;      /* [n_frames]: the last copy into or out of it (NULL: none to wait for) */
  int *frame_of;        /* [n_slots]: the frame the slot holds, -1 */
  char *frame_used;     /* [n_frames] */
  void **host;          /* [n_hosts] pinned */
  int *host_of;         /* [n_slots]: the host buffer with the slot's tensors, -1 */
  char *host_used;      /* [n_hosts] */
  unsigned char *offloaded; /* [n_micro] */
} offload_pool;

struct stage_offload {
  offload_pool pool[OFFLOAD_KINDS];
  int n_micro;
  int *next_mb; /* [n_slots]: the micro-batch the slot's next forward runs (the engine's), -1 */
  int *mb_of;   /* [n_slots]: the micro-batch its last forward ran, -1: not the engine's */
  stage_offload_span *spans;
  int n_spans, cap_spans;
};

static const pt_layer *layer_at(const pt_stage *st, int li) {
  return &st->m->layers[st->first + li];
}

/* The bytes slot buffer (kind, li) has where it is pooled, else 0 and *pooled 0. */
static size_t piece_bytes(const pt_stage *st, int kind, int li, int *pooled) {
  const pt_layer *L = layer_at(st, li);
  size_t BT = (size_t)st->B * st->T;
  if (kind == OFFLOAD_OUTPUTS) {
    *pooled = li < st->n - 1 && stage_kept(st, li);
    return *pooled ? (st->packed ? 2 : 4) * BT * L->out_dim : 0;
  }
  *pooled = st->ckpt == 0;
  if (!*pooled) return 0;
  if (st->packed) return layer_saved_rest_bytes(L, layer_kernels(L), st->B, st->T, 0);
  return L->type->saved_bytes ? L->type->saved_bytes(L, st->B, st->T) : 0;
}

static int *slots_minus_one(int n) {
  int *v = pt_calloc((size_t)n, sizeof(int));
  for (int i = 0; i < n; i++) v[i] = -1;
  return v;
}

void stage_offload_init(pt_stage *st, const stage_offload_plan *plan) {
  stage_offload *o = pt_calloc(1, sizeof *o);
  o->n_micro = plan->n_micro;
  o->next_mb = slots_minus_one(st->n_slots);
  o->mb_of = slots_minus_one(st->n_slots);
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = &o->pool[k];
    if (plan->frames[k] <= 0) continue;
    q->n_frames = plan->frames[k];
    q->n_hosts = plan->hosts[k];
    q->off = pt_calloc((size_t)st->n, sizeof(size_t));
    q->size = pt_calloc((size_t)st->n, sizeof(size_t));
    for (int li = 0; li < st->n; li++) {
      int pooled;
      q->size[li] = piece_bytes(st, k, li, &pooled);
      q->off[li] = pooled ? q->bytes : (size_t)-1;
      q->bytes += (q->size[li] + 63) & ~(size_t)63;
    }
    q->offloaded = pt_calloc((size_t)plan->n_micro, 1);
    memcpy(q->offloaded, plan->offloaded[k], (size_t)plan->n_micro);
    if (q->bytes == 0) q->n_frames = 0; /* nothing of the kind here (a one-layer stage's outputs) */
  }
  st->offload = o;
}

static offload_pool *pool_of(const pt_stage *st, int kind) {
  offload_pool *q = st->offload ? &st->offload->pool[kind] : NULL;
  return q && q->n_frames > 0 ? q : NULL;
}

int stage_offload_pooled(const pt_stage *st, int kind, int li) {
  const offload_pool *q = pool_of(st, kind);
  return q && q->off[li] != (size_t)-1;
}

void stage_offload_alloc(pt_stage *st) {
  pt_device *d = st->m->dev;
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = pool_of(st, k);
    if (!q) continue;
    q->frame = pt_calloc((size_t)q->n_frames, sizeof(char *));
    q->frame_ev = pt_calloc((size_t)q->n_frames, sizeof(void *));
    q->frame_used = pt_calloc((size_t)q->n_frames, 1);
    for (int f = 0; f < q->n_frames; f++) {
      q->frame[f] = stage_alloc(st, q->bytes ? q->bytes : 64);
      q->frame_ev[f] = device_event_new(d);
    }
    q->host = pt_calloc((size_t)q->n_hosts + 1, sizeof(void *));
    q->host_used = pt_calloc((size_t)q->n_hosts + 1, 1);
    for (int h = 0; h < q->n_hosts; h++) q->host[h] = device_pinned_alloc(d, q->bytes);
    q->frame_of = slots_minus_one(st->n_slots);
    q->host_of = slots_minus_one(st->n_slots);
  }
}

/* The slot's pointers of the kind into frame base, or NULL. Packed saved areas with nothing at
 * rest stay NULL, as engine/stage_store.c allocates them. */
static void point(pt_stage *st, int kind, int slot, const char *base) {
  const offload_pool *q = pool_of(st, kind);
  for (int li = 0; li < st->n; li++) {
    if (q->off[li] == (size_t)-1) continue;
    int i = slot * st->n + li;
    void *p = base ? (void *)(base + q->off[li]) : NULL;
    if (kind == OFFLOAD_OUTPUTS && st->packed) st->out16[i] = p;
    else if (kind == OFFLOAD_OUTPUTS) st->out[i] = p;
    else if (st->packed) st->saved16[i] = q->size[li] ? p : NULL;
    else st->saved[i] = p;
  }
}

void stage_offload_free(pt_stage *st) {
  stage_offload *o = st->offload;
  if (!o) return;
  pt_device *d = st->m->dev;
  device_sync(d); /* copies may still read or write the buffers */
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = &o->pool[k];
    for (int s = 0; q->frame && s < st->n_slots; s++) point(st, k, s, NULL);
    for (int f = 0; q->frame && f < q->n_frames; f++) {
      stage_release(st, q->frame[f]);
      device_event_free(d, q->frame_ev[f]);
    }
    for (int h = 0; q->host && h < q->n_hosts; h++) device_pinned_free(d, q->host[h]);
    free(q->off), free(q->size), free(q->frame), free(q->frame_ev), free(q->frame_of);
    free(q->frame_used), free(q->host), free(q->host_of), free(q->host_used), free(q->offloaded);
  }
  free(o->next_mb), free(o->mb_of);
  free(o->spans);
  free(o);
  st->offload = NULL;
}

static int take(char *used, int n, const pt_stage *st, const char *what) {
  for (int i = 0; i < n; i++)
    if (!used[i]) return used[i] = 1, i;
  pt_fatal("activation offload: layers %d..%d need more than the %d %s the schedule's action "
           "list gave them (schedule/schedule_offload.h)", st->first, st->last - 1, n, what);
}

/* A frame for the slot, its pointers set; the compute stream waits for the frame's last copy
 * (compute writes it next) unless the copy stream fills it (prefetch: in order behind it). */
static int hold_frame(pt_stage *st, int kind, int slot, int for_compute) {
  offload_pool *q = pool_of(st, kind);
  if (q->frame_of[slot] >= 0) return q->frame_of[slot];
  int f = take(q->frame_used, q->n_frames, st, "device frames");
  q->frame_of[slot] = f;
  point(st, kind, slot, q->frame[f]);
  if (for_compute) device_wait_event(st->m->dev, q->frame_ev[f]);
  return f;
}

static void give_frame(pt_stage *st, int kind, int slot) {
  offload_pool *q = pool_of(st, kind);
  if (q->frame_of[slot] < 0) return;
  q->frame_used[q->frame_of[slot]] = 0;
  q->frame_of[slot] = -1;
  point(st, kind, slot, NULL);
}

static void note_span(pt_stage *st, int prefetch, int slot, double t0) {
  stage_offload *o = st->offload;
  if (o->n_spans == o->cap_spans) {
    o->cap_spans = o->cap_spans ? 2 * o->cap_spans : 16;
    o->spans = realloc(o->spans, sizeof *o->spans * (size_t)o->cap_spans);
    if (!o->spans) pt_fatal("out of memory recording offload copies");
  }
  o->spans[o->n_spans++] = (stage_offload_span){prefetch, o->mb_of[slot], t0, pt_now_s()};
}

void stage_offload_micro_batch(pt_stage *st, int slot, int mb) {
  if (st->offload) st->offload->next_mb[slot] = mb;
}

void stage_offload_before_forward(pt_stage *st, int slot) {
  for (int k = 0; k < OFFLOAD_KINDS; k++)
    if (pool_of(st, k)) hold_frame(st, k, slot, 1);
}

/* Only the engine's forwards go out: an eval forward (no micro-batch named) keeps its frame
 * until stage_offload_release. */
void stage_offload_after_forward(pt_stage *st, int slot) {
  int mb = st->offload->next_mb[slot];
  st->offload->mb_of[slot] = mb;
  st->offload->next_mb[slot] = -1;
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = pool_of(st, k);
    if (!q || mb < 0 || mb >= st->offload->n_micro || !q->offloaded[mb]) continue;
    double t0 = pt_now_s();
    int f = q->frame_of[slot], h = take(q->host_used, q->n_hosts, st, "host buffers");
    q->host_of[slot] = h;
    device_copy_async(st->m->dev, q->host[h], q->frame[f], q->bytes, 0, q->frame_ev[f]);
    give_frame(st, k, slot);
    note_span(st, 0, slot, t0);
  }
}

void stage_offload_prefetch(pt_stage *st, int slot) {
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = pool_of(st, k);
    if (!q || q->host_of[slot] < 0 || q->frame_of[slot] >= 0) continue;
    double t0 = pt_now_s();
    int f = hold_frame(st, k, slot, 0);
    device_copy_async(st->m->dev, q->frame[f], q->host[q->host_of[slot]], q->bytes, 1,
                      q->frame_ev[f]);
    note_span(st, 1, slot, t0);
  }
}

void stage_offload_before_backward(pt_stage *st, int slot) {
  stage_offload_prefetch(st, slot);
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = pool_of(st, k);
    if (q && q->frame_of[slot] < 0) hold_frame(st, k, slot, 1); /* nothing kept: a fresh one */
    if (q) device_wait_event(st->m->dev, q->frame_ev[q->frame_of[slot]]);
  }
}

void stage_offload_release(pt_stage *st, int slot) {
  for (int k = 0; k < OFFLOAD_KINDS; k++) {
    offload_pool *q = pool_of(st, k);
    if (!q) continue;
    give_frame(st, k, slot);
    if (q->host_of[slot] >= 0) q->host_used[q->host_of[slot]] = 0;
    q->host_of[slot] = -1;
  }
}

const stage_offload_span *stage_offload_take_spans(pt_stage *st, int *n) {
  *n = st->offload ? st->offload->n_spans : 0;
  if (st->offload) st->offload->n_spans = 0;
  return st->offload ? st->offload->spans : NULL;
}
