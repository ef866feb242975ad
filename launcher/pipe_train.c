/* pipe_train: trains a model described by a YAML layer spec.
 *   pipe_train SPEC [--sequential] [--set KEY=VALUE ...] [--metrics FILE] [--quiet]
 * Exit codes: 0 success, 2 bad input (spec, data, command line), 1 other failures. */
#include <cblas.h>
#include <signal.h>
#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/plan.h"
#include "spec/spec.h"
#include "comm/comm.h"
#include "device/gemm_rate.h"
#include "model/param_dump.h"
#include "device/placement.h"
#include "schedule/schedule_svg.h"
#include "core/signals.h"
#include "observe/watchdog.h"
#include "observe/trace_write.h"
#include "engine/pipeline.h"
#include "core/error.h"
#include "engine/train.h"

#define MAX_OVERRIDES 256

typedef struct {
  const char *spec_path;
  const char *overrides[MAX_OVERRIDES];
  int n_overrides;
  int sequential, quiet, plan, json, print_schedule;
  int bind; /* PT_BIND_AUTO | PT_BIND_NONE */
  const char *metrics_path;
  const char *dump_prefix;
  const char *save_dir, *load_path, *gather_path;
  const char *trace_path, *trace_steps, *svg_path;
  int actions_format; /* --format actions: the schedule as a schedule file */
  pt_spec_source src; /* what checkpoints record of the spec */
} cli_args;

static void usage(FILE *f) {
  fprintf(f,
          "usage: pipe_train SPEC.yaml [options]\n"
          "  --sequential        run every layer in this one process (same results as the\n"
          "                      pipelined run of the same spec)\n"
          "  --set KEY=VALUE     override a spec value, e.g. --set train.steps=50 (repeatable)\n"
          "  --metrics FILE      write one JSON object per step to FILE\n"
          "  --quiet             no per-step lines on stdout\n"
          "  --bind auto|none    bind each rank's threads to the cores nearest its GPU, or\n"
          "                      spread over cores and NUMA nodes (auto, the default); none\n"
          "                      keeps the binding it started with\n"
          "  --plan [--json]     print the stage plan (layers, memory, time per stage) and exit\n"
          "  --print-schedule    print every stage's action list for one step and exit\n"
          "                      (--svg FILE also draws it as a picture; --format actions\n"
          "                      prints it as a schedule file for pipeline.schedule_file)\n"
          "  --trace FILE        write a Chrome trace (Perfetto, chrome://tracing) of the run\n"
          "  --trace-steps A:B   only steps A..B in the trace (default: all)\n"
          "  --load CKPT         start from a checkpoint (written under any layout) at its step\n"
          "  --save DIR          write a checkpoint to DIR at the end of the run\n"
          "  --gather FILE       at the end, write the whole model to one safetensors FILE\n"
          "  --dump-params PRE   after training, each rank writes its parameters to PRE.<rank>.bin\n"
          "  --help, --version\n");
}

static const char *option_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) pt_fail_input("%s needs a value; see pipe_train --help", argv[*i]);
  return argv[++*i];
}

static void parse_args(int argc, char **argv, cli_args *a) {
  memset(a, 0, sizeof *a);
  a->bind = PT_BIND_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(s, "--version")) {
      printf("pipetrain 0.1.0\n");
      exit(0);
    } else if (!strcmp(s, "--sequential")) {
      a->sequential = 1;
    } else if (!strcmp(s, "--quiet")) {
      a->quiet = 1;
    } else if (!strcmp(s, "--plan")) {
      a->plan = 1;
    } else if (!strcmp(s, "--print-schedule")) {
      a->print_schedule = 1;
    } else if (!strcmp(s, "--bind")) {
      const char *v = option_value(argc, argv, &i);
      if (strcmp(v, "auto") && strcmp(v, "none"))
        pt_fail_input("--bind '%s': expected auto or none", v);
      a->bind = !strcmp(v, "auto") ? PT_BIND_AUTO : PT_BIND_NONE;
    } else if (!strcmp(s, "--json")) {
      a->json = 1;
    } else if (!strcmp(s, "--metrics")) {
      a->metrics_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--save")) {
      a->save_dir = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--trace")) {
      a->trace_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--trace-steps")) {
      a->trace_steps = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--format")) {
      const char *v = option_value(argc, argv, &i);
      if (strcmp(v, "actions") && strcmp(v, "text"))
        pt_fail_input("--format '%s': expected text or actions", v);
      a->actions_format = !strcmp(v, "actions");
    } else if (!strcmp(s, "--svg")) {
      a->svg_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--gather")) {
      a->gather_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--load")) {
      a->load_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--dump-params")) {
      a->dump_prefix = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--set")) {
      if (a->n_overrides == MAX_OVERRIDES) pt_fail_input("more than %d --set options", MAX_OVERRIDES);
      a->overrides[a->n_overrides++] = option_value(argc, argv, &i);
    } else if (s[0] == '-') {
      pt_fail_input("unknown option '%s'; see pipe_train --help", s);
    } else if (a->spec_path) {
      pt_fail_input("more than one spec file ('%s' and '%s'); pass exactly one", a->spec_path, s);
    } else {
      a->spec_path = s;
    }
  }
  if (a->json && !a->plan) pt_fail_input("--json goes with --plan");
  if (a->svg_path && !a->print_schedule) pt_fail_input("--svg goes with --print-schedule");
  if (a->actions_format && !a->print_schedule) pt_fail_input("--format goes with --print-schedule");
  int64_t first, last;
  if (trace_parse_window(a->trace_steps, &first, &last) != 0)
    pt_fail_input("--trace-steps '%s': expected A:B with 1 <= A <= B, e.g. 3:5", a->trace_steps);
  if (a->trace_steps && !a->trace_path) pt_fail_input("--trace-steps goes with --trace FILE");
  if (!a->spec_path)
    pt_fail_input("no spec file given; try: pipe_train examples/default.yaml (or --help)");
}

/* The spec's text, kept in checkpoints so they can be converted and resumed without it. */
static char *read_spec_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return pt_strdup("");
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[65536];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = 2 * (len + n + 1);
      char *nb = realloc(buf, cap);
      if (!nb) pt_fatal("out of memory reading %s", path);
      buf = nb;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (!buf) return pt_strdup("");
  buf[len] = '\0';
  return buf;
}

/* Where a preempted run saves: the periodic checkpoint directory's step-N if configured, else
 * --save DIR, else ./pipetrain-preempted. */
static void preempt_dir(const pt_spec *s, const cli_args *a, int64_t step, char *out, size_t n) {
  if (s->train.ckpt_dir[0]) checkpoint_step_dir(s->train.ckpt_dir, step, out, n);
  else snprintf(out, n, "%s", a->save_dir ? a->save_dir : "pipetrain-preempted");
}

static void preempt_report(int sig, int64_t step, const char *dir) {
  printf("\npipetrain: %s after step %lld: checkpoint written to %s; resume with --load %s\n",
         sig == SIGINT ? "interrupted" : "preempted", (long long)step, dir, dir);
  fflush(stdout);
}

static void report_skip(int64_t step, int64_t total) {
  printf("\npipetrain: step %lld: non-finite gradients, step skipped (%lld so far)\n",
         (long long)step, (long long)total);
}

/* Periodic checkpoints (train.checkpoint) after step `step`. */
static int periodic_due(const pt_spec *s, int64_t step) {
  return s->train.ckpt_dir[0] && s->train.ckpt_every > 0 && step % s->train.ckpt_every == 0;
}

/* A bad-input error every rank hits alike: rank 0 prints it, all ranks leave with code 2. */
static void fail_everywhere(int launched, const char *msg) {
  int rank = launched ? comm_rank(comm_world()) : 0;
  if (rank == 0 && msg[0]) {
    fprintf(stderr, "pipetrain: %s\n", msg);
    fflush(stderr);
  }
  if (launched) comm_finalize();
  exit(PT_EXIT_INPUT);
}

/* Every rank must have read the same spec (file and --set options). */
static void check_same_spec(const pt_spec *s) {
  uint64_t lo = s->hash, hi = s->hash;
  comm_allreduce_min_u64(comm_world(), &lo, 1);
  comm_allreduce_max_u64(comm_world(), &hi, 1);
  if (lo != hi)
    fail_everywhere(1, "the ranks of this job read different specs (hashes differ); every rank "
                       "must see the same spec file and the same --set options");
}

static FILE *open_metrics(const char *path) {
  if (!path) return NULL;
  FILE *f = fopen(path, "w");
  if (!f) pt_fail_input("%s: cannot open the metrics file: %s", path, strerror(errno));
  return f;
}

/* --plan: configure (no allocation), plan, print, exit. One rank, no MPI. */
static int print_plan(const pt_spec *spec, int json) {
  pt_model m;
  pt_plan p;
  spec_errors e = {0};
  if (model_configure(&m, spec, &e) != 0 || plan_build(&p, &m, &e) != 0) pt_fail_input("%s", e.msg);
  double gflops = gemm_measure_flops(512, 0.2) / 1e9;
  if (json) plan_print_json(stdout, &p, &m, gflops);
  else plan_print(stdout, &p, &m, gflops);
  plan_free(&p);
  model_free(&m);
  return 0;
}

static void print_schedule(const pt_spec *spec, const char *svg, int actions) {
  pt_schedule sch;
  char err[1024];
  if (schedule_build_spec(&sch, spec, err, sizeof err) != 0) pt_fail_input("%s", err);
  if (actions) schedule_write_actions(stdout, &sch);
  else schedule_print(stdout, &sch);
  if (schedule_validate(&sch, err, sizeof err) != 0) pt_fatal("schedule is invalid: %s", err);
  if (svg && schedule_write_svg(&sch, svg, err, sizeof err) != 0) pt_fail_input("%s", err);
  schedule_free(&sch);
}

/* The engine runs one chunk per rank and the fused backward only: a schedule that needs more
 * is refused before any work (it can still be printed and planned). */
static void refuse_unsupported(const pt_spec *spec, const pt_schedule_type *t, int launched) {
  const spec_pipeline *p = &spec->pipeline;
  char msg[512] = "";
  if (p->schedule_file[0])
    snprintf(msg, sizeof msg, "pipeline.schedule_file: the engine does not run schedule files "
             "yet; --print-schedule shows and checks it");
  else if (t->splits_backward || schedule_virtual_stages(t, p) > 1)
    snprintf(msg, sizeof msg, "pipeline.schedule: %s needs %s, which the engine does not run "
             "yet; use 1f1b or gpipe (--print-schedule and --plan show it)", t->name,
             t->splits_backward ? "the backward split into I and W" : "several chunks per rank");
  if (msg[0]) fail_everywhere(launched, msg);
}

/* Binds this rank's threads (--bind; device/placement.h), prints where it runs, and sizes the
 * BLAS pool to its cores: one pool per rank over all cores would oversubscribe them. An
 * explicit OPENBLAS_NUM_THREADS wins (benchmarks pin one thread per rank with it). Collective
 * over the node (the ranks share their GPUs' bus ids). A placement that fails costs speed,
 * not the run: a warning. */
static char g_placement[1024]; /* the start-up line, printed once the run is set up */

static void place_rank(const cli_args *a, int launched) {
  pt_device *d = device_current();
  int n = launched ? comm_local_size() : 1, any_gpu = 0;
  char mine[32] = "", (*ids)[32] = pt_calloc((size_t)n, 32);
  snprintf(mine, sizeof mine, "%s", device_pci_bus_id(d));
  comm_node_allgather(mine, sizeof mine, ids);
  const char **list = pt_calloc((size_t)n, sizeof(char *));
  for (int r = 0; r < n; r++) any_gpu |= (list[r] = ids[r][0] ? ids[r] : NULL) != NULL;
  placement_request rq = {launched ? comm_local_rank() : 0, n, a->bind, device_gpu_id(d),
                          any_gpu ? list : NULL};
  placement_result out;
  char err[512];
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = (int)(cores / n) > 0 ? (int)(cores / n) : 1;
  if (placement_apply(&rq, &out, err, sizeof err) != 0) {
    pt_warn("placement: %s; running unbound", err);
  } else {
    threads = out.threads;
    if (launched)
      snprintf(g_placement, sizeof g_placement, "pipetrain[rank %d]: %s device, %s\n",
               comm_rank(comm_world()), device_name(d), out.text);
    else
      snprintf(g_placement, sizeof g_placement, "pipetrain: %s device, %s\n", device_name(d),
               out.text);
  }
  if (!getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(threads);
  free(ids);
  free(list);
}

/* A periodic checkpoint that could not be written (disk full, I/O error) costs only itself: the
 * training state is intact and the next interval tries again. root: this rank reports the
 * consequences; err: this rank's own reason (empty when its part went well). */
static void warn_periodic_failed(const char *dir, const char *err, int root, int64_t next) {
  if (root)
    pt_warn("checkpoint %s not written%s%s; training goes on with its state intact, the next try "
            "is after step %lld, and earlier checkpoints are untouched", dir, err[0] ? ": " : "",
            err, (long long)next);
  else if (err[0])
    pt_warn("checkpoint %s not written: %s", dir, err);
}

/* The save a run ends with (--save, or after a signal): without it the run's work is lost, so
 * its failure is the run's. */
static void sequential_save(pt_trainer *t, const char *dir, const cli_args *a) {
  char err[1024];
  if (trainer_save(t, dir, &a->src, err, sizeof err) != 0)
    pt_fatal("checkpoint %s not written: %s; earlier checkpoints are untouched", dir, err);
}

static void run_sequential(const pt_spec *spec, const cli_args *a) {
  if (a->trace_path) pt_fail_input("--trace records a pipelined run: start it with mpirun");
  pt_trainer t;
  char err[1024];
  int gpu = device_wants_gpu(spec_device_names[spec->pipeline.device]), launched = comm_launched();
  if (!gpu) place_rank(a, launched);
  if (trainer_init(&t, spec, err, sizeof err) != 0) pt_fail_input("%s", err);
  if (gpu) place_rank(a, launched);
  if (a->load_path && trainer_load(&t, a->load_path, err, sizeof err) != 0) pt_fail_input("%s", err);
  if (!a->quiet) fputs(g_placement, stdout);
  FILE *metrics = open_metrics(a->metrics_path);
  if (!a->quiet)
    printf("pipetrain: %s: %d layers, %lld parameters, %lld steps of %lld sequences, one process\n",
           spec->path, t.model.n_layers, (long long)model_param_count(&t.model),
           (long long)spec->train.steps,
           (long long)(spec->pipeline.data_parallel * spec->train.micro_batches *
                       spec->train.micro_batch_size));
  double gemm = gemm_measure_flops(512, 0.2), fpt = model_flops_per_token(&t.model), spent = 0;
  int64_t start = t.step;
  while (t.step < spec->train.steps) {
    pt_step_metrics m;
    int status = trainer_step(&t, &m);
    if (status < 0) pt_fatal("%s", t.error);
    if (status > 0 && !a->quiet) report_skip(m.step, m.skipped_steps);
    double peak = (double)pt_mem_peak(), zero = 0.0;
    m.n_stages = 1, m.bubble = &zero, m.peak_bytes = &peak;
    m.mfu = m.tokens_per_s * fpt / gemm;
    spent += m.step_ms / 1e3;
    if (metrics) metrics_write_json(metrics, &m);
    if (!a->quiet)
      metrics_print_progress(stdout, &m, spec->log_every,
                             spent / (double)(t.step - start) * (double)(m.steps - m.step));
    int saved = 0; /* this step's periodic checkpoint is complete */
    if (periodic_due(spec, t.step)) {
      char dir[4200];
      checkpoint_step_dir(spec->train.ckpt_dir, t.step, dir, sizeof dir);
      saved = trainer_save(&t, dir, &a->src, err, sizeof err) == 0;
      if (saved) checkpoint_prune(spec->train.ckpt_dir, (int)spec->train.ckpt_keep);
      else warn_periodic_failed(dir, err, 1, t.step + spec->train.ckpt_every);
    }
    if (signals_pending() && t.step < spec->train.steps) {
      char dir[4200];
      preempt_dir(spec, a, t.step, dir, sizeof dir);
      if (!saved || !spec->train.ckpt_dir[0]) sequential_save(&t, dir, a); /* never redo it */
      if (spec->train.ckpt_dir[0]) checkpoint_prune(spec->train.ckpt_dir, (int)spec->train.ckpt_keep);
      preempt_report(signals_pending(), t.step, dir);
      break;
    }
  }
  if (a->save_dir) sequential_save(&t, a->save_dir, a);
  char gerr[1024];
  model_to_host(&t.model);
  if (a->gather_path &&
      checkpoint_write_sequential(&t.model, NULL, a->gather_path, t.step, gerr, sizeof gerr) != 0)
    pt_fatal("--gather: %s", gerr);
  if (a->dump_prefix) param_dump_write(&t.model, a->dump_prefix, 0);
  if (metrics && fclose(metrics) != 0) pt_fatal("closing the metrics file: %s", strerror(errno));
  trainer_free(&t);
}

/* Rank 0 prints, per stage (replica 0), the peak micro-batches in flight, peak bytes held and
 * the idle fraction (time not spent computing, over the steps' wall time). */
static void report_stages(pt_pipeline *p) {
  int world = p->P * p->dp, *counts = pt_calloc((size_t)world, sizeof(int));
  for (int i = 0; i < world; i++) counts[i] = 3;
  double idle = p->total_s > 0 ? 1.0 - p->compute_s / p->total_s : 0.0;
  double mine[3] = {p->peak_in_flight, (double)pt_mem_peak(), idle};
  double *all = pt_calloc(3 * (size_t)world, sizeof(double));
  comm_allgatherv_f64(comm_world(), mine, 3, all, counts);
  for (int s = 0; p->rank == 0 && s < p->P; s++) {
    char est[32], got[32];
    memory_format_size(p->plan.mem[s].total, est, sizeof est);
    memory_format_size((int64_t)all[3 * s + 1], got, sizeof got);
    printf("stage %d: peak %d micro-batches in flight, peak memory %s (planned %s), idle %.1f%%\n",
           s, (int)all[3 * s], got, est, 100.0 * all[3 * s + 2]);
  }
  free(counts);
  free(all);
}

/* Per-step figures that need every rank: each stage's idle fraction and peak memory (replica 0),
 * and MFU against the sgemm rate measured on each rank at start. */
typedef struct {
  int world, *counts;
  double *all, *bubble, *peak;
} step_stats;

static step_stats stats_new(const pt_pipeline *p) {
  step_stats st = {.world = p->P * p->dp};
  st.counts = pt_calloc((size_t)st.world, sizeof(int));
  for (int i = 0; i < st.world; i++) st.counts[i] = 2;
  st.all = pt_calloc(2 * (size_t)st.world, sizeof(double));
  st.bubble = pt_calloc((size_t)p->P, sizeof(double));
  st.peak = pt_calloc((size_t)p->P, sizeof(double));
  return st;
}

static void stats_fill(step_stats *st, pt_pipeline *p, pt_step_metrics *m, double gemm) {
  double idle = p->last_step_s > 0 ? 1.0 - p->step_compute_s / p->last_step_s : 0.0;
  double mine[2] = {idle < 0 ? 0 : idle, (double)pt_mem_peak()};
  pipeline_gather_root(p, mine, 2, st->all, "the end-of-step statistics");
  if (p->rank != 0) return; /* only rank 0 writes metrics */
  m->n_stages = p->P, m->bubble = st->bubble, m->peak_bytes = st->peak, m->bubble_mean = 0;
  for (int s = 0; s < p->P; s++) { /* replica 0's stage s is rank s */
    st->bubble[s] = st->all[2 * s], st->peak[s] = st->all[2 * s + 1];
    m->bubble_mean += st->bubble[s] / p->P;
  }
  m->mfu = m->tokens_per_s * model_flops_per_token(&p->model) / (gemm * st->world);
}

/* The largest pending signal over all ranks: gathered on rank 0 peer by peer (so a dead rank
 * is named), then broadcast. */
static uint64_t agree_signal(pt_pipeline *p) {
  int world = p->P * p->dp;
  double mine = signals_pending(), *all = pt_calloc((size_t)world, sizeof(double));
  pipeline_gather_root(p, &mine, 1, all, "the end-of-step signal check");
  uint64_t sig = 0;
  for (int r = 0; p->rank == 0 && r < world; r++) sig = all[r] > (double)sig ? (uint64_t)all[r] : sig;
  watchdog_arm("rank 0's end-of-step decision", 0, p->step);
  comm_broadcast(comm_world(), &sig, sizeof sig, 0);
  watchdog_disarm();
  free(all);
  return sig;
}

static void stats_free(step_stats *st) {
  free(st->counts), free(st->all), free(st->bubble), free(st->peak);
}

/* pipeline_save of a save the run cannot do without: on failure every rank leaves with code 1,
 * each failing rank having said why. */
static void pipeline_save_or_exit(pt_pipeline *p, const char *dir, const cli_args *a) {
  char err[1024];
  if (pipeline_save(p, dir, &a->src, err, sizeof err) == 0) return;
  if (err[0]) fprintf(stderr, "pipetrain[rank %d]: error: checkpoint %s not written: %s\n", p->rank, dir, err);
  if (p->rank == 0)
    fprintf(stderr, "pipetrain: error: the run's final checkpoint %s could not be written (see "
            "above); earlier checkpoints are untouched\n", dir);
  comm_finalize();
  exit(PT_EXIT_FATAL);
}

static void run_pipeline(const pt_spec *spec, const cli_args *a) {
  pt_pipeline p;
  char err[1024] = "";
  watchdog_init((int)spec->pipeline.timeout_s, comm_rank(comm_world()));
  watchdog_arm("the other ranks to start", -1, 0);
  /* CPU runs bind before allocating (first touch puts memory near the cores); GPU runs once
   * the GPU is open, to bind near it */
  int gpu = device_wants_gpu(spec_device_names[spec->pipeline.device]);
  if (!gpu) place_rank(a, 1);
  if (pipeline_init(&p, spec, err, sizeof err) != 0 ||
      (a->load_path && pipeline_load(&p, a->load_path, err, sizeof err) != 0)) {
    if (err[0]) fprintf(stderr, "pipetrain: %s\n", err); /* one rank holds the message */
    fail_everywhere(1, "");
  }
  if (gpu) place_rank(a, 1);
  if (!a->quiet) fputs(g_placement, stdout);
  watchdog_disarm();
  int root = p.rank == 0;
  FILE *metrics = root ? open_metrics(a->metrics_path) : NULL;
  if (a->trace_path) {
    int64_t first, last;
    trace_parse_window(a->trace_steps, &first, &last);
    trace_init(&p.trace, first, last);
    p.trace.offset_s = trace_measure_offset(comm_world());
  }
  double gemm = gemm_measure_flops(512, 0.2), spent = 0;
  int64_t start = p.step;
  step_stats st = stats_new(&p);
  if (root && !a->quiet)
    printf("pipetrain: %s: %d layers on %d stages x %d replicas (%s, %s), %lld steps\n",
           spec->path, p.model.n_layers, p.P, p.dp, p.plan.method, p.sched.type->name,
           (long long)spec->train.steps);
  while (p.step < spec->train.steps) {
    pt_step_metrics m;
    int status = pipeline_step(&p, &m); /* the same on every rank */
    if (status < 0) {
      if (root) fprintf(stderr, "pipetrain: error: %s\n", p.error);
      comm_finalize();
      exit(PT_EXIT_FATAL);
    }
    if (status > 0 && root && !a->quiet) report_skip(m.step, m.skipped_steps);
    int64_t every = spec->pipeline.tie_check_every;
    if ((every > 0 && m.step % every == 0) || m.step == spec->train.steps) pipeline_check_ties(&p);
    stats_fill(&st, &p, &m, gemm);
    spent += m.step_ms / 1e3;
    if (metrics) metrics_write_json(metrics, &m);
    if (root && !a->quiet)
      metrics_print_progress(stdout, &m, spec->log_every,
                             spent / (double)(p.step - start) * (double)(m.steps - m.step));
    int saved = 0; /* this step's periodic checkpoint is complete (the same on every rank) */
    if (periodic_due(spec, p.step)) {
      char dir[4200];
      checkpoint_step_dir(spec->train.ckpt_dir, p.step, dir, sizeof dir);
      saved = pipeline_save(&p, dir, &a->src, err, sizeof err) == 0;
      if (!saved) warn_periodic_failed(dir, err, root, p.step + spec->train.ckpt_every);
      else if (root) checkpoint_prune(spec->train.ckpt_dir, (int)spec->train.ckpt_keep);
    }
    uint64_t sig = agree_signal(&p); /* ranks may see the signal at different times */
    if (sig && p.step < spec->train.steps) {
      char dir[4200];
      preempt_dir(spec, a, p.step, dir, sizeof dir);
      /* a second save of a complete checkpoint would only put it at risk */
      if (!saved || !spec->train.ckpt_dir[0]) pipeline_save_or_exit(&p, dir, a);
      if (root && spec->train.ckpt_dir[0])
        checkpoint_prune(spec->train.ckpt_dir, (int)spec->train.ckpt_keep);
      if (root) preempt_report((int)sig, p.step, dir);
      break;
    }
  }
  if (a->save_dir) pipeline_save_or_exit(&p, a->save_dir, a);
  if (a->gather_path) pipeline_gather(&p, a->gather_path);
  watchdog_arm("the end-of-run exchange", -1, p.step);
  if (a->trace_path)
    trace_write(&p.trace, comm_world(), p.P, spec->pipeline.schedule,
                (int)spec->train.micro_batches, a->trace_path);
  stats_free(&st);
  watchdog_disarm();
  if (!a->quiet) report_stages(&p);
  model_to_host(&p.model);
  if (a->dump_prefix) param_dump_write(&p.model, a->dump_prefix, p.rank);
  if (metrics && fclose(metrics) != 0) pt_fatal("closing the metrics file: %s", strerror(errno));
  pipeline_free(&p);
}

/* Where the run will write (checkpoints, --gather) must be writable before it trains for hours:
 * one line from the lowest rank that cannot, then every rank exits with code 2. */
static void check_output_dirs(const pt_spec *s, const cli_args *a, int launched) {
  char err[1024] = "";
  int bad = s->train.ckpt_dir[0] && checkpoint_check_writable(s->train.ckpt_dir, 0,
                                                              "train.checkpoint.dir", err, sizeof err);
  bad = bad || (a->save_dir && checkpoint_check_writable(a->save_dir, 0, "--save", err, sizeof err));
  bad = bad || (a->gather_path &&
                checkpoint_check_writable(a->gather_path, 1, "--gather", err, sizeof err));
  int first_bad = launched ? comm_first_failed(comm_world(), bad) : (bad ? 0 : -1);
  if (first_bad < 0) return;
  if (first_bad == (launched ? comm_rank(comm_world()) : 0)) fprintf(stderr, "pipetrain: %s\n", err);
  fflush(stderr);
  if (launched) comm_finalize();
  exit(PT_EXIT_INPUT);
}

int main(int argc, char **argv) {
  cli_args a;
  parse_args(argc, argv, &a);
  int launched = comm_launched();
  if (launched) comm_init(&argc, &argv);
  signals_install(); /* after MPI, which may install handlers of its own */
  char *spec_text = read_spec_text(a.spec_path);
  a.src = (pt_spec_source){.text = spec_text, .origin = a.spec_path, .overrides = a.overrides,
                           .n_overrides = a.n_overrides};
  pt_spec spec;
  spec_errors e = {0};
  const pt_schedule_type *sched_type = NULL;
  if (spec_load(a.spec_path, a.overrides, a.n_overrides, &spec, &e) != 0 ||
      !(sched_type = schedule_from_spec(&spec.pipeline, &e)))
    fail_everywhere(launched, e.msg);
  if (launched) check_same_spec(&spec);
  int world = launched ? comm_size(comm_world()) : 1, root = !launched || comm_rank(comm_world()) == 0;
  int64_t procs = spec.pipeline.stages * spec.pipeline.data_parallel;
  if (a.plan || a.print_schedule) {
    if (root && a.plan) print_plan(&spec, a.json);
    if (root && a.print_schedule) print_schedule(&spec, a.svg_path, a.actions_format);
  } else if (a.sequential || (procs == 1 && world == 1)) {
    if (world > 1) {
      char msg[256];
      snprintf(msg, sizeof msg, "--sequential runs in one process but this job has %d; start it "
               "without mpirun (or with -np 1)", world);
      fail_everywhere(launched, msg);
    }
    check_output_dirs(&spec, &a, launched);
    run_sequential(&spec, &a);
  } else if (!launched) {
    refuse_unsupported(&spec, sched_type, launched);
    pt_fail_input("%s: pipeline.stages (%lld) x pipeline.data_parallel (%lld) = %lld processes: "
                  "start it with mpirun -np %lld, or add --sequential (same results, one process)",
                  spec.path, (long long)spec.pipeline.stages, (long long)spec.pipeline.data_parallel,
                  (long long)procs, (long long)procs);
  } else {
    refuse_unsupported(&spec, sched_type, launched);
    check_output_dirs(&spec, &a, launched);
    run_pipeline(&spec, &a);
  }
  spec_free(&spec);
  free(spec_text);
  if (launched) comm_finalize();
  return 0;
}
