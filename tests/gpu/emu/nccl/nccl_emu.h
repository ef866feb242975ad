/* tests/gpu/emu/nccl/nccl_emu.h: the NCCL EMULATION (pt_ncclemu), a fake of NCCL over MPI for
 * running the GPU path without a GPU, and its own small API (counters). Programs include
 * include/nccl.h as <nccl.h> and link pt_ncclemu instead of NCCL.
 *
 * It keeps NCCL's rules, reading each as strictly as NCCL allows, so that a program that could
 * hang or mismatch on NCCL fails here, with a message:
 *  - Issue order per communicator: an operation starts only once every operation issued
 *    before it on the same communicator has completed, whatever their streams.
 *  - Rendezvous: a send completes only when its receive is posted on the peer (MPI_Issend,
 *    never a buffered send), whatever its size. A receive matches only a send of the same byte
 *    count (NCCL needs equal counts); a mismatch waits and is reported as a deadlock (a size
 *    equal modulo 8192 is reported as a size mismatch when it lands). Zero bytes still meet.
 *  - Streams: each call is queued on its cudaStream_t (nccl_emu_stream.h) and runs when the
 *    stream drains, in order with the stream's other work; buffers are read and written then.
 *  - Groups: between ncclGroupStart and ncclGroupEnd (nested: the outermost pair counts)
 *    operations are queued together, start together once every stream of the group has
 *    reached them and each communicator's turn has come, and complete together: a grouped send
 *    and receive between two ranks do not deadlock. Ungrouped, each call is a group of its own.
 *    A call refused inside a group drops the group; ncclGroupEnd returns that error.
 *  - Communicators are independent: each has its own MPI communicator. ncclCommInitRank is
 *    collective over its nranks members only; the rank that called ncclGetUniqueId must be one
 *    of them (it coordinates, over MPI_COMM_WORLD, with tags within 8192 of MPI_TAG_UB).
 *    ncclCommSplit is collective over the parent (NCCL_SPLIT_NOCOLOR: no new communicator).
 *  - Collectives: ncclBroadcast, ncclBcast, ncclAllReduce, ncclReduce; no rank finishes one
 *    before every rank has started it. Reductions combine in rank order, ((x0 + x1) + x2) + ...,
 *    the same bits on every rank and every run; ncclAvg divides the sum by the rank count. Half,
 *    bfloat16 and fp8 reductions are refused (ncclInvalidArgument); moving them is fine.
 *  - Deadlocks are reported, not waited out: an operation (or the host-side wait of init, split
 *    or destroy) blocked longer than PT_EMU_NCCL_TIMEOUT seconds (default 30) ends the job with
 *    MPI_Abort after one line on stderr, e.g. "nccl-emu[rank 0]: a deadlock in the emulated
 *    NCCL: ncclSend of 256 bytes to rank 1 on communicator w0#1 (rank 0 of 2), posted, not
 *    matched by rank 1, blocked for 2.0 s (PT_EMU_NCCL_TIMEOUT=2)". Communicator names:
 *    w<world rank of the id's creator>#<its n-th id>, a split child <parent>/<k-th split>:<color>.
 *  - Bad arguments return NCCL's codes (ncclInvalidArgument, ncclInvalidUsage) with a text for
 *    ncclGetLastError; a failed MPI call ends the job naming the call.
 * Failure injection: PT_EMU_NCCL_FAIL=getuniqueid makes ncclGetUniqueId fail on every rank that
 * calls it (getuniqueid@R: on MPI_COMM_WORLD rank R only), returning ncclSystemError with a
 * last-error text that names the injection. A zeroed id makes ncclCommInitRank return
 * ncclInvalidArgument ("all zero bytes") on every rank instead of hanging.
 * Not emulated: timing and bandwidth, NCCL's own memory, sends that finish early into NCCL's
 * buffers (stricter here, never looser), asynchronous errors (ncclCommGetAsyncError always
 * succeeds: MPI ends the whole job when a rank dies), non-blocking communicators (the config is
 * ignored), several host threads, an id's creator outside its communicator. The timeout cannot
 * tell a deadlock from a peer busier than PT_EMU_NCCL_TIMEOUT: raise it for slow runs. */
#ifndef PT_NCCL_EMU_H
#define PT_NCCL_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this process asked of the emulated NCCL since start (or the last reset), counted when
 * the call is made. Bytes are each operation's payload (count times the type's size). */
typedef struct {
  uint64_t sends, send_bytes;       /* ncclSend */
  uint64_t recvs, recv_bytes;       /* ncclRecv */
  uint64_t collectives, coll_bytes; /* ncclBroadcast, ncclBcast, ncclAllReduce, ncclReduce */
  uint64_t groups;                  /* queued groups: outermost ncclGroupEnd, ungrouped calls */
  uint64_t comms;                   /* communicators created (init and split) */
} nccl_emu_counters;

void nccl_emu_counters_read(nccl_emu_counters *out);
void nccl_emu_counters_reset(void);
/* One line: "nccl-emu counters: sends=... send_bytes=... recvs=... ...". With
 * PT_EMU_NCCL_COUNTERS=1 that line is printed on stderr at exit (once the first communicator
 * exists), prefixed with the MPI_COMM_WORLD rank. */
void nccl_emu_counters_format(const nccl_emu_counters *c, char *buf, size_t bufsz);

#ifdef __cplusplus
}
#endif

#endif
