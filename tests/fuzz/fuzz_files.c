/* tests/fuzz/fuzz_files.c: scratch files for the fuzz targets (fuzz_files.h). */
#include "fuzz_files.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void fuzz_die(const char *target, const char *what, const char *detail) {
  fprintf(stderr, "%s: %s%s%s\n", target, what, detail ? ": " : "", detail ? detail : "");
  abort();
}

int fuzz_verbose(void) {
  static int verbose = -1;
  if (verbose < 0) {
    const char *v = getenv("PT_FUZZ_VERBOSE");
    verbose = v && *v && strcmp(v, "0") != 0;
  }
  return verbose;
}

void fuzz_expect_msg(const char *target, int rc, const char *err, const char *call) {
  if (rc != 0 && rc != -1) fuzz_die(target, call, "returned neither 0 nor -1");
  if (rc == -1 && !err[0]) fuzz_die(target, call, "returned -1 without a message");
  if (fuzz_verbose()) fprintf(stderr, "%s: %s: %s\n", target, call, rc ? err : "ok");
}

void fuzz_make_dir(const char *target, const char *name, char *out, size_t outsz) {
  const char *tmp = getenv("TMPDIR");
  if (snprintf(out, outsz, "%s/pt_fuzz_%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name) >= (int)outsz)
    fuzz_die(target, "TMPDIR too long", tmp);
  if (!mkdtemp(out)) fuzz_die(target, "mkdtemp failed for", out);
}

void fuzz_path(const char *target, char *out, size_t outsz, const char *dir, const char *name) {
  if (snprintf(out, outsz, "%s/%s", dir, name) >= (int)outsz) fuzz_die(target, "path too long", dir);
}

void fuzz_write_file(const char *target, const char *path, const void *data, size_t size) {
  unlink(path);
  FILE *f = fopen(path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
    fuzz_die(target, "cannot write", path);
}

fuzz_blob fuzz_read_file(const char *target, const char *path) {
  fuzz_blob b = {NULL, 0};
  struct stat st;
  FILE *f = fopen(path, "rb");
  if (!f || stat(path, &st) != 0) fuzz_die(target, "cannot open", path);
  b.size = (size_t)st.st_size;
  b.data = malloc(b.size ? b.size : 1);
  if (!b.data || fread(b.data, 1, b.size, f) != b.size) fuzz_die(target, "cannot read", path);
  fclose(f);
  return b;
}

void fuzz_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *ent;
  char path[8400];
  while ((ent = readdir(d))) {
    if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, ent->d_name) < (int)sizeof path) unlink(path);
  }
  closedir(d);
  rmdir(dir);
}
