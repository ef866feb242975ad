/* The stage planner (partition/plan.c) on YAML specs: every partition method, memory caps,
 * explicit layouts, device maps, tied weights and the in-flight rule of the memory estimate.
 * Expected bounds are derived by hand in the comments (the solver itself has its own
 * brute-force test in test_partition_solve.c); error cases check the message text and the
 * file:line:col it points at. Run from the repository root (specs read examples/data/tiny.txt). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "partition/plan.h"
#include "core/error.h"
#include "schedule/schedule.h"
#include "test_util.h"

/* --- Specs --------------------------------------------------------------------------------- */

/* GPT-like, 10 layers: 0 embedding, 1 pos_embedding, 2-7 transformer_block, 8 layernorm,
 * 9 lm_head (tied to 0). Per layer (B*M*T = 128 tokens): a block has 12*32^2 + 13*32 = 12704
 * parameters and 10223616 FLOPs per step; lm_head 8192 parameters and 6291456 FLOPs. */
static const char *GPT =
    "model: {vocab: 256, seq_len: 16, dim: 32, heads: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - pos_embedding: {}\n"
    "  - transformer_block: {repeat: 6}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    "data: {path: examples/data/tiny.txt, format: bytes}\n"
    "train: {micro_batch_size: 2, micro_batches: 4}\n";

/* The same with a large vocabulary: embedding and lm_head have 65536 parameters each, lm_head
 * costs 50331648 FLOPs per step (about 5 blocks), so the methods disagree. */
static const char *GPTV =
    "model: {vocab: 2048, seq_len: 16, dim: 32, heads: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - pos_embedding: {}\n"
    "  - transformer_block: {repeat: 6}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    "data: {path: examples/data/tiny.txt, format: bytes}\n"
    "train: {micro_batch_size: 2, micro_batches: 4}\n";

/* Sizes that are not multiples of 16 floats: every tensor is padded (6 layers). */
static const char *GPTPAD =
    "model: {vocab: 257, seq_len: 10, dim: 24, heads: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - pos_embedding: {}\n"
    "  - transformer_block: {repeat: 2}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    "data: {path: examples/data/tiny.txt, format: bytes}\n"
    "train: {micro_batch_size: 2, micro_batches: 2}\n";

/* MLP, 6 layers (8 inputs, 4 targets, T = 1, 8 samples a step):
 *   0 linear 8->32 (288 params, 13824 FLOPs)  1 relu (5120)  2 linear 32->32 (1056, 50688)
 *   3 gelu (5120)  4 layernorm (64, 5120)  5 linear 32->4 (132, 6336) */
static const char *MLP_FMT =
    "layers:\n"
    "  - linear: {out: 32}\n"
    "  - relu\n"
    "  - linear: {out: 32}\n"
    "  - gelu\n"
    "  - layernorm\n"
    "  - linear: {out: 4}\n"
    "loss: mse\n"
    "data: {path: %s, format: f32, inputs: 8, targets: 4}\n"
    "train: {micro_batch_size: 4, micro_batches: 2}\n";

/* One layer far larger than the rest, 7 layers:
 *   0 linear 8->32 (288, 13824)  1 relu (5120)  2 linear 32->32 (1056, 50688)  3 gelu (5120)
 *   4 linear 32->4096 (135168 params, 6488064 FLOPs)  5 relu (655360)  6 linear 4096->4
 *   (16388, 786624) */
static const char *BIG_FMT =
    "layers:\n"
    "  - linear: {out: 32}\n"
    "  - relu\n"
    "  - linear: {out: 32}\n"
    "  - gelu\n"
    "  - linear: {out: 4096}\n"
    "  - relu\n"
    "  - linear: {out: 4}\n"
    "loss: mse\n"
    "data: {path: %s, format: f32, inputs: 8, targets: 4}\n"
    "train: {micro_batch_size: 4, micro_batches: 2}\n";

enum { S_GPT, S_GPTV, S_GPTPAD, S_MLP, S_BIG, S_COUNT };
static char g_f32_path[64];
static char g_base[S_COUNT][1024];

static void make_specs(void) {
  snprintf(g_f32_path, sizeof g_f32_path, "/tmp/pt_test_plan_%ld.f32", (long)getpid());
  FILE *f = fopen(g_f32_path, "wb");
  if (!f) pt_fatal("cannot create %s", g_f32_path);
  for (int i = 0; i < 64 * 12; i++) {
    float v = (float)((i * 37) % 101) / 50.0f - 1.0f;
    fwrite(&v, sizeof v, 1, f);
  }
  fclose(f);
  snprintf(g_base[S_GPT], sizeof g_base[0], "%s", GPT);
  snprintf(g_base[S_GPTV], sizeof g_base[0], "%s", GPTV);
  snprintf(g_base[S_GPTPAD], sizeof g_base[0], "%s", GPTPAD);
  snprintf(g_base[S_MLP], sizeof g_base[0], MLP_FMT, g_f32_path);
  snprintf(g_base[S_BIG], sizeof g_base[0], BIG_FMT, g_f32_path);
}

/* A loaded, configured spec: base text + pipeline section, plus --set overrides. */
typedef struct {
  char text[4096];
  pt_spec spec;
  pt_model model;
  int ok; /* loaded and configured */
} loaded;

/* Returns -1 with e set when the spec does not load or the model does not configure. */
static int load_or_error(loaded *L, int base, const char *pipeline, const char *const *over,
                         int n_over, spec_errors *e) {
  memset(L, 0, sizeof *L);
  snprintf(L->text, sizeof L->text, "%s%s", g_base[base], pipeline ? pipeline : "");
  if (spec_load_text(L->text, strlen(L->text), "t.yaml", over, n_over, &L->spec, e) != 0)
    return -1;
  if (model_configure(&L->model, &L->spec, e) != 0) {
    spec_free(&L->spec);
    return -1;
  }
  L->ok = 1;
  return 0;
}

static int load(loaded *L, int base, const char *pipeline, const char *const *over, int n_over) {
  spec_errors e = {0};
  int rc = load_or_error(L, base, pipeline, over, n_over, &e);
  CHECK(rc == 0, "spec did not load and configure: %s", e.msg);
  return rc;
}

static void unload(loaded *L) {
  if (!L->ok) return;
  model_free(&L->model);
  spec_free(&L->spec);
  L->ok = 0;
}

/* "t.yaml:LINE:COL: " of the first occurrence of marker in text (1-based, bytes). */
static void position_of(const char *text, const char *marker, char *out, size_t outsz) {
  const char *hit = strstr(text, marker);
  if (!hit) {
    snprintf(out, outsz, "(marker '%s' not in the spec)", marker);
    return;
  }
  int line = 1, col = 1;
  for (const char *c = text; c < hit; c++) {
    if (*c == '\n') line++, col = 1;
    else col++;
  }
  snprintf(out, outsz, "t.yaml:%d:%d: error: ", line, col);
}

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int has_warning(const pt_plan *p, const char *needle) {
  for (int i = 0; i < p->n_warnings; i++)
    if (strstr(p->warnings[i], needle)) return 1;
  return 0;
}

static void format_bounds(const pt_plan *p, char *out, size_t outsz) {
  size_t used = 0;
  out[0] = '\0';
  for (int s = 0; p->bounds && s <= p->n_stages && used < outsz; s++)
    used += (size_t)snprintf(out + used, outsz - used, "%s%d", s ? "," : "[", p->bounds[s]);
  if (used < outsz) snprintf(out + used, outsz - used, "]");
}

/* --- The table ------------------------------------------------------------------------------ */

#define END -1
typedef struct {
  const char *name;
  int base;
  const char *pipeline;   /* the pipeline section, block style */
  const char *set;        /* one --set override, or NULL */
  int bounds[12];         /* expected bounds, END-terminated; {END} means an error */
  const char *method;     /* expected p->method (success) */
  const char *msg[4];     /* substrings of the error (or of the warnings when it succeeds) */
  const char *at;         /* marker whose position starts the message; "--set" for overrides */
  int n_warnings;         /* on success */
} plan_case;

static const plan_case CASES[] = {
    /* GPT, 4 stages. Blocks dominate every measure: six blocks in four stages put two blocks on
     * two stages, which must hold nothing else (parameters: 2 * 12704 = 25408 is the least
     * possible maximum and adding any layer exceeds it; time: likewise 2 blocks), so stages 0
     * and 3 get one block each: [0,3,5,7,10]. uniform (at most 3 layers a stage) reaches the
     * same through its time tie-break: stage 0 = [emb,pos] would leave 8 layers with at most 2
     * blocks each for 3 stages, impossible. */
    {"gpt uniform", S_GPT, "pipeline: {stages: 4, partition: uniform}\n", NULL,
     {0, 3, 5, 7, 10, END}, "uniform", {0}, NULL, 0},
    {"gpt parameters", S_GPT, "pipeline: {stages: 4, partition: parameters}\n", NULL,
     {0, 3, 5, 7, 10, END}, "parameters", {0}, NULL, 0},
    {"gpt default is parameters", S_GPT, "pipeline: {stages: 4}\n", NULL,
     {0, 3, 5, 7, 10, END}, "parameters", {0}, NULL, 0},
    {"gpt balanced", S_GPT, "pipeline: {stages: 4, partition: balanced}\n", NULL,
     {0, 3, 5, 7, 10, END}, "balanced", {0}, NULL, 0},
    {"gpt type:transformer_block", S_GPT,
     "pipeline: {stages: 4, partition: 'type:transformer_block'}\n", NULL,
     {0, 3, 5, 7, 10, END}, "type:transformer_block", {0}, NULL, 0},
    {"gpt type regex matching nothing", S_GPT,
     "pipeline:\n  stages: 4\n  partition: 'type:^conv'\n", NULL, {END}, NULL,
     {"pipeline.partition 'type:^conv' matches no layer type"}, "'type:^conv'", 0},
    {"gpt invalid regex", S_GPT, "pipeline:\n  stages: 4\n  partition: 'type:(block'\n", NULL,
     {END}, NULL, {"pipeline.partition: '(block' is not a valid extended regular expression"},
     "'type:(block'", 0},
    {"gpt unknown method", S_GPT, "pipeline:\n  stages: 4\n  partition: layers\n", NULL, {END},
     NULL, {"unknown pipeline.partition 'layers'", "parameters, uniform, balanced, type:REGEX",
            "pipeline.boundaries"}, "layers\n", 0},
    {"gpt unknown method via --set", S_GPT, "pipeline: {stages: 4}\n",
     "pipeline.partition=paramters", {END}, NULL,
     {"unknown pipeline.partition 'paramters'"}, "--set pipeline.partition=paramters: error: ", 0},
    {"gpt unknown schedule", S_GPT, "pipeline:\n  stages: 4\n  schedule: zigzag\n", NULL, {END},
     NULL, {"pipeline.schedule: expected one of 1f1b, gpipe, ", "got 'zigzag'"}, "zigzag", 0},

    /* GPT with a large vocabulary, 3 stages: the methods disagree.
     * uniform: at most 4 layers a stage; lm_head cannot be alone (9 layers left for 2 stages of
     *   4), so [ln,head] is stage 2 and 4+4 before it: [0,4,8,10] (slowest 50.4 MFLOP).
     * parameters: the six blocks (76224) exceed embedding+pos (66048) and ln+head (65600), and
     *   adding a block to either end stage exceeds 76224: [0,2,8,10].
     * balanced: lm_head alone (50.33M) bounds the slowest stage; stage 1 may take at most four
     *   blocks + layernorm (40.98M), so stage 0 needs two blocks: [0,4,9,10].
     * type:transformer_block: two blocks a stage, then stage 2 holds the rest: [0,4,6,10]
     *   (and is 1.90x the mean time: the slow-stage warning).
     * type:^(embedding|lm_head)$: one match a stage is the optimum, then time as balanced. */
    {"gptv uniform", S_GPTV, "pipeline: {stages: 3, partition: uniform}\n", NULL,
     {0, 4, 8, 10, END}, "uniform",
     {"stage 2 is 1.35x the mean stage time (layers 8-9); partition: balanced minimises the "
      "slowest stage"}, NULL, 1},
    {"gptv parameters", S_GPTV, "pipeline: {stages: 3, partition: parameters}\n", NULL,
     {0, 2, 8, 10, END}, "parameters", {"stage 1 is 1.65x the mean stage time (layers 2-7)"},
     NULL, 1},
    {"gptv balanced", S_GPTV, "pipeline: {stages: 3, partition: balanced}\n", NULL,
     {0, 4, 9, 10, END}, "balanced", {"stage 2 is 1.35x the mean stage time (layers 9-9)"}, NULL,
     1},
    {"gptv type:transformer_block", S_GPTV,
     "pipeline: {stages: 3, partition: 'type:transformer_block'}\n", NULL, {0, 4, 6, 10, END},
     "type:transformer_block", {"stage 2 is 1.90x the mean stage time (layers 6-9)"}, NULL, 1},
    {"gptv type regex with fewer matches than stages", S_GPTV,
     "pipeline: {stages: 3, partition: 'type:^(embedding|lm_head)$'}\n", NULL,
     {0, 4, 9, 10, END}, "type:^(embedding|lm_head)$",
     {"partition 'type:^(embedding|lm_head)$' matches 2 layers for 3 stages: some stages get none",
      "stage 2 is 1.35x the mean stage time"}, NULL, 2},

    /* MLP, 4 stages. Layer 2 (50688 FLOPs, 1056 params) is the heaviest by every measure.
     * uniform: at most 2 layers a stage; layer 2 alone (with a neighbour it is slower), so
     *   [0,1] before it and [3] [4,5] after (earliest of the optima): [0,2,3,4,6].
     * parameters / balanced: layer 2 alone, the earliest plan: [0] [1] [2] [3,4,5].
     * type:linear: 3 matches for 4 stages (warning), one a stage, then time: the same. */
    {"mlp uniform", S_MLP, "pipeline: {stages: 4, partition: uniform}\n", NULL,
     {0, 2, 3, 4, 6, END}, "uniform", {"stage 1 is 2.35x the mean stage time (layers 2-2)"},
     NULL, 1},
    {"mlp parameters", S_MLP, "pipeline: {stages: 4, partition: parameters}\n", NULL,
     {0, 1, 2, 3, 6, END}, "parameters", {"stage 2 is 2.35x"}, NULL, 1},
    {"mlp balanced", S_MLP, "pipeline: {stages: 4, partition: balanced}\n", NULL,
     {0, 1, 2, 3, 6, END}, "balanced", {"stage 2 is 2.35x"}, NULL, 1},
    {"mlp type:linear", S_MLP, "pipeline: {stages: 4, partition: 'type:linear'}\n", NULL,
     {0, 1, 2, 3, 6, END}, "type:linear",
     {"partition 'type:linear' matches 3 layers for 4 stages: some stages get none"}, NULL, 2},
    {"mlp type:transformer_block matches nothing", S_MLP,
     "pipeline:\n  stages: 4\n  partition: type:transformer_block\n", NULL, {END}, NULL,
     {"pipeline.partition 'type:transformer_block' matches no layer type"},
     "type:transformer_block", 0},
    {"mlp invalid regex", S_MLP, "pipeline:\n  stages: 4\n  partition: 'type:[relu'\n", NULL,
     {END}, NULL, {"'[relu' is not a valid extended regular expression"}, "'type:[relu'", 0},
    {"mlp unknown method", S_MLP, "pipeline:\n  stages: 2\n  partition: memory\n", NULL, {END},
     NULL, {"unknown pipeline.partition 'memory'"}, "memory\n", 0},

    /* One large layer (layer 4, 135168 parameters, 6.5 MFLOP): parameters and balanced give it
     * a stage of its own (a zero-parameter relu/gelu beside it would add time): [0,4,5,7].
     * uniform (at most 3 layers) cannot: [0,1,2] [3,4] [5,6]. */
    {"big parameters", S_BIG, "pipeline: {stages: 3, partition: parameters}\n", NULL,
     {0, 4, 5, 7, END}, "parameters", {"stage 1 is 2.43x the mean stage time (layers 4-4)"}, NULL,
     1},
    {"big balanced", S_BIG, "pipeline: {stages: 3, partition: balanced}\n", NULL,
     {0, 4, 5, 7, END}, "balanced", {"(layers 4-4)"}, NULL, 1},
    {"big uniform", S_BIG, "pipeline: {stages: 3, partition: uniform}\n", NULL,
     {0, 3, 5, 7, END}, "uniform", {"(layers 3-4)"}, NULL, 1},

    /* More stages than layers; exactly as many is fine (one layer each). */
    {"more stages than layers", S_GPT, "pipeline:\n  stages: 11\n", NULL, {END}, NULL,
     {"pipeline.stages (11) is more than the 10 layers; every stage needs at least one layer, "
      "so use at most 10 stages"}, "11\n", 0},
    {"mlp more stages than layers", S_MLP, "pipeline: {stages: 7, partition: uniform}\n", NULL,
     {END}, NULL, {"pipeline.stages (7) is more than the 6 layers", "at most 6 stages"}, "7,", 0},
    {"one layer per stage", S_GPT, "pipeline: {stages: 10, partition: uniform}\n", NULL,
     {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, END}, "uniform", {"stage"}, NULL, 1},

    /* Explicit boundaries. [0,1,9]: stage FLOPs 4096 | 8192 + 6 * 10223616 + 81920 | 6291456,
     * the middle one 61431808 / (67727360 / 3) = 2.72x the mean. */
    {"boundaries valid", S_GPT, "pipeline:\n  stages: 3\n  boundaries: [0, 1, 9]\n", NULL,
     {0, 1, 9, 10, END}, "explicit boundaries",
     {"stage 1 is 2.72x the mean stage time (layers 1-8)"}, NULL, 1},
    {"boundaries not starting at 0", S_GPT, "pipeline:\n  stages: 4\n  boundaries: [1, 3, 5, 7]\n",
     NULL, {END}, NULL, {"pipeline.boundaries must start at layer 0 (got 1)"}, "1, 3, 5, 7]", 0},
    {"boundaries repeated (empty stage)", S_GPT,
     "pipeline:\n  stages: 4\n  boundaries: [0, 3, 3, 7]\n", NULL, {END}, NULL,
     {"pipeline.boundaries must increase: stage 2 would start at layer 3 but stage 1 starts at 3, "
      "leaving a stage empty"}, "3, 7]", 0},
    {"boundaries decreasing", S_GPT, "pipeline:\n  stages: 4\n  boundaries: [0, 5, 2, 7]\n", NULL,
     {END}, NULL, {"stage 2 would start at layer 2 but stage 1 starts at 5"}, "2, 7]", 0},
    {"boundaries wrong count", S_GPT, "pipeline:\n  stages: 4\n  boundaries: [0, 3, 5]\n", NULL,
     {END}, NULL,
     {"pipeline.boundaries must list the first layer of each of the 4 stages, e.g. [0, 3, 6, 9] "
      "for 4 stages"}, "[0, 3, 5]", 0},
    {"boundaries not a list", S_GPT, "pipeline:\n  stages: 2\n  boundaries: 5\n", NULL, {END},
     NULL, {"pipeline.boundaries must list the first layer of each of the 2 stages"}, "5\n", 0},
    {"boundaries out of range", S_GPT, "pipeline:\n  stages: 4\n  boundaries: [0, 3, 5, 10]\n",
     NULL, {END}, NULL, {"pipeline.boundaries[3]: expected an integer in [0, 9], got '10'"},
     "10]", 0},
    {"boundaries negative", S_GPT, "pipeline:\n  stages: 2\n  boundaries: [0, -4]\n", NULL, {END},
     NULL, {"pipeline.boundaries[1]: expected an integer in [0, 9], got '-4'"}, "-4]", 0},
    {"boundaries via --set", S_GPT, "pipeline: {stages: 3}\n", "pipeline.boundaries=[0,2,2]",
     {END}, NULL, {"must increase: stage 2 would start at layer 2"},
     "--set pipeline.boundaries=[0,2,2]: error: ", 0},

    /* Explicit stage_layers. */
    {"stage_layers valid", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2, 3], [4, 5], [6, 7], [8, 9]]\n", NULL,
     {0, 4, 6, 8, 10, END}, "explicit stage_layers", {0}, NULL, 0},
    {"stage_layers block style", S_GPT,
     "pipeline:\n  stages: 2\n  stage_layers:\n    - [0, 1, 2, 3, 4]\n    - [5, 6, 7, 8, 9]\n",
     NULL, {0, 5, 10, END}, "explicit stage_layers", {0}, NULL, 0},
    {"stage_layers duplicate layer", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2], [2, 3, 4], [5, 6], [7, 8, 9]]\n", NULL,
     {END}, NULL, {"layer 2 is listed twice (stages 0 and 1); each layer belongs to exactly one "
                   "stage"}, "2, 3, 4]", 0},
    {"stage_layers gap", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2], [4], [5, 6], [7, 8, 9]]\n", NULL,
     {END}, NULL, {"pipeline.stage_layers leaves layer 3 unassigned; list every layer 0..9 "
                   "exactly once"}, "[[0", 0},
    {"stage_layers last layer missing", S_GPT,
     "pipeline:\n  stages: 2\n  stage_layers: [[0, 1, 2, 3, 4], [5, 6, 7, 8]]\n", NULL, {END},
     NULL, {"leaves layer 9 unassigned"}, "[[0", 0},
    {"stage_layers extra layer", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2], [3, 4], [5, 6], [7, 8, 9, 10]]\n",
     NULL, {END}, NULL, {"pipeline.stage_layers[3][3]: expected an integer in [0, 9], got '10'"},
     "10]", 0},
    {"stage_layers not contiguous", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2], [3, 5], [4, 6], [7, 8, 9]]\n", NULL,
     {END}, NULL, {"pipeline.stage_layers[1] is not a contiguous ascending range (layer 5 "
                   "follows 3); a stage owns consecutive layers"}, "5], [4", 0},
    {"stage_layers descending", S_GPT,
     "pipeline:\n  stages: 2\n  stage_layers: [[4, 3, 2, 1, 0], [5, 6, 7, 8, 9]]\n", NULL, {END},
     NULL, {"pipeline.stage_layers[0] is not a contiguous ascending range (layer 3 follows 4)"},
     "3, 2", 0},
    {"stage_layers empty stage", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2], [], [3, 4, 5, 6], [7, 8, 9]]\n", NULL,
     {END}, NULL, {"pipeline.stage_layers[1]: expected a non-empty list of layer indices (no "
                   "stage may be empty)"}, "[], ", 0},
    {"stage_layers item not a list", S_GPT,
     "pipeline:\n  stages: 2\n  stage_layers: [[0, 1, 2, 3, 4], 5]\n", NULL, {END}, NULL,
     {"pipeline.stage_layers[1]: expected a non-empty list"}, "5]\n", 0},
    {"stage_layers out of order", S_GPT,
     "pipeline:\n  stages: 4\n  stage_layers: [[0, 1, 2], [5, 6], [3, 4], [7, 8, 9]]\n", NULL,
     {END}, NULL, {"pipeline.stage_layers: stage 2 comes before stage 1 in the layer order; "
                   "stages must follow the layers"}, "[3, 4]", 0},
    {"stage_layers first stage not first", S_GPT,
     "pipeline:\n  stages: 2\n  stage_layers: [[5, 6, 7, 8, 9], [0, 1, 2, 3, 4]]\n", NULL, {END},
     NULL, {"stage 1 comes before stage 0 in the layer order"}, "[0, 1", 0},
    {"stage_layers wrong count", S_GPT,
     "pipeline:\n  stages: 3\n  stage_layers: [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]\n", NULL, {END},
     NULL, {"pipeline.stage_layers must have one list per stage (3), e.g. [[0, 1, 2], [3, 4, 5]]"},
     "[[0", 0},
    {"boundaries and stage_layers", S_GPT,
     "pipeline:\n  stages: 2\n  boundaries: [0, 5]\n  stage_layers: [[0, 1, 2, 3, 4], [5, 6, 7, "
     "8, 9]]\n", NULL, {END}, NULL,
     {"give pipeline.boundaries or pipeline.stage_layers, not both"}, "[[0", 0},

    /* Caps: errors in the sizes themselves. */
    {"cap bad unit", S_GPT, "pipeline:\n  stages: 4\n  max_memory: 12XB\n", NULL, {END}, NULL,
     {"pipeline.max_memory: '12XB' is not a size; write e.g. 24GiB, 512MiB, 16GB or a byte count"},
     "12XB", 0},
    {"cap bad unit in a list", S_GPT,
     "pipeline:\n  stages: 2\n  max_memory: [1GiB, 2 parsecs]\n", NULL, {END}, NULL,
     {"pipeline.max_memory: '2 parsecs' is not a size"}, "2 parsecs", 0},
    {"cap zero", S_GPT, "pipeline:\n  stages: 2\n  max_memory: 0\n", NULL, {END}, NULL,
     {"'0' is not a size"}, "0\n", 0},
    {"cap negative", S_GPT, "pipeline:\n  stages: 2\n  max_memory: -5MiB\n", NULL, {END}, NULL,
     {"'-5MiB' is not a size"}, "-5MiB", 0},
    {"cap a mapping", S_GPT, "pipeline:\n  stages: 2\n  max_memory: {gpu: 1GiB}\n", NULL, {END},
     NULL, {"pipeline.max_memory: expected a size like 24GiB, 512MiB or 16GB"}, "{gpu", 0},
    {"cap list of the wrong length", S_GPT,
     "pipeline:\n  stages: 4\n  max_memory: [1GiB, 1GiB]\n", NULL, {END}, NULL,
     {"pipeline.max_memory lists 2 sizes for 4 stages; give one per stage or one for all"},
     "[1GiB", 0},
    {"cap on an explicit layout that does not fit", S_GPT,
     "pipeline:\n  stages: 2\n  boundaries: [0, 9]\n  max_memory: [300KiB, 100MiB]\n", NULL,
     {END}, NULL, {"the explicit boundaries layout puts ", " on stage 0, over its 300.00 KiB cap; "
                   "move layers or raise the cap"}, "[300KiB", 0},

    /* Devices: errors. */
    {"devices duplicate", S_GPT, "pipeline:\n  stages: 4\n  devices: [0, 1, 1, 2]\n", NULL, {END},
     NULL, {"pipeline.devices: device 1 is given twice (entries 1 and 2); each rank of a node "
            "needs its own device under NCCL (set comm.backend: mpi to let ranks share one)"}, "1, 2]", 0},
    {"devices wrong length", S_GPT, "pipeline:\n  stages: 4\n  devices: [0, 1, 2]\n", NULL,
     {END}, NULL, {"pipeline.devices: expected a list of 4 device ids (one per stage) or 4 (one "
                   "per rank), in any order, e.g. [2, 3, 0, 1]"}, "[0, 1, 2]", 0},
    {"devices wrong length with replicas", S_GPT,
     "pipeline:\n  stages: 2\n  data_parallel: 2\n  devices: [0, 1, 2]\n", NULL, {END}, NULL,
     {"expected a list of 2 device ids (one per stage) or 4 (one per rank)"}, "[0, 1, 2]", 0},
    {"devices negative", S_GPT, "pipeline:\n  stages: 2\n  devices: [0, -1]\n", NULL, {END},
     NULL, {"pipeline.devices[1]: expected an integer in [0, 1048576], got '-1'"}, "-1]", 0},
    {"devices per-rank duplicate", S_GPT,
     "pipeline:\n  stages: 2\n  data_parallel: 2\n  devices: [0, 1, 2, 0]\n", NULL, {END}, NULL,
     {"device 0 is given twice (entries 0 and 3)"}, "0]\n", 0},
};

static void run_case(const plan_case *c) {
  loaded L;
  const char *over[1] = {c->set};
  pt_plan p = {0};
  spec_errors e = {0};
  /* the spec itself rejects an unknown method name: that error counts as the plan's */
  int rc = load_or_error(&L, c->base, c->pipeline, over, c->set ? 1 : 0, &e);
  if (rc == 0) rc = plan_build(&p, &L.model, &e);
  int want_ok = c->bounds[0] != END;
  if (getenv("PT_TEST_VERBOSE")) printf("[%s] rc %d: %s\n", c->name, rc, rc ? e.msg : p.method);
  CHECK((rc == 0) == want_ok, "[%s] plan_build returned %d, want %s (message: %s)", c->name, rc,
        want_ok ? "success" : "an error", e.msg);
  if (rc == 0 && want_ok) {
    int n = 0;
    while (c->bounds[n] != END) n++;
    char got[128];
    format_bounds(&p, got, sizeof got);
    int same = p.n_stages == n - 1;
    for (int s = 0; same && s < n; s++) same = p.bounds[s] == c->bounds[s];
    CHECK(same, "[%s] bounds %s differ from the expected ones", c->name, got);
    CHECK(!strcmp(p.method, c->method), "[%s] method '%s', want '%s'", c->name, p.method,
          c->method);
    CHECK(p.n_warnings == c->n_warnings, "[%s] %d warnings, want %d (first: %s)", c->name,
          p.n_warnings, c->n_warnings, p.n_warnings ? p.warnings[0] : "-");
    for (int i = 0; i < 4 && c->msg[i]; i++)
      CHECK(has_warning(&p, c->msg[i]), "[%s] no warning contains '%s' (first: %s)", c->name,
            c->msg[i], p.n_warnings ? p.warnings[0] : "-");
    /* every stage non-empty; the stage map agrees with the bounds */
    for (int s = 0; s < p.n_stages; s++) {
      CHECK(p.bounds[s] < p.bounds[s + 1], "[%s] stage %d is empty", c->name, s);
      for (int li = p.bounds[s]; li < p.bounds[s + 1]; li++)
        CHECK(plan_stage_of_layer(&p, li) == s, "[%s] layer %d: stage %d, want %d", c->name, li,
              plan_stage_of_layer(&p, li), s);
    }
    plan_free(&p);
  }
  if (rc != 0 && !want_ok) {
    CHECK(p.bounds == NULL && p.mem == NULL, "[%s] failed plan not freed", c->name);
    for (int i = 0; i < 4 && c->msg[i]; i++)
      CHECK(strstr(e.msg, c->msg[i]) != NULL, "[%s] message lacks '%s': %s", c->name, c->msg[i],
            e.msg);
    if (c->at && starts_with(c->at, "--set")) {
      CHECK(starts_with(e.msg, c->at), "[%s] message does not start with '%s': %s", c->name,
            c->at, e.msg);
    } else if (c->at) {
      char where[160];
      position_of(L.text, c->at, where, sizeof where);
      CHECK(starts_with(e.msg, where), "[%s] message does not start with '%s': %s", c->name,
            where, e.msg);
    }
  }
  if (rc == 0 && !want_ok) plan_free(&p);
  unload(&L);
}

/* --- Closed forms ----------------------------------------------------------------------------- */

static int64_t pad16(int64_t n) { return (n + 15) / 16 * 16; }

/* Padded floats of one transformer_block of width d (12 tensors, each padded to 16 floats). */
static int64_t block_floats(int64_t d) {
  return pad16(d) * 2 + pad16(3 * d * d) + pad16(3 * d) + pad16(d * d) + pad16(d) +
         pad16(d) * 2 + pad16(4 * d * d) + pad16(4 * d) + pad16(4 * d * d) + pad16(d);
}

static int build_plan(loaded *L, int base, const char *pipeline, const char *set, pt_plan *p,
                      spec_errors *e) {
  const char *over[1] = {set};
  memset(e, 0, sizeof *e);
  memset(p, 0, sizeof *p);
  if (load(L, base, pipeline, over, set ? 1 : 0) != 0) return -2;
  return plan_build(p, &L->model, e);
}

/* Tied weights (GPTPAD: vocab 257, dim 24, seq_len 10; the wte weight is 257*24 = 6168 floats,
 * padded to 6176): counted on both stages when split, once (with a second gradient) when not. */
static void test_tied(void) {
  const int64_t d = 24, wte = pad16(257 * 24), pos = pad16(10 * 24), blk = block_floats(d),
                ln = 2 * pad16(d);
  CHECK(wte == 6176 && pos == 240 && blk == 7280 && ln == 64, "closed forms: %lld %lld %lld %lld",
        (long long)wte, (long long)pos, (long long)blk, (long long)ln);
  loaded L;
  pt_plan p;
  spec_errors e;

  /* split: embedding on stage 0, lm_head on stage 1 */
  if (build_plan(&L, S_GPTPAD, "pipeline: {stages: 2, boundaries: [0, 3]}\n", NULL, &p, &e) == 0) {
    int64_t p0 = 4 * (wte + pos + blk), p1 = 4 * (blk + ln + wte);
    CHECK(p.mem[0].params == p0, "split: stage 0 params %lld, want %lld",
          (long long)p.mem[0].params, (long long)p0);
    CHECK(p.mem[1].params == p1, "split: stage 1 params %lld, want %lld",
          (long long)p.mem[1].params, (long long)p1);
    for (int s = 0; s < 2; s++) {
      CHECK(p.mem[s].grads == p.mem[s].params, "split: stage %d grads %lld != params %lld", s,
            (long long)p.mem[s].grads, (long long)p.mem[s].params);
      CHECK(p.mem[s].optimizer == 2 * p.mem[s].params, "split: stage %d adamw state %lld", s,
            (long long)p.mem[s].optimizer);
      CHECK(p.mem[s].total == p.mem[s].params + p.mem[s].grads + p.mem[s].optimizer +
                                  p.mem[s].activations + p.mem[s].workspace,
            "split: stage %d total is not the sum of its parts", s);
    }
    int st[4];
    int n = plan_tie_stages(&p, &L.model, "wte", st, 4);
    CHECK(n == 2 && st[0] == 0 && st[1] == 1, "split: tie stages n=%d", n);
    CHECK(plan_tie_stages(&p, &L.model, "nope", st, 4) == 0, "unknown tie key has stages");
    CHECK(plan_tie_stages(&p, &L.model, "wte", st, 1) == 1 && st[0] == 0, "max=1 not honoured");
    plan_free(&p);
  } else {
    CHECK(0, "split plan failed: %s", e.msg);
  }
  unload(&L);

  /* each tied copy alone on its stage, three stages */
  if (build_plan(&L, S_GPTPAD, "pipeline: {stages: 3, boundaries: [0, 1, 5]}\n", NULL, &p, &e) ==
      0) {
    CHECK(p.mem[0].params == 4 * wte && p.mem[2].params == 4 * wte,
          "alone: stage params %lld / %lld, want %lld each", (long long)p.mem[0].params,
          (long long)p.mem[2].params, (long long)(4 * wte));
    CHECK(p.mem[1].params == 4 * (pos + 2 * blk + ln), "alone: middle params %lld",
          (long long)p.mem[1].params);
    int st[4];
    int n = plan_tie_stages(&p, &L.model, "wte", st, 4);
    CHECK(n == 2 && st[0] == 0 && st[1] == 2, "alone: tie stages n=%d [%d %d]", n, st[0], st[1]);
    plan_free(&p);
  } else {
    CHECK(0, "3-stage plan failed: %s", e.msg);
  }
  unload(&L);

  /* one stage: the weight counts once, its second use keeps its own gradient */
  if (build_plan(&L, S_GPTPAD, "pipeline: {stages: 1}\n", NULL, &p, &e) == 0) {
    int64_t p0 = 4 * (wte + pos + 2 * blk + ln);
    CHECK(p.mem[0].params == p0, "one stage: params %lld, want %lld", (long long)p.mem[0].params,
          (long long)p0);
    CHECK(p.mem[0].grads == p0 + 4 * wte, "one stage: grads %lld, want %lld",
          (long long)p.mem[0].grads, (long long)(p0 + 4 * wte));
    CHECK(p.mem[0].optimizer == 2 * p0, "one stage: optimizer %lld",
          (long long)p.mem[0].optimizer);
    int st[4];
    CHECK(plan_tie_stages(&p, &L.model, "wte", st, 4) == 1 && st[0] == 0,
          "one stage: tie stages");
    /* planned "weight" is the parameter count with the tied weight on both layers */
    CHECK(p.weight[0] == (double)(257 * 24 * 2 + 240 + 2 * (12 * 576 + 13 * 24) + 48),
          "one stage: weight %.0f", p.weight[0]);
    plan_free(&p);
  } else {
    CHECK(0, "1-stage plan failed: %s", e.msg);
  }
  unload(&L);

  /* SGD keeps one state buffer */
  if (build_plan(&L, S_GPTPAD, "pipeline: {stages: 2, boundaries: [0, 3]}\n",
                 "train.optimizer.name=sgd", &p, &e) == 0) {
    for (int s = 0; s < 2; s++)
      CHECK(p.mem[s].optimizer == p.mem[s].params, "sgd: stage %d optimizer %lld vs params %lld",
            s, (long long)p.mem[s].optimizer, (long long)p.mem[s].params);
    plan_free(&p);
  } else {
    CHECK(0, "sgd plan failed: %s", e.msg);
  }
  unload(&L);
}

/* --- Memory caps ------------------------------------------------------------------------------ */

/* Stage memory as the planner sees it (the stage's in-flight count under the spec's schedule). */
/* The memory the planner fits caps against: the monotone bound of the estimate (the exact
 * estimate of every chosen stage is checked against its cap separately). */
static double stage_total(const pt_model *m, int P, int s, int a, int b) {
  int k = schedule_find(m->spec->pipeline.schedule)->in_flight(s, P,
                                                                (int)m->spec->train.micro_batches);
  return (double)memory_bound_stage(m, P, s, a, b, k);
}

static double layer_param_count(const pt_model *m, int li) {
  double n = 0;
  for (int q = 0; q < m->layers[li].n_params; q++) n += (double)m->layers[li].params[q].numel;
  return n;
}

/* Over every partition of layers [0, n) into P stages: the least possible largest stage total
 * (min_mem), and among partitions within caps (NULL: none) the least largest parameter count. */
typedef struct {
  double min_mem, best_params;
  int feasible;
} brute_result;

static void brute_rec(const pt_model *m, int P, const double *cap, int s, int a, double worst_mem,
                      double worst_params, int fits, brute_result *r) {
  int n = m->n_layers;
  if (s == P - 1) {
    double mm = stage_total(m, P, s, a, n), pp = 0;
    for (int i = a; i < n; i++) pp += layer_param_count(m, i);
    worst_mem = fmax(worst_mem, mm);
    worst_params = fmax(worst_params, pp);
    fits = fits && (!cap || mm <= cap[s]);
    if (worst_mem < r->min_mem) r->min_mem = worst_mem;
    if (fits) {
      r->feasible = 1;
      if (worst_params < r->best_params) r->best_params = worst_params;
    }
    return;
  }
  double pp = 0;
  for (int b = a + 1; b <= n - (P - 1 - s); b++) {
    pp += layer_param_count(m, b - 1);
    double mm = stage_total(m, P, s, a, b);
    brute_rec(m, P, cap, s + 1, b, fmax(worst_mem, mm), fmax(worst_params, pp),
              fits && (!cap || mm <= cap[s]), r);
  }
}

static brute_result brute(const pt_model *m, int P, const double *cap) {
  brute_result r = {INFINITY, INFINITY, 0};
  brute_rec(m, P, cap, 0, 0, 0, 0, 1, &r);
  return r;
}

/* The most leading layers that P stages within caps can hold (stage s starts at most at
 * s + n - P, as in any full plan). */
static int brute_fit_prefix(const pt_model *m, int P, const double *cap, int s, int a) {
  int n = m->n_layers, best = 0;
  if (s == P) return a;
  for (int b = a + 1; b <= s + 1 + n - P; b++) {
    if (stage_total(m, P, s, a, b) > cap[s]) break;
    int k = brute_fit_prefix(m, P, cap, s + 1, b);
    if (k > best) best = k;
  }
  return best;
}

/* How the no-fit message states the leading layers that fit (plan.c, explain_failure). */
static const char *fit_text(int prefix, int n_layers, int n_stages) {
  static char buf[96];
  if (prefix > 0)
    snprintf(buf, sizeof buf, "the first %d of %d layers fit in %d stages", prefix, n_layers,
             n_stages);
  else
    snprintf(buf, sizeof buf, "not even the first %d layers fit one per stage", n_stages);
  return buf;
}

static void check_fits(const pt_plan *p, const char *what) {
  for (int s = 0; s < p->n_stages; s++)
    CHECK(p->cap && (double)p->mem[s].total <= p->cap[s], "%s: stage %d needs %lld over cap %.0f",
          what, s, (long long)p->mem[s].total, p->cap ? p->cap[s] : 0.0);
}

static double max_weight(const pt_plan *p) {
  double w = 0;
  for (int s = 0; s < p->n_stages; s++) w = fmax(w, p->weight[s]);
  return w;
}

static void test_caps(void) {
  loaded L;
  pt_plan p;
  spec_errors e;
  char pipe[256], where[160];

  /* Uncapped reference: [0,3,5,7,10], stage 1 (2 blocks, 3 micro-batches in flight) largest. */
  if (load(&L, S_GPT, "pipeline: {stages: 4}\n", NULL, 0) != 0) return;
  brute_result r4 = brute(&L.model, 4, NULL);
  double c4 = r4.min_mem; /* the least uniform cap any 4-stage plan meets */
  unload(&L);
  CHECK(build_plan(&L, S_GPT, "pipeline: {stages: 4}\n", NULL, &p, &e) == 0, "uncapped: %s", e.msg);
  double uncapped_max = 0;
  int uncapped[5] = {0};
  for (int s = 0; s < 4 && p.bounds; s++) uncapped_max = fmax(uncapped_max, (double)p.mem[s].total);
  for (int s = 0; s <= 4 && p.bounds; s++) uncapped[s] = p.bounds[s];
  CHECK(p.cap == NULL, "no max_memory, yet caps");
  plan_free(&p);
  unload(&L);
  CHECK(c4 < uncapped_max, "the uncapped plan should not be the least-memory one (%.0f vs %.0f)",
        c4, uncapped_max);

  /* A uniform cap that binds: exactly the least achievable maximum. */
  snprintf(pipe, sizeof pipe, "pipeline:\n  stages: 4\n  max_memory: %.0f\n", c4);
  if (build_plan(&L, S_GPT, pipe, NULL, &p, &e) == 0) {
    char b[64];
    format_bounds(&p, b, sizeof b);
    int differs = 0;
    for (int s = 0; s <= 4; s++) differs |= p.bounds[s] != uncapped[s];
    CHECK(differs, "binding cap %.0f: plan %s equals the uncapped one", c4, b);
    for (int s = 0; s < 4; s++) CHECK(p.cap[s] == c4, "cap[%d] = %.0f", s, p.cap[s]);
    check_fits(&p, "binding cap");
    brute_result r = brute(&L.model, 4, p.cap);
    CHECK(r.feasible && max_weight(&p) == r.best_params,
          "binding cap: largest stage has %.0f parameters, the best plan within the cap %.0f",
          max_weight(&p), r.best_params);
    CHECK(p.n_warnings == 1 && has_warning(&p, "mean stage time"),
          "binding cap: %d warnings (%s)", p.n_warnings, p.n_warnings ? p.warnings[0] : "-");
    plan_free(&p);
  } else {
    CHECK(0, "binding cap %.0f: %s", c4, e.msg);
  }
  unload(&L);

  /* One byte less: no 4-stage plan fits; 5 stages would (if the brute force says so). */
  if (load(&L, S_GPT, "pipeline: {stages: 4}\n", NULL, 0) == 0) {
    double caps[10];
    for (int i = 0; i < 10; i++) caps[i] = c4 - 1;
    int prefix = brute_fit_prefix(&L.model, 4, caps, 0, 0);
    int fit = 0;
    for (int k = 5; k <= 10 && !fit; k++)
      if (brute(&L.model, k, caps).feasible) fit = k;
    unload(&L);
    snprintf(pipe, sizeof pipe, "pipeline:\n  stages: 4\n  max_memory: %.0f\n", c4 - 1);
    if (build_plan(&L, S_GPT, pipe, NULL, &p, &e) == 0) {
      CHECK(0, "cap %.0f: a plan was found", c4 - 1);
      plan_free(&p);
    }
    char want[512];
    snprintf(want, sizeof want, "no plan fits pipeline.max_memory: %s", fit_text(prefix, 10, 4));
    CHECK(strstr(e.msg, want) != NULL, "cap - 1: message lacks '%s': %s", want, e.msg);
    if (fit) {
      snprintf(want, sizeof want, "; %d stages would fit the whole model", fit);
      CHECK(strstr(e.msg, want) != NULL, "cap - 1: message lacks '%s': %s", want, e.msg);
    }
    CHECK(fit == 5, "expected 5 stages to fit at cap %.0f (brute force: %d)", c4 - 1, fit);
    CHECK(strstr(e.msg, "raise the caps, add stages") != NULL, "cap - 1: no advice: %s", e.msg);
    /* the message points at the value after "max_memory: " */
    char at[160];
    const char *hit = strstr(L.text, "max_memory: ");
    position_of(L.text, hit ? hit + 12 : "?", at, sizeof at);
    CHECK(starts_with(e.msg, at), "cap - 1: message does not start with '%s': %s", at, e.msg);
    unload(&L);
  }

  /* A uniform cap too small for any single layer on stage 0 (4 micro-batches in flight): the
   * message names stage 0, its least-memory layer and the bytes against the cap. */
  {
    const double cap = 20 * 1024;
    if (load(&L, S_GPT, "pipeline: {stages: 4}\n", NULL, 0) == 0) {
      double need = INFINITY;
      int layer = -1, starved = -1;
      for (int s = 0; s < 4 && starved < 0; s++) {
        /* the layers stage s can hold alone: layer 0 for the first, layer 9 for the last */
        int lo = s == 3 ? 9 : s, hi = s == 0 ? 0 : s + 10 - 4, all_over = 1;
        for (int l = lo; l <= hi; l++) all_over &= stage_total(&L.model, 4, s, l, l + 1) > cap;
        if (!all_over) continue;
        starved = s;
        for (int l = lo; l <= hi; l++) {
          double t = stage_total(&L.model, 4, s, l, l + 1);
          if (t < need) need = t, layer = l;
        }
      }
      CHECK(starved == 0 && layer == 0, "20KiB: expected stage 0 / layer 0 (embedding) to be "
            "the starved pair, brute force found stage %d layer %d", starved, layer);
      char needs[32], want[512];
      memory_format_size((int64_t)need, needs, sizeof needs);
      snprintf(want, sizeof want, "no plan fits pipeline.max_memory: stage %d cannot hold even one "
               "layer (the lightest, layer %d, %s, needs %s against its cap of 20.00 KiB); %s",
               starved, layer, layer >= 0 ? L.model.layers[layer].type->name : "?", needs,
               fit_text(0, 10, 4));
      unload(&L);
      if (build_plan(&L, S_GPT, "pipeline:\n  stages: 4\n  max_memory: 20KiB\n", NULL, &p, &e) == 0) {
        CHECK(0, "20KiB: a plan was found");
        plan_free(&p);
      }
      CHECK(strstr(e.msg, want) != NULL, "20KiB: message lacks '%s': %s", want, e.msg);
      CHECK(strstr(e.msg, "would fit") == NULL, "20KiB: no stage count fits, yet: %s", e.msg);
      position_of(L.text, "20KiB", where, sizeof where);
      CHECK(starts_with(e.msg, where), "20KiB: message does not start with '%s': %s", where, e.msg);
      unload(&L);
    }
  }

  /* Heterogeneous caps: a tight stage 0. */
  if (build_plan(&L, S_GPT, "pipeline:\n  stages: 4\n  max_memory: [600000, 2MiB, 1.5MiB, 2MB]\n",
                 NULL, &p, &e) == 0) {
    CHECK(p.cap[0] == 600000 && p.cap[1] == 2097152 && p.cap[2] == 1572864 && p.cap[3] == 2e6,
          "caps parsed as %.0f %.0f %.0f %.0f", p.cap[0], p.cap[1], p.cap[2], p.cap[3]);
    check_fits(&p, "per-stage caps");
    CHECK(p.bounds[1] < uncapped[1], "stage 0 under 600000 B should hold fewer than %d layers "
          "(has %d)", uncapped[1], p.bounds[1]);
    brute_result r = brute(&L.model, 4, p.cap);
    CHECK(r.feasible && max_weight(&p) == r.best_params,
          "per-stage caps: largest stage %.0f parameters, best within the caps %.0f",
          max_weight(&p), r.best_params);
    plan_free(&p);
  } else {
    CHECK(0, "per-stage caps: %s", e.msg);
  }
  unload(&L);
  if (load(&L, S_GPT, "pipeline: {stages: 4}\n", NULL, 0) == 0) {
    double need = INFINITY;
    int layer = -1;
    for (int l = 2; l <= 8; l++) { /* stage 2 of 4 can start at layers 2..8 */
      double t = stage_total(&L.model, 4, 2, l, l + 1);
      if (t < need) need = t, layer = l;
    }
    double caps[4] = {1 << 30, 1 << 30, 10 * 1024, 1 << 30};
    int prefix = brute_fit_prefix(&L.model, 4, caps, 0, 0);
    char needs[32], want[512];
    memory_format_size((int64_t)need, needs, sizeof needs);
    snprintf(want, sizeof want, "stage 2 cannot hold even one layer (the lightest, layer %d, %s, "
             "needs %s against its cap of 10.00 KiB); %s", layer, L.model.layers[layer].type->name,
             needs, fit_text(prefix, 10, 4));
    unload(&L);
    /* a starved stage 2 (10 KiB, less than any layer it could hold) */
    if (build_plan(&L, S_GPT, "pipeline:\n  stages: 4\n  max_memory: [1GiB, 1GiB, 10KiB, 1GiB]\n",
                   NULL, &p, &e) == 0) {
      CHECK(0, "a starved stage 2 still planned");
      plan_free(&p);
    }
    CHECK(strstr(e.msg, want) != NULL, "starved stage 2: message lacks '%s': %s", want, e.msg);
    CHECK(strstr(e.msg, "would fit") == NULL, "per-stage caps never suggest a stage count: %s",
          e.msg);
    position_of(L.text, "[1GiB", where, sizeof where);
    CHECK(starts_with(e.msg, where), "starved stage 2: message does not start with '%s': %s",
          where, e.msg);
    unload(&L);
  }

  /* One size in a list applies to every stage; spaces before the unit are fine. */
  if (build_plan(&L, S_GPT, "pipeline:\n  stages: 4\n  max_memory: [1 GiB]\n", NULL, &p, &e) == 0) {
    for (int s = 0; s < 4; s++) CHECK(p.cap[s] == 1073741824.0, "[1 GiB]: cap[%d] %.0f", s, p.cap[s]);
    /* every stage uses < 10% of 1 GiB: one warning each, with the sizes */
    CHECK(p.n_warnings == 4, "near-unused caps: %d warnings", p.n_warnings);
    for (int s = 0; s < 4 && s < p.n_warnings; s++) {
      char used[32], want[160];
      memory_format_size(p.mem[s].total, used, sizeof used);
      snprintf(want, sizeof want, "stage %d uses %s of its 1.00 GiB cap (0%%): the cap is nearly "
               "unused", s, used);
      CHECK(has_warning(&p, want), "near-unused caps: no warning '%s' (got %s)", want,
            p.warnings[s]);
    }
    for (int s = 0; s <= 4; s++) CHECK(p.bounds[s] == uncapped[s], "a loose cap changed the plan");
    plan_free(&p);
  } else {
    CHECK(0, "[1 GiB]: %s", e.msg);
  }
  unload(&L);

  /* A cap used at 10% or more is not "nearly unused": 8 MiB vs stage totals of 0.57-1.0 MiB
   * warns for every stage under 838861 bytes only. */
  if (build_plan(&L, S_GPT, "pipeline:\n  stages: 4\n  max_memory: 8MiB\n", NULL, &p, &e) == 0) {
    int want = 0;
    for (int s = 0; s < 4; s++) {
      int low = (double)p.mem[s].total < 0.1 * 8388608.0;
      want += low;
      char needle[32];
      snprintf(needle, sizeof needle, "stage %d uses", s);
      CHECK(has_warning(&p, needle) == low, "8MiB: stage %d (%lld B) warning %s", s,
            (long long)p.mem[s].total, low ? "missing" : "unexpected");
    }
    CHECK(want > 0 && want < 4, "8MiB should leave some stages above 10%% (%d warned)", want);
    CHECK(p.n_warnings == want, "8MiB: %d warnings, want %d", p.n_warnings, want);
    plan_free(&p);
  } else {
    CHECK(0, "8MiB: %s", e.msg);
  }
  unload(&L);

  /* "Not given" (null) means no cap / no explicit layout, as everywhere else in a spec
   * (docs/spec.md: null "means 'not given': the default applies"), e.g. to drop a cap of the
   * file from the command line with --set pipeline.max_memory= */
  static const char *const nulls[] = {"pipeline.max_memory=", "pipeline.boundaries=~",
                                      "pipeline.stage_layers=null", "pipeline.devices="};
  for (int i = 0; i < 4; i++) {
    static const char *const pipes[] = {
        "pipeline:\n  stages: 4\n  max_memory: 10KiB\n",
        "pipeline:\n  stages: 4\n  boundaries: [0, 3, 3, 3]\n",
        "pipeline:\n  stages: 4\n  stage_layers: [[0]]\n",
        "pipeline:\n  stages: 4\n  devices: [0, 0]\n"};
    int rc = build_plan(&L, S_GPT, pipes[i], nulls[i], &p, &e);
    CHECK(rc == 0, "--set %s should remove the setting (plan as if absent), got: %s", nulls[i],
          e.msg);
    if (rc == 0) {
      for (int s = 0; s <= 4; s++)
        CHECK(p.bounds[s] == uncapped[s], "--set %s: bounds differ from the default plan",
              nulls[i]);
      plan_free(&p);
    }
    unload(&L);
  }
}

/* With activation checkpointing a stage's memory is not monotone in its layer range: a stage of
 * at most k layers keeps everything (stage.c turns checkpointing off there) and the kept segment
 * ends move with the stage start, so [2,4) (two blocks, unchecked) needs more than [0,4). Caps
 * must still be honoured by the automatic methods whenever some plan meets them. GPT, k = 2,
 * 4 stages, 875000 B: the layout [0,1,4,7,10] fits (checked as explicit boundaries below), so
 * the parameters method must find a plan within the cap too. */
static void test_checkpoint_caps(void) {
  loaded L;
  pt_plan p;
  spec_errors e;
  static const char *const ck = "train.activation_checkpoint_interval=2";
  if (build_plan(&L, S_GPT, "pipeline: {stages: 4, boundaries: [0, 1, 4, 7], max_memory: 875000}\n",
                 ck, &p, &e) == 0) {
    check_fits(&p, "checkpointing, explicit [0,1,4,7]");
    plan_free(&p);
  } else {
    CHECK(0, "checkpointing: the explicit layout [0,1,4,7] should fit 875000 B: %s", e.msg);
  }
  unload(&L);
  if (load(&L, S_GPT, "pipeline: {stages: 4, max_memory: 875000}\n", &ck, 1) == 0) {
    double caps[4] = {875000, 875000, 875000, 875000};
    brute_result r = brute(&L.model, 4, caps);
    CHECK(r.feasible, "checkpointing: brute force finds no 4-stage plan within 875000 B");
    unload(&L);
  }
  static const char *const methods[] = {"parameters", "uniform", "balanced"};
  for (int i = 0; i < 3; i++) {
    char pipe[128];
    snprintf(pipe, sizeof pipe, "pipeline: {stages: 4, max_memory: 875000, partition: %s}\n",
             methods[i]);
    int rc = build_plan(&L, S_GPT, pipe, ck, &p, &e);
    CHECK(rc == 0, "checkpointing, %s: a plan within 875000 B exists ([0,1,4,7,10]) but "
          "plan_build failed: %s", methods[i], e.msg);
    if (rc == 0) {
      check_fits(&p, "checkpointing, automatic");
      plan_free(&p);
    }
    unload(&L);
  }
}

/* --- Devices and the stage map ---------------------------------------------------------------- */

static void test_devices(void) {
  loaded L;
  pt_plan p;
  spec_errors e;

  /* no devices: each rank uses its node-local rank */
  if (build_plan(&L, S_GPT, "pipeline: {stages: 4}\n", NULL, &p, &e) == 0) {
    for (int r = 0; r < 4; r++) {
      CHECK(p.devices[r] == -1, "default device of rank %d is %d", r, p.devices[r]);
      CHECK(plan_device(&p, r, 7 - r) == 7 - r, "rank %d: local rank not used", r);
    }
    plan_free(&p);
  }
  unload(&L);

  static const struct {
    const char *pipeline;
    int dp, ranks, dev[8];
  } maps[] = {
      {"pipeline: {stages: 4, devices: [2, 3, 0, 1]}\n", 1, 4, {2, 3, 0, 1}},
      {"pipeline: {stages: 4, devices: [0, 2, 5, 7]}\n", 1, 4, {0, 2, 5, 7}},
      /* a per-stage list with replicas: each replica's rank gets its stage's device */
      {"pipeline: {stages: 4, data_parallel: 2, devices: [2, 3, 0, 1]}\n", 2, 8,
       {2, 3, 0, 1, 2, 3, 0, 1}},
      /* a per-rank list */
      {"pipeline: {stages: 4, data_parallel: 2, devices: [7, 6, 5, 4, 3, 2, 1, 0]}\n", 2, 8,
       {7, 6, 5, 4, 3, 2, 1, 0}},
      {"pipeline: {stages: 2, data_parallel: 3, devices: [1, 0]}\n", 3, 6, {1, 0, 1, 0, 1, 0}},
      /* ranks sharing one GPU through the staged transport (a pipeline on a one-GPU machine) */
      {"comm: {backend: mpi}\npipeline: {stages: 2, devices: [0, 0]}\n", 1, 2, {0, 0}},
      {"comm: {backend: mpi}\npipeline: {stages: 4, devices: [0, 0, 1, 1]}\n", 1, 4, {0, 0, 1, 1}},
  };
  for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) {
    if (build_plan(&L, S_GPT, maps[i].pipeline, NULL, &p, &e) != 0) {
      CHECK(0, "devices case %zu: %s", i, e.msg);
      unload(&L);
      continue;
    }
    int P = p.n_stages;
    CHECK(p.data_parallel == maps[i].dp, "case %zu: data_parallel %d", i, p.data_parallel);
    for (int r = 0; r < maps[i].ranks; r++) {
      int stage = r % P, replica = r / P;
      CHECK(plan_device(&p, r, 99) == maps[i].dev[r], "case %zu: rank %d on device %d, want %d",
            i, r, plan_device(&p, r, 99), maps[i].dev[r]);
      CHECK(plan_stage_of_rank(&p, r) == stage && plan_replica_of_rank(&p, r) == replica,
            "case %zu: rank %d is (replica %d, stage %d)", i, r, plan_replica_of_rank(&p, r),
            plan_stage_of_rank(&p, r));
      CHECK(plan_rank(&p, replica, stage) == r, "case %zu: plan_rank(%d, %d) = %d", i, replica,
            stage, plan_rank(&p, replica, stage));
      /* neighbours follow stage order within the replica, whatever the device ids */
      int prev = stage == 0 ? -1 : r - 1, next = stage == P - 1 ? -1 : r + 1;
      CHECK(plan_prev_rank(&p, r) == prev, "case %zu: prev of rank %d is %d, want %d", i, r,
            plan_prev_rank(&p, r), prev);
      CHECK(plan_next_rank(&p, r) == next, "case %zu: next of rank %d is %d, want %d", i, r,
            plan_next_rank(&p, r), next);
    }
    /* the stage map: every layer, first/end layers */
    for (int s = 0; s < P; s++) {
      CHECK(plan_first_layer(&p, s) == p.bounds[s] && plan_end_layer(&p, s) == p.bounds[s + 1],
            "case %zu: stage %d layer range", i, s);
      for (int li = p.bounds[s]; li < p.bounds[s + 1]; li++)
        CHECK(plan_stage_of_layer(&p, li) == s, "case %zu: layer %d on stage %d, want %d", i, li,
              plan_stage_of_layer(&p, li), s);
    }
    int st[8];
    int n = plan_tie_stages(&p, &L.model, "wte", st, 8);
    CHECK(n == 2 && st[0] == 0 && st[1] == P - 1, "case %zu: wte on %d stages", i, n);
    plan_free(&p);
    unload(&L);
  }

  /* an uneven explicit layout: the stage of every layer */
  if (build_plan(&L, S_GPT, "pipeline: {stages: 5, boundaries: [0, 1, 2, 8, 9]}\n", NULL, &p, &e) ==
      0) {
    static const int want[10] = {0, 1, 2, 2, 2, 2, 2, 2, 3, 4};
    for (int li = 0; li < 10; li++)
      CHECK(plan_stage_of_layer(&p, li) == want[li], "uneven: layer %d on stage %d, want %d", li,
            plan_stage_of_layer(&p, li), want[li]);
    int st[8];
    int n = plan_tie_stages(&p, &L.model, "wte", st, 8);
    CHECK(n == 2 && st[0] == 0 && st[1] == 4, "uneven: wte stages");
    plan_free(&p);
  } else {
    CHECK(0, "uneven: %s", e.msg);
  }
  unload(&L);
}

/* --- The in-flight rule ------------------------------------------------------------------------ */

static void test_in_flight(void) {
  const pt_schedule_type *f1b = schedule_find("1f1b"), *gpipe = schedule_find("gpipe");
  CHECK(f1b->in_flight(0, 4, 8) == 4 && f1b->in_flight(3, 4, 8) == 1 &&
            f1b->in_flight(1, 4, 2) == 2 && gpipe->in_flight(3, 4, 8) == 8 &&
            gpipe->in_flight(0, 4, 3) == 3,
        "in-flight counts");
  static const struct {
    const char *set[2];
    int M, gpipe;
  } runs[] = {
      {{"pipeline.schedule=1f1b", "train.micro_batches=4"}, 4, 0},
      {{"pipeline.schedule=gpipe", "train.micro_batches=4"}, 4, 1},
      {{"pipeline.schedule=1f1b", "train.micro_batches=2"}, 2, 0},
      {{"pipeline.schedule=gpipe", "train.micro_batches=2"}, 2, 1},
      {{"pipeline.schedule=1f1b", "train.micro_batches=9"}, 9, 0},
  };
  int64_t act[5][4];
  for (int i = 0; i < 5; i++) {
    loaded L;
    pt_plan p;
    spec_errors e = {0};
    if (load(&L, S_GPT, "pipeline: {stages: 4, boundaries: [0, 3, 5, 7]}\n", runs[i].set, 2) != 0)
      return;
    if (plan_build(&p, &L.model, &e) != 0) {
      CHECK(0, "in-flight %d: %s", i, e.msg);
      unload(&L);
      return;
    }
    const pt_layer *blk = &L.model.layers[3];
    int64_t B = 2, T = 16, d = 32;
    /* a two-block middle stage keeps per micro-batch its input, both outputs and both saved
     * states, plus the engine's received output gradient and the input gradient it sends */
    int64_t act_b = 4 * B * T * d;
    int64_t slot12 = act_b + 2 * (act_b + (int64_t)blk->type->saved_bytes(blk, 2, 16)) + 2 * act_b;
    for (int s = 0; s < 4; s++) {
      int k = runs[i].gpipe ? runs[i].M : (4 - s < runs[i].M ? 4 - s : runs[i].M);
      pt_stage_memory one;
      memory_estimate_stage(&L.model, p.bounds[s], p.bounds[s + 1], 1, &one);
      CHECK(p.mem[s].in_flight == k, "run %d stage %d: %d in flight, want %d", i, s,
            p.mem[s].in_flight, k);
      CHECK(p.mem[s].activations == k * one.activations,
            "run %d stage %d: activations %lld, want %d x %lld", i, s,
            (long long)p.mem[s].activations, k, (long long)one.activations);
      if (s == 1 || s == 2)
        CHECK(one.activations == slot12, "stage %d: one micro-batch holds %lld, want %lld", s,
              (long long)one.activations, (long long)slot12);
      act[i][s] = p.mem[s].activations;
    }
    plan_free(&p);
    unload(&L);
  }
  /* stages 1 and 2 hold the same layers: GPipe keeps the same on both, 1F1B 3 vs 2 */
  CHECK(act[1][1] == act[1][2], "gpipe: stage 1 %lld vs stage 2 %lld", (long long)act[1][1],
        (long long)act[1][2]);
  CHECK(2 * act[0][1] == 3 * act[0][2], "1f1b: stage 1 %lld vs stage 2 %lld (want 3:2)",
        (long long)act[0][1], (long long)act[0][2]);
  for (int s = 0; s < 4; s++)
    CHECK(act[0][s] <= act[1][s], "stage %d: 1f1b holds more than gpipe", s);
  CHECK(act[0][3] * 4 == act[1][3], "last stage: 1f1b holds 1, gpipe 4 micro-batches");
  CHECK(act[0][0] == act[1][0], "first stage: both hold all 4");
  /* with M = 2 < P the first stages are capped at M: 2, 2, 2, 1 */
  CHECK(act[2][1] == act[3][1] && act[2][3] * 2 == act[3][3], "M=2: 1f1b vs gpipe");
  /* M = 9 > P: 1F1B still holds P - s */
  CHECK(act[4][0] == act[0][0] && act[4][3] == act[0][3], "M=9: in-flight grew with M");
}


/* --- Several chunks per stage ----------------------------------------------------------------- */

/* The plan's chunks against the schedule's own placement and slots, every chunk non-empty, the
 * stage map through the chunks, and each stage's figures as its chunks' together. */
static void check_chunk_plan(const char *name, const pt_plan *p, const pt_model *m) {
  pt_schedule s;
  char err[256];
  if (schedule_build_spec(&s, m->spec, err, sizeof err) != 0) {
    CHECK(0, "[%s] schedule: %s", name, err);
    return;
  }
  CHECK(p->n_chunks == s.n_chunks && p->n_chunks == p->n_stages * p->virtual_stages,
        "[%s] %d chunks, the schedule %d", name, p->n_chunks, s.n_chunks);
  for (int c = 0; c < p->n_chunks && c < s.n_chunks; c++) {
    CHECK(p->chunk_stage[c] == s.chunk_rank[c] && p->chunk_in_flight[c] == s.n_slots[c],
          "[%s] chunk %d: stage %d, %d in flight; the schedule %d, %d", name, c,
          p->chunk_stage[c], p->chunk_in_flight[c], s.chunk_rank[c], s.n_slots[c]);
    CHECK(p->bounds[c] < p->bounds[c + 1], "[%s] chunk %d is empty", name, c);
    for (int li = p->bounds[c]; li < p->bounds[c + 1]; li++)
      CHECK(plan_chunk_of_layer(p, li) == c && plan_stage_of_layer(p, li) == p->chunk_stage[c],
            "[%s] layer %d: chunk %d", name, li, plan_chunk_of_layer(p, li));
  }
  for (int st = 0; st < p->n_stages; st++) {
    int chunks[8], n = plan_stage_chunks(p, st, chunks), in_flight = 0;
    double flops = 0;
    for (int i = 0; i < n; i++)
      in_flight += p->chunk_in_flight[chunks[i]], flops += p->chunk_flops[chunks[i]];
    CHECK(n == p->virtual_stages && p->mem[st].in_flight == in_flight && p->flops[st] == flops,
          "[%s] stage %d: %d chunks, %d in flight (chunks: %d)", name, st, n,
          p->mem[st].in_flight, in_flight);
  }
  schedule_free(&s);
}

/* Stage memory with two chunks: the activations and workspace of both, less the input-gradient
 * slots of a chunk whose predecessor runs on the same stage; a tied weight held twice by one
 * stage stored once, with a second gradient. */
static void check_rank_memory(const char *name, const pt_plan *p, const pt_model *m, int st,
                              int64_t tied_bytes) {
  int chunks[8], n = plan_stage_chunks(p, st, chunks);
  int64_t act = 0, work = 0, params = 0;
  for (int i = 0; i < n; i++) {
    int c = chunks[i];
    const pt_stage_memory *cm = &p->chunk_mem[c];
    int64_t din = 4 * 2 * 16 * (int64_t)m->layers[p->bounds[c]].in_dim; /* B = 2, T = 16 */
    act += cm->activations - (c > 0 && p->chunk_stage[c - 1] == st ? cm->in_flight * din : 0);
    work += cm->workspace;
    params += cm->params;
  }
  CHECK(p->mem[st].activations == act && p->mem[st].workspace == work,
        "[%s] stage %d: activations %lld, workspace %lld; want %lld, %lld", name, st,
        (long long)p->mem[st].activations, (long long)p->mem[st].workspace, (long long)act,
        (long long)work);
  CHECK(p->mem[st].params == params - tied_bytes && p->mem[st].grads == params,
        "[%s] stage %d: params %lld, grads %lld; chunks hold %lld, a tie %lld", name, st,
        (long long)p->mem[st].params, (long long)p->mem[st].grads, (long long)params,
        (long long)tied_bytes);
}

static void test_chunks(void) {
  loaded L;
  pt_plan p;
  spec_errors e;
  int64_t wte = 4 * 256 * 32; /* GPT's tied weight: 8192 floats, a multiple of 16 */

  /* interleaved, 2 stages x 2 chunks (loop): embedding on stage 0, lm_head on stage 1 */
  const char *loop = "pipeline: {stages: 2, schedule: interleaved_1f1b, virtual_stages: 2}\n";
  if (build_plan(&L, S_GPT, loop, NULL, &p, &e) == 0) {
    check_chunk_plan("interleaved", &p, &L.model);
    check_rank_memory("interleaved", &p, &L.model, 0, 0);
    check_rank_memory("interleaved", &p, &L.model, 1, 0);
    int st[4], n = plan_tie_stages(&p, &L.model, "wte", st, 4);
    CHECK(n == 2 && st[0] == 0 && st[1] == 1, "interleaved: wte on %d stages", n);
    pt_range r[4];
    CHECK(plan_stage_ranges(&p, 1, r) == 2 && r[0].first == p.bounds[1] && r[1].last == 10,
          "interleaved: stage 1's ranges");
    plan_free(&p);
  } else {
    CHECK(0, "interleaved: %s", e.msg);
  }
  unload(&L);

  /* V (zbv), explicit chunk boundaries: chunks 0 and 3 on stage 0 hold both tied layers (one
   * weight, two gradients); chunk 2 takes its input from chunk 1 on the same stage */
  if (build_plan(&L, S_GPT, "pipeline: {stages: 2, schedule: zbv, boundaries: [0, 3, 5, 7]}\n",
                 NULL, &p, &e) == 0) {
    static const int want[5] = {0, 3, 5, 7, 10}, stage[4] = {0, 1, 1, 0};
    for (int c = 0; c < 4; c++)
      CHECK(p.bounds[c] == want[c] && p.chunk_stage[c] == stage[c], "zbv: chunk %d", c);
    check_chunk_plan("zbv", &p, &L.model);
    check_rank_memory("zbv", &p, &L.model, 0, wte);
    check_rank_memory("zbv", &p, &L.model, 1, 0);
    int st[4], n = plan_tie_stages(&p, &L.model, "wte", st, 4);
    CHECK(n == 1 && st[0] == 0, "zbv: wte on %d stages, want stage 0 alone", n);
    plan_free(&p);
  } else {
    CHECK(0, "zbv: %s", e.msg);
  }
  unload(&L);
}

/* Caps with chunks: each chunk is fitted to its stage's cap shared evenly; errors speak of
 * chunks. */
static void test_chunk_caps(void) {
  loaded L;
  pt_plan p;
  spec_errors e;
  const char *pipe = "pipeline: {stages: 2, schedule: interleaved_1f1b, virtual_stages: 2, "
                     "max_memory: 3MiB}\n";
  if (build_plan(&L, S_GPT, pipe, NULL, &p, &e) == 0) {
    for (int s = 0; s < 2; s++)
      CHECK(p.mem[s].total <= 3 << 20, "capped chunks: stage %d holds %lld", s,
            (long long)p.mem[s].total);
    for (int c = 0; c < 4; c++)
      CHECK(memory_bound_stage(&L.model, 4, c, p.bounds[c], p.bounds[c + 1],
                               p.chunk_in_flight[c]) <= (3 << 20) / 2,
            "capped chunks: chunk %d over half its stage's cap", c);
    plan_free(&p);
  } else {
    CHECK(0, "capped chunks: %s", e.msg);
  }
  unload(&L);
  static const struct {
    const char *pipeline, *msg;
  } bad[] = {
      {"pipeline: {stages: 2, schedule: interleaved_1f1b, virtual_stages: 2, max_memory: 200KiB}\n",
       "chunk 0 (on stage 0, which gives each of its 2 chunks 1/2 of its cap) cannot hold even "
       "one layer"},
      {"pipeline: {stages: 2, schedule: interleaved_1f1b, virtual_stages: 2, boundaries: [0, 5]}\n",
       "pipeline.boundaries must list the first layer of each of the 4 chunks"},
      {"pipeline: {stages: 6, schedule: interleaved_1f1b, virtual_stages: 2}\n",
       "pipeline.stages (6) x 2 chunks per stage = 12 chunks is more than the 10 layers"},
      {"pipeline: {stages: 2, schedule: dualpipev}\n",
       "dualpipev needs at least 2P = 4 micro-batches"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *over[1] = {"train.micro_batches=3"};
    memset(&e, 0, sizeof e);
    int rc = load(&L, S_GPT, bad[i].pipeline, over, i == 3) == 0 ? plan_build(&p, &L.model, &e) : 0;
    CHECK(rc != 0 && strstr(e.msg, bad[i].msg), "chunk error %zu: rc %d, message: %s", i, rc,
          e.msg);
    unload(&L);
  }
}

/* comm (partition/memory.h) of one stage on a GPU over NCCL: dp replicas' chain-sum scratch
 * (the stage's gradients), the tied weight's, and NCCL's buffers for its peers. */
static int64_t expected_comm(const pt_stage_memory *cpu, int64_t wte, int peers) {
  return cpu->grads + 4 * wte + peers * memory_nccl_peer_bytes();
}

/* GPTPAD on 2 stages x 2 replicas, wte tied over both stages: on a GPU with comm.backend auto or
 * nccl each stage adds the data-parallel scratch, the tie's, and 3 peers (its pipeline
 * neighbour, its replica, the other holder of wte); on the CPU or over MPI staging nothing
 * changes; NCCL_BUFFSIZE moves NCCL's part; the solver's bound covers it. */
static void test_comm(void) {
  const char *pipe = "pipeline: {stages: 2, data_parallel: 2, boundaries: [0, 3]}\n";
  const char *pipe_mpi = "pipeline: {stages: 2, data_parallel: 2, boundaries: [0, 3]}\n"
                         "comm: {backend: mpi}\n";
  const int64_t wte = pad16(257 * 24);
  loaded a, b, c;
  pt_plan cpu, gpu, mpi;
  spec_errors e;
  CHECK(build_plan(&a, S_GPTPAD, pipe, "pipeline.device=cpu", &cpu, &e) == 0, "cpu: %s", e.msg);
  CHECK(build_plan(&b, S_GPTPAD, pipe, "pipeline.device=gpu", &gpu, &e) == 0, "gpu: %s", e.msg);
  CHECK(build_plan(&c, S_GPTPAD, pipe_mpi, "pipeline.device=gpu", &mpi, &e) == 0, "mpi: %s",
        e.msg);
  CHECK(memory_nccl_peer_bytes() == 16 << 20, "4 MiB x 2 channels x 2 sides: %lld",
        (long long)memory_nccl_peer_bytes());
  for (int s = 0; s < 2; s++) {
    const pt_stage_memory *mc = &cpu.mem[s], *mg = &gpu.mem[s], *mm = &mpi.mem[s];
    CHECK(mc->comm == 0 && mc->total == mc->params + mc->grads + mc->optimizer +
              mc->activations + mc->workspace, "cpu stage %d: comm %lld, total %lld", s,
          (long long)mc->comm, (long long)mc->total);
    /* a GPU build sizes the blocks' saved attention state for the GPU's fused kernels (B*H*T
     * floats, not B*H*T*T: tests/gpu/test_attention_memory.c), so only the parameter parts
     * equal the CPU's; the GPU over MPI staging is the GPU's figure without comm */
    CHECK(mm->comm == 0 && mm->params == mc->params && mm->grads == mc->grads &&
              mm->optimizer == mc->optimizer && mm->activations <= mc->activations &&
              mm->total == mm->params + mm->grads + mm->optimizer + mm->activations +
                               mm->workspace,
          "gpu over mpi staging, stage %d: comm %lld, total %lld", s, (long long)mm->comm,
          (long long)mm->total);
    CHECK(mg->comm_peers == 3 && mg->comm == expected_comm(mc, wte, 3) &&
              mg->total == mm->total + mg->comm,
          "gpu over nccl, stage %d: comm %lld (%d peers), expected %lld; total %lld, mpi %lld", s,
          (long long)mg->comm, mg->comm_peers, (long long)expected_comm(mc, wte, 3),
          (long long)mg->total, (long long)mm->total);
    int k = schedule_find("1f1b")->in_flight(s, 2, 2);
    CHECK(memory_bound_stage(&b.model, 2, s, gpu.bounds[s], gpu.bounds[s + 1], k) >= mg->total,
          "gpu stage %d: the solver's bound misses comm", s);
  }
  plan_free(&gpu);
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  CHECK(plan_build(&gpu, &b.model, &e) == 0 && gpu.mem[0].comm == expected_comm(&cpu.mem[0], wte, 3)
        && memory_nccl_peer_bytes() == 4 << 20, "NCCL_BUFFSIZE=1 MiB: comm %lld",
        (long long)gpu.mem[0].comm);
  unsetenv("NCCL_BUFFSIZE");
  plan_free(&cpu), plan_free(&gpu), plan_free(&mpi);
  unload(&a), unload(&b), unload(&c);
}

int main(void) {
  FILE *tiny = fopen("examples/data/tiny.txt", "rb");
  if (!tiny) {
    fprintf(stderr, "test_plan: examples/data/tiny.txt not found; run from the repository root\n");
    return 1;
  }
  fclose(tiny);
  make_specs();
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
  test_tied();
  test_caps();
  test_checkpoint_caps();
  test_devices();
  test_in_flight();
  test_chunks();
  test_chunk_caps();
  test_comm();
  remove(g_f32_path);
  return test_summary("plan");
}
