/* comm/nccl/comm_nccl.c: the NCCL transport (comm_transport.h): a GPU rank's device buffers
 * over a NCCL communicator per group (the world's from a unique id broadcast over MPI, the
 * others by ncclCommSplit), on a stream of its own, sends grouped with their receives. It
 * matches transfers in issue order and holds sends back (its traits; see below). Float sums
 * keep comm.h's fixed order ((x0 + x1) + x2) + ..., so results match the host path bit for
 * bit. GPU builds only. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_check.h"
#include "comm/nccl/comm_gpu.h"
#include "core/error.h"
#include "kernels/cuda/gpu.h"
#include "partition/memory.h"

/* The add kernels of the chain sums (kernels/cuda/comm_add.cu). */
void comm_nccl_add_f32(float *y, const float *x, size_t n, cudaStream_t s);

typedef struct nccl_link {
  MPI_Comm mpi;
  int rank, size;
  ncclComm_t comm;
  cudaStream_t compute;  /* where the buffers are produced and consumed */
  cudaStream_t stream;   /* NCCL's own, so transfers overlap compute */
  float *tmp;            /* device scratch of the chain sum */
  size_t tmp_floats;
  unsigned char *peers;  /* [size]: ranks exchanged with, whose NCCL buffers are counted */
  int64_t accounted;     /* bytes of NCCL's own buffers counted in the memory totals */
  int grouped;           /* inside comm_group_start/end */
  struct dev_req **held; /* NCCL transfers not issued yet (see below) */
  int n_held, cap_held;
  struct nccl_link *next_live; /* the list nccl_failure_text aborts */
} nccl_link;

extern const comm_transport comm_transport_nccl;

/* NCCL runs a rank's transfers on one stream in issue order, and a transfer finishes only with
 * its match on the peer (a rendezvous): a receive posted early would hold up every send issued
 * after it. So sends are held back, and go out as one group, together with the receive waited
 * for, when the engine first waits for a transfer not yet issued; a receive goes out only when
 * waited for. Inside comm_group_start/end everything goes out together at the end. comm_flush
 * (nccl_flush; the schedule's FLUSH) issues the held sends alone: a rank about to block in a
 * reduction on another communicator must, or its peers wait for them meanwhile. A reduction
 * on this communicator issues them first itself (nccl_sum_f32). schedule/schedule_rendezvous.c
 * checks that the engine's schedules finish under these rules. Holding costs no overlap: a
 * held send is issued at the latest when something waits for it or for a later transfer.
 *
 * Ordering against compute (docs/gpu.md, "Overlap"): the host never waits for a transfer.
 *   - At the send or receive call, an event (ready) is recorded on the compute stream: what is
 *     queued there so far produces the send's buffer, or is the last to read the buffer a
 *     receive overwrites (the engine posts a receive only once the buffer is free, as MPI
 *     requires). The group's stream waits for each member's ready event, not for all compute.
 *   - After the group, an event (done) is recorded on the group's stream. comm_wait (nccl_wait)
 *     makes the compute stream wait for it: a receive's consumers, and whatever the engine
 *     queues after waiting for a send (it overwrites the buffer only after that wait), run
 *     after the transfer; the host goes on queuing work at once. */
typedef struct dev_req {
  nccl_link *d;
  int peer, recv, issued;
  void *buf;
  size_t bytes;
  cudaEvent_t ready;     /* NCCL: on the compute stream at the call (see above) */
  cudaEvent_t done;      /* NCCL: recorded on d->stream after the transfer's group */
} dev_req;

/* Tests on the emulated NCCL only (its nccl.h defines PT_NCCL_EMULATION): PT_EMU_COMM_UNORDERED
 * =ready drops the group stream's wait for the buffers' producers, =done the compute stream's
 * wait for the transfer, so tests/gpu/overlap_order.sh can show the emulator catches either
 * missing ordering. Never set in a build for real NCCL: there it is always 0. */
static int unordered(const char *which) {
#ifdef PT_NCCL_EMULATION
  const char *v = getenv("PT_EMU_COMM_UNORDERED");
  return v && !strcmp(v, which);
#else
  (void)which;
  return 0;
#endif
}

/* Every live communicator of this process (see nccl_failure_text). */
static nccl_link *g_live;

/* A failed NCCL call aborts this process's communicators first: peers blocked on one of them
 * then fail too, instead of waiting for a rank that is leaving. Returns the text the failure is
 * reported with (NCCL's name for r and its last error message). */
static const char *nccl_failure_text(ncclResult_t r) {
  static char text[512];
  const char *last = ncclGetLastError(NULL);
  snprintf(text, sizeof text, "%s%s%s", ncclGetErrorString(r), last && last[0] ? ": " : "",
           last ? last : "");
  for (nccl_link *d = g_live; d; d = d->next_live)
    if (d->comm) ncclCommAbort(d->comm);
  return text;
}
/* ncclInProgress: a non-blocking communicator's call that goes on in the background */
#define PT_NCCL_OK(r) ((r) == ncclSuccess || (r) == ncclInProgress)
#define PT_CHECK_NCCL(call) \
  PT_CHECK_CALL(ncclResult_t, call, #call, PT_NCCL_OK, "NCCL", nccl_failure_text)

/* The memory plan counts NCCL's buffers per peer (partition/memory.h: comm), which NCCL
 * allocates out of sight; the same figure goes into the measured totals at the first transfer
 * with each peer, so planned and measured peaks agree on it. */
static void note_peer(nccl_link *d, int peer) {
  if (peer == d->rank || d->peers[peer]) return;
  d->peers[peer] = 1;
  int64_t b = memory_nccl_peer_bytes();
  d->accounted += b;
  pt_mem_account(b);
}

static nccl_link *device_new(MPI_Comm mpi, cudaStream_t compute) {
  nccl_link *d = pt_calloc(1, sizeof *d);
  d->mpi = mpi, d->compute = compute;
  PT_CHECK_MPI(MPI_Comm_rank(mpi, &d->rank));
  PT_CHECK_MPI(MPI_Comm_size(mpi, &d->size));
  d->peers = pt_calloc((size_t)d->size, 1);
  PT_CHECK_CUDA(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  d->next_live = g_live;
  g_live = d;
  return d;
}

/* What rank 0 broadcasts: the unique id, or why it has none (status and NCCL's words), so
 * that every rank fails with the same message instead of joining a zeroed id. */
typedef struct {
  ncclUniqueId id;
  int status; /* ncclResult_t of ncclGetUniqueId */
  char text[256];
} shared_id;

static void make_id(shared_id *s) {
  ncclResult_t r = ncclGetUniqueId(&s->id);
  s->status = (int)r;
  if (r == ncclSuccess) return;
  const char *last = ncclGetLastError(NULL);
  snprintf(s->text, sizeof s->text, "%s%s%s", ncclGetErrorString(r), last && last[0] ? ": " : "",
           last ? last : "");
}

static void nccl_close(void *state);

static void *nccl_open(MPI_Comm mpi, void *stream, char *err, size_t errsz) {
  nccl_link *d = device_new(mpi, (cudaStream_t)stream);
  shared_id s;
  memset(&s, 0, sizeof s);
  if (d->rank == 0) make_id(&s);
  if (MPI_Bcast(&s, (int)sizeof s, MPI_BYTE, 0, mpi) != MPI_SUCCESS || s.status != ncclSuccess) {
    if (s.status != ncclSuccess) /* the same words on every rank */
      snprintf(err, errsz, "ncclGetUniqueId failed on rank 0: %.255s (comm.backend: mpi stages "
               "GPU buffers through host memory instead)", s.text);
    else
      snprintf(err, errsz, "sharing the NCCL unique id over MPI failed");
    nccl_close(d);
    return NULL;
  }
  ncclUniqueId id = s.id;
  ncclResult_t r = ncclCommInitRank(&d->comm, d->size, id, d->rank);
  if (r != ncclSuccess) {
    snprintf(err, errsz, "ncclCommInitRank (%d ranks): %s", d->size, ncclGetErrorString(r));
    d->comm = NULL; /* not a communicator to destroy */
    nccl_close(d);
    return NULL;
  }
  return d;
}

static void *nccl_split(void *state, MPI_Comm child, int color, int key) {
  nccl_link *parent = state;
  ncclComm_t c = NULL; /* collective over the parent's members, members or not */
  PT_CHECK_NCCL(ncclCommSplit(parent->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c,
                              NULL));
  if (color < 0) return NULL;
  nccl_link *d = device_new(child, parent->compute);
  d->comm = c;
  return d;
}

static void forget(nccl_link *d) {
  for (nccl_link **p = &g_live; *p; p = &(*p)->next_live)
    if (*p == d) {
      *p = d->next_live;
      return;
    }
}

static void nccl_close(void *state) {
  nccl_link *d = state;
  if (!d) return;
  forget(d);
  if (d->comm) ncclCommDestroy(d->comm);
  if (d->stream) cudaStreamDestroy(d->stream);
  if (d->tmp) cudaFree(d->tmp);
  pt_mem_account(-(int64_t)(d->tmp_floats * sizeof(float)) - d->accounted);
  free(d->peers);
  free(d->held);
  free(d);
}

/* NCCL's stream waits for what the compute stream has queued so far (the buffers' producers,
 * and the last readers of a buffer about to be received into). */
static void after_compute(nccl_link *d) {
  cudaEvent_t ev;
  PT_CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  PT_CHECK_CUDA(cudaEventRecord(ev, d->compute));
  PT_CHECK_CUDA(cudaStreamWaitEvent(d->stream, ev, 0));
  PT_CHECK_CUDA(cudaEventDestroy(ev));
}

static void hold(nccl_link *d, dev_req *q) {
  if (d->n_held == d->cap_held) {
    d->cap_held = d->cap_held ? 2 * d->cap_held : 16;
    d->held = realloc(d->held, sizeof *d->held * (size_t)d->cap_held);
    if (!d->held) pt_fatal("out of memory holding NCCL transfers");
  }
  d->held[d->n_held++] = q;
}

/* One NCCL group: every held transfer, and extra (a receive waited for) when not NULL. */
static void issue_group(nccl_link *d, dev_req *extra) {
  int held = 0;
  for (int i = 0; extra && i < d->n_held; i++) held |= d->held[i] == extra;
  if (extra && !extra->issued && !held) hold(d, extra);
  if (d->n_held == 0) return;
  for (int i = 0; i < d->n_held; i++) { /* each buffer's producers or last readers, no more */
    dev_req *q = d->held[i];
    if (!unordered("ready")) PT_CHECK_CUDA(cudaStreamWaitEvent(d->stream, q->ready, 0));
    PT_CHECK_CUDA(cudaEventDestroy(q->ready));
  }
  PT_CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < d->n_held; i++) {
    dev_req *q = d->held[i];
    note_peer(d, q->peer);
    if (q->recv) PT_CHECK_NCCL(ncclRecv(q->buf, q->bytes, ncclChar, q->peer, d->comm, d->stream));
    else PT_CHECK_NCCL(ncclSend(q->buf, q->bytes, ncclChar, q->peer, d->comm, d->stream));
  }
  PT_CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < d->n_held; i++) {
    dev_req *q = d->held[i];
    PT_CHECK_CUDA(cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming));
    PT_CHECK_CUDA(cudaEventRecord(q->done, d->stream));
    q->issued = 1;
  }
  d->n_held = 0;
}

static dev_req *req_new(nccl_link *d, void *buf, size_t bytes, int peer, int recv,
                        pt_request *r) {
  dev_req *q = pt_calloc(1, sizeof *q);
  *q = (dev_req){.d = d, .peer = peer, .recv = recv, .buf = buf, .bytes = bytes};
  r->impl = q;
  r->via = &comm_transport_nccl;
  return q;
}

/* The compute stream's position now: the buffer's producers or last readers (see dev_req). */
static void mark_ready(nccl_link *d, dev_req *q) {
  PT_CHECK_CUDA(cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming));
  PT_CHECK_CUDA(cudaEventRecord(q->ready, d->compute));
}

/* tag: MPI's; NCCL matches in issue order instead (comm.h). */
static void nccl_send(void *state, const void *buf, size_t bytes, int peer, int tag,
                      pt_request *r) {
  nccl_link *d = state;
  (void)tag;
  dev_req *q = req_new(d, (void *)buf, bytes, peer, 0, r);
  mark_ready(d, q);
  hold(d, q);
}

static void nccl_recv(void *state, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  nccl_link *d = state;
  (void)tag;
  dev_req *q = req_new(d, buf, bytes, peer, 1, r);
  mark_ready(d, q);
  if (d->grouped) hold(d, q); /* an explicit group goes out whole at its end */
}

/* Polls the event and the communicator's asynchronous error. That error is what NCCL detects
 * itself, e.g. a network connection to a peer on another node that broke: it turns into an
 * abort and an error naming the peer. A dead peer over NVLink, PCIe or shared memory (one node)
 * is not reported: the event never completes, and the watchdog (pipeline.timeout_s), armed by
 * the engine around every wait, ends the job instead, as it does for a peer that hangs. */
static void nccl_wait_event(nccl_link *d, cudaEvent_t ev, int peer, size_t bytes) {
  struct timespec nap = {0, 20000};
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) PT_CHECK_CUDA(e);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(d->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      ncclCommAbort(d->comm);
      pt_fatal("NCCL failed while exchanging %zu bytes with rank %d: %s (that rank may have "
               "died)", bytes, peer, ncclGetErrorString(async));
    }
    nanosleep(&nap, NULL);
  }
}

/* The compute stream waits for the transfer; the host does not (see dev_req). An error NCCL
 * has already detected on the communicator is reported here, without waiting for one. */
static void nccl_wait(pt_request *r) {
  dev_req *q = r->impl;
  nccl_link *d = q->d;
  if (!q->issued) issue_group(d, q);
  if (!unordered("done")) PT_CHECK_CUDA(cudaStreamWaitEvent(d->compute, q->done, 0));
  PT_CHECK_CUDA(cudaEventDestroy(q->done)); /* the queued wait keeps what it needs */
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(d->comm, &async);
  if (async != ncclSuccess && async != ncclInProgress) {
    ncclCommAbort(d->comm);
    pt_fatal("NCCL failed while exchanging %zu bytes with rank %d: %s (that rank may have "
             "died)", q->bytes, q->peer, ncclGetErrorString(async));
  }
  free(q);
  r->impl = NULL;
  r->via = NULL;
}

static void nccl_group_start(void *state) { ((nccl_link *)state)->grouped = 1; }

static void nccl_group_end(void *state) {
  nccl_link *d = state;
  d->grouped = 0;
  issue_group(d, NULL);
}

/* comm_flush: the held sends out as one group (inside a group: nothing). */
static void nccl_flush(void *state) {
  nccl_link *d = state;
  if (!d->grouped) issue_group(d, NULL);
}

/* The host waits for what the group's stream queued so far (a reduction's end: the engine's
 * watchdog is armed around it, and NCCL's asynchronous errors are polled meanwhile). */
static void nccl_finish(nccl_link *d, int peer, size_t bytes) {
  cudaEvent_t ev;
  PT_CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  PT_CHECK_CUDA(cudaEventRecord(ev, d->stream));
  nccl_wait_event(d, ev, peer, bytes);
  PT_CHECK_CUDA(cudaEventDestroy(ev));
}

/* Chain sum on the device: receive the running sum from rank - 1, add this rank's values,
 * pass it on. The same order as the host path, so the same bits; the last rank ends with the
 * sum. The chain's neighbours are noted here, the callers' other peers by them. */
static void nccl_chain(nccl_link *d, float *buf, size_t n) {
  if (d->tmp_floats < n) { /* counted in the memory totals, as the plan counts it */
    if (d->tmp) PT_CHECK_CUDA(cudaFree(d->tmp));
    PT_CHECK_CUDA(cudaMalloc((void **)&d->tmp, n * sizeof(float)));
    pt_mem_account((int64_t)((n - d->tmp_floats) * sizeof(float)));
    d->tmp_floats = n;
  }
  note_peer(d, (d->rank + 1) % d->size); /* the chain's and the broadcast ring's neighbours */
  note_peer(d, (d->rank + d->size - 1) % d->size);
  issue_group(d, NULL); /* transfers held on this group go first, in issue order */
  after_compute(d);
  if (d->rank > 0) {
    PT_CHECK_NCCL(ncclRecv(d->tmp, n, ncclFloat, d->rank - 1, d->comm, d->stream));
    comm_nccl_add_f32(buf, d->tmp, n, d->stream);
    PT_CHECK_CUDA(cudaGetLastError());
  }
  if (d->rank < d->size - 1) PT_CHECK_NCCL(ncclSend(buf, n, ncclFloat, d->rank + 1, d->comm, d->stream));
}

/* The chain, then the last rank broadcasts. */
static void nccl_sum_f32(void *state, float *buf, size_t n) {
  nccl_link *d = state;
  if (d->size == 1 || n == 0) return;
  nccl_chain(d, buf, n);
  PT_CHECK_NCCL(ncclBroadcast(buf, buf, n, ncclFloat, d->size - 1, d->comm, d->stream));
  nccl_finish(d, d->rank > 0 ? d->rank - 1 : d->rank + 1, n * sizeof(float));
}

/* Rank r's range of comm.h's ends: its first float and count. */
static size_t range_of(const size_t *ends, int r, size_t *count) {
  size_t lo = r ? ends[r - 1] : 0;
  *count = ends[r] - lo;
  return lo;
}

/* The chain, then the last rank sends each rank its range (one group). */
static void nccl_reduce_scatter_f32(void *state, float *buf, size_t n, const size_t *ends) {
  nccl_link *d = state;
  if (d->size == 1 || n == 0) return;
  nccl_chain(d, buf, n);
  int last = d->size - 1;
  size_t count, lo;
  PT_CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < last; r++) {
    lo = range_of(ends, r, &count);
    if (count == 0 || (d->rank != last && d->rank != r)) continue;
    note_peer(d, d->rank == last ? r : last);
    if (d->rank == last) PT_CHECK_NCCL(ncclSend(buf + lo, count, ncclFloat, r, d->comm, d->stream));
    else PT_CHECK_NCCL(ncclRecv(buf + lo, count, ncclFloat, last, d->comm, d->stream));
  }
  PT_CHECK_NCCL(ncclGroupEnd());
  nccl_finish(d, d->rank > 0 ? d->rank - 1 : d->rank + 1, n * sizeof(float));
}

/* Every rank sends its range to every other and receives theirs (one group). */
static void nccl_allgather_f32(void *state, float *buf, size_t n, const size_t *ends) {
  nccl_link *d = state;
  if (d->size == 1 || n == 0) return;
  issue_group(d, NULL); /* transfers held on this group go first, in issue order */
  after_compute(d);
  size_t mine, count, at = range_of(ends, d->rank, &mine);
  PT_CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < d->size; r++) {
    size_t lo = range_of(ends, r, &count);
    if (r == d->rank) continue;
    note_peer(d, r);
    if (mine) PT_CHECK_NCCL(ncclSend(buf + at, mine, ncclFloat, r, d->comm, d->stream));
    if (count) PT_CHECK_NCCL(ncclRecv(buf + lo, count, ncclFloat, r, d->comm, d->stream));
  }
  PT_CHECK_NCCL(ncclGroupEnd());
  nccl_finish(d, (d->rank + 1) % d->size, n * sizeof(float));
}

/* comm.dp_reduce: allreduce. NCCL's own reduction (ring or tree, chosen by NCCL): one call,
 * bandwidth-optimal, but its order of additions is NCCL's, not the chain's. */
static void nccl_allreduce_f32(void *state, float *buf, size_t n) {
  nccl_link *d = state;
  if (d->size == 1 || n == 0) return;
  note_peer(d, (d->rank + 1) % d->size); /* the ring's neighbours, as the plan counts them */
  note_peer(d, (d->rank + d->size - 1) % d->size);
  issue_group(d, NULL); /* transfers held on this group go first, in issue order */
  after_compute(d);
  PT_CHECK_NCCL(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, d->comm, d->stream));
  nccl_finish(d, (d->rank + 1) % d->size, n * sizeof(float));
}

static void nccl_connect(void *state, const int *peers, int n) {
  comm_gpu_connect(&comm_transport_nccl, state, peers, n);
}

const comm_transport comm_transport_nccl = {
    .traits = {.name = "nccl", .in_order = 1, .holds_sends = 1},
    .gpu = 1,
    .backend = SPEC_COMM_NCCL,
    .open = nccl_open,
    .split = nccl_split,
    .close = nccl_close,
    .send = nccl_send,
    .recv = nccl_recv,
    .wait = nccl_wait,
    .group_start = nccl_group_start,
    .group_end = nccl_group_end,
    .flush = nccl_flush,
    .sum_f32 = nccl_sum_f32,
    .allreduce_f32 = nccl_allreduce_f32,
    .reduce_scatter_f32 = nccl_reduce_scatter_f32,
    .allgather_f32 = nccl_allgather_f32,
    .connect = nccl_connect,
};
