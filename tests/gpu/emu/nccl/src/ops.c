/* tests/gpu/emu/nccl/src/ops.c: the operations' entry points. Each checks its arguments as
 * NCCL does (a bad one returns ncclInvalidArgument, queues nothing), counts, and is issued. */
#include <stdint.h>

#include "internal.h"

static size_t type_size(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  default: return 0;
  }
}

/* Reductions need arithmetic the emulation has: not half, bfloat16 or fp8. */
static int reducible(ncclDataType_t t) {
  return t != ncclFloat16 && t != ncclBfloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

static ncclResult_t check_args(emu_op *op) {
  const char *fn = emu_op_name(op->kind);
  size_t size = type_size(op->type);
  if (!op->comm) return emu_fail(ncclInvalidArgument, "%s: comm is NULL", fn);
  if (op->comm->aborted)
    return emu_fail(ncclInvalidUsage, "%s: communicator %s was aborted", fn, op->comm->name);
  if (size == 0) return emu_fail(ncclInvalidArgument, "%s: unknown datatype %d", fn, (int)op->type);
  if (op->count > SIZE_MAX / size)
    return emu_fail(ncclInvalidArgument, "%s: count %zu overflows", fn, op->count);
  op->bytes = op->count * size;
  int n = op->comm->nranks, collective = op->kind != OP_SEND && op->kind != OP_RECV;
  if (op->kind != OP_ALLREDUCE && (op->peer < 0 || op->peer >= n))
    return emu_fail(ncclInvalidArgument, "%s: %s %d of a communicator of %d ranks", fn,
                    collective ? "root" : "peer", op->peer, n);
  if (op->kind == OP_ALLREDUCE || op->kind == OP_REDUCE) {
    if ((int)op->red < 0 || op->red >= ncclNumOps)
      return emu_fail(ncclInvalidArgument, "%s: unknown reduction %d", fn, (int)op->red);
    if (!reducible(op->type))
      return emu_fail(ncclInvalidArgument, "%s: the emulation has no arithmetic for datatype %d "
                      "(half, bfloat16 and fp8 are not emulated)", fn, (int)op->type);
  }
  return ncclSuccess;
}

/* The buffers this rank reads and writes, which NCCL requires in device memory. */
static ncclResult_t check_buffers(const emu_op *op) {
  const char *fn = emu_op_name(op->kind);
  int me = op->comm->rank, root = op->peer;
  int reads = op->kind != OP_RECV && (op->kind != OP_BCAST || me == root);
  int writes = op->kind != OP_SEND && (op->kind != OP_REDUCE || me == root);
  if (op->bytes && ((reads && !op->sendbuf) || (writes && !op->recvbuf)))
    return emu_fail(ncclInvalidArgument, "%s: a NULL buffer for %zu bytes", fn, op->bytes);
  if (op->bytes && reads) nccl_emu_check_device(fn, op->sendbuf, op->bytes);
  if (op->bytes && writes) nccl_emu_check_device(fn, op->recvbuf, op->bytes);
  return ncclSuccess;
}

static void count(const emu_op *op) {
  nccl_emu_counters *c = &emu_counters;
  if (op->kind == OP_SEND) c->sends++, c->send_bytes += op->bytes;
  else if (op->kind == OP_RECV) c->recvs++, c->recv_bytes += op->bytes;
  else c->collectives++, c->coll_bytes += op->bytes;
}

static ncclResult_t issue(emu_op op) {
  ncclResult_t r = check_args(&op);
  if (r == ncclSuccess) r = check_buffers(&op);
  if (r != ncclSuccess) return emu_refuse(r);
  count(&op);
  return emu_issue(&op);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue((emu_op){.kind = OP_SEND, .comm = comm, .stream = stream, .sendbuf = sendbuff,
                        .count = count, .type = datatype, .peer = peer});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue((emu_op){.kind = OP_RECV, .comm = comm, .stream = stream, .recvbuf = recvbuff,
                        .count = count, .type = datatype, .peer = peer});
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return issue((emu_op){.kind = OP_BCAST, .comm = comm, .stream = stream, .sendbuf = sendbuff,
                        .recvbuf = recvbuff, .count = count, .type = datatype, .peer = root});
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return issue((emu_op){.kind = OP_ALLREDUCE, .comm = comm, .stream = stream, .sendbuf = sendbuff,
                        .recvbuf = recvbuff, .count = count, .type = datatype, .red = op, .peer = -1});
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return issue((emu_op){.kind = OP_REDUCE, .comm = comm, .stream = stream, .sendbuf = sendbuff,
                        .recvbuf = recvbuff, .count = count, .type = datatype, .red = op, .peer = root});
}
