/* Activation offload's frames and host buffers (schedule/schedule_offload.h). */
#include "schedule/schedule_offload.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"

static int is_compute(pt_action_kind k) {
  return k == ACT_FORWARD || k == ACT_BACKWARD || k == ACT_BACKWARD_INPUT ||
         k == ACT_BACKWARD_WEIGHT;
}

int schedule_prefetch_at(const pt_action *acts, int n, int i) {
  if (!is_compute(acts[i].kind)) return -1;
  for (int j = i + 1; j < n; j++) {
    if (!is_compute(acts[j].kind)) continue;
    return acts[j].kind == ACT_BACKWARD || acts[j].kind == ACT_BACKWARD_INPUT ? j : -1;
  }
  return -1;
}

/* The action that releases a micro-batch's slot: its B, or its W when its backward is split (a
 * schedule may split some micro-batches' and not others'). */
static int releases(pt_action_kind k) { return k == ACT_BACKWARD || k == ACT_BACKWARD_WEIGHT; }

/* Marks up to k micro-batches: the micro-batches ranked by how long they are held (longest
 * first, ties by number), the j-th taken where floor((j + 1) k / M) steps up. Taking the k
 * longest instead would leave the warm-up's micro-batches of 1F1B, held shorter, all on the
 * device at the peak; spread over the ranking, every set of micro-batches held at once (which
 * hold about alike) loses about the same share, and so does the peak. A micro-batch whose
 * backward is the next compute action after its own forward (the last stage's) never goes out:
 * its prefetch would be issued before it went out. */
static void choose(const pt_action *a, int n, int chunk, int n_micro, int k, unsigned char *off) {
  int *hold = pt_calloc((size_t)n_micro, sizeof(int));
  unsigned char *ranked = pt_calloc((size_t)n_micro, 1), *stays = pt_calloc((size_t)n_micro, 1);
  for (int i = 0; i < n; i++) {
    if (a[i].chunk != chunk || a[i].mb < 0 || a[i].mb >= n_micro) continue;
    if (a[i].kind == ACT_FORWARD) hold[a[i].mb] -= i;
    if (releases(a[i].kind)) hold[a[i].mb] += i;
    int j = schedule_prefetch_at(a, n, i);
    if (a[i].kind == ACT_FORWARD && j >= 0 && a[j].chunk == chunk && a[j].mb == a[i].mb)
      stays[a[i].mb] = 1;
  }
  for (int j = 0; j < n_micro; j++) {
    int best = -1;
    for (int mb = 0; mb < n_micro; mb++)
      if (!ranked[mb] && (best < 0 || hold[mb] > hold[best])) best = mb;
    ranked[best] = 1;
    if ((int64_t)(j + 1) * k / n_micro > (int64_t)j * k / n_micro) off[best] = !stays[best];
  }
  free(hold), free(ranked), free(stays);
}

typedef struct {
  unsigned char *frame, *host;
  int frames, hosts, peak_frames, peak_hosts;
} walk;

static void take_frame(walk *w, int mb) {
  if (w->frame[mb]) return;
  w->frame[mb] = 1;
  if (++w->frames > w->peak_frames) w->peak_frames = w->frames;
}

static void give_frame(walk *w, int mb) {
  if (w->frame[mb]) w->frame[mb] = 0, w->frames--;
}

void schedule_offload_sim(const pt_schedule *s, int chunk, double fraction, pt_offload_sim *out) {
  int r = s->chunk_rank[chunk], n = s->n_acts[r], M = s->n_micro;
  const pt_action *a = s->acts[r];
  int k = (int)ceil(fraction * M - 1e-9);
  out->offloaded = pt_calloc((size_t)M, 1);
  out->frames = s->n_slots[chunk];
  out->hosts = 0;
  if (k <= 0) return;
  choose(a, n, chunk, M, k < M ? k : M, out->offloaded);
  walk w = {pt_calloc((size_t)M, 1), pt_calloc((size_t)M, 1), 0, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    int j = schedule_prefetch_at(a, n, i);
    if (j >= 0 && a[j].chunk == chunk && out->offloaded[a[j].mb]) take_frame(&w, a[j].mb);
    int mb = a[i].mb;
    if (a[i].chunk != chunk || mb < 0 || mb >= M) continue;
    if (a[i].kind == ACT_FORWARD) {
      take_frame(&w, mb);
      if (out->offloaded[mb]) {
        give_frame(&w, mb);
        w.host[mb] = 1;
        if (++w.hosts > w.peak_hosts) w.peak_hosts = w.hosts;
      }
    }
    if (a[i].kind == ACT_BACKWARD || a[i].kind == ACT_BACKWARD_INPUT) take_frame(&w, mb);
    if (releases(a[i].kind)) {
      give_frame(&w, mb);
      if (w.host[mb]) w.host[mb] = 0, w.hosts--;
    }
  }
  out->frames = w.peak_frames;
  out->hosts = w.peak_hosts;
  free(w.frame), free(w.host);
}

void schedule_offload_free(pt_offload_sim *o) {
  free(o->offloaded);
  o->offloaded = NULL;
}
