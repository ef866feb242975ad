/* test_start_lines: the ranks' start-up lines collapsed as rank 0 prints them
 * (engine/start_lines.h): one line per kind of compute with its ranks; a shared binding kept,
 * differing ones summarised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/start_lines.h"

static int failures;

static void expect(const char *what, char (*lines)[PT_START_LINE_BYTES], int n, const char *want) {
  char got[8192] = "";
  FILE *f = fmemopen(got, sizeof got - 1, "w");
  if (!f) {
    perror("fmemopen");
    exit(1);
  }
  start_lines_collapse(lines, n, f);
  fclose(f);
  if (strcmp(got, want) != 0) {
    printf("FAIL %s:\n  got:  %s  want: %s", what, got, want);
    failures++;
  } else {
    printf("ok   %s: %s", what, got);
  }
}

int main(void) {
  static char l[8][PT_START_LINE_BYTES];
  for (int i = 0; i < 8; i++)
    snprintf(l[i], sizeof l[i], "cpu, OpenBLAS Haswell kernel, 1 thread(s); not bound: 8 ranks share 2 cores");
  expect("eight alike", l, 8, "pipetrain: ranks 0-7: cpu, OpenBLAS Haswell kernel, 1 thread(s); "
                              "not bound: 8 ranks share 2 cores\n");
  for (int i = 0; i < 4; i++)
    snprintf(l[i], sizeof l[i], "cpu, OpenBLAS Haswell kernel, 1 thread(s); core %d of 4, CPUs %d", i, i);
  expect("bound apart", l, 4, "pipetrain: ranks 0-3: cpu, OpenBLAS Haswell kernel, 1 thread(s); "
                              "bound per rank (--verbose: each rank's cores)\n");
  snprintf(l[0], sizeof l[0], "gpu 0 (H100); cores 0-7");
  snprintf(l[1], sizeof l[1], "cpu; all 2 cores");
  snprintf(l[2], sizeof l[2], "gpu 0 (H100); cores 0-7");
  snprintf(l[3], sizeof l[3], "gpu 0 (H100); cores 0-7");
  snprintf(l[4], sizeof l[4], "cpu; all 2 cores");
  expect("two kinds", l, 5, "pipetrain: ranks 0,2-3: gpu 0 (H100); cores 0-7\n"
                            "pipetrain: ranks 1,4: cpu; all 2 cores\n");
  snprintf(l[0], sizeof l[0], "emulated");
  expect("one rank, no binding", l, 1, "pipetrain: rank 0: emulated\n");
  printf(failures ? "test_start_lines: %d failed\n" : "test_start_lines: all passed\n", failures);
  return failures != 0;
}
