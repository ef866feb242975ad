#include "engine/run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/hf.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/signals.h"
#include "data/data.h"
#include "device/gemm_rate.h"
#include "device/placement.h"
#include "engine/start_lines.h"
#include "engine/engine.h"
#include "kernels/cpu/blas_kernel.h"
#include "kernels/kernels.h"
#include "model/param_dump.h"
#include "observe/tensorboard.h"
#include "observe/watchdog.h"
#include "partition/plan.h"

/* How long a leaving rank waits for the others (engine/run.h run_exit): they come at once by
 * contract; seconds of slack for a loaded machine. */
#define RUN_EXIT_WAIT_S 30.0

typedef struct {
  const pt_spec *spec;
  const pt_run_options *o;
  pt_engine e;
  int launched, root;  /* under mpirun; this process reports (rank 0) */
  FILE *metrics;       /* rank 0's --metrics file */
  pt_tensorboard tb;   /* rank 0's --tensorboard events file (tb.f NULL without) */
  double gemm, fpt;    /* sgemm FLOP/s of one rank, model FLOPs per token: for MFU */
  double spent;        /* seconds in steps so far, for the ETA */
  int64_t start;       /* the step this run started at */
  char placement[PT_START_LINE_BYTES]; /* what computes and where this rank is bound */
} run_state;

void run_exit(int code, const char *msg) {
  if (msg[0])
    fprintf(stderr, code == PT_EXIT_INPUT ? "pipetrain: %s\n" : "pipetrain: error: %s\n", msg);
  fflush(stdout);
  fflush(stderr);
  signals_restore_default(); /* leaving on purpose: mpirun's SIGTERM adds no line */
  /* the message is out before any rank's exit ends the job; a rank that broke the contract
   * (never came) costs at most the wait, never a hang: the others leave without finalizing */
  if (comm_launched() && comm_barrier_within(comm_world(), RUN_EXIT_WAIT_S) == 0)
    comm_finalize(); /* a clean end: mpirun then reports only the code */
  exit(code);
}

void run_exit_first_failed(int launched, int failed, const char *msg) {
  int first = launched ? comm_first_failed(comm_world(), failed) : (failed ? 0 : -1);
  if (first < 0) return;
  run_exit(PT_EXIT_INPUT, first == (launched ? comm_rank(comm_world()) : 0) ? msg : "");
}

/* Ends the run on a failure. The sequential engine's lines go through core/error.h as they
 * always have (under mpirun -np 1 they name rank 0). */
static void run_fail(const run_state *r, int code, const char *msg) {
  if (r->o->sequential && code == PT_EXIT_INPUT) pt_fail_input("%s", msg);
  if (r->o->sequential) pt_fatal("%s", msg);
  run_exit(code, msg);
}

/* Where the run will write (checkpoints, --gather, the trace, metrics, --dump-params) must be
 * writable before it trains for hours, and the checkpoint directories this job's alone (rank 0
 * locks them): one line from the lowest rank that cannot, then every rank exits with code 2. */
static void check_outputs(const run_state *r) {
  const pt_spec *s = r->spec;
  const pt_run_options *o = r->o;
  char err[1024] = "", dump[4200] = "";
  int rank = r->launched ? comm_rank(comm_world()) : 0;
  if (o->dump_prefix) snprintf(dump, sizeof dump, "%s.%d.bin", o->dump_prefix, rank);
  int bad = s->train.ckpt_dir[0] && checkpoint_check_writable(s->train.ckpt_dir, 0,
                                                              "train.checkpoint.dir", err, sizeof err);
  bad = bad || (o->save_dir && checkpoint_check_writable(o->save_dir, 0, "--save", err, sizeof err));
  bad = bad || (o->tensorboard_dir &&
                checkpoint_check_writable(o->tensorboard_dir, 0, "--tensorboard", err, sizeof err));
  bad = bad || (o->gather_path &&
                checkpoint_check_writable(o->gather_path, 1, "--gather", err, sizeof err));
  bad = bad || (o->gather_hf_dir &&
                (checkpoint_check_writable(o->gather_hf_dir, 0, "--gather-hf", err, sizeof err) ||
                 hf_check_spec(s, err, sizeof err)));
  bad = bad || (o->trace_path && !o->sequential &&
                checkpoint_check_writable(o->trace_path, 1, "--trace", err, sizeof err));
  bad = bad || (o->metrics_path &&
                checkpoint_check_writable(o->metrics_path, 1, "--metrics", err, sizeof err));
  bad = bad || (o->dump_prefix && checkpoint_check_writable(dump, 1, "--dump-params", err, sizeof err));
  if (rank == 0 && !bad) {
    bad = s->train.ckpt_dir[0] &&
          checkpoint_lock_dir(s->train.ckpt_dir, "train.checkpoint.dir", err, sizeof err) != 0;
    bad = bad || (o->save_dir && checkpoint_lock_dir(o->save_dir, "--save", err, sizeof err) != 0);
  }
  run_exit_first_failed(r->launched, bad, err);
}

/* Binds this rank's threads (--bind; device/placement.h), keeps the line saying where it runs,
 * and sizes the BLAS pool to its cores: one pool per rank over all cores would oversubscribe
 * them. An explicit OPENBLAS_NUM_THREADS wins (benchmarks pin one thread per rank with it).
 * Collective over the node (the ranks share their GPUs' bus ids). A placement that fails costs
 * speed, not the run: a warning. */
static void place_rank(run_state *r) {
  pt_device *d = device_current();
  int n = r->launched ? comm_local_size() : 1, any_gpu = 0;
  char mine[32] = "", (*ids)[32] = pt_calloc((size_t)n, 32);
  snprintf(mine, sizeof mine, "%s", device_pci_bus_id(d));
  comm_node_allgather(mine, sizeof mine, ids);
  const char **list = pt_calloc((size_t)n, sizeof(char *));
  for (int i = 0; i < n; i++) any_gpu |= (list[i] = ids[i][0] ? ids[i] : NULL) != NULL;
  placement_request rq = {r->launched ? comm_local_rank() : 0, n, r->o->bind, device_gpu_id(d),
                          any_gpu ? list : NULL};
  placement_result out;
  char err[512];
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = (int)(cores / n) > 0 ? (int)(cores / n) : 1;
  int placed = placement_apply(&rq, &out, err, sizeof err) == 0;
  if (placed) threads = out.threads;
  else pt_warn("placement: %s; running unbound", err);
  if (!getenv("OPENBLAS_NUM_THREADS")) kernels_cpu_set_threads(threads);
  if (placed) { /* what computes (for cpu: the BLAS kernel and its threads), then where */
    char prec[80] = "", what[256]; /* train.precision, when not the default; the CPU's products */
    spec_precision p = r->spec->train.precision;
    const char *products = device_cpu_bf16_products(r->spec->pipeline.device, p);
    if (p != SPEC_PRECISION_FP32)
      snprintf(prec, sizeof prec, ", %s%s%s", spec_precision_names[p],
               products ? " products " : "", products ? products : "");
    device_describe(d, what, sizeof what);
    snprintf(r->placement, sizeof r->placement, "%s%s; %s", what, prec, out.text);
  }
  free(ids);
  free(list);
}

/* Every rank resolves pipeline.device alike (auto: GPUs where its machine has them, or
 * PIPETRAIN_AUTO_DEVICE): a rank on the CPU beside ranks on GPUs binds, opens and connects in
 * another order, and the job would wait for the watchdog. Collective; every rank reaches the
 * same verdict, rank 0 says it. */
static void check_same_device(const run_state *r) {
  if (!r->launched) return;
  const pt_spec *s = r->spec;
  int world = comm_size(comm_world()), odd = -1, *all = pt_calloc((size_t)world, sizeof(int));
  comm_allgather_int(comm_world(), (int)device_resolve(s->pipeline.device), all);
  for (int q = 1; q < world && odd < 0; q++)
    if (all[q] != all[0]) odd = q;
  char err[4400] = "";
  if (odd >= 0)
    snprintf(err, sizeof err, "%s: pipeline.device %s resolves to %s on rank 0 (%s) but to %s "
             "on rank %d (%s): a machine without GPUs, or another PIPETRAIN_AUTO_DEVICE; name "
             "the device (pipeline.device: cpu or gpu)", s->path,
             spec_device_names[s->pipeline.device], spec_device_names[all[0]],
             comm_host_name(0), spec_device_names[all[odd]], odd, comm_host_name(odd));
  free(all);
  run_exit_first_failed(r->launched, odd >= 0, err);
}

/* The engine, from --load on where given. CPU runs bind before allocating (first touch puts
 * memory near the cores); GPU runs once the GPU is open, to bind near it (binds_after_open). */
static void open_engine(run_state *r) {
  const pt_run_options *o = r->o;
  char err[1024] = "";
  check_same_device(r);
  int after = device_kind(r->spec->pipeline.device)->is.binds_after_open;
  if (!after) place_rank(r);
  int failed = (o->sequential ? engine_open_sequential(&r->e, r->spec, err, sizeof err)
                              : engine_open_pipelined(&r->e, r->spec, o->trace_path,
                                                      o->trace_steps, err, sizeof err)) != 0;
  if (!failed && after) place_rank(r);
  failed = failed || (o->load_path && r->e.ops->load(&r->e, o->load_path, err, sizeof err) != 0);
  if (failed) run_fail(r, PT_EXIT_INPUT, err); /* one rank holds the message */
}

/* The plan as `pipe_train --plan` prints it, for --tensorboard's text; NULL if it cannot be
 * built (then no text). */
static char *plan_text(run_state *r) {
  pt_plan p;
  spec_errors se = {0};
  if (plan_build(&p, &r->e.part->model, &se) != 0) return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f) plan_print(f, &p, &r->e.part->model, r->gemm / 1e9), fclose(f);
  plan_free(&p);
  return text;
}

/* Rank 0's --tensorboard file, continued after the step this run starts at; the spec and the
 * plan as texts at the run's first step (so a later resume from here drops them with the rest). */
static void open_tensorboard(run_state *r) {
  char err[4400] = "";
  if (checkpoint_make_dir(r->o->tensorboard_dir, err, sizeof err) != 0 ||
      tensorboard_open(&r->tb, r->o->tensorboard_dir, r->start, err, sizeof err) != 0)
    pt_fail_input("--tensorboard %s: %s", r->o->tensorboard_dir, err);
  if (r->o->src.text) tensorboard_text(&r->tb, r->start + 1, "spec", r->o->src.text);
  char *plan = plan_text(r);
  if (plan) tensorboard_text(&r->tb, r->start + 1, "plan", plan);
  free(plan);
}

static void run_start(run_state *r) {
  const pt_run_options *o = r->o;
  signals_defer_first(); /* a preemption from here on saves what the run has */
  /* a rank whose start-up hangs must not keep the others waiting forever; one process waits on
   * nobody (seconds 0: no watchdog) */
  watchdog_init(o->sequential ? 0 : (int)r->spec->pipeline.timeout_s,
                r->launched ? comm_rank(comm_world()) : 0);
  watchdog_arm("the other ranks to start", -1, 0);
  open_engine(r);
  if (!o->quiet) { /* the input checked: a bad one said its one line alone */
    blas_kernel_say_restart();
    start_lines_print(r->placement, r->launched, o->verbose, stdout);
  }
  watchdog_disarm();
  r->root = r->e.rank == 0;
  if (r->root && o->metrics_path && !(r->metrics = fopen(o->metrics_path, "w")))
    pt_fail_input("%s: cannot open the metrics file: %s", o->metrics_path, strerror(errno));
  if (r->root && !o->quiet) {
    char shape[512];
    r->e.ops->describe(&r->e, shape, sizeof shape);
    printf("pipetrain: %s: %s\n", r->spec->path, shape);
  }
  r->gemm = gemm_measure_flops(512, 0.2);
  r->fpt = model_flops_per_token(&r->e.part->model);
  r->start = r->e.part->step;
  if (r->root && o->tensorboard_dir) open_tensorboard(r);
}

/* A save the run cannot do without (--save, or after a signal): its failure is the run's, every
 * rank leaving with code 1, each failing rank having said why. */
static void save_or_exit(run_state *r, const char *dir) {
  char err[1024] = "", msg[5400];
  if (r->e.ops->save(&r->e, dir, &r->o->src, err, sizeof err) == 0) return;
  if (r->e.ranks == 1) {
    snprintf(msg, sizeof msg, "checkpoint %s not written: %s; earlier checkpoints are untouched",
             dir, err);
    run_fail(r, PT_EXIT_FATAL, msg);
  }
  if (err[0])
    fprintf(stderr, "pipetrain[rank %d]: error: checkpoint %s not written: %s\n", r->e.rank, dir,
            err);
  snprintf(msg, sizeof msg, "the run's final checkpoint %s could not be written (see above); "
           "earlier checkpoints are untouched", dir);
  run_exit(PT_EXIT_FATAL, r->root ? msg : "");
}

/* After step `step`, train.checkpoint's checkpoint when one is due; returns whether it is
 * complete (the same on every rank). One that could not be written (disk full, I/O error)
 * costs only itself: the training state is intact and the next interval tries again. */
static int save_periodic(run_state *r) {
  const spec_train *t = &r->spec->train;
  int64_t step = r->e.part->step;
  if (!t->ckpt_dir[0] || t->ckpt_every <= 0 || step % t->ckpt_every != 0) return 0;
  char dir[4200], err[1024] = "";
  checkpoint_step_dir(t->ckpt_dir, step, dir, sizeof dir);
  if (r->e.ops->save(&r->e, dir, &r->o->src, err, sizeof err) == 0) {
    if (r->root) checkpoint_prune(t->ckpt_dir, (int)t->ckpt_keep);
    return 1;
  }
  if (r->root)
    pt_warn("checkpoint %s not written%s%s; training goes on with its state intact, the next try "
            "is after step %lld, and earlier checkpoints are untouched", dir, err[0] ? ": " : "",
            err, (long long)(step + t->ckpt_every));
  else if (err[0])
    pt_warn("checkpoint %s not written: %s", dir, err);
  return 0;
}

/* A signal: the checkpoint goes to the periodic checkpoint directory's step-N if configured,
 * else --save DIR, else ./pipetrain-preempted; `saved`: this step's periodic one is complete. */
static void preempt(run_state *r, int sig, int saved) {
  const spec_train *t = &r->spec->train;
  int64_t step = r->e.part->step;
  char dir[4200];
  if (t->ckpt_dir[0]) checkpoint_step_dir(t->ckpt_dir, step, dir, sizeof dir);
  else snprintf(dir, sizeof dir, "%s", r->o->save_dir ? r->o->save_dir : "pipetrain-preempted");
  /* a second save of a complete checkpoint would only put it at risk */
  if (!saved || !t->ckpt_dir[0]) save_or_exit(r, dir);
  if (r->root && t->ckpt_dir[0]) checkpoint_prune(t->ckpt_dir, (int)t->ckpt_keep);
  if (!r->root) return;
  printf("\npipetrain: %s after step %lld: checkpoint written to %s; resume with --load %s\n",
         sig == SIGINT ? "interrupted" : "preempted", (long long)step, dir, dir);
  fflush(stdout);
}

/* Rank 0's record of a step: MFU against the sgemm rate measured on each rank, the metrics
 * line, the progress line. */
static void report_step(run_state *r, pt_step_metrics *m, int status) {
  if (!r->root) return;
  if (status > 0 && !r->o->quiet)
    printf("\npipetrain: step %lld: non-finite gradients, step skipped (%lld so far)\n",
           (long long)m->step, (long long)m->skipped_steps);
  m->mfu = m->tokens_per_s * r->fpt / (r->gemm * r->e.ranks);
  r->spent += m->step_ms / 1e3;
  if (r->metrics && metrics_write_json(r->metrics, m) != 0)
    pt_fatal("%s: cannot write the metrics file: %s", r->o->metrics_path, strerror(errno));
  if (r->tb.f) tensorboard_step(&r->tb, m);
  double eta = r->spent / (double)(m->step - r->start) * (double)(m->steps - m->step);
  if (!r->o->quiet) metrics_print_progress(stdout, m, r->spec->log_every, eta);
}

static void run_steps(run_state *r) {
  pt_engine *e = &r->e;
  while (e->part->step < r->spec->train.steps) {
    pt_step_metrics m;
    int status = e->ops->step(e, &m); /* the same on every rank */
    if (status < 0) run_fail(r, PT_EXIT_FATAL, r->root ? e->part->error : "");
    m.has_eval = data_eval_due(r->spec, e->part->step); /* the same on every rank */
    if (m.has_eval) m.eval_loss = e->ops->eval(e);
    report_step(r, &m, status);
    int saved = save_periodic(r);
    int sig = e->ops->agree_signal(e);
    if (sig && e->part->step < r->spec->train.steps) {
      preempt(r, sig, saved);
      break;
    }
  }
}

/* --gather-hf: the --gather file next to the directory, converted by rank 0, then removed. */
static void gather_hf(run_state *r) {
  pt_engine *e = &r->e;
  char tmp[4200], err[1024];
  char what[4400];
  snprintf(tmp, sizeof tmp, "%s.gather.safetensors", r->o->gather_hf_dir);
  /* a failure names the option and the directory, not only the intermediate file */
  snprintf(what, sizeof what, "--gather-hf %s (writing the whole model beside it first, as "
           "--gather does; a full disk: free space there or name a directory elsewhere)",
           r->o->gather_hf_dir);
  e->ops->gather(e, tmp, what);
  if (e->rank != 0) return;
  int rc = hf_export_sequential_file(r->spec, tmp, r->o->gather_hf_dir, err, sizeof err);
  remove(tmp);
  if (rc != 0) pt_fatal("--gather-hf: %s", err);
}

static void run_finish(run_state *r) {
  pt_engine *e = &r->e;
  const pt_run_options *o = r->o;
  if (o->save_dir) save_or_exit(r, o->save_dir);
  if (o->gather_path) e->ops->gather(e, o->gather_path, "--gather");
  if (o->gather_hf_dir) gather_hf(r);
  e->ops->finish(e, o->quiet);
  model_to_host(&e->part->model);
  if (o->dump_prefix) param_dump_write(&e->part->model, o->dump_prefix, e->rank);
  if (r->metrics && fclose(r->metrics) != 0)
    pt_fatal("closing the metrics file: %s", strerror(errno));
  if (tensorboard_close(&r->tb) != 0) pt_fatal("closing the TensorBoard events file");
  e->ops->free(e);
}

void run_train(const pt_spec *spec, const pt_run_options *o) {
  run_state r = {.spec = spec, .o = o, .launched = comm_launched()};
  check_outputs(&r);
  if (o->sequential && o->trace_path)
    pt_fail_input("--trace records a pipelined run: start it with mpirun");
  run_start(&r);
  run_steps(&r);
  run_finish(&r);
}
