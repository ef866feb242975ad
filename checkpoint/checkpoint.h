/* checkpoint/checkpoint.h: checkpoints that any layout can load.
 *
 * A checkpoint is a directory:
 *   model-sNNN.safetensors  chunk NNN's weights (a chunk is a contiguous layer range: a stage,
 *                           or a virtual stage when ranks run several), named as a PyTorch
 *                           nn.Sequential state dict ("3.attn.qkv.weight"); a tied weight once,
 *                           under its first owner
 *   optim-sNNN.safetensors  its optimizer state: "<name>.exp_avg", "<name>.exp_avg_sq" (AdamW)
 *                           or "<name>.momentum_buffer" (SGD)
 *   manifest.json           written last: format, step, optimizer step count, the layout that
 *                           wrote it, every tensor's file and shape, tie groups, each file's
 *                           CRC-32 and size, and the spec (text and --set options) it trained
 * Every file is written atomically (temporary, fsync, rename) and the manifest last, then the
 * directory is fsynced: a directory without a complete manifest is not a checkpoint, so a crash
 * mid-save leaves the previous one as it was. Loading reads, for each tensor this process holds,
 * that tensor from whichever file has it: stage counts, chunks per rank, partitions and
 * data-parallel degrees may differ between writing and reading.
 */
#ifndef PT_CHECKPOINT_H
#define PT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/optimizer.h"

#define CKPT_FORMAT "pipetrain-checkpoint/1"

typedef struct {
  const char *text;   /* the spec file's text */
  const char *origin; /* its path */
  const char *const *overrides;
  int n_overrides;
} pt_spec_source;

/* What a chunk's writer wrote, for the manifest. */
typedef struct {
  char model_file[64], optim_file[64];
  uint32_t model_crc, optim_crc;
  int64_t model_bytes, optim_bytes;
} ckpt_stage_files;

/* The layout that writes a checkpoint: n_chunks contiguous chunks, chunk c holding layers
 * [bounds[c], bounds[c + 1]) and run by stage chunk_stage[c] of `stages` (NULL: chunk c is stage
 * c, one chunk per stage), each stage replicated data_parallel times. Recorded in the manifest;
 * loading does not need it to match. */
typedef struct {
  int n_chunks, stages, data_parallel;
  const int *bounds;      /* [n_chunks + 1] */
  const int *chunk_stage; /* [n_chunks], or NULL */
} ckpt_layout;

/* Writes chunk `chunk`'s files into dir for the tensors of layers [first, end) that m holds
 * (not tied copies: their first owner's chunk writes them). Returns 0 or -1 with err. */
int checkpoint_write_stage(const char *dir, const pt_model *m, const pt_optimizer *o, int chunk,
                           int first, int end, ckpt_stage_files *out, char *err, size_t errsz);
/* Writes manifest.json for a whole checkpoint whose chunks wrote files[0..n_chunks). m must be
 * configured (all layers known; storage not needed). With one chunk per stage the manifest is
 * the one this format always had; with several, the layout also records them. */
int checkpoint_write_manifest(const char *dir, const pt_model *m, const pt_spec_source *src,
                              int64_t step, int64_t opt_t, const ckpt_layout *layout,
                              const ckpt_stage_files *files, char *err, size_t errsz);
/* The manifest's own checksum: CRC-32 (zlib's, as the files' crc32) of the manifest printed
 * without whitespace (cJSON_PrintUnformatted, keys in file order) and without its
 * CKPT_MANIFEST_CRC key, so reformatting the file keeps it valid and any changed value breaks it.
 * manifest is a cJSON object that has no CKPT_MANIFEST_CRC item. */
#define CKPT_MANIFEST_CRC "manifest_crc32"
uint32_t checkpoint_manifest_crc(const void *manifest);
/* Creates dir (and parents) if needed. */
int checkpoint_make_dir(const char *dir, char *err, size_t errsz);
/* Before writing a checkpoint into dir: a complete checkpoint already there is renamed, whole,
 * to dir.previous (loading dir falls back to it until the new manifest exists), then dir is
 * created. After the new manifest is written, checkpoint_end_save removes dir.previous. A failed
 * begin_save leaves everything as it was. */
int checkpoint_begin_save(const char *dir, char *err, size_t errsz);
void checkpoint_end_save(const char *dir);
/* After a save into dir failed (disk full, I/O error): removes what the save wrote there (only
 * checkpoint file names; other files stay) and puts back the checkpoint begin_save set aside,
 * so dir loads as it did before the attempt. */
void checkpoint_abort_save(const char *dir);
/* Before training: can this process create and write target (a directory, or with is_file a
 * file)? Every part of the path within NAME_MAX bytes; a file's directory must exist (and a
 * file already there be writable); a directory's nearest existing part must be a writable
 * directory (saves create the rest). Creates nothing.
 * `what` names the setting for the message ("--save", "train.checkpoint.dir"). 0, or -1 with a
 * one-line err. */
int checkpoint_check_writable(const char *target, int is_file, const char *what, char *err,
                              size_t errsz);
/* Before training, on the one rank that writes manifests: creates dir if needed and takes its
 * lock, DIR/.pipetrain.lock (flock, held until this process ends, which removes the file; its
 * text names the holder: host, pid, start time). A lock left by a job that ended without
 * removing it is taken over with a note on stderr. 0, or -1 with a one-line err naming `what`
 * and the holder when another job holds it. */
int checkpoint_lock_dir(const char *dir, const char *what, char *err, size_t errsz);
/* DIR/step-NNNNNNNN for periodic checkpoints. */
void checkpoint_step_dir(const char *root, int64_t step, char *out, size_t outsz);
/* Is name "step-N" or "step-N.previous"? Sets *step and *previous. */
int checkpoint_parse_step_dir(const char *name, long long *step, int *previous);
/* Removes all but the `keep` newest complete step-* checkpoints under root, and what an
 * interrupted save or prune left older than the newest complete one (a step-N without a
 * manifest, a step-N.previous); those are never loaded. */
void checkpoint_prune(const char *root, int keep);

/* One sequential safetensors file of a whole model m (storage for every layer): each tensor
 * under its nn.Sequential name, a tied weight once with metadata "tied.<name>" listing the
 * names sharing it. With o, also PATH's stem + ".optimizer.safetensors". 0 or -1 with err. */
int checkpoint_write_sequential(const pt_model *m, const pt_optimizer *o, const char *path,
                                int64_t step, char *err, size_t errsz);

typedef struct {
  char dir[4096];
  void *manifest;      /* cJSON root */
  int64_t step, opt_t;
  char optimizer[16];
} pt_checkpoint;

/* Opens a checkpoint: path is a checkpoint directory (or, when a save into it was interrupted,
 * the path.previous it set aside), or a directory of step-* checkpoints (the newest complete
 * one is used). Validates the manifest. Returns 0 or -1 with err. */
int checkpoint_open(pt_checkpoint *c, const char *path, char *err, size_t errsz);
void checkpoint_close(pt_checkpoint *c);
/* The spec the checkpoint was trained with (text, origin, overrides as stored). */
const char *checkpoint_spec_text(const pt_checkpoint *c);
const char *checkpoint_spec_origin(const pt_checkpoint *c);
int checkpoint_spec_overrides(const pt_checkpoint *c, const char **out, int max);
/* Loads every tensor m holds (its slice) and, when o is not NULL, the optimizer state. Checks
 * that the model matches (names, shapes, tensor count) and each file's CRC. */
int checkpoint_load(pt_checkpoint *c, pt_model *m, pt_optimizer *o, char *err, size_t errsz);

#endif
