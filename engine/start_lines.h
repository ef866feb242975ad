/* engine/start_lines.h: the start-up lines of a job's ranks (what computes, where each rank is
 * bound) as rank 0 prints them: collapsed into one line per kind of device and compute, with the
 * ranks it covers and their binding when they share it ("ranks 0-7: cpu, ...; not bound: 8
 * ranks share 2 cores"), or every rank's own line in rank order with verbose. */
#ifndef PT_START_LINES_H
#define PT_START_LINES_H

#include <stdio.h>

/* Bytes of one rank's line, its terminating zero included. */
#define PT_START_LINE_BYTES 1280

/* mine: this rank's line, "WHAT; WHERE" (device and compute; binding). Collective over the
 * world when launched (rank 0 receives every rank's line, under the caller's watchdog), else
 * prints mine. Rank 0 writes to out. */
void start_lines_print(const char *mine, int launched, int verbose, FILE *out);

/* The collapsed lines of n ranks' lines (each "WHAT; WHERE"), written to out: for each distinct
 * WHAT in order of first rank, "pipetrain: ranks A-B,C: WHAT; WHERE" when those ranks have one
 * WHERE, else "...; bound per rank (--verbose: each rank's cores)". Separate for tests. */
void start_lines_collapse(char (*lines)[PT_START_LINE_BYTES], int n, FILE *out);

#endif
