/* tests/gpu/emu/nccl/src/boot.c: ncclGetUniqueId and ncclCommInitRank.
 *
 * NCCL's init is collective over the new communicator's members only, so it cannot be an MPI
 * collective over MPI_COMM_WORLD. The id names its creator (a world rank) and a serial number;
 * the creator, one of the members, collects every member's world rank over MPI_COMM_WORLD (tags
 * near MPI_TAG_UB, derived from the serial), sends back the list in NCCL rank order, and the
 * members alone build their MPI communicator with MPI_Comm_create_group: MPI rank = NCCL rank. */
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define ID_MAGIC 0x6e63656du /* "ncem" */

typedef struct {
  uint32_t magic;
  int32_t creator; /* MPI_COMM_WORLD rank of the process that made the id */
  uint64_t serial; /* per creator: 1, 2, ... */
} emu_id;

/* What each member tells the creator. */
enum { J_MAGIC, J_SERIAL, J_NRANKS, J_RANK, J_WORLD, J_LEN };

static int mpi_up(void) {
  int up = 0, down = 0;
  EMU_CHECK_MPI(MPI_Initialized(&up));
  EMU_CHECK_MPI(MPI_Finalized(&down));
  return up && !down;
}

/* emu_world_rank is for messages; here the rank decides, so a failure must end the job. */
static int world_rank(void) {
  int rank;
  EMU_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

/* PT_EMU_NCCL_FAIL=getuniqueid (every rank) or getuniqueid@R (world rank R). */
static int injected_failure(int world) {
  const char *s = getenv("PT_EMU_NCCL_FAIL");
  if (!s || strncmp(s, "getuniqueid", 11) != 0) return 0;
  if (s[11] == '\0') return 1;
  return s[11] == '@' && atoi(s + 12) == world;
}

/* NCCL's bootstrap needs the socket interface NCCL_SOCKET_IFNAME names: "=NAME" asks for exactly
 * NAME, and an interface that does not exist makes ncclGetUniqueId fail, as in real NCCL (the
 * engine's shared-failure test relies on it). Other forms (prefixes, ^exclusions) always pass. */
static const char *missing_interface(void) {
  const char *s = getenv("NCCL_SOCKET_IFNAME");
  if (!s || s[0] != '=' || strchr(s, ',')) return NULL;
  return if_nametoindex(s + 1) == 0 ? s + 1 : NULL;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
  static uint64_t serial;
  if (!out) return emu_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  if (!mpi_up()) return emu_fail(ncclSystemError, "ncclGetUniqueId: MPI is not initialized");
  int world = world_rank();
  if (injected_failure(world))
    return emu_fail(ncclSystemError, "ncclGetUniqueId failed on world rank %d (injected by "
                    "PT_EMU_NCCL_FAIL=%s)", world, getenv("PT_EMU_NCCL_FAIL"));
  const char *ifname = missing_interface();
  if (ifname)
    return emu_fail(ncclSystemError, "ncclGetUniqueId: bootstrap: no socket interface named "
                    "'%s' (NCCL_SOCKET_IFNAME)", ifname);
  emu_id id = {ID_MAGIC, world, ++serial};
  memset(out, 0, sizeof *out);
  memcpy(out->internal, &id, sizeof id);
  return ncclSuccess;
}

static void boot_tags(uint64_t serial, int *join, int *reply) {
  int *ub = NULL, flag = 0;
  EMU_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
  int top = flag && ub ? *ub : 32767; /* MPI guarantees at least 32767 */
  *join = top - 8191 + (int)(serial % 4096);
  *reply = *join + 4096;
}

/* The creator: every other member's world rank, placed at its NCCL rank, then the list back. */
static void collect(const emu_id *id, int nranks, int rank, int *members, const char *name) {
  int join, reply;
  boot_tags(id->serial, &join, &reply);
  for (int r = 0; r < nranks; r++) members[r] = -1;
  members[rank] = id->creator;
  char what[256];
  for (int k = 1; k < nranks; k++) {
    long long msg[J_LEN];
    MPI_Request q;
    MPI_Status st;
    snprintf(what, sizeof what, "ncclCommInitRank of communicator %s (rank %d of %d), %d of %d "
             "ranks joined,", name, rank, nranks, k, nranks);
    EMU_CHECK_MPI(MPI_Irecv(msg, J_LEN, MPI_LONG_LONG, MPI_ANY_SOURCE, join, MPI_COMM_WORLD, &q));
    emu_wait_host(1, &q, &st, what);
    int r = (int)msg[J_RANK];
    if (msg[J_MAGIC] != ID_MAGIC || (uint64_t)msg[J_SERIAL] != id->serial || msg[J_NRANKS] != nranks ||
        r < 0 || r >= nranks || members[r] >= 0)
      emu_die("ncclCommInitRank of communicator %s: world rank %d joined as rank %d of %lld "
              "(this rank: %d ranks; ranks taken must differ)", name, st.MPI_SOURCE, r,
              msg[J_NRANKS], nranks);
    members[r] = (int)msg[J_WORLD];
  }
  MPI_Request *q = malloc(sizeof *q * (size_t)nranks);
  if (!q) emu_die("out of memory");
  int n = 0;
  for (int r = 0; r < nranks; r++)
    if (r != rank)
      EMU_CHECK_MPI(MPI_Isend(members, nranks, MPI_INT, members[r], reply, MPI_COMM_WORLD, &q[n++]));
  snprintf(what, sizeof what, "ncclCommInitRank of communicator %s (rank %d of %d), sending the "
           "member list,", name, rank, nranks);
  emu_wait_host(n, q, NULL, what);
  free(q);
}

/* Any other member: its world rank to the creator, the list back. */
static void join(const emu_id *id, int nranks, int rank, int *members, const char *name) {
  int jtag, reply;
  boot_tags(id->serial, &jtag, &reply);
  long long msg[J_LEN] = {ID_MAGIC, (long long)id->serial, nranks, rank, world_rank()};
  MPI_Request q[2];
  EMU_CHECK_MPI(MPI_Isend(msg, J_LEN, MPI_LONG_LONG, id->creator, jtag, MPI_COMM_WORLD, &q[0]));
  EMU_CHECK_MPI(MPI_Irecv(members, nranks, MPI_INT, id->creator, reply, MPI_COMM_WORLD, &q[1]));
  char what[256];
  snprintf(what, sizeof what, "ncclCommInitRank of communicator %s (rank %d of %d), waiting for "
           "the id's creator (world rank %d) and the other ranks,", name, rank, nranks, id->creator);
  emu_wait_host(2, q, NULL, what);
}

static ncclResult_t bad_id(const ncclUniqueId *raw) {
  int zero = 1;
  for (size_t i = 0; i < sizeof raw->internal; i++) zero &= raw->internal[i] == 0;
  return emu_fail(ncclInvalidArgument, "ncclCommInitRank: the unique id was not made by "
                  "ncclGetUniqueId (%s)", zero ? "all zero bytes: did ncclGetUniqueId fail on "
                  "the rank that shared it?" : "unknown bytes");
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId raw, int rank) {
  emu_id id;
  memcpy(&id, raw.internal, sizeof id);
  if (!out) return emu_fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *out = NULL;
  if (id.magic != ID_MAGIC) return bad_id(&raw);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return emu_fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d ranks", rank, nranks);
  if (!mpi_up()) return emu_fail(ncclSystemError, "ncclCommInitRank: MPI is not initialized");
  char name[64];
  snprintf(name, sizeof name, "w%d#%llu", (int)id.creator, (unsigned long long)id.serial);
  int *members = malloc(sizeof *members * (size_t)nranks);
  if (!members) return emu_fail(ncclSystemError, "ncclCommInitRank: out of memory");
  if (world_rank() == id.creator) collect(&id, nranks, rank, members, name);
  else join(&id, nranks, rank, members, name);
  int jtag, reply;
  boot_tags(id.serial, &jtag, &reply);
  MPI_Group world, group;
  MPI_Comm mpi;
  EMU_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  EMU_CHECK_MPI(MPI_Group_incl(world, nranks, members, &group));
  EMU_CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, group, jtag, &mpi));
  EMU_CHECK_MPI(MPI_Group_free(&group));
  EMU_CHECK_MPI(MPI_Group_free(&world));
  free(members);
  *out = emu_comm_new(mpi, name);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  (void)config; /* blocking, whatever it asks */
  return ncclCommInitRank(comm, nranks, id, rank);
}
