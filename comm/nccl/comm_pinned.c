/* comm/nccl/comm_pinned.c: the staged transport's reusable pinned buffers (comm_pinned.h). */
#include "comm/nccl/comm_pinned.h"

#include <stdlib.h>

#include "core/error.h"

struct pinned_slab {
  unsigned char *host;
  size_t cap;
  int taken;
  int copying;       /* freed is recorded: a copy may still use the buffer */
  cudaEvent_t freed; /* the give-back's position on its stream */
};

static long g_allocations;
long pinned_allocations(void) { return g_allocations; }

/* Whether the copy that last used s has completed (a poll: the host does not wait). */
static int settled(pinned_slab *s) {
  if (!s->copying) return 1;
  cudaError_t e = cudaEventQuery(s->freed);
  if (e == cudaErrorNotReady) return 0;
  PT_CHECK_CUDA(e);
  s->copying = 0;
  return 1;
}

static void slab_alloc(pinned_slab *s, size_t bytes) {
  if (s->host) PT_CHECK_CUDA(cudaFreeHost(s->host));
  size_t cap = s->cap * 2 > bytes ? s->cap * 2 : bytes; /* doubling: few reallocations */
  PT_CHECK_CUDA(cudaMallocHost((void **)&s->host, cap));
  s->cap = cap;
  g_allocations++;
}

static int slab_new(pinned_pool *p) {
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 4;
    p->slab = realloc(p->slab, sizeof *p->slab * (size_t)p->cap);
    if (!p->slab) pt_fatal("out of memory for pinned staging buffers");
  }
  pinned_slab *s = &p->slab[p->n];
  *s = (pinned_slab){0};
  PT_CHECK_CUDA(cudaEventCreateWithFlags(&s->freed, cudaEventDisableTiming));
  return p->n++;
}

int pinned_take(pinned_pool *p, size_t bytes) {
  if (bytes == 0) bytes = 1;
  int fit = -1, small = -1;
  for (int i = 0; i < p->n; i++) {
    pinned_slab *s = &p->slab[i];
    if (s->taken || !settled(s)) continue;
    if (s->cap >= bytes && (fit < 0 || s->cap < p->slab[fit].cap)) fit = i;
    if (s->cap < bytes) small = i;
  }
  int i = fit >= 0 ? fit : small >= 0 ? small : slab_new(p);
  if (p->slab[i].cap < bytes) slab_alloc(&p->slab[i], bytes);
  p->slab[i].taken = 1;
  return i;
}

void *pinned_host(const pinned_pool *p, int slab) { return p->slab[slab].host; }

void pinned_give(pinned_pool *p, int slab, cudaStream_t after) {
  pinned_slab *s = &p->slab[slab];
  s->taken = 0;
  s->copying = after != NULL;
  if (after) PT_CHECK_CUDA(cudaEventRecord(s->freed, after));
}

void pinned_free(pinned_pool *p) {
  for (int i = 0; i < p->n; i++) {
    if (p->slab[i].host) PT_CHECK_CUDA(cudaFreeHost(p->slab[i].host));
    PT_CHECK_CUDA(cudaEventDestroy(p->slab[i].freed));
  }
  free(p->slab);
  *p = (pinned_pool){0};
}
