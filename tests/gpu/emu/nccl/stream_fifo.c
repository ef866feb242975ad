/* tests/gpu/emu/nccl/stream_fifo.c: a stand-in for the CUDA emulation's streams, so the NCCL
 * emulation's tests run without it: nccl_emu_stream.h's hooks over FIFO queues, and the stream
 * functions of stub/cuda_runtime_api.h. A queue is drained only by a synchronisation; a drain
 * polls the head of every stream in turn, as a GPU runs its streams side by side. The emulated
 * GPU build links the CUDA emulation's implementation of the hooks instead of this file. */
#include <stdlib.h>
#include <time.h>

#include "nccl_emu_stream.h"

typedef struct item {
  nccl_emu_poll_fn poll;
  void (*after)(void *);
  void *arg;
  struct item *next;
} item;

struct nccl_emu_fifo_stream {
  item *head, *tail;
  struct nccl_emu_fifo_stream *next; /* every live stream */
};

static struct nccl_emu_fifo_stream g_default; /* stream 0 */
static struct nccl_emu_fifo_stream *g_streams = &g_default;

static struct nccl_emu_fifo_stream *resolve(cudaStream_t s) { return s ? s : &g_default; }

void nccl_emu_stream_enqueue(cudaStream_t s, const char *what, nccl_emu_poll_fn poll,
                             void (*after)(void *arg), void *arg) {
  (void)what;
  struct nccl_emu_fifo_stream *q = resolve(s);
  item *it = calloc(1, sizeof *it);
  if (!it) abort();
  *it = (item){poll, after, arg, NULL};
  if (q->tail) q->tail->next = it;
  else q->head = it;
  q->tail = it;
}

/* Runs q's head until it waits; returns whether anything finished. */
static int run_head(struct nccl_emu_fifo_stream *q) {
  int progressed = 0;
  while (q->head && q->head->poll(q->head->arg) == NCCL_EMU_DONE) {
    item *it = q->head;
    q->head = it->next;
    if (!q->head) q->tail = NULL;
    if (it->after) it->after(it->arg);
    free(it);
    progressed = 1;
  }
  return progressed;
}

static int progress_once(void) {
  int progressed = 0;
  for (struct nccl_emu_fifo_stream *q = g_streams; q; q = q->next) progressed |= run_head(q);
  return progressed;
}

void nccl_emu_stream_progress(void) { (void)progress_once(); }

void nccl_emu_check_device(const char *what, const void *ptr, size_t bytes) {
  (void)what, (void)ptr, (void)bytes; /* host memory stands for device memory here */
}

/* Until pending() is false; a stuck NCCL operation ends the job from inside its poll. */
static void drain(int (*pending)(struct nccl_emu_fifo_stream *), struct nccl_emu_fifo_stream *q) {
  struct timespec nap = {0, 50000};
  while (pending(q))
    if (!progress_once()) nanosleep(&nap, NULL);
}

static int stream_busy(struct nccl_emu_fifo_stream *q) { return q->head != NULL; }

static int any_busy(struct nccl_emu_fifo_stream *unused) {
  (void)unused;
  for (struct nccl_emu_fifo_stream *q = g_streams; q; q = q->next)
    if (q->head) return 1;
  return 0;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  struct nccl_emu_fifo_stream *q = calloc(1, sizeof *q);
  if (!stream || !q) return cudaErrorInvalidValue;
  q->next = g_streams;
  g_streams = q;
  *stream = q;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  drain(stream_busy, resolve(stream));
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  (void)progress_once();
  return stream_busy(resolve(stream)) ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  drain(any_busy, NULL);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return cudaErrorInvalidValue;
  drain(stream_busy, stream);
  for (struct nccl_emu_fifo_stream **p = &g_streams; *p; p = &(*p)->next)
    if (*p == stream) {
      *p = stream->next;
      break;
    }
  free(stream);
  return cudaSuccess;
}
