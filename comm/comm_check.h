/* comm/comm_check.h: PT_CHECK_MPI, core/error.h's check of a library call for MPI (internal to
 * comm/, the only folder that calls MPI). A failed call ends the job naming the place, the call,
 * the rank and MPI's words for the error: comm_init sets MPI_ERRORS_RETURN, so MPI reports
 * failures as codes instead of aborting without them. */
#ifndef PT_COMM_CHECK_H
#define PT_COMM_CHECK_H

#include <mpi.h>

#include "core/error.h"

/* MPI_Error_string's text for code (a static buffer: the job ends right after). */
const char *comm_mpi_error_text(int code);
#define PT_MPI_OK(r) ((r) == MPI_SUCCESS)
#define PT_CHECK_MPI(call) PT_CHECK_CALL(int, call, #call, PT_MPI_OK, "MPI", comm_mpi_error_text)

#endif
