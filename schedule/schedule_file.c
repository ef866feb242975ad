/* schedule/schedule_file.c: reading a schedule file (schedule.h: schedule_from_file; the format
 * is in docs/schedules.md, "Schedule files"). Each parsed action keeps its line (as the list's
 * src), so every later check can say where the problem is. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "schedule/check.h"
#include "schedule/emit.h"

#define FILE_MAX_RANKS 4096

typedef struct {
  const char *path, *name; /* name: the path's last part, for messages */
  schedule_list *ranks;    /* [FILE_MAX_RANKS]: the parsed actions, src = their line */
  int n_ranks, placement;  /* placement: -1 until a "placement:" line */
  int line;
  char *err;
  size_t errsz;
} reader;

static const struct {
  const char *code;
  pt_action_kind kind;
} CODES[] = {
    {"F", ACT_FORWARD},        {"B", ACT_BACKWARD},       {"I", ACT_BACKWARD_INPUT},
    {"W", ACT_BACKWARD_WEIGHT}, {"L", ACT_LOAD},          {"rA", ACT_RECV_ACT},
    {"sA", ACT_SEND_ACT},      {"rG", ACT_RECV_GRAD},     {"sG", ACT_SEND_GRAD},
    {"RECV_F", ACT_RECV_ACT},  {"SEND_F", ACT_SEND_ACT},  {"RECV_B", ACT_RECV_GRAD},
    {"SEND_B", ACT_SEND_GRAD}, {"TIE", ACT_REDUCE_TIED},  {"DP", ACT_REDUCE_DP},
    {"OPT", ACT_OPTIMIZER},    {"FLUSH", ACT_FLUSH},
};

/* The step end's reductions: a file that writes one writes the step end itself. */
static int step_end_kind(pt_action_kind k) {
  return k == ACT_REDUCE_TIED || k == ACT_REDUCE_DP || k == ACT_OPTIMIZER;
}

/* Actions of no chunk and no micro-batch. */
static int step_wide(pt_action_kind k) { return step_end_kind(k) || k == ACT_FLUSH; }

/* One token: CHUNK CODE MB (chunk and micro-batch in decimal), or FLUSH, TIE, DP, OPT alone. */
static int parse_action(const char *tok, pt_action *a) {
  const char *p = tok;
  char *end;
  long chunk = -1, mb = -1;
  if (isdigit((unsigned char)*p)) chunk = strtol(p, &end, 10), p = end;
  size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_");
  if (isdigit((unsigned char)p[len])) mb = strtol(p + len, &end, 10);
  else end = (char *)p + len;
  if (*end || chunk > 1 << 20 || mb > 1 << 20) return -1;
  for (size_t i = 0; i < sizeof CODES / sizeof CODES[0]; i++) {
    if (strlen(CODES[i].code) != len || strncmp(CODES[i].code, p, len)) continue;
    if (step_wide(CODES[i].kind) != (chunk < 0 && mb < 0) || (chunk < 0) != (mb < 0)) return -1;
    *a = (pt_action){CODES[i].kind, (int)mb, (int)chunk};
    return 0;
  }
  return -1;
}

static int fail_line(reader *x, const char *what) {
  return pt_errorf(x->err, x->errsz, "%s:%d: %s", x->path, x->line, what);
}

/* "rank N: ACTION ..." (the text after "rank"). */
static int parse_rank_line(reader *x, char *text) {
  char *end;
  long r = strtol(text, &end, 10);
  if (end == text || *end != ':' || r < 0 || r >= FILE_MAX_RANKS)
    return fail_line(x, "expected 'rank N: ACTIONS' with N from 0");
  if (r + 1 > x->n_ranks) x->n_ranks = (int)r + 1;
  for (char *tok = strtok(end + 1, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
    pt_action a;
    if (parse_action(tok, &a) != 0)
      return pt_errorf(x->err, x->errsz, "%s:%d: rank %ld: '%s' is not an action; write CHUNK "
                       "CODE MB (0F3, 1I2, 1W2, 0sA3, or torch's 0SEND_F3) or FLUSH, TIE, DP, OPT",
                       x->path, x->line, r, tok);
    schedule_list_push(&x->ranks[r], a, x->line);
  }
  return 0;
}

static int parse_line(reader *x, char *line) {
  line[strcspn(line, "#\n")] = '\0';
  while (isspace((unsigned char)*line)) line++;
  if (!*line) return 0;
  if (!strncmp(line, "rank", 4) && isspace((unsigned char)line[4]))
    return parse_rank_line(x, line + 5);
  if (!strncmp(line, "placement:", 10)) {
    char *v = strtok(line + 10, " \t\r");
    x->placement = v && !strcmp(v, "loop") ? PT_PLACE_LOOP : v && !strcmp(v, "v") ? PT_PLACE_V : -2;
    return x->placement == -2 ? fail_line(x, "placement: expected loop or v") : 0;
  }
  return fail_line(x, "expected 'rank N: ACTIONS', 'placement: loop|v' or a # comment");
}

static int read_lines(reader *x) {
  const char *why = NULL;
  int fd = pt_open_regular_file(x->path, &why); /* a FIFO must not block, a device stream */
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    return pt_errorf(x->err, x->errsz, "%s: cannot open the schedule file: %s; point "
                     "pipeline.schedule_file at a schedule text file", x->path,
                     why ? why : strerror(errno));
  }
  char buf[1 << 16];
  int rc = 0;
  while (rc == 0 && fgets(buf, sizeof buf, f)) {
    x->line++;
    if (!strchr(buf, '\n') && !feof(f))
      rc = fail_line(x, "line longer than 64 KiB; split the rank over several 'rank N:' lines");
    else
      rc = parse_line(x, buf);
  }
  fclose(f);
  if (rc == 0 && x->n_ranks == 0)
    rc = pt_errorf(x->err, x->errsz, "%s: no 'rank N:' lines", x->path);
  return rc;
}

/* The file's chunks, micro-batches and where each chunk runs (from the rank naming it). */
static int infer_layout(reader *x, int *n_chunks, int *n_micro, int *chunk_rank, int max_chunks) {
  *n_chunks = *n_micro = 0;
  for (int c = 0; c < max_chunks; c++) chunk_rank[c] = -1;
  for (int r = 0; r < x->n_ranks; r++)
    for (int i = 0; i < x->ranks[r].n; i++) {
      pt_action a = x->ranks[r].a[i];
      if (a.mb < 0) continue;
      if (a.chunk >= max_chunks)
        return pt_errorf(x->err, x->errsz, "%s:%d: rank %d: chunk %d: more than %d chunks",
                         x->path, x->ranks[r].src[i], r, a.chunk, max_chunks);
      if (a.chunk + 1 > *n_chunks) *n_chunks = a.chunk + 1;
      if (a.mb + 1 > *n_micro) *n_micro = a.mb + 1;
      if (chunk_rank[a.chunk] < 0) chunk_rank[a.chunk] = r;
      char text[48];
      if (chunk_rank[a.chunk] != r)
        return pt_errorf(x->err, x->errsz, "%s:%d: rank %d, action %s: chunk %d already runs on "
                         "rank %d", x->path, x->ranks[r].src[i], r,
                         schedule_action_text(&a, text, sizeof text), a.chunk, chunk_rank[a.chunk]);
    }
  return 0;
}

/* The file's layout against the spec's: ranks, micro-batches, chunks per rank, placement. */
static int check_layout(reader *x, const int *chunk_rank, int C, int M, int P, int want_M,
                        int want_v, pt_placement *placement) {
  if (x->n_ranks != P)
    return pt_errorf(x->err, x->errsz, "%s: %d ranks, but pipeline.stages is %d", x->path,
                     x->n_ranks, P);
  for (int r = 0; r < P; r++)
    if (x->ranks[r].n == 0)
      return pt_errorf(x->err, x->errsz, "%s: rank %d has no actions", x->path, r);
  if (M != want_M)
    return pt_errorf(x->err, x->errsz, "%s: micro-batches 0..%d, but train.micro_batches is %d",
                     x->path, M - 1, want_M);
  if (C % P != 0)
    return pt_errorf(x->err, x->errsz, "%s: %d chunks on %d ranks; every rank holds as many",
                     x->path, C, P);
  if (want_v > 0 && C / P != want_v)
    return pt_errorf(x->err, x->errsz, "%s: %d chunk%s per rank, but pipeline.virtual_stages is "
                     "%d", x->path, C / P, C / P == 1 ? "" : "s", want_v);
  int fits[2] = {1, C == 2 * P};
  for (int c = 0; c < C; c++) {
    if (chunk_rank[c] < 0)
      return pt_errorf(x->err, x->errsz, "%s: chunk %d has no actions (chunks 0..%d)", x->path,
                       c, C - 1);
    fits[PT_PLACE_LOOP] &= chunk_rank[c] == c % P;
    fits[PT_PLACE_V] &= chunk_rank[c] == (c < P ? c : 2 * P - 1 - c);
  }
  *placement = x->placement >= 0 ? (pt_placement)x->placement
               : fits[PT_PLACE_LOOP] ? PT_PLACE_LOOP : PT_PLACE_V;
  if (!fits[*placement])
    return pt_errorf(x->err, x->errsz, "%s: the ranks the chunks run on fit %s (loop: chunk c on "
                     "rank c mod P; v: on rank c, then on 2P - 1 - c)", x->path,
                     x->placement >= 0 ? "no 'placement: loop|v' line's" : "neither placement");
  return 0;
}

/* What the file leaves out, the builder adds: transfers and loads, the step end (FLUSH and the
 * reductions). */
static void implied(const reader *x, int *transfers, int *step_end) {
  *transfers = *step_end = 1;
  for (int r = 0; r < x->n_ranks; r++)
    for (int i = 0; i < x->ranks[r].n; i++) {
      pt_action_kind k = x->ranks[r].a[i].kind;
      if (k == ACT_RECV_ACT || k == ACT_SEND_ACT || k == ACT_RECV_GRAD || k == ACT_SEND_GRAD ||
          k == ACT_LOAD)
        *transfers = 0;
      if (step_end_kind(k)) *step_end = 0;
    }
}

/* A rank that writes its own step end but no FLUSH gets one before its first step-wide action:
 * files written before FLUSH existed (or by hand) keep working, and the NCCL check still holds
 * a FLUSH placed anywhere else to its rule. */
static void insert_flush(reader *x) {
  for (int r = 0; r < x->n_ranks; r++) {
    schedule_list *l = &x->ranks[r];
    int first = -1, has = 0;
    for (int i = 0; i < l->n; i++) {
      has |= l->a[i].kind == ACT_FLUSH;
      if (first < 0 && step_end_kind(l->a[i].kind)) first = i;
    }
    if (has || first < 0) continue;
    schedule_list_push(l, l->a[l->n - 1], l->src[l->n - 1]); /* room for one more */
    memmove(l->a + first + 1, l->a + first, sizeof *l->a * (size_t)(l->n - 2 - first));
    memmove(l->src + first + 1, l->src + first, sizeof *l->src * (size_t)(l->n - 2 - first));
    l->a[first] = (pt_action){ACT_FLUSH, -1, -1};
  }
}

/* Runs the checks; a failure names the file and the line of the action it is about. */
static int check_all(const pt_schedule *s, const reader *x, const schedule_list *lists) {
  pt_sched_where w = {0, -1};
  char msg[1024];
  int rc = schedule_validate_where(s, &w, msg, sizeof msg);
  if (rc == 0) rc = schedule_check_rendezvous_where(s, &w, msg, sizeof msg);
  if (rc == 0) return 0;
  if (w.index >= 0)
    return pt_errorf(x->err, x->errsz, "%s:%d: %s", x->path, lists[w.rank].src[w.index], msg);
  return pt_errorf(x->err, x->errsz, "%s: %s", x->path, msg);
}

static int build(pt_schedule *s, reader *x, int n_ranks, int n_micro, int v) {
  int C, M, max_chunks = 64 * n_ranks, *chunk_rank = pt_calloc((size_t)max_chunks, sizeof(int));
  pt_placement placement = PT_PLACE_LOOP;
  int rc = infer_layout(x, &C, &M, chunk_rank, max_chunks);
  if (rc == 0) rc = check_layout(x, chunk_rank, C, M, n_ranks, n_micro, v, &placement);
  free(chunk_rank);
  if (rc != 0) return -1;
  schedule_alloc(s, n_ranks, C / n_ranks, M, placement);
  snprintf(s->name, sizeof s->name, "file %s", x->name);
  int transfers, step_end;
  implied(x, &transfers, &step_end);
  if (!step_end) insert_flush(x);
  schedule_gen g = {n_ranks, C / n_ranks, C, M, s->chunk_rank, x->ranks};
  schedule_lower(s, &g, transfers, step_end);
  return check_all(s, x, x->ranks);
}

int schedule_from_file(pt_schedule *s, const char *path, int n_ranks, int n_micro, int v,
                       char *err, size_t errsz) {
  const char *slash = strrchr(path, '/');
  reader x = {.path = path, .name = slash ? slash + 1 : path, .placement = -1, .err = err,
              .errsz = errsz, .ranks = pt_calloc(FILE_MAX_RANKS, sizeof(schedule_list))};
  memset(s, 0, sizeof *s);
  int rc = read_lines(&x);
  if (rc == 0) rc = build(s, &x, n_ranks, n_micro, v);
  for (int r = 0; r < FILE_MAX_RANKS; r++) schedule_list_free(&x.ranks[r]);
  free(x.ranks);
  if (rc != 0) schedule_free(s);
  return rc;
}
