/* comm/nccl/comm_nccl.c: device buffers for comm.h, over NCCL or over MPI through pinned host
 * memory (see comm_device.h). GPU builds only. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_device.h"
#include "core/error.h"
#include "kernels/cuda/gpu.h"

/* The add kernels of the chain sums (kernels/cuda/comm_add.cu). */
void comm_nccl_add_f32(float *y, const float *x, size_t n, cudaStream_t s);

struct comm_device {
  int nccl;              /* 1: NCCL; 0: MPI on pinned host copies */
  MPI_Comm mpi;
  int rank, size;
  ncclComm_t comm;
  cudaStream_t compute;  /* where the buffers are produced and consumed */
  cudaStream_t stream;   /* NCCL's own, so transfers overlap compute */
  float *tmp;            /* device scratch of the chain sum */
  size_t tmp_floats;
  int grouped;           /* inside comm_device_group_start/end */
  struct dev_req **held; /* NCCL transfers not issued yet (see below) */
  int n_held, cap_held;
};

/* NCCL runs a rank's transfers on one stream in issue order, and a transfer finishes only with
 * its match on the peer (a rendezvous): a receive posted early would hold up every send issued
 * after it. So sends are held back, and go out as one group, together with the receive waited
 * for, when the engine first waits for a transfer not yet issued; a receive goes out only when
 * waited for. Inside comm_device_group_start/end everything goes out together at the end.
 * schedule/schedule_rendezvous.c checks that the engine's schedules finish under these rules. */
typedef struct dev_req {
  comm_device *d;
  int peer, recv, issued;
  void *buf;
  size_t bytes;
  cudaEvent_t done;      /* NCCL: recorded on d->stream after the transfer's group */
  MPI_Request mpi;       /* staged */
  void *host;
} dev_req;

#define NCCL_CHECK(d, call)                                                              \
  do {                                                                                   \
    ncclResult_t r_ = (call);                                                            \
    if (r_ != ncclSuccess && r_ != ncclInProgress) nccl_fail(d, __FILE__, __LINE__, #call, r_); \
  } while (0)

/* A failed NCCL call aborts the communicator first: peers blocked on it then fail too,
 * instead of waiting for a rank that is leaving. */
static void nccl_fail(comm_device *d, const char *file, int line, const char *call, ncclResult_t r) {
  const char *last = d && d->comm ? ncclGetLastError(d->comm) : "";
  if (d && d->comm) ncclCommAbort(d->comm);
  pt_fatal("%s:%d: %s failed: %s%s%s", file, line, call, ncclGetErrorString(r),
           last && last[0] ? ": " : "", last ? last : "");
}

int comm_device_owns(const void *buf) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, buf) != cudaSuccess) {
    (void)cudaGetLastError(); /* a plain host pointer on older runtimes */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static comm_device *device_new(MPI_Comm mpi, int nccl, cudaStream_t compute) {
  comm_device *d = pt_calloc(1, sizeof *d);
  d->nccl = nccl, d->mpi = mpi, d->compute = compute;
  MPI_Comm_rank(mpi, &d->rank);
  MPI_Comm_size(mpi, &d->size);
  if (nccl) CUDA_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  return d;
}

comm_device *comm_device_create(MPI_Comm mpi, int nccl, void *stream, char *err, size_t errsz) {
  comm_device *d = device_new(mpi, nccl, (cudaStream_t)stream);
  if (!nccl) return d;
  ncclUniqueId id;
  if (d->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) memset(&id, 0, sizeof id);
  if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi) != MPI_SUCCESS) {
    snprintf(err, errsz, "sharing the NCCL unique id over MPI failed");
    free(d);
    return NULL;
  }
  ncclResult_t r = ncclCommInitRank(&d->comm, d->size, id, d->rank);
  if (r != ncclSuccess) {
    snprintf(err, errsz, "ncclCommInitRank (%d ranks): %s", d->size, ncclGetErrorString(r));
    cudaStreamDestroy(d->stream);
    free(d);
    return NULL;
  }
  return d;
}

comm_device *comm_device_split(comm_device *parent, MPI_Comm child, int color, int key) {
  ncclComm_t c = NULL;
  if (parent->nccl) /* collective over the parent's members, members or not */
    NCCL_CHECK(parent, ncclCommSplit(parent->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
                                     &c, NULL));
  if (color < 0) return NULL;
  comm_device *d = device_new(child, parent->nccl, parent->compute);
  d->comm = c;
  return d;
}

void comm_device_free(comm_device *d) {
  if (!d) return;
  if (d->comm) ncclCommDestroy(d->comm);
  if (d->stream) cudaStreamDestroy(d->stream);
  if (d->tmp) cudaFree(d->tmp);
  free(d->held);
  free(d);
}

/* NCCL's stream waits for what the compute stream has queued so far (the buffers' producers,
 * and the last readers of a buffer about to be received into). */
static void after_compute(comm_device *d) {
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ev, d->compute));
  CUDA_CHECK(cudaStreamWaitEvent(d->stream, ev, 0));
  CUDA_CHECK(cudaEventDestroy(ev));
}

static void hold(comm_device *d, dev_req *q) {
  if (d->n_held == d->cap_held) {
    d->cap_held = d->cap_held ? 2 * d->cap_held : 16;
    d->held = realloc(d->held, sizeof *d->held * (size_t)d->cap_held);
    if (!d->held) pt_fatal("out of memory holding NCCL transfers");
  }
  d->held[d->n_held++] = q;
}

/* One NCCL group: every held transfer, and extra (a receive waited for) when not NULL. */
static void issue_group(comm_device *d, dev_req *extra) {
  int held = 0;
  for (int i = 0; extra && i < d->n_held; i++) held |= d->held[i] == extra;
  if (extra && !extra->issued && !held) hold(d, extra);
  if (d->n_held == 0) return;
  after_compute(d);
  NCCL_CHECK(d, ncclGroupStart());
  for (int i = 0; i < d->n_held; i++) {
    dev_req *q = d->held[i];
    if (q->recv) NCCL_CHECK(d, ncclRecv(q->buf, q->bytes, ncclChar, q->peer, d->comm, d->stream));
    else NCCL_CHECK(d, ncclSend(q->buf, q->bytes, ncclChar, q->peer, d->comm, d->stream));
  }
  NCCL_CHECK(d, ncclGroupEnd());
  for (int i = 0; i < d->n_held; i++) {
    dev_req *q = d->held[i];
    CUDA_CHECK(cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(q->done, d->stream));
    q->issued = 1;
  }
  d->n_held = 0;
}

static dev_req *req_new(comm_device *d, void *buf, size_t bytes, int peer, int recv,
                        pt_request *r) {
  dev_req *q = pt_calloc(1, sizeof *q);
  *q = (dev_req){.d = d, .peer = peer, .recv = recv, .buf = buf, .bytes = bytes,
                 .mpi = MPI_REQUEST_NULL};
  r->impl = q;
  r->device = 1;
  return q;
}

void comm_device_send(comm_device *d, const void *buf, size_t bytes, int peer, int tag,
                      pt_request *r) {
  dev_req *q = req_new(d, (void *)buf, bytes, peer, 0, r);
  if (d->nccl) return hold(d, q);
  CUDA_CHECK(cudaMallocHost(&q->host, bytes ? bytes : 1));
  CUDA_CHECK(cudaMemcpyAsync(q->host, buf, bytes, cudaMemcpyDeviceToHost, d->compute));
  CUDA_CHECK(cudaStreamSynchronize(d->compute));
  if (MPI_Isend(q->host, (int)bytes, MPI_BYTE, peer, tag, d->mpi, &q->mpi) != MPI_SUCCESS)
    pt_fatal("MPI_Isend of %zu staged bytes to rank %d failed", bytes, peer);
}

void comm_device_recv(comm_device *d, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  dev_req *q = req_new(d, buf, bytes, peer, 1, r);
  if (d->nccl) {
    if (d->grouped) hold(d, q); /* an explicit group goes out whole at its end */
    return;
  }
  CUDA_CHECK(cudaMallocHost(&q->host, bytes ? bytes : 1));
  if (MPI_Irecv(q->host, (int)bytes, MPI_BYTE, peer, tag, d->mpi, &q->mpi) != MPI_SUCCESS)
    pt_fatal("MPI_Irecv of %zu staged bytes from rank %d failed", bytes, peer);
}

/* Polls the event and the communicator's asynchronous error: a peer that died turns into an
 * abort and an error naming it (the watchdog bounds a peer that hangs). */
static void nccl_wait_event(comm_device *d, cudaEvent_t ev, int peer, size_t bytes) {
  struct timespec nap = {0, 20000};
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
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

static void nccl_wait(dev_req *q) {
  if (!q->issued) issue_group(q->d, q);
  nccl_wait_event(q->d, q->done, q->peer, q->bytes);
  CUDA_CHECK(cudaEventDestroy(q->done));
}

int comm_device_wait(pt_request *r) {
  if (!r->device) return 0;
  dev_req *q = r->impl;
  if (q->d->nccl) {
    nccl_wait(q);
  } else {
    if (MPI_Wait(&q->mpi, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      pt_fatal("waiting for %zu staged bytes with rank %d failed", q->bytes, q->peer);
    if (q->recv)
      CUDA_CHECK(cudaMemcpyAsync(q->buf, q->host, q->bytes, cudaMemcpyHostToDevice, q->d->compute));
    CUDA_CHECK(cudaStreamSynchronize(q->d->compute)); /* the pinned copy is freed next */
    CUDA_CHECK(cudaFreeHost(q->host));
  }
  free(q);
  r->impl = NULL;
  r->device = 0;
  return 1;
}

void comm_device_group_start(comm_device *d) {
  if (d->nccl) d->grouped = 1;
}

void comm_device_group_end(comm_device *d) {
  if (!d->nccl) return;
  d->grouped = 0;
  issue_group(d, NULL);
}

/* Chain sum on the device: receive the running sum from rank - 1, add this rank's values,
 * pass it on; the last rank broadcasts. The same order as the host path, so the same bits. */
static void nccl_sum_f32(comm_device *d, float *buf, size_t n) {
  if (d->tmp_floats < n) {
    if (d->tmp) CUDA_CHECK(cudaFree(d->tmp));
    CUDA_CHECK(cudaMalloc((void **)&d->tmp, n * sizeof(float)));
    d->tmp_floats = n;
  }
  issue_group(d, NULL); /* transfers held on this group go first, in issue order */
  after_compute(d);
  if (d->rank > 0) {
    NCCL_CHECK(d, ncclRecv(d->tmp, n, ncclFloat, d->rank - 1, d->comm, d->stream));
    comm_nccl_add_f32(buf, d->tmp, n, d->stream);
    CUDA_CHECK(cudaGetLastError());
  }
  if (d->rank < d->size - 1) NCCL_CHECK(d, ncclSend(buf, n, ncclFloat, d->rank + 1, d->comm, d->stream));
  NCCL_CHECK(d, ncclBroadcast(buf, buf, n, ncclFloat, d->size - 1, d->comm, d->stream));
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ev, d->stream));
  nccl_wait_event(d, ev, d->rank > 0 ? d->rank - 1 : d->rank + 1, n * sizeof(float));
  CUDA_CHECK(cudaEventDestroy(ev));
}

void comm_device_sum_f32(comm_device *d, float *buf, size_t n) {
  if (d->size == 1 || n == 0) return;
  if (d->nccl) return nccl_sum_f32(d, buf, n);
  float *host;
  CUDA_CHECK(cudaMallocHost((void **)&host, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpyAsync(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost, d->compute));
  CUDA_CHECK(cudaStreamSynchronize(d->compute));
  comm_host_sum_f32(d->mpi, host, n);
  CUDA_CHECK(cudaMemcpyAsync(buf, host, n * sizeof(float), cudaMemcpyHostToDevice, d->compute));
  CUDA_CHECK(cudaStreamSynchronize(d->compute));
  CUDA_CHECK(cudaFreeHost(host));
}
