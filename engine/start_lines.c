/* engine/start_lines.c: the ranks' start-up lines, collapsed (engine/start_lines.h). */
#include "engine/start_lines.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"

/* "A-B,C,...": the ranks i with pick[i], runs joined. */
static void rank_list(const int *pick, int n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (!pick[i]) continue;
    int j = i;
    while (j + 1 < n && pick[j + 1]) j++;
    int w = j > i ? snprintf(buf + at, cap - at, "%s%d-%d", at ? "," : "", i, j)
                  : snprintf(buf + at, cap - at, "%s%d", at ? "," : "", i);
    if (w < 0 || (size_t)w >= cap - at) return; /* cut: the list is only shown */
    at += (size_t)w;
    i = j;
  }
}

/* The WHAT of a line: up to its first "; " (the whole line without one). */
static size_t what_len(const char *line) {
  const char *sep = strstr(line, "; ");
  return sep ? (size_t)(sep - line) : strlen(line);
}

void start_lines_collapse(char (*lines)[PT_START_LINE_BYTES], int n, FILE *out) {
  int *done = pt_calloc((size_t)n, sizeof(int)), *pick = pt_calloc((size_t)n, sizeof(int));
  char *ranks = pt_calloc(1, 4096);
  for (int i = 0; i < n; i++) {
    if (done[i]) continue;
    size_t wl = what_len(lines[i]);
    const char *where = lines[i][wl] ? lines[i] + wl + 2 : "";
    int same_where = 1, count = 0;
    for (int j = i; j < n; j++) {
      pick[j] = !done[j] && what_len(lines[j]) == wl && !strncmp(lines[i], lines[j], wl);
      if (!pick[j]) continue;
      done[j] = 1, count++;
      const char *w = lines[j][wl] ? lines[j] + wl + 2 : "";
      same_where &= !strcmp(w, where);
    }
    for (int j = 0; j < i; j++) pick[j] = 0;
    rank_list(pick, n, ranks, 4096);
    fprintf(out, "pipetrain: rank%s %s: %.*s", count > 1 ? "s" : "", ranks, (int)wl, lines[i]);
    if (same_where && *where) fprintf(out, "; %s\n", where);
    else if (!same_where) fprintf(out, "; bound per rank (--verbose: each rank's cores)\n");
    else fputc('\n', out);
  }
  free(done);
  free(pick);
  free(ranks);
}

void start_lines_print(const char *mine, int launched, int verbose, FILE *out) {
  if (!launched) {
    fprintf(out, "pipetrain: %s\n", mine);
    return;
  }
  pt_comm *w = comm_world();
  int n = comm_size(w), me = comm_rank(w);
  char line[PT_START_LINE_BYTES] = "";
  snprintf(line, sizeof line, "%s", mine);
  if (me != 0) {
    pt_request r;
    comm_send_host_async(w, line, sizeof line, 0, PT_TAG_START_LINES, &r);
    comm_wait(&r);
    return;
  }
  char (*all)[PT_START_LINE_BYTES] = pt_calloc((size_t)n, PT_START_LINE_BYTES);
  memcpy(all[0], line, sizeof line);
  for (int i = 1; i < n; i++) {
    pt_request r;
    comm_recv_host_async(w, all[i], PT_START_LINE_BYTES, i, PT_TAG_START_LINES, &r);
    comm_wait(&r);
    all[i][PT_START_LINE_BYTES - 1] = '\0';
  }
  if (verbose)
    for (int i = 0; i < n; i++) fprintf(out, "pipetrain[rank %d]: %s\n", i, all[i]);
  else
    start_lines_collapse(all, n, out);
  free(all);
}
