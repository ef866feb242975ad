/* pipe_train: trains a model described by a YAML layer spec.
 *   pipe_train SPEC [--sequential] [--set KEY=VALUE ...] [--metrics FILE] [--quiet]
 * Exit codes: 0 success, 2 bad input (spec, data, command line), 1 other failures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/file.h"
#include "core/signals.h"
#include "device/gemm_rate.h"
#include "device/placement.h"
#include "engine/auto_plan.h"
#include "engine/run.h"
#include "kernels/cpu/blas_kernel.h"
#include "launcher/self_launch.h"
#include "observe/trace.h"
#include "partition/plan.h"
#include <cjson/cJSON.h>
#include "schedule/schedule_sim.h"
#include "schedule/schedule_svg.h"
#include "spec/spec.h"

#define MAX_OVERRIDES 256

/* --print-schedule --format: text for people, or a schedule file (ours, torch's CSV) */
enum { FORMAT_TEXT, FORMAT_ACTIONS, FORMAT_TORCH, FORMAT_TORCH_COMMS, FORMAT_KINDS };
static const char *const FORMAT_NAMES[FORMAT_KINDS] = {"text", "actions", "torch", "torch-comms"};

typedef struct {
  const char *spec_path;
  const char *overrides[MAX_OVERRIDES];
  int n_overrides;
  int plan, json, print_schedule;
  const char *svg_path;
  int format; /* --format: FORMAT_TEXT, or the schedule as a file (print_schedule) */
  auto_plan_options auto_opts; /* --from-trace, --layer-times */
  int times_given;             /* either was given: --plan predicts the step */
  int nproc;                   /* --nproc N: ranks to start without mpirun; 0: the spec's */
  pt_run_options run;
} cli_args;

static void usage(FILE *f) {
  fprintf(f,
          "usage: pipe_train SPEC.yaml [options]\n"
          "  --sequential        run every layer in this one process (same results as the\n"
          "                      pipelined run of the same spec)\n"
          "  --nproc N           started without mpirun: start N ranks on this node (default:\n"
          "                      stages x data_parallel; with data_parallel: auto, N / stages\n"
          "                      replicas). Under mpirun or srun the launcher decides\n"
          "  --set KEY=VALUE     override a spec value, e.g. --set train.steps=50 (repeatable)\n"
          "  --metrics FILE      write one JSON object per step to FILE\n"
          "  --tensorboard DIR   write TensorBoard events (scalars per step, spec, plan) to DIR\n"
          "  --quiet             no per-step lines on stdout\n"
          "  --verbose           each rank's start-up line (device, binding), not collapsed\n"
          "  --bind auto|none    bind each rank's threads to the cores nearest its GPU, or\n"
          "                      spread over cores and NUMA nodes (auto, the default); none\n"
          "                      keeps the binding it started with\n"
          "  --plan [--json]     print the stage plan (layers, memory, time per stage) and exit;\n"
          "                      with `auto` in the spec also the planner's choice and runners-up\n"
          "  --from-trace FILE   plan `auto` (and re-balance the split) from the layer times an\n"
          "                      earlier run's --trace FILE measured\n"
          "  --layer-times measure|flops|flops:GFLOPS\n"
          "                      what `auto` plans from without a trace: times measured at\n"
          "                      start-up and cached (measure, the default) or FLOP estimates\n"
          "                      (at the measured GEMM rate, or at GFLOPS given)\n"
          "  --print-schedule    print every stage's action list for one step and exit\n"
          "                      (--svg FILE also draws it as a picture; --format actions\n"
          "                      prints it as a schedule file for pipeline.schedule_file,\n"
          "                      --format torch as torch.distributed.pipelining's CSV for its\n"
          "                      _load_csv, torch-comms with its sends and receives)\n"
          "  --trace FILE        write a Chrome trace (Perfetto, chrome://tracing) of the run\n"
          "  --trace-steps A:B   only steps A..B in the trace (default: all)\n"
          "  --load CKPT         start from a checkpoint (written under any layout) at its step\n"
          "  --save DIR          write a checkpoint to DIR at the end of the run\n"
          "  --gather FILE       at the end, write the whole model to one safetensors FILE\n"
          "  --gather-hf DIR     at the end, write the whole model as a Hugging Face transformers\n"
          "                      directory (GPT-2 or Llama layer order; docs/checkpoint.md)\n"
          "  --dump-params PRE   after training, each rank writes its parameters to PRE.<rank>.bin\n"
          "  --help, --version\n");
}

static const char *option_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) pt_fail_input("%s needs a value; see pipe_train --help", argv[*i]);
  return argv[++*i];
}

static void parse_args(int argc, char **argv, cli_args *a) {
  memset(a, 0, sizeof *a);
  a->run.bind = PT_BIND_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(s, "--version")) {
      printf("pipetrain 0.1.0\n");
      exit(0);
    } else if (!strcmp(s, "--sequential")) {
      a->run.sequential = 1;
    } else if (!strcmp(s, "--nproc")) {
      const char *v = option_value(argc, argv, &i);
      char *end;
      long n = strtol(v, &end, 10);
      if (*end || end == v || n < 1 || n > 4096)
        pt_fail_input("--nproc '%s': expected a number of ranks from 1 to 4096", v);
      a->nproc = (int)n;
    } else if (!strcmp(s, "--verbose")) {
      a->run.verbose = 1;
    } else if (!strcmp(s, "--quiet")) {
      a->run.quiet = 1;
    } else if (!strcmp(s, "--plan")) {
      a->plan = 1;
    } else if (!strcmp(s, "--print-schedule")) {
      a->print_schedule = 1;
    } else if (!strcmp(s, "--bind")) {
      const char *v = option_value(argc, argv, &i);
      if (strcmp(v, "auto") && strcmp(v, "none"))
        pt_fail_input("--bind '%s': expected auto or none", v);
      a->run.bind = !strcmp(v, "auto") ? PT_BIND_AUTO : PT_BIND_NONE;
    } else if (!strcmp(s, "--from-trace")) {
      a->auto_opts.from_trace = option_value(argc, argv, &i);
      a->times_given = 1;
    } else if (!strcmp(s, "--layer-times")) {
      const char *v = option_value(argc, argv, &i);
      char *end = NULL;
      double rate = !strncmp(v, "flops:", 6) ? strtod(v + 6, &end) : 0;
      if (strcmp(v, "measure") && strcmp(v, "flops") && !(rate > 0 && isfinite(rate) && !*end))
        pt_fail_input("--layer-times '%s': expected measure, flops or flops:GFLOPS (a rate > 0)",
                      v);
      a->auto_opts.times = !strncmp(v, "flops", 5) ? AUTO_TIMES_FLOPS : AUTO_TIMES_MEASURE;
      a->auto_opts.gflops = rate;
      a->times_given = 1;
    } else if (!strcmp(s, "--json")) {
      a->json = 1;
    } else if (!strcmp(s, "--metrics")) {
      a->run.metrics_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--tensorboard")) {
      a->run.tensorboard_dir = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--save")) {
      a->run.save_dir = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--trace")) {
      a->run.trace_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--trace-steps")) {
      a->run.trace_steps = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--format")) {
      const char *v = option_value(argc, argv, &i);
      a->format = FORMAT_TEXT;
      while (a->format < FORMAT_KINDS && strcmp(v, FORMAT_NAMES[a->format])) a->format++;
      if (a->format == FORMAT_KINDS)
        pt_fail_input("--format '%s': expected text, actions, torch or torch-comms", v);
    } else if (!strcmp(s, "--svg")) {
      a->svg_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--gather-hf")) {
      a->run.gather_hf_dir = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--gather")) {
      a->run.gather_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--load")) {
      a->run.load_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--dump-params")) {
      a->run.dump_prefix = option_value(argc, argv, &i);
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
  if (a->nproc && a->run.sequential)
    pt_fail_input("--nproc starts ranks for a pipelined run; --sequential runs in one process");
  if (a->svg_path && !a->print_schedule) pt_fail_input("--svg goes with --print-schedule");
  if (a->format && !a->print_schedule) pt_fail_input("--format goes with --print-schedule");
  int64_t first, last;
  if (trace_parse_window(a->run.trace_steps, &first, &last) != 0)
    pt_fail_input("--trace-steps '%s': expected A:B with 1 <= A <= B, e.g. 3:5", a->run.trace_steps);
  if (a->run.trace_steps && !a->run.trace_path) pt_fail_input("--trace-steps goes with --trace FILE");
  if (!a->spec_path)
    pt_fail_input("no spec file given; try: pipe_train examples/default.yaml (or --help)");
}

/* The spec's text, kept in checkpoints so they can be converted and resumed without it. Empty
 * when it is no regular file or over the spec limit: spec_load then says what is wrong. */
static char *read_spec_text(const char *path) {
  const char *why;
  int fd = pt_open_regular_file(path, &why);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    return pt_strdup("");
  }
  size_t cap = 16u << 20;
  char *buf = malloc(cap + 2);
  if (!buf) pt_fatal("out of memory reading %s", path);
  size_t len = fread(buf, 1, cap + 1, f); /* one byte more than spec_load takes tells it is too big */
  fclose(f);
  if (len > cap) len = 0;
  buf[len] = '\0';
  return buf;
}

/* A bad-input error every rank hits alike: rank 0 prints it, all ranks leave with code 2. */
static void fail_everywhere(int launched, const char *msg) {
  run_exit(PT_EXIT_INPUT, !launched || comm_rank(comm_world()) == 0 ? msg : "");
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

/* What `auto` chose, as --set values: the last n_pinned of the overrides. */
typedef struct {
  pt_auto_result search; /* n == 0: nothing was searched */
  const char *const *pinned;
  int n_pinned;
  int predicted;         /* step_s, bubble and source are set */
  double step_s, bubble;
  char source[320];
} auto_choice;

static void print_auto(const auto_choice *ac) {
  if (ac->predicted)
    printf("simulated step: %.2f ms, bubble %.1f%% (layer times %s)\n", 1e3 * ac->step_s,
           100 * ac->bubble, ac->source);
  if (ac->search.n > 0) auto_print(stdout, &ac->search, 5);
  if (ac->n_pinned == 0) return;
  printf("to pin this plan:");
  for (int i = 0; i < ac->n_pinned; i++) printf(" --set '%s'", ac->pinned[i]);
  printf("\n");
}

static void print_plan_json(const pt_plan *p, const pt_model *m, double gflops,
                            const auto_choice *ac) {
  cJSON *o = plan_json(p, m, gflops);
  if (ac->search.n > 0) cJSON_AddItemToObject(o, "auto", auto_json(&ac->search));
  if (ac->predicted) {
    cJSON_AddNumberToObject(o, "simulated_step_ms", 1e3 * ac->step_s);
    cJSON_AddNumberToObject(o, "simulated_bubble", ac->bubble);
    cJSON_AddStringToObject(o, "layer_times", ac->source);
  }
  cJSON *pins = cJSON_AddArrayToObject(o, "pinned");
  for (int i = 0; i < ac->n_pinned; i++) cJSON_AddItemToArray(pins, cJSON_CreateString(ac->pinned[i]));
  char *text = cJSON_Print(o);
  if (!text) pt_fatal("out of memory printing the plan");
  printf("%s\n", text);
  free(text);
  cJSON_Delete(o);
}

/* --plan: configure (no allocation), plan, print, exit. One rank, no MPI. */
static int print_plan(const pt_spec *spec, int json, const auto_choice *ac) {
  pt_model m;
  pt_plan p;
  spec_errors e = {0};
  if (model_configure(&m, spec, &e) != 0 || plan_build(&p, &m, &e) != 0) pt_fail_input("%s", e.msg);
  double gflops = gemm_measure_flops(512, 0.2) / 1e9;
  if (json) print_plan_json(&p, &m, gflops, ac);
  else plan_print(stdout, &p, &m, gflops), print_auto(ac);
  plan_free(&p);
  model_free(&m);
  return 0;
}

static void print_schedule(const pt_spec *spec, const char *svg, int format) {
  pt_schedule sch;
  char err[1024];
  if (schedule_build_spec(&sch, spec, err, sizeof err) != 0) pt_fail_input("%s", err);
  if (format == FORMAT_ACTIONS) schedule_write_actions(stdout, &sch);
  else if (format == FORMAT_TEXT) schedule_print(stdout, &sch);
  else schedule_write_torch(stdout, &sch, format == FORMAT_TORCH_COMMS);
  if (schedule_validate(&sch, err, sizeof err) != 0) pt_fatal("schedule is invalid: %s", err);
  double step = 0; /* a comment line, so the actions format still reads back */
  double bubble = schedule_time(&sch, &schedule_unit_costs, 1, &step, NULL, err, sizeof err);
  if (bubble < 0) pt_fatal("schedule cannot run: %s", err);
  /* torch's loader reads every line as a rank: the comment goes to stderr there */
  fprintf(format >= FORMAT_TORCH ? stderr : stdout, "# simulated at unit costs (F = I = W = 1, "
          "B = 2): step %g, bubble %.2f%%\n", step, 100.0 * bubble);
  if (svg && schedule_write_svg(&sch, svg, err, sizeof err) != 0) pt_fail_input("%s", err);
  schedule_free(&sch);
}

/* A training run's one line on what `auto` chose. */
static void print_chosen(const auto_choice *ac) {
  printf("pipetrain: auto:");
  for (int i = 0; i < ac->n_pinned; i++) printf(" %s", ac->pinned[i]);
  if (ac->search.n > 0)
    printf(" (simulated step %.1f ms; layer times %s)", 1e3 * ac->search.c[0].step_s,
           ac->search.times_source);
  printf("\n");
}

/* `auto` in the spec (or --from-trace): the planner's choice appended to the overrides as --set
 * values and the spec read again with them, so what ran is what checkpoints record. */
static void resolve_auto(cli_args *a, pt_spec *spec, int launched, auto_choice *ac) {
  static char over[16][AUTO_OVERRIDE_MAX];
  memset(ac, 0, sizeof *ac);
  a->auto_opts.launched = launched;
  if (!auto_plan_needed(spec, &a->auto_opts)) return;
  char err[2048];
  int root = !launched || comm_rank(comm_world()) == 0;
  int n = auto_plan_resolve(spec, &a->auto_opts, over, 16, root ? &ac->search : NULL, err,
                            sizeof err);
  if (n < 0) fail_everywhere(launched, err);
  if (a->n_overrides + n > MAX_OVERRIDES) fail_everywhere(launched, "too many --set options");
  ac->pinned = a->overrides + a->n_overrides, ac->n_pinned = n;
  for (int i = 0; i < n; i++) a->overrides[a->n_overrides++] = over[i];
  if (root && !a->plan && !a->print_schedule && !a->run.quiet) print_chosen(ac);
  a->run.src.n_overrides = a->n_overrides;
  spec_free(spec);
  spec_errors e = {0};
  if (spec_load(a->spec_path, a->overrides, a->n_overrides, spec, &e) != 0)
    fail_everywhere(launched, e.msg);
}

/* --plan with `auto` or with --layer-times / --from-trace: the plan's simulated step. */
static void predict(const cli_args *a, const pt_spec *spec, auto_choice *ac) {
  if (!a->times_given && ac->n_pinned == 0) return;
  ac->predicted = 1;
  if (ac->search.n > 0) { /* the search simulated the chosen plan already, with these times */
    ac->step_s = ac->search.c[0].step_s, ac->bubble = ac->search.c[0].bubble;
    snprintf(ac->source, sizeof ac->source, "%s", ac->search.times_source);
    return;
  }
  auto_plan_options o = a->auto_opts;
  o.launched = 0;
  char err[1024];
  if (auto_plan_predict(spec, &o, &ac->step_s, &ac->bubble, ac->source, sizeof ac->source, err,
                        sizeof err) != 0)
    pt_fail_input("%s", err);
}

/* The job's ranks: stages x data_parallel, or --nproc (which data_parallel: auto divides by the
 * stages, and which must match the spec otherwise and the launcher's count under one). */
static int64_t job_ranks(const cli_args *a, const pt_spec *spec, int dp_auto, int launched,
                         int world) {
  int64_t S = spec->pipeline.stages, procs = S * spec->pipeline.data_parallel;
  if (!a->nproc) return procs;
  char msg[4608] = "";
  if (launched && a->nproc != world)
    snprintf(msg, sizeof msg, "--nproc %d but the launcher started %d ranks; leave --nproc out "
             "under mpirun or srun", a->nproc, world);
  else if (dp_auto && a->nproc % S != 0)
    snprintf(msg, sizeof msg, "--nproc %d: pipeline.data_parallel: auto divides the ranks by "
             "pipeline.stages (%lld), which does not go evenly; give a multiple of %lld",
             a->nproc, (long long)S, (long long)S);
  else if (!dp_auto && a->nproc != procs)
    snprintf(msg, sizeof msg, "--nproc %d: %s needs pipeline.stages (%lld) x "
             "pipeline.data_parallel (%lld) = %lld ranks; give --nproc %lld, or set "
             "pipeline.data_parallel: auto", a->nproc, spec->path, (long long)S,
             (long long)spec->pipeline.data_parallel, (long long)procs, (long long)procs);
  if (msg[0]) fail_everywhere(launched, msg);
  return a->nproc;
}

/* Layer types of the program's own, registered before the spec is read. pipe_train has none; a
 * program that is pipe_train plus its own layers (bench/bench_schedules.c, docs/layers.md)
 * compiles this file with one more source that defines it. */
__attribute__((weak)) void pipe_train_register_layers(void) {}

int main(int argc, char **argv) {
  blas_kernel_ensure(argv); /* may restart this process: before MPI and any thread */
  pipe_train_register_layers();
  cli_args a;
  parse_args(argc, argv, &a);
  int launched = comm_launched();
  if (launched) comm_init(&argc, &argv);
  signals_install(); /* after MPI, which may install handlers of its own */
  self_launch_install_signals();
  char *spec_text = read_spec_text(a.spec_path);
  a.run.src = (pt_spec_source){.text = spec_text, .origin = a.spec_path,
                               .overrides = a.overrides, .n_overrides = a.n_overrides};
  pt_spec spec;
  spec_errors e = {0};
  /* a spec may fail on one rank alone (mpirun's MPMD form, a file that differs on one host) */
  run_exit_first_failed(launched, spec_load(a.spec_path, a.overrides, a.n_overrides, &spec, &e) != 0,
                        e.msg);
  if (launched) check_same_spec(&spec);
  int dp_auto = spec.pipeline.data_parallel == SPEC_AUTO;
  auto_choice ac;
  resolve_auto(&a, &spec, launched, &ac);
  if (!schedule_from_spec(&spec.pipeline, &e)) fail_everywhere(launched, e.msg);
  int world = launched ? comm_size(comm_world()) : 1, root = !launched || comm_rank(comm_world()) == 0;
  int64_t procs = job_ranks(&a, &spec, dp_auto, launched, world);
  if (a.plan || a.print_schedule) {
    if (root && a.plan) predict(&a, &spec, &ac), print_plan(&spec, a.json, &ac);
    if (root && a.print_schedule) print_schedule(&spec, a.svg_path, a.format);
  } else if (a.run.sequential || (procs == 1 && world == 1)) {
    if (world > 1) {
      char msg[256];
      snprintf(msg, sizeof msg, "--sequential runs in one process but this job has %d; start it "
               "without mpirun (or with -np 1)", world);
      fail_everywhere(launched, msg);
    }
    a.run.sequential = 1;
    run_train(&spec, &a.run);
  } else if (!launched) {
    char what[4352];
    long long S = spec.pipeline.stages, D = procs / spec.pipeline.stages;
    snprintf(what, sizeof what, "%s: %lld stage%s x %lld replica%s", spec.path, S,
             S == 1 ? "" : "s", D, D == 1 ? "" : "s");
    self_launch((int)procs, what, spec.pipeline.timeout_s, argc, argv);
  } else {
    run_train(&spec, &a.run);
  }
  auto_result_free(&ac.search);
  spec_free(&spec);
  free(spec_text);
  if (launched) comm_finalize();
  return 0;
}
