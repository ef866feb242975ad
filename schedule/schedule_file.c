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
#include "schedule/file_fix.h"

#define FILE_MAX_RANKS 4096

/* The forms a file comes in: our "rank N:" lines, the CSV torch's _dump_csv writes (row r:
 * rank r's actions), or the table torch's _format_pipeline_order prints (a "Rank 0 Rank 1"
 * header, then one "Step NN:" row per time step, a column per rank). */
enum { FORM_UNKNOWN, FORM_RANKS, FORM_CSV, FORM_TABLE };

#define TABLE_MAX_COLS 4096

typedef struct {
  const char *path, *name; /* name: the path's last part, for messages */
  schedule_list *ranks;    /* [FILE_MAX_RANKS]: the parsed actions, src = their line */
  int n_ranks, placement;  /* placement: -1 until a "placement:" line */
  int line, form, rows;    /* rows: CSV rows so far (each a rank) */
  int *col;                /* FORM_TABLE: where each rank's column starts, from the header */
  int n_cols;
  int ignored_waits, ignored_fsdp, overlaps; /* torch actions pipetrain has no use for */
  char *err;
  size_t errsz;
} reader;

/* Torch's actions pipetrain has no use for: WAIT_SEND_* (pipetrain waits for a send before its
 * buffer is reused and at OPT), FSDP's UNSHARD/RESHARD and the gradient reductions (pipetrain
 * holds whole stages and reduces at the step end). */
enum { KEEP, DROP_WAIT, DROP_FSDP };

static const struct {
  const char *code;
  pt_action_kind kind;
  int drop, per_mb; /* per_mb: CHUNK CODE MB; else CHUNK CODE (drop) or the code alone */
} CODES[] = {
    {"F", ACT_FORWARD, KEEP, 1},         {"B", ACT_BACKWARD, KEEP, 1},
    {"I", ACT_BACKWARD_INPUT, KEEP, 1},  {"W", ACT_BACKWARD_WEIGHT, KEEP, 1},
    {"L", ACT_LOAD, KEEP, 1},            {"rA", ACT_RECV_ACT, KEEP, 1},
    {"sA", ACT_SEND_ACT, KEEP, 1},       {"rG", ACT_RECV_GRAD, KEEP, 1},
    {"sG", ACT_SEND_GRAD, KEEP, 1},      {"RECV_F", ACT_RECV_ACT, KEEP, 1},
    {"SEND_F", ACT_SEND_ACT, KEEP, 1},   {"RECV_B", ACT_RECV_GRAD, KEEP, 1},
    {"SEND_B", ACT_SEND_GRAD, KEEP, 1},  {"TIE", ACT_REDUCE_TIED, KEEP, 0},
    {"DP", ACT_REDUCE_DP, KEEP, 0},      {"OPT", ACT_OPTIMIZER, KEEP, 0},
    {"FLUSH", ACT_FLUSH, KEEP, 0},       {"WAIT_SEND_F", ACT_FLUSH, DROP_WAIT, 1},
    {"WAIT_SEND_B", ACT_FLUSH, DROP_WAIT, 1}, {"UNSHARD", ACT_FLUSH, DROP_FSDP, 0},
    {"RESHARD", ACT_FLUSH, DROP_FSDP, 0},     {"REDUCE_GRAD", ACT_FLUSH, DROP_FSDP, 0},
    {"WAIT_REDUCE_GRAD", ACT_FLUSH, DROP_FSDP, 0},
};

/* The step end's reductions: a file that writes one writes the step end itself. */
static int step_end_kind(pt_action_kind k) {
  return k == ACT_REDUCE_TIED || k == ACT_REDUCE_DP || k == ACT_OPTIMIZER;
}

/* One token: CHUNK CODE MB (chunk and micro-batch in decimal), CHUNK CODE for torch's FSDP
 * actions, or FLUSH, TIE, DP, OPT alone. Returns KEEP with *a, DROP_* for an action to
 * ignore, -1 for no action. */
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
    int want_chunk = CODES[i].per_mb || CODES[i].drop;
    if ((chunk >= 0) != want_chunk || (mb >= 0) != CODES[i].per_mb) return -1;
    *a = (pt_action){CODES[i].kind, (int)mb, (int)chunk};
    return CODES[i].drop;
  }
  return -1;
}

static int fail_line(reader *x, const char *what) {
  return pt_errorf(x->err, x->errsz, "%s:%d: %s", x->path, x->line, what);
}

static int fail_token(reader *x, int r, const char *tok) {
  const char *hint = strstr(tok, "LOAD") ? "; pipetrain's load is L (0L3), and torch writes "
                     "none: leave loads out and the builder adds them"
                     : strstr(tok, "OVERLAP_F_B") ? "; torch writes it (0F3;1B1)OVERLAP_F_B" : "";
  return pt_errorf(x->err, x->errsz, "%s:%d: rank %d: '%s' is not an action; write CHUNK CODE "
                   "MB (0F3, 1I2, 1W2, 0sA3, or torch's 0SEND_F3) or FLUSH, TIE, DP, OPT%s",
                   x->path, x->line, r, tok, hint);
}

/* One action token of rank r: ours, torch's (its ignored ones counted), or torch's
 * (F;B)OVERLAP_F_B, which runs as its F, then its B. */
static int push_token(reader *x, int r, char *tok) {
  static const char overlap[] = ")OVERLAP_F_B";
  size_t n = strlen(tok), k = sizeof overlap - 1;
  if (tok[0] == '(' && n > k + 1 && !strcmp(tok + n - k, overlap)) {
    char inner[256];
    snprintf(inner, sizeof inner, "%.*s", (int)(n - k - 1), tok + 1);
    x->overlaps++;
    for (char *save = NULL, *t = strtok_r(inner, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
      pt_action a;
      if (parse_action(t, &a) != KEEP || a.mb < 0) return fail_token(x, r, tok);
      schedule_list_push(&x->ranks[r], a, x->line);
    }
    return 0;
  }
  pt_action a;
  int kind = parse_action(tok, &a);
  if (kind < 0) return fail_token(x, r, tok);
  if (kind == DROP_WAIT) x->ignored_waits++;
  if (kind == DROP_FSDP) x->ignored_fsdp++;
  if (kind == KEEP) schedule_list_push(&x->ranks[r], a, x->line);
  return 0;
}

static int note_rank(reader *x, long r) {
  if (r < 0 || r >= FILE_MAX_RANKS) return fail_line(x, "more ranks than pipetrain runs");
  if (r + 1 > x->n_ranks) x->n_ranks = (int)r + 1;
  return 0;
}

/* "rank N: ACTION ..." (the text after "rank"). */
static int parse_rank_line(reader *x, char *text) {
  char *end, *save = NULL;
  long r = strtol(text, &end, 10);
  if (end == text || *end != ':' || r < 0 || r >= FILE_MAX_RANKS)
    return fail_line(x, "expected 'rank N: ACTIONS' with N from 0");
  note_rank(x, r);
  for (char *tok = strtok_r(end + 1, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save))
    if (push_token(x, (int)r, tok) != 0) return -1;
  return 0;
}

/* A cell of torch's CSV or table: blanks and csv quoting around, empty for no action. */
static char *trim_cell(char *c) {
  while (isspace((unsigned char)*c) || *c == '"') c++;
  size_t n = strlen(c);
  while (n && (isspace((unsigned char)c[n - 1]) || c[n - 1] == '"')) c[--n] = '\0';
  return c;
}

/* One CSV row: the next rank's actions, comma-separated, empty cells for idle steps. */
static int parse_csv_row(reader *x, char *line) {
  int r = x->rows++;
  if (note_rank(x, r) != 0) return -1;
  for (char *cell = line, *next; cell; cell = next) {
    next = strchr(cell, ',');
    if (next) *next++ = '\0';
    char *t = trim_cell(cell);
    if (*t && push_token(x, r, t) != 0) return -1;
  }
  return 0;
}

/* torch's table: the header's "Rank N" labels give where each column starts. */
static int parse_table_header(reader *x, const char *line) {
  x->col = pt_calloc(TABLE_MAX_COLS + 1, sizeof(int));
  for (const char *p = strstr(line, "Rank "); p && x->n_cols < TABLE_MAX_COLS;
       p = strstr(p + 5, "Rank "))
    x->col[x->n_cols++] = (int)(p - line);
  x->col[x->n_cols] = 1 << 30;
  return note_rank(x, x->n_cols - 1);
}

static int parse_table_row(reader *x, char *line) {
  if (strncmp(line, "Step ", 5)) return fail_line(x, "expected a 'Step NN:' row of torch's table");
  char *mark = strstr(line, " <-- ERROR HERE");
  if (mark) *mark = '\0';
  int n = (int)strlen(line);
  for (int r = 0; r < x->n_cols && x->col[r] < n; r++) {
    char cell[256];
    int w = x->col[r + 1] - x->col[r];
    snprintf(cell, sizeof cell, "%.*s", w < 255 ? w : 255, line + x->col[r]);
    char *t = trim_cell(cell);
    if (*t && push_token(x, r, t) != 0) return -1;
  }
  return 0;
}

/* The file's form, from its first line that says anything. */
static int detect_form(const char *line) {
  const char *p = line;
  while (isspace((unsigned char)*p)) p++;
  if ((!strncmp(p, "rank", 4) && isspace((unsigned char)p[4])) || !strncmp(p, "placement:", 10))
    return FORM_RANKS;
  if (!strncmp(p, "Rank 0", 6) && p != line) return FORM_TABLE;
  return FORM_CSV;
}

static int parse_line(reader *x, char *raw) {
  raw[strcspn(raw, "\r\n")] = '\0';
  char *line = raw;
  while (isspace((unsigned char)*line)) line++;
  if (!*line || *line == '#') return 0;
  if (x->form == FORM_UNKNOWN) {
    x->form = detect_form(raw);
    if (x->form == FORM_TABLE) return parse_table_header(x, raw);
  }
  if (x->form == FORM_CSV) return parse_csv_row(x, line);
  if (x->form == FORM_TABLE) return parse_table_row(x, line);
  line[strcspn(line, "#")] = '\0';
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
    rc = pt_errorf(x->err, x->errsz, "%s: no 'rank N:' lines, no CSV rows (torch's _dump_csv) "
                   "and no table (torch's _format_pipeline_order)", x->path);
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
static int check_ranks(reader *x, int P) {
  if (x->n_ranks != P)
    return pt_errorf(x->err, x->errsz, "%s: %d ranks, but pipeline.stages is %d; set "
                     "pipeline.stages to %d or write a %s per rank", x->path, x->n_ranks, P,
                     x->n_ranks, x->form == FORM_RANKS ? "'rank N:' line" : "row");
  for (int r = 0; r < P; r++)
    if (x->ranks[r].n == 0)
      return pt_errorf(x->err, x->errsz, "%s: rank %d has no actions", x->path, r);
  return 0;
}

/* The file's layout against the spec's: micro-batches, chunks per rank, placement (the actions'
 * ranges are checked, at their lines, before). */
static int check_layout(reader *x, const int *chunk_rank, int C, int M, int P, int want_M,
                        int want_v, pt_placement *placement) {
  if (M != want_M)
    return pt_errorf(x->err, x->errsz, "%s: micro-batches 0..%d, but train.micro_batches is %d; "
                     "set train.micro_batches to %d or add micro-batches %d..%d", x->path, M - 1,
                     want_M, M, M, want_M - 1);
  if (want_v > 0 && C / P != want_v)
    return pt_errorf(x->err, x->errsz, "%s: %d chunk%s per rank, but pipeline.virtual_stages is "
                     "%d; set pipeline.virtual_stages to %d", x->path, C / P, C / P == 1 ? "" : "s",
                     want_v, C / P);
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

/* What was ignored or changed, one line for the run (once per file and process). */
static void notice_changes(const reader *x, int dropped, int split) {
  char line[768] = "";
  size_t n = 0;
  if (dropped)
    n += (size_t)snprintf(line + n, sizeof line - n, "; its sends and receives (torch's "
                          "lowering: no L) are ignored, pipetrain places its own with the loads");
  if (x->ignored_waits && n < sizeof line)
    n += (size_t)snprintf(line + n, sizeof line - n, "; WAIT_SEND_F/B ignored (a send completes "
                          "before its buffer is reused, all by OPT)");
  if (x->ignored_fsdp && n < sizeof line)
    n += (size_t)snprintf(line + n, sizeof line - n, "; UNSHARD, RESHARD, REDUCE_GRAD ignored "
                          "(no FSDP: each rank holds its chunks whole and reduces at the step "
                          "end)");
  if (x->overlaps && n < sizeof line)
    n += (size_t)snprintf(line + n, sizeof line - n, "; OVERLAP_F_B runs as its F, then its B");
  if (split && n < sizeof line)
    n += (size_t)snprintf(line + n, sizeof line - n, "; full backwards (B) out of ascending "
                          "micro-batch order run as I, each W in ascending order (up to %d "
                          "pending), so weight gradients add up as in --sequential", split);
  static char last[256];
  if (!n || !strcmp(last, x->path)) return;
  snprintf(last, sizeof last, "%s", x->path);
  pt_notice("schedule file %s: %s", x->path, line + 2); /* past the first "; " */
}

static int build(pt_schedule *s, reader *x, int n_ranks, int n_micro, int v) {
  if (check_ranks(x, n_ranks) != 0) return -1;
  file_lists fl = {x->path, x->ranks, x->n_ranks, x->err, x->errsz};
  if (file_check_ranges(&fl, n_micro, v > 0 ? n_ranks * v : 0) != 0) return -1;
  int C, M, max_chunks = 64 * n_ranks, *chunk_rank = pt_calloc((size_t)max_chunks, sizeof(int));
  pt_placement placement = PT_PLACE_LOOP;
  int rc = infer_layout(x, &C, &M, chunk_rank, max_chunks);
  if (rc == 0) rc = file_check_duplicates(&fl, n_micro);
  if (rc == 0) rc = check_layout(x, chunk_rank, C, M, n_ranks, n_micro, v, &placement);
  free(chunk_rank);
  if (rc != 0) return -1;
  int dropped = file_drop_torch_transfers(&fl);
  int split = file_order_weights(&fl, C, M);
  schedule_alloc(s, n_ranks, C / n_ranks, M, placement);
  snprintf(s->name, sizeof s->name, "file %s", x->name);
  int transfers, step_end;
  implied(x, &transfers, &step_end);
  if (!step_end) insert_flush(x);
  schedule_gen g = {n_ranks, C / n_ranks, C, M, s->chunk_rank, x->ranks};
  schedule_lower(s, &g, transfers, step_end);
  rc = check_all(s, x, x->ranks);
  if (rc == 0) notice_changes(x, dropped, split);
  return rc;
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
  free(x.ranks), free(x.col);
  if (rc != 0) schedule_free(s);
  return rc;
}
