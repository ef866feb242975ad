/* pipe_convert: checkpoints to other layouts, without MPI or the training data.
 *   pipe_convert CKPT OUT.safetensors [--with-optimizer]
 *       one sequential safetensors file (an nn.Sequential-style state dict); with
 *       --with-optimizer also OUT.optimizer.safetensors
 *   pipe_convert CKPT --stages N --out DIR [--set KEY=VALUE ...]
 *       the same checkpoint re-split for N stages (loadable with pipe_train --load DIR)
 *   pipe_convert --from-hf HFDIR --out CKPT --spec-out SPEC.yaml [--seq-len N]
 *       a transformers model directory as a checkpoint and the spec of its model
 *   pipe_convert CKPT --to-hf HFDIR [--hf-arch NAME]
 *       the checkpoint as a transformers model directory (config.json, model.safetensors), as
 *       architecture NAME (e.g. Phi3ForCausalLM) where the blocks fit more than one
 * Exit codes: 0 success, 2 bad input, 1 other failures. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/memory.h"
#include "partition/plan.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/hf.h"
#include "core/error.h"
#include "checkpoint/safetensors.h"

#define USAGE                                                                                    \
  "pipe_convert CKPT OUT.safetensors [--with-optimizer] | pipe_convert CKPT --stages N --out DIR "   \
  "| pipe_convert --from-hf HFDIR --out CKPT --spec-out SPEC.yaml [--seq-len N] | pipe_convert "   \
  "CKPT --to-hf HFDIR [--hf-arch NAME]"

typedef struct {
  const char *ckpt, *out_file, *out_dir;
  const char *from_hf, *to_hf, *spec_out, *hf_arch;
  int64_t seq_len;
  int stages, with_optimizer;
  const char *sets[64];
  int n_sets;
} convert_args;

static void parse(int argc, char **argv, convert_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    int has_value = i + 1 < argc;
    if (!strcmp(s, "--with-optimizer")) a->with_optimizer = 1;
    else if (!strcmp(s, "--stages") && has_value) a->stages = atoi(argv[++i]);
    else if (!strcmp(s, "--out") && has_value) a->out_dir = argv[++i];
    else if (!strcmp(s, "--set") && has_value && a->n_sets < 63) a->sets[a->n_sets++] = argv[++i];
    else if (!strcmp(s, "--from-hf") && has_value) a->from_hf = argv[++i];
    else if (!strcmp(s, "--to-hf") && has_value) a->to_hf = argv[++i];
    else if (!strcmp(s, "--hf-arch") && has_value) a->hf_arch = argv[++i];
    else if (!strcmp(s, "--spec-out") && has_value) a->spec_out = argv[++i];
    else if (!strcmp(s, "--seq-len") && has_value) {
      char *end;
      errno = 0;
      a->seq_len = strtoll(argv[++i], &end, 10);
      if (errno || end == argv[i] || *end || a->seq_len < 1 || a->seq_len > INT32_MAX)
        pt_fail_input("--seq-len '%.40s': expected an integer in [1, %d] (the model's sequence "
                      "length, model.seq_len of the spec it writes)", argv[i], INT32_MAX);
    } else if (s[0] == '-') pt_fail_input("unknown or incomplete option '%s'; usage: %s", s, USAGE);
    else if (!a->ckpt) a->ckpt = s;
    else if (!a->out_file) a->out_file = s;
    else pt_fail_input("unexpected argument '%s'", s);
  }
  if (a->from_hf) {
    if (!a->out_dir || !a->spec_out || a->ckpt || a->stages || a->to_hf || a->hf_arch)
      pt_fail_input("usage: pipe_convert --from-hf HFDIR --out CKPT --spec-out SPEC.yaml "
                    "[--seq-len N]");
    return;
  }
  if (a->seq_len || a->spec_out) pt_fail_input("--seq-len and --spec-out go with --from-hf");
  if (a->hf_arch && !a->to_hf) pt_fail_input("--hf-arch goes with --to-hf");
  if (!a->ckpt) pt_fail_input("usage: %s", USAGE);
  if (a->to_hf) {
    if (a->out_file || a->out_dir || a->with_optimizer)
      pt_fail_input("usage: pipe_convert CKPT --to-hf HFDIR [--hf-arch NAME]");
    return;
  }
  if (!!a->out_file == !!a->out_dir)
    pt_fail_input("give either OUT.safetensors or --stages N --out DIR");
  if (a->out_dir && a->stages < 1) pt_fail_input("--out needs --stages N (N >= 1)");
}

/* The checkpoint's own spec with its --set options, then ours. */
static void load_spec(pt_checkpoint *c, const convert_args *a, pt_spec *spec, pt_spec_source *src,
                      const char **over) {
  int n = checkpoint_spec_overrides(c, over, 128);
  static char stages[64];
  for (int i = 0; i < a->n_sets && n < 190; i++) over[n++] = a->sets[i];
  if (a->out_dir && a->stages) {
    snprintf(stages, sizeof stages, "pipeline.stages=%d", a->stages);
    over[n++] = stages;
  }
  const char *text = checkpoint_spec_text(c);
  if (!text) pt_fail_input("%s/manifest.json: no spec recorded", c->dir);
  spec_errors e = {0};
  spec_set_resolve_data(0); /* converting needs the model, not the data */
  if (spec_load_text(text, strlen(text), checkpoint_spec_origin(c), over, n, spec, &e) != 0)
    pt_fail_input("%s", e.msg);
  *src = (pt_spec_source){text, checkpoint_spec_origin(c), over, n};
}

static void write_resplit(const pt_model *m, const pt_optimizer *o, const pt_spec_source *src,
                          const char *dir, int64_t step) {
  pt_plan plan;
  spec_errors e = {0};
  char err[1024];
  if (plan_build(&plan, m, &e) != 0) pt_fail_input("%s", e.msg);
  ckpt_stage_files *files = pt_calloc((size_t)plan.n_chunks, sizeof *files);
  ckpt_layout lay = {.n_chunks = plan.n_chunks, .stages = plan.n_stages,
                     .data_parallel = plan.data_parallel, .bounds = plan.bounds,
                     .chunk_stage = plan.virtual_stages > 1 ? plan.chunk_stage : NULL};
  if (checkpoint_begin_save(dir, err, sizeof err) != 0) pt_fatal("%s", err);
  for (int c = 0; c < plan.n_chunks; c++) /* one file per chunk, whichever stage runs it */
    if (checkpoint_write_stage(dir, m, o, c, plan.bounds[c], plan.bounds[c + 1], &files[c], err,
                               sizeof err) != 0)
      pt_fatal("%s", err);
  if (checkpoint_write_manifest(dir, m, src, step, o->t, &lay, files, err, sizeof err) != 0)
    pt_fatal("%s", err);
  checkpoint_end_save(dir);
  char chunks[64] = "";
  if (plan.virtual_stages > 1) snprintf(chunks, sizeof chunks, ", %d chunks", plan.n_chunks);
  printf("pipe_convert: wrote %s (%d stages%s, partition %s)\n", dir, plan.n_stages, chunks,
         plan.method);
  free(files);
  plan_free(&plan);
}

/* The spec text to path, atomically (temporary, rename). */
static void write_text(const char *path, const char *text) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  int ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    pt_fatal("%s: cannot write the spec", path);
  }
}

/* A model this machine cannot hold is refused before anything is allocated: weights, gradients
 * and the fresh optimizer's two moments, 4 bytes each per parameter (the storage model_alloc
 * and optimizer_init make; tied copies counted twice, so a slight overestimate). */
static void check_fits(const pt_model *m, const char *dir) {
  int64_t params = 0;
  for (int li = 0; li < m->n_layers; li++)
    for (int p = 0; p < m->layers[li].n_params; p++) params += m->layers[li].params[p].numel;
  int64_t need = params * 16, machine = memory_machine_bytes();
  if (machine <= 0 || need <= machine) return;
  char n[32], have[32];
  memory_format_size(need, n, sizeof n);
  memory_format_size(machine, have, sizeof have);
  pt_fail_input("%s/config.json: converting this model (%lld parameters) needs %s (%lld bytes: "
                "weights, gradients and optimizer state, estimated before allocating) but this "
                "machine has %s; convert on a machine with more memory",
                dir, (long long)params, n, (long long)need, have);
}

static int from_hf(const convert_args *a) {
  hf_config c;
  char err[1024];
  if (hf_config_read(a->from_hf, a->seq_len, &c, err, sizeof err) != 0) pt_fail_input("%s", err);
  char *text = hf_spec_text(&c, a->from_hf);
  pt_spec spec;
  spec_errors e = {0};
  spec_set_resolve_data(0);
  if (spec_load_text(text, strlen(text), a->spec_out, NULL, 0, &spec, &e) != 0)
    pt_fail_input("%s", e.msg);
  pt_model m;
  if (model_configure(&m, &spec, &e) != 0)
    pt_fail_input("%s (the spec pipe_convert made for %s; is its layer type in this build?)",
                  e.msg, c.arch->architecture);
  /* the files first: a missing or misshapen tensor is named before any allocation */
  if (hf_check_weights(a->from_hf, &c, &m, err, sizeof err) != 0) pt_fail_input("%s", err);
  check_fits(&m, a->from_hf);
  model_alloc_blank(&m, device_current()); /* every parameter is read from the files next */
  if (hf_import_weights(a->from_hf, &c, &m, err, sizeof err) != 0) pt_fail_input("%s", err);
  model_to_device(&m);
  pt_optimizer o; /* a fresh optimizer: the checkpoint starts training at step 0 */
  optimizer_init(&o, &spec.train, m.n_floats);
  pt_spec_source src = {text, a->spec_out, NULL, 0};
  write_resplit(&m, &o, &src, a->out_dir, 0);
  write_text(a->spec_out, text);
  printf("pipe_convert: wrote %s (%s, %d tensors); fill in data.path in %s\n", a->spec_out,
         c.arch->architecture, m.n_tensors, a->spec_out);
  optimizer_free(&o);
  model_free(&m);
  spec_free(&spec);
  free(text);
  return 0;
}

int main(int argc, char **argv) {
  convert_args a;
  parse(argc, argv, &a);
  if (a.from_hf) return from_hf(&a);
  pt_checkpoint c;
  char err[1024];
  /* HFDIR and its parent (the export is written beside it, then renamed): checked before the
   * checkpoint is read, a place this job cannot write is bad input */
  if (a.to_hf && (checkpoint_check_writable(a.to_hf, 0, "--to-hf", err, sizeof err) != 0 ||
                  checkpoint_check_writable(a.to_hf, 1, "--to-hf", err, sizeof err) != 0))
    pt_fail_input("%s", err);
  if (checkpoint_open(&c, a.ckpt, err, sizeof err) != 0) pt_fail_input("%s", err);
  pt_spec spec;
  pt_spec_source src;
  const char *over[200];
  load_spec(&c, &a, &spec, &src, over);
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, &spec, &e) != 0) pt_fail_input("%s", e.msg);
  model_alloc(&m, 0, m.n_layers);
  pt_optimizer o;
  int need_opt = a.with_optimizer || a.out_dir;
  if (need_opt) optimizer_init(&o, &spec.train, m.n_floats);
  if (checkpoint_load(&c, &m, need_opt ? &o : NULL, err, sizeof err) != 0) pt_fail_input("%s", err);
  if (a.to_hf) {
    model_to_host(&m);
    hf_config hc; /* a model of another shape is bad input (2); a failed write is not (1) */
    if (hf_config_from_model_as(&m, a.hf_arch, &hc, err, sizeof err) != 0)
      pt_fail_input("%s", err);
    if (hf_export_as(&m, a.hf_arch, a.to_hf, err, sizeof err) != 0) pt_fatal("%s", err);
    printf("pipe_convert: wrote %s (config.json, model.safetensors; step %lld)\n", a.to_hf,
           (long long)c.step);
  } else if (a.out_file) {
    if (checkpoint_write_sequential(&m, need_opt ? &o : NULL, a.out_file, c.step, err,
                                    sizeof err) != 0)
      pt_fatal("%s", err);
    printf("pipe_convert: wrote %s (%d tensors, step %lld)\n", a.out_file, m.n_tensors,
           (long long)c.step);
  } else {
    write_resplit(&m, &o, &src, a.out_dir, c.step);
  }
  if (need_opt) optimizer_free(&o);
  model_free(&m);
  spec_free(&spec);
  checkpoint_close(&c);
  return 0;
}
