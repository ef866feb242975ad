/* profile/cache.h: measured layer times kept on disk, so a run measures a model once per
 * machine.
 *
 * A file holds one measurement (JSON, cJSON):
 *   {"version":2, "key":"<16 hex>", "machine":"<id>", "n_layers":N, "f":[N], "i":[N], "w":[N],
 *    "opt":[N], "p2p_latency_s":x, "p2p_bytes_per_s":x, "copy_bytes_per_s":x,
 *    "source":"measured on ..."}
 * It is named after the machine and the key (profile_cache_path), in $PIPETRAIN_CACHE_DIR, else
 * $XDG_CACHE_HOME/pipetrain, else $HOME/.cache/pipetrain (created when missing). A file written
 * for another key or layer count is stale and ignored, one that is not such a document is
 * corrupt (reported with the advice to delete it). Writes are atomic (PATH.tmp.<pid>, fsync,
 * rename): a reader sees the old file or the new one, never half of one.
 */
#ifndef PT_PROFILE_CACHE_H
#define PT_PROFILE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "profile/layer_times.h"

#define PROFILE_CACHE_VERSION 2 /* 2: copy_bytes_per_s */

/* FNV-1a over what the times depend on: every layer's type name, dims, token input, settings
 * values (pt_layer.set) and parameter shapes; micro_batch_size, seq_len, the loss, the device
 * the spec asks for (pipeline.device as device_resolve reads it: auto is cpu or gpu), the
 * optimizer, the BLAS thread count and train.precision (when not fp32). */
uint64_t profile_times_key(const pt_model *m);
/* This machine in a file name: the short host name (letters, digits, '-', '_' only) and a hash
 * of the CPU model (/proc/cpuinfo), the OpenBLAS kernel (blas_kernel_name) and, on a GPU, the
 * GPU's name: "node7-3f09a2c1". */
void profile_machine_id(char *out, size_t outsz);
/* DIR/layer-times-<machine>-<key as 16 hex>.json, the directory created. 0, or -1 when there
 * is no usable directory (none of the variables set, or it cannot be created). */
int profile_cache_path(const pt_model *m, char *out, size_t outsz);

/* 1: t allocated and filled from path (free with profile_times_free), source "cache <path>".
 * 0: no such file, or a stale one. -1: path cannot be read or is corrupt; err is one line
 * naming the file and saying to delete it. On 0 and -1, t is empty. */
int profile_cache_load(pt_layer_times *t, const pt_model *m, const char *path, char *err,
                       size_t errsz);
/* Writes t for m to path atomically. 0, or -1 with err naming the file. */
int profile_cache_save(const pt_layer_times *t, const pt_model *m, const char *path, char *err,
                       size_t errsz);

/* Allocates t: the cache when use_cache and it holds this model's times; else profile_measure
 * (budget_s as there), saved to the cache when use_cache (a save that fails is noted in source,
 * not an error; a corrupt file is warned about and replaced). 0, or -1 with err when measuring
 * fails. */
int profile_times_get(pt_layer_times *t, const pt_model *m, double budget_s, int use_cache,
                      char *err, size_t errsz);

#endif
