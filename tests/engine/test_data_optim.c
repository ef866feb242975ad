/* Data positions (the documented offset formula), data-file errors, AdamW against a closed form
 * in double, the learning-rate schedule and gradient clipping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "data/data.h"
#include "data/data_rows.h"
#include "data/source.h"
#include "model/optimizer.h"
#include "test_util.h"

static char g_dir[] = "/tmp/pt_test_data_XXXXXX";

static void write_file(const char *path, const void *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) pt_fatal("writing %s", path);
}

static void spec_for(pt_spec *s, const char *path, const char *fmt, int vocab, int T) {
  memset(s, 0, sizeof *s);
  snprintf(s->path, sizeof s->path, "test.yaml");
  snprintf(s->data.path, sizeof s->data.path, "%s", path);
  s->data.format = (spec_data_format)spec_name_index(spec_data_format_names, fmt);
  s->vocab = vocab;
  s->seq_len = T;
}

static void test_offsets(void) {
  enum { N = 1000, T = 16, B = 3 };
  uint8_t bytes[N];
  for (int i = 0; i < N; i++) bytes[i] = (uint8_t)((i * 7 + i / 256) % 256);
  char path[128];
  snprintf(path, sizeof path, "%s/tok.bin", g_dir);
  write_file(path, bytes, N);
  pt_spec s;
  spec_for(&s, path, "bytes", 256, T);
  pt_data d;
  char err[512];
  CHECK(data_open(&d, &s, err, sizeof err) == 0, "%s", err);
  const int64_t G = 24, steps[4] = {0, 1, 57, 4000000000000LL};
  for (int si = 0; si < 4; si++) {
    for (int64_t j0 = 0; j0 < G; j0 += B) {
      int32_t in[B * T], tg[B * T];
      data_fill_rows(&d, steps[si], G, j0, B, T, T, in, tg);
      for (int r = 0; r < B; r++) {
        unsigned __int128 o128 = ((unsigned __int128)steps[si] * G + (unsigned __int128)(j0 + r)) * T;
        int64_t o = (int64_t)(o128 % (N - T));
        for (int t = 0; t < T; t++) {
          CHECK(in[r * T + t] == bytes[o + t], "step %lld j %lld t %d: input", (long long)steps[si],
                (long long)(j0 + r), t);
          CHECK(tg[r * T + t] == bytes[o + t + 1], "step %lld j %lld t %d: target",
                (long long)steps[si], (long long)(j0 + r), t);
        }
      }
    }
  }
  data_close(&d);
}

static void expect_open_error(const char *name, const void *bytes, size_t n, const char *fmt,
                              int vocab, const char *needle) {
  char path[128], err[512] = "";
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  write_file(path, bytes, n);
  pt_spec s;
  spec_for(&s, path, fmt, vocab, 16);
  pt_data d;
  CHECK(data_open(&d, &s, err, sizeof err) != 0, "%s: opened", name);
  CHECK(strstr(err, needle) && strstr(err, path), "%s: message '%s' lacks '%s'", name, err, needle);
}

static void test_data_errors(void) {
  uint8_t big[100];
  for (int i = 0; i < 100; i++) big[i] = (uint8_t)(150 + i % 50);
  expect_open_error("short.bin", "abc", 3, "bytes", 256, "too short");
  expect_open_error("vocab.bin", big, 100, "bytes", 100, ">= model.vocab");
  expect_open_error("odd.u16", big, 41, "u16", 256, "not a multiple of 2");
  expect_open_error("empty.bin", "", 0, "bytes", 256, "empty");
  expect_open_error("odd.u32", big, 42, "u32", 256, "not a multiple of 4");
  uint32_t ids[40];
  for (int i = 0; i < 40; i++) ids[i] = 70000u + (uint32_t)i;
  expect_open_error("vocab.u32", ids, sizeof ids, "u32", 70020, ">= model.vocab");
}

/* u32 ids above 16 bits (and up to the vocabulary) come back exactly, little-endian. */
static void test_u32(void) {
  enum { N = 64, T = 8 };
  uint8_t bytes[4 * N];
  for (int i = 0; i < N; i++) {
    uint32_t id = 100000u + (uint32_t)i * 4099u;
    for (int b = 0; b < 4; b++) bytes[4 * i + b] = (uint8_t)(id >> (8 * b));
  }
  char path[128], err[512];
  snprintf(path, sizeof path, "%s/tok.u32", g_dir);
  write_file(path, bytes, sizeof bytes);
  pt_spec s;
  spec_for(&s, path, "u32", 100000 + 4099 * N, T);
  pt_data d;
  CHECK(data_open(&d, &s, err, sizeof err) == 0, "%s", err);
  CHECK(d.length == N, "u32: %lld tokens, expected %d", (long long)d.length, N);
  int32_t in[T], tg[T];
  data_fill_rows(&d, 3, 2, 1, 1, T, T, in, tg);
  int64_t o = ((3 * 2 + 1) * T) % (N - T);
  for (int t = 0; t < T; t++) {
    CHECK(in[t] == (int32_t)(100000 + (o + t) * 4099), "u32 input %d: %d", t, in[t]);
    CHECK(tg[t] == (int32_t)(100000 + (o + t + 1) * 4099), "u32 target %d: %d", t, tg[t]);
  }
  data_close(&d);
}

/* AdamW with PyTorch's formula evaluated in double for 3 steps. */
static void test_adamw(void) {
  spec_train c = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  c.optimizer = SPEC_OPTIMIZER_ADAMW;
  pt_tensor tens[2] = {{.offset = 0, .numel = 3, .decay = 1}, {.offset = 16, .numel = 2}};
  float params[32] = {1.0f, -2.0f, 0.5f}, grads[32] = {0.3f, -0.1f, 2.0f};
  params[16] = 0.25f, params[17] = -0.75f, grads[16] = -1.0f, grads[17] = 0.01f;
  pt_model m = {.params = params, .grads = grads, .n_floats = 32, .tensors = tens, .n_tensors = 2,
               .dev = device_host()};
  double p[5] = {1.0, -2.0, 0.5, 0.25, -0.75}, g[5] = {0.3, -0.1, 2.0, -1.0, 0.01};
  double mm[5] = {0}, vv[5] = {0};
  int idx[5] = {0, 1, 2, 16, 17}, decay[5] = {1, 1, 1, 0, 0};
  pt_optimizer o;
  optimizer_init(&o, &c, 32);
  for (int t = 1; t <= 3; t++) {
    optimizer_step(&o, &m, c.lr, 1.0f);
    for (int i = 0; i < 5; i++) {
      if (decay[i]) p[i] *= 1.0 - c.lr * c.weight_decay;
      mm[i] = c.beta1 * mm[i] + (1 - c.beta1) * g[i];
      vv[i] = c.beta2 * vv[i] + (1 - c.beta2) * g[i] * g[i];
      double mh = mm[i] / (1 - pow(c.beta1, t)), vh = vv[i] / (1 - pow(c.beta2, t));
      p[i] -= c.lr * mh / (sqrt(vh) + c.eps);
      CHECK(fabs(params[idx[i]] - p[i]) <= 2e-6 * fmax(1.0, fabs(p[i])),
            "adamw step %d elem %d: %.9g vs %.9g", t, i, params[idx[i]], p[i]);
    }
  }
  optimizer_free(&o);
}

/* pipeline.shard_optimizer's ranges: contiguous, covering the buffer, ends on 16 floats, none
 * much over n / D; and D replicas each updating their range (their state of it only) give the
 * unsharded update's bits, the tensors cut anywhere, clipped (the factor folded into each
 * range's read of the gradients). */
static void test_adamw_sharded(void) {
  spec_train c = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  c.optimizer = SPEC_OPTIMIZER_ADAMW;
  enum { N = 144 };
  pt_tensor tens[3] = {{.offset = 0, .numel = 40, .decay = 1}, {.offset = 48, .numel = 70},
                       {.offset = 128, .numel = 5, .decay = 1}};
  float whole[N], grads[N];
  for (int i = 0; i < N; i++)
    whole[i] = 0.01f * (float)(i % 37) - 0.2f, grads[i] = 0.3f - 0.007f * (float)(i % 53);
  for (int D = 2; D <= 5; D++) {
    int64_t at = 0;
    for (int r = 0; r < D; r++) {
      int64_t end = optimizer_shard_end(N, D, r);
      CHECK(optimizer_shard_end(N, D, r - 1) == at && end >= at, "D=%d range %d starts at %lld",
            D, r, (long long)optimizer_shard_end(N, D, r - 1));
      CHECK(r == D - 1 ? end == N : end % 16 == 0, "D=%d range %d ends at %lld", D, r,
            (long long)end);
      at = end;
    }
    CHECK(optimizer_shard_max(N, D) <= N / D + 16, "D=%d: largest range %lld", D,
          (long long)optimizer_shard_max(N, D));
    float ref[N], mine[N], sharded[N];
    memcpy(ref, whole, sizeof ref), memcpy(sharded, whole, sizeof sharded);
    pt_model m = {.params = ref, .grads = grads, .n_floats = N, .tensors = tens, .n_tensors = 3,
                  .dev = device_host()};
    pt_optimizer o, *part = calloc((size_t)D, sizeof *part);
    optimizer_init(&o, &c, N);
    for (int r = 0; r < D; r++) optimizer_init_shard(&part[r], &c, N, r, D);
    for (int t = 1; t <= 3; t++) {
      m.params = ref;
      optimizer_step(&o, &m, c.lr, 0.37f);
      for (int r = 0; r < D; r++) { /* each replica from the gathered parameters */
        memcpy(mine, sharded, sizeof mine);
        m.params = mine;
        optimizer_step(&part[r], &m, c.lr, 0.37f);
        int64_t lo = part[r].lo, n = part[r].n_floats;
        memcpy(sharded + lo, mine + lo, sizeof(float) * (size_t)n);
      }
      CHECK(!memcmp(ref, sharded, sizeof ref), "D=%d step %d: the sharded update differs", D, t);
    }
    optimizer_free(&o);
    for (int r = 0; r < D; r++) optimizer_free(&part[r]);
    free(part);
  }
}

static void test_lr_schedule(void) {
  spec_train c = {.lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .steps = 110};
  c.lr_schedule = SPEC_LR_COSINE;
  CHECK(fabs(lr_at(&c, 0) - 0.1) < 1e-12, "warm-up start %.6f", lr_at(&c, 0));
  CHECK(fabs(lr_at(&c, 9) - 1.0) < 1e-12, "warm-up end %.6f", lr_at(&c, 9));
  CHECK(fabs(lr_at(&c, 10) - 1.0) < 1e-12, "cosine start %.6f", lr_at(&c, 10));
  /* step 59 is 49 of the 99 decay intervals in */
  double mid = 0.1 + 0.9 * 0.5 * (1 + cos(3.14159265358979323846 * 49.0 / 99.0));
  CHECK(fabs(lr_at(&c, 59) - mid) < 1e-12, "cosine middle %.9f vs %.9f", lr_at(&c, 59), mid);
  CHECK(fabs(lr_at(&c, 109) - 0.1) < 1e-12, "cosine end %.6f", lr_at(&c, 109));
  c.lr_schedule = SPEC_LR_CONSTANT;
  CHECK(lr_at(&c, 50) == 1.0, "constant %.6f", lr_at(&c, 50));
}

/* The clip factor (torch clip_grad_norm_'s), and the optimizer applying it as it reads the
 * gradients: the bits of scaling the gradients first (the pass it replaced, g * factor in
 * float) and then stepping unclipped, for AdamW and SGD with momentum, tensors with and
 * without decay, three steps; the gradients in memory stay unscaled. */
static void test_clip(void) {
  float grads[16] = {3.0f, 4.0f};
  pt_tensor t = {.offset = 0, .numel = 2};
  pt_model m = {.grads = grads, .n_floats = 16, .tensors = &t, .n_tensors = 1, .dev = device_host()};
  double norm = sqrt(grad_sumsq(&m));
  CHECK(fabs(norm - 5.0) < 1e-12, "norm %.9f", norm);
  CHECK(grad_clip_factor(norm, 1.0) == (float)(1.0 / (5.0 + 1e-6)), "factor %.9g",
        grad_clip_factor(norm, 1.0));
  CHECK(grad_clip_factor(1.0, 2.0) == 1.0f, "clipped below the threshold");
  CHECK(grad_clip_factor(5.0, 0.0) == 1.0f, "clipped with grad_clip 0 (off)");
  enum { N = 48 };
  pt_tensor tens[2] = {{.offset = 0, .numel = 20, .decay = 1}, {.offset = 32, .numel = 13}};
  for (int sgd = 0; sgd <= 1; sgd++) {
    spec_train c = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                    .momentum = 0.9};
    c.optimizer = sgd ? SPEC_OPTIMIZER_SGD : SPEC_OPTIMIZER_ADAMW;
    float folded[N], scaled[N], g[N], gs[N], keep[N];
    for (int i = 0; i < N; i++)
      folded[i] = scaled[i] = 0.02f * (float)(i % 11) - 0.1f, g[i] = 0.7f - 0.031f * (float)i;
    memcpy(keep, g, sizeof keep);
    pt_model a = {.params = folded, .grads = g, .n_floats = N, .tensors = tens, .n_tensors = 2,
                  .dev = device_host()};
    pt_model b = a;
    b.params = scaled, b.grads = gs;
    pt_optimizer oa, ob;
    optimizer_init(&oa, &c, N), optimizer_init(&ob, &c, N);
    for (int step = 1; step <= 3; step++) {
      float f = grad_clip_factor(12.5 * step, 1.0);
      for (int i = 0; i < N; i++) gs[i] = g[i] * f; /* the scaling pass */
      optimizer_step(&oa, &a, c.lr, f);
      optimizer_step(&ob, &b, c.lr, 1.0f);
    }
    CHECK(!memcmp(folded, scaled, sizeof folded), "%s: the folded clip's weights differ",
          sgd ? "sgd" : "adamw");
    CHECK(!memcmp(oa.m, ob.m, sizeof(float) * N) && (sgd || !memcmp(oa.v, ob.v, sizeof(float) * N)),
          "%s: the folded clip's optimizer state differs", sgd ? "sgd" : "adamw");
    CHECK(!memcmp(g, keep, sizeof keep), "%s: the gradients were scaled in memory",
          sgd ? "sgd" : "adamw");
    optimizer_free(&oa), optimizer_free(&ob);
  }
}

/* Every data.format has a reader, and the spec's records-or-tokens answer (which decides T = 1
 * and the model's token input at load) is the reader's (width 0: records). */
static void test_formats(void) {
  for (int f = 0; spec_data_format_names[f]; f++) {
    const data_source *src = data_source_find(spec_data_format_names[f]);
    CHECK(src != NULL, "data.format %s has no entry in data/source.c", spec_data_format_names[f]);
    if (src)
      CHECK(spec_data_is_records((spec_data_format)f) == (src->width == 0),
            "%s: spec says %s, the reader's width is %d", src->name,
            spec_data_is_records((spec_data_format)f) ? "records" : "tokens", src->width);
  }
}

int main(void) {
  if (!mkdtemp(g_dir)) pt_fatal("mkdtemp");
  test_formats();
  test_offsets();
  test_data_errors();
  test_u32();
  test_adamw();
  test_adamw_sharded();
  test_lr_schedule();
  test_clip();
  return test_summary("data_optim");
}
