/* spec/spec.h: the YAML model spec.
 *
 * Loading is two passes. spec_tree_parse() reads YAML (libyaml) into a tree of spec_node that
 * remembers where every node came from (file:line:col, or the --set argument); overrides are
 * applied to that tree; spec_load() then interprets the tree into typed settings (pt_spec) and
 * the expanded layer list. Layer arguments stay as nodes: each layer type reads its own with the
 * spec_get_* accessors, so its errors also point at the file, line and column.
 *
 * Errors never exit: they go into a spec_errors (first error wins, later ones are dropped) and
 * the caller decides (pipe_train prints the message and exits 2). Every accessor is a no-op
 * returning its default once an error is recorded, so interpretation code needs no error paths.
 *
 * Ownership: the tree owns all nodes and strings; pt_spec points into its tree and frees it in
 * spec_free(). Limits against hostile input: nesting depth SPEC_MAX_DEPTH, SPEC_MAX_NODES nodes,
 * scalars of at most SPEC_MAX_SCALAR bytes; anchors/aliases, tags and multiple documents are
 * rejected with an error.
 */
#ifndef PT_SPEC_H
#define PT_SPEC_H

#include <stdint.h>
#include <stdio.h>

#define SPEC_MAX_DEPTH 32
#define SPEC_MAX_NODES 100000
#define SPEC_MAX_SCALAR 4096
#define SPEC_MAX_LAYERS 100000
#define SPEC_NAME_MAX 64

typedef enum { SPEC_SCALAR, SPEC_MAP, SPEC_SEQ } spec_kind;

typedef struct spec_node spec_node;
struct spec_node {
  spec_kind kind;
  char *value;        /* scalar text (SPEC_SCALAR only), NUL-terminated */
  int quoted;         /* scalar was quoted in YAML ('...' or "..."): always a string */
  char *key;          /* key text when this node is the value of a map entry, else NULL */
  const char *origin; /* file path, or the text of the --set argument that made it */
  int line, col;      /* 1-based position of the value (0,0 for --set values) */
  int key_line, key_col; /* position of the key, for "unknown key" errors */
  int used;           /* set by the accessors; spec_check_unused() reports the rest */
  spec_node **items;  /* map values (each with ->key) or sequence items, in file order */
  int n_items;
  int cap_items;
  spec_node *parent;  /* enclosing map or sequence (NULL for the root): dotted paths in errors */
};

typedef struct {
  int failed;
  char msg[1024]; /* "FILE:LINE:COL: error: WHAT; FIX" of the first error */
} spec_errors;

/* Records an error at node (or at its key when at_key is nonzero) unless one is already set. */
void spec_error(spec_errors *e, const spec_node *n, int at_key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* --- Tree --------------------------------------------------------------------------------- */
/* Parses YAML text (len bytes) from origin (a path, used in messages). Returns the root mapping,
 * or NULL with an error recorded. */
spec_node *spec_tree_parse(const char *text, size_t len, const char *origin, spec_errors *e);
spec_node *spec_tree_parse_file(const char *path, spec_errors *e);
void spec_tree_free(spec_node *root);

/* Applies "a.b.c=VALUE": VALUE is parsed as a YAML flow value (scalar, [list] or {map}); missing
 * maps on the path are created; the replaced node is freed. Error if a path component is not a
 * map or the text has no '='. */
int spec_tree_override(spec_node *root, const char *assignment, spec_errors *e);

/* --- Accessors (mark the node used) ------------------------------------------------------- */
/* Map lookup; NULL if map is NULL, not a map, or has no such key. */
spec_node *spec_find(spec_node *map, const char *key);
/* Typed reads of map[key]. A missing key gives the default (or an error if required != 0).
 * A present value of the wrong type or outside [lo, hi] is an error naming the expected type
 * and range. */
/* A setting the planner chooses when the spec says `auto` (partition/auto.h resolves it before
 * anything reads the value): data_parallel and activation_checkpoint_interval hold SPEC_AUTO. */
#define SPEC_AUTO (-1)
/* spec_get_int that also takes the word auto, returned as SPEC_AUTO. */
int64_t spec_get_int_or_auto(spec_node *map, const char *key, int64_t def, int64_t lo, int64_t hi,
                             spec_errors *e);
int64_t spec_get_int(spec_node *map, const char *key, int required, int64_t def, int64_t lo,
                     int64_t hi, spec_errors *e);
double spec_get_num(spec_node *map, const char *key, int required, double def, double lo,
                    double hi, spec_errors *e);
int spec_get_bool(spec_node *map, const char *key, int def, spec_errors *e);
/* Copies a string value into out (size outsz); error if longer. Returns out. */
const char *spec_get_str(spec_node *map, const char *key, int required, const char *def,
                         char *out, size_t outsz, spec_errors *e);
/* Scalar conversions of one node (for sequence items). */
int64_t spec_node_int(spec_node *n, int64_t lo, int64_t hi, spec_errors *e);
double spec_node_num(spec_node *n, double lo, double hi, spec_errors *e);
/* A YAML null (~, null, or an empty value): "not given". */
int spec_node_is_null(const spec_node *n);
/* Requires n to be a map (SPEC_MAP), else records "expected a mapping". */
int spec_expect_map(spec_node *n, const char *what, spec_errors *e);
/* Index of n's text (a scalar, quoted or not) in names, a NULL-terminated list, or -1 with
 * "PATH: expected one of A, B, got X" recorded. Also for names a higher folder owns (the
 * schedule registry), which this one cannot include. */
int spec_node_choice(spec_node *n, const char *const *names, spec_errors *e);
/* Index of name in a NULL-terminated list, -1 if absent. */
int spec_name_index(const char *const *names, const char *name);
/* Records "unknown key 'k' in WHAT; known keys: ..." for the first unused entry of map.
 * known is a NULL-terminated list of accepted keys used only for the hint (may be NULL). */
void spec_check_unused(spec_node *map, const char *what, const char *const *known,
                       spec_errors *e);

/* --- Typed spec --------------------------------------------------------------------------- */
/* Settings chosen from a fixed set of names are enums, resolved once by spec_load. The
 * spec_*_names tables give each value's spelling (indexed by the enum, NULL-terminated) for
 * messages, manifests and APIs that take the name. */
typedef enum { SPEC_LOSS_CROSS_ENTROPY, SPEC_LOSS_MSE } spec_loss;
typedef enum { SPEC_DATA_BYTES, SPEC_DATA_U16, SPEC_DATA_F32, SPEC_DATA_U32 } spec_data_format;
typedef enum { SPEC_ORDER_SEQUENTIAL, SPEC_ORDER_SHUFFLED } spec_data_order;
typedef enum { SPEC_OPTIMIZER_ADAMW, SPEC_OPTIMIZER_SGD } spec_optimizer;
typedef enum { SPEC_LR_CONSTANT, SPEC_LR_COSINE } spec_lr_schedule;
typedef enum { SPEC_NONFINITE_ABORT, SPEC_NONFINITE_SKIP } spec_nonfinite;
/* train.precision: the GEMMs' arithmetic (kernels/kernels.h's pt_precision, same order). */
typedef enum { SPEC_PRECISION_FP32, SPEC_PRECISION_TF32, SPEC_PRECISION_BF16 } spec_precision;
/* SPEC_PARTITION_TYPE: "type:REGEX", the regex in spec_pipeline.partition_types */
typedef enum {
  SPEC_PARTITION_PARAMETERS,
  SPEC_PARTITION_UNIFORM,
  SPEC_PARTITION_BALANCED,
  SPEC_PARTITION_TYPE,
  SPEC_PARTITION_AUTO, /* the planner searches the split with the schedule (partition/auto.h) */
} spec_partition;
typedef enum {
  SPEC_DEVICE_AUTO,
  SPEC_DEVICE_CPU,
  SPEC_DEVICE_GPU,
  SPEC_DEVICE_EMULATED,
} spec_device;
typedef enum { SPEC_COMM_AUTO, SPEC_COMM_NCCL, SPEC_COMM_MPI } spec_comm_backend;
typedef enum { SPEC_DP_REDUCE_CHAIN, SPEC_DP_REDUCE_ALLREDUCE } spec_dp_reduce;

extern const char *const spec_loss_names[];
extern const char *const spec_data_format_names[];
/* The format holds records (inputs and targets as float32, one sample a record, T = 1), not a
 * token stream: the one place a data.format says which (data/source.h has each format's reader). */
int spec_data_is_records(spec_data_format f);
extern const char *const spec_data_order_names[];
extern const char *const spec_optimizer_names[];
extern const char *const spec_lr_schedule_names[];
extern const char *const spec_nonfinite_names[];
extern const char *const spec_precision_names[];
extern const char *const spec_partition_names[]; /* "type:" for SPEC_PARTITION_TYPE */
extern const char *const spec_device_names[];
extern const char *const spec_comm_backend_names[];
extern const char *const spec_dp_reduce_names[];

typedef struct {
  char type[SPEC_NAME_MAX];  /* layer type name, e.g. "transformer_block" */
  char tie[SPEC_NAME_MAX];   /* tie key, "" when untied */
  spec_node *args;           /* the entry's argument map (never NULL; may be empty) */
  spec_node *entry;          /* the list item, for error positions */
  int index;                 /* global index after expanding repeat */
} spec_layer;

typedef struct {
  char path[4096];
  spec_data_format format;
  int inputs, targets; /* f32 only: floats per record that are inputs / targets */
  int documents;       /* data.documents given: token data packed into documents */
  int64_t doc_eos;     /* data.documents.eos: the token ending a document */
  spec_node *node;     /* the data map (NULL when absent), for positions in later errors */
  spec_data_order order; /* data.order: which window each sample reads (data/data_order.h) */
  /* data.eval: held-out data, evaluated every eval_every steps and at the end of the run;
   * eval_path "" when absent. eval_format is data.format's values (default data.format). */
  char eval_path[4096];
  spec_data_format eval_format;
  int64_t eval_every, eval_batches;
} spec_data;

typedef struct {
  int64_t steps;
  int64_t micro_batch_size; /* B */
  int64_t micro_batches;    /* M, per data-parallel replica and step */
  spec_optimizer optimizer;
  double lr, beta1, beta2, eps, weight_decay, momentum;
  double grad_clip;         /* 0 = off */
  uint64_t seed;
  int64_t activation_checkpoint_interval; /* 0 = off; SPEC_AUTO until the planner picks */
  spec_lr_schedule lr_schedule;
  int64_t warmup_steps;
  double min_lr;            /* floor of the cosine decay */
  char ckpt_dir[4096];      /* train.checkpoint.dir ("" = no periodic checkpoints) */
  int64_t ckpt_every;       /* save every N steps (0: only with --save) */
  int64_t ckpt_keep;        /* keep the K newest step-N checkpoints (default 3) */
  spec_nonfinite on_nonfinite; /* a step whose gradients are not finite: abort (default) or skip */
  spec_precision precision;    /* fp32 (default, the bitwise reference), tf32 or bf16 */
  /* train.seq_len_schedule {start, warmup_steps, multiple}: tokens per sequence grow from start
   * to model.seq_len over warmup_steps (spec_seq_len_at); seq_start 0 when absent. */
  int64_t seq_start, seq_warmup, seq_multiple;
} spec_train;

typedef struct {
  int64_t stages, data_parallel; /* data_parallel: SPEC_AUTO until resolved (world / stages) */
  spec_partition partition;
  char partition_types[256]; /* SPEC_PARTITION_TYPE: the REGEX of "type:REGEX" */
  /* A name in the schedule registry (schedule/registry.h), which this folder sits below: the
   * registry checks it (schedule_from_spec). Default "1f1b"; "auto" until the planner picks. */
  char schedule[SPEC_NAME_MAX];
  /* pipeline.schedule_file: a file of per-rank action lists (docs/schedules.md) instead of a
   * registered schedule, resolved like data.path; "" when not given. Excludes schedule. */
  char schedule_file[4096];
  /* Chunks (virtual stages) per rank; 0 when not given (1, or the schedule's own count). */
  int64_t virtual_stages;
  spec_node *node;     /* the whole pipeline map */
  /* Raw nodes (NULL when absent), interpreted by the planner (partition/plan.h): */
  spec_node *boundaries;   /* [first layer of each stage] */
  spec_node *stage_layers; /* [[layer indices of stage 0], [of stage 1], ...] */
  spec_node *max_memory;   /* one size or a list per stage: 24GiB, 512MiB, 1000000 */
  spec_node *devices;      /* [device id per stage] or per (replica, stage) */
  spec_node *offload;      /* none, a fraction, auto, {outputs:, saved:} or a list per stage */
  int64_t tie_check_every; /* compare tied copies' checksums every N steps (0: only at the end) */
  int64_t timeout_s;       /* a rank blocked this long on a peer ends the job (0: never) */
  spec_device device;      /* auto: a GPU when there is one */
  /* pipeline.shard_optimizer: each data-parallel replica of a stage keeps the optimizer state
   * of 1/data_parallel of its parameters (ZeRO-1); with one replica (data_parallel 1, which
   * auto may resolve to) and under --sequential it changes nothing, and the engine says so.
   * auto: the planner's choice (partition/auto.h; off until it pins one), shard_auto set */
  int shard_optimizer, shard_auto;
} spec_pipeline;

typedef struct {
  char path[4096];      /* the spec file */
  spec_node *root;
  spec_node *model;     /* the model settings map (layers read their keys from it) */
  int64_t vocab, seq_len, dim, heads; /* 0 when absent */
  spec_layer *layers;
  int n_layers;
  spec_loss loss;
  spec_data data;
  spec_train train;
  spec_pipeline pipeline;
  spec_comm_backend comm_backend; /* comm.backend: auto (NCCL for GPU buffers), nccl, mpi */
  spec_dp_reduce dp_reduce; /* comm.dp_reduce: chain (bitwise, ordered) or allreduce (faster) */
  int64_t log_every;
  uint64_t hash;        /* FNV-1a of the canonical tree after overrides: same spec => same hash */
} pt_spec;

/* Parses path, applies the n_overrides "KEY=VALUE" strings in order, interprets the result.
 * Returns 0, or -1 with e set. On success *out owns the tree. The data path is resolved
 * against the working directory first, then the spec file's directory. Layer arguments are NOT
 * validated here (the model builder does that with the layer registry), but "repeat" and "tie"
 * are consumed here. */
int spec_load(const char *path, const char *const *overrides, int n_overrides, pt_spec *out,
              spec_errors *e);
/* Same from text already in memory (origin is used in messages and for path resolution). */
int spec_load_text(const char *text, size_t len, const char *origin,
                   const char *const *overrides, int n_overrides, pt_spec *out, spec_errors *e);
void spec_free(pt_spec *s);
/* With 0, a relative data path that does not resolve is kept as written instead of being an
 * error (for tools that only need the model, e.g. pipe_convert on a checkpoint's spec). */
void spec_set_resolve_data(int on);

/* Tokens per sequence of step `step` (0-based) under train.seq_len_schedule: model.seq_len
 * without a schedule, else min(seq_len, round_down(start + (seq_len - start) * step /
 * warmup_steps, multiple)) (integer division; never below start). A pure function of the spec
 * and the step: every stage computes it alone, so no shape crosses the pipeline. */
int64_t spec_seq_len_at(const pt_spec *s, int64_t step);
#endif
