/* tests/fuzz/replay_main.c: runs a libFuzzer target over saved inputs, without libFuzzer.
 *
 * Usage: PROGRAM PATH...  Each PATH is an input file or a directory; a directory's files and
 * the files of its direct subdirectories run in name order (so a run is reproducible). Names
 * starting with '.' and README files are skipped, so a corpus folder can carry a note.
 *
 * Linked with a fuzz target (fuzz_spec.c, fuzz_checkpoint.c) it makes the committed corpus and
 * crashers a plain CTest test in any build, gcc included: a crash, a sanitizer report or an
 * abort() in the target fails it. Exits 1 if a path cannot be read; prints how many ran.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_DEPTH 1 /* a directory and its direct subdirectories */

typedef struct {
  long ran;
  int failed;
} replay_count;

static void replay_fail(replay_count *c, const char *path, const char *what) {
  fprintf(stderr, "replay: %s: %s: %s\n", path, what, strerror(errno));
  c->failed = 1;
}

/* Reads the whole file into an exact-size buffer: ASan then catches any read past its end. */
static void replay_file(const char *path, replay_count *c) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    replay_fail(c, path, "cannot open");
    return;
  }
  size_t cap = 1 << 16, n = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n < cap) continue;
    uint8_t *bigger = realloc(buf, cap *= 2);
    if (!bigger) free(buf);
    buf = bigger;
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    replay_fail(c, path, "cannot read");
    return;
  }
  uint8_t *exact = malloc(n ? n : 1);
  if (n) memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  c->ran++;
}

static int replay_skipped(const char *name) {
  return name[0] == '.' || !strncmp(name, "README", 6);
}

static void replay_path(const char *path, int depth, replay_count *c);

static void replay_dir(const char *path, int depth, replay_count *c) {
  struct dirent **names;
  int n = scandir(path, &names, NULL, alphasort);
  if (n < 0) {
    replay_fail(c, path, "cannot list");
    return;
  }
  for (int i = 0; i < n; i++) {
    if (!replay_skipped(names[i]->d_name)) {
      size_t len = strlen(path) + strlen(names[i]->d_name) + 2;
      char *child = malloc(len);
      snprintf(child, len, "%s/%s", path, names[i]->d_name);
      replay_path(child, depth + 1, c);
      free(child);
    }
    free(names[i]);
  }
  free(names);
}

static void replay_path(const char *path, int depth, replay_count *c) {
  struct stat st;
  if (stat(path, &st) != 0)
    replay_fail(c, path, "cannot stat");
  else if (!S_ISDIR(st.st_mode))
    replay_file(path, c);
  else if (depth <= REPLAY_MAX_DEPTH)
    replay_dir(path, depth, c);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  replay_count c = {0, 0};
  for (int i = 1; i < argc; i++) replay_path(argv[i], 0, &c);
  printf("replay: %ld inputs ran\n", c.ran);
  return c.failed ? 1 : 0;
}
