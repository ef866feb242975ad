/* layers/settings.h: a layer type's settings, declared once as a table.
 *
 * A type lists its spec arguments in pt_layer_type.settings: name, kind, default, range,
 * whether required, one line of documentation. That one table is read by
 *   - the model builder (model/model.c), which parses the entry's arguments against it before
 *     the type's configure runs (layer_settings_parse): wrong type, out of range, missing
 *     required and unknown keys are one line at the file:line:col of the value or key;
 *   - the layer's own code, through the named accessors below (no slot numbers);
 *   - docs/spec.md's table of layer settings (layer_settings_doc; the layer_settings test checks
 *     the docs hold what it prints), --plan (layer_settings_describe: the values a spec
 *     changed) and checkpoint/hf_export.c (a block's resolved settings).
 */
#ifndef PT_LAYER_SETTINGS_H
#define PT_LAYER_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

#define PT_MAX_SETTINGS 16

typedef enum { PT_SETTING_INT, PT_SETTING_NUM, PT_SETTING_BOOL } pt_setting_kind;

typedef struct {
  const char *name; /* the spec key; NULL ends the table */
  pt_setting_kind kind;
  /* Default when the spec leaves it out: def_from when set, else def. def_from is "model.KEY"
   * (dim, heads, vocab, seq_len: the setting is required when the model leaves KEY unset) or
   * the name of a setting earlier in the same table. */
  double def;
  const char *def_from;
  double lo, hi;    /* accepted range, inclusive (int and num) */
  int required;     /* no default: the spec must give it */
  const char *doc;  /* one line, for docs/layers.md */
} pt_setting_decl;

/* A layer's resolved values, in the order of its type's table. */
typedef struct {
  int n;
  int64_t i[PT_MAX_SETTINGS]; /* int and bool settings (0 elsewhere) */
  double f[PT_MAX_SETTINGS];  /* num settings (0 elsewhere) */
  int changed[PT_MAX_SETTINGS]; /* the spec set it to other than its default (or it has none) */
} pt_layer_settings;

#endif
