/* A layer type's settings table: parsing a spec entry against it, reading values by name, and
 * describing it for --plan and docs/layers.md (layers/settings.h). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "layers/layer.h"

static const char *const kind_names[] = {"int", "number", "bool"};

/* The model key a "model.KEY" default names (0 when the model leaves it unset). */
static int64_t model_value(const pt_spec *spec, const char *key) {
  if (!strcmp(key, "dim")) return spec->dim;
  if (!strcmp(key, "heads")) return spec->heads;
  if (!strcmp(key, "vocab")) return spec->vocab;
  if (!strcmp(key, "seq_len")) return spec->seq_len;
  pt_fatal("layer settings: default from unknown model key '%s'", key);
}

static int find_setting(const pt_setting_decl *d, const char *name) {
  for (int i = 0; d && d[i].name; i++)
    if (!strcmp(d[i].name, name)) return i;
  return -1;
}

/* The default of setting k, and whether it must be given (no default to fall back on). */
static double default_of(const pt_layer *L, int k, const pt_spec *spec, int *required) {
  const pt_setting_decl *d = &L->type->settings[k];
  *required = d->required;
  if (!d->def_from) return d->def;
  if (!strncmp(d->def_from, "model.", 6)) {
    int64_t v = model_value(spec, d->def_from + 6);
    *required |= v <= 0;
    return (double)v;
  }
  int from = find_setting(L->type->settings, d->def_from);
  if (from < 0 || from >= k)
    pt_fatal("layer type '%s': setting '%s' defaults to '%s', which is not declared before it",
             L->type->name, d->name, d->def_from);
  return L->type->settings[from].kind == PT_SETTING_NUM ? L->set.f[from] : (double)L->set.i[from];
}

void layer_settings_parse(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  const pt_setting_decl *d = L->type->settings;
  memset(&L->set, 0, sizeof L->set);
  for (int k = 0; d && d[k].name; k++) {
    if (k == PT_MAX_SETTINGS)
      pt_fatal("layer type '%s' declares more than %d settings", L->type->name, PT_MAX_SETTINGS);
    int required;
    double def = default_of(L, k, s->spec, &required);
    int given = spec_find(s->args, d[k].name) != NULL;
    if (d[k].kind == PT_SETTING_INT)
      L->set.i[k] = spec_get_int(s->args, d[k].name, required, (int64_t)def, (int64_t)d[k].lo,
                                 (int64_t)d[k].hi, e);
    else if (d[k].kind == PT_SETTING_NUM)
      L->set.f[k] = spec_get_num(s->args, d[k].name, required, def, d[k].lo, d[k].hi, e);
    else
      L->set.i[k] = spec_get_bool(s->args, d[k].name, def != 0, e);
    double v = d[k].kind == PT_SETTING_NUM ? L->set.f[k] : (double)L->set.i[k];
    L->set.changed[k] = given && (required || v != def);
    L->set.n = k + 1;
  }
}

static int setting_index(const pt_layer *L, const char *name, pt_setting_kind kind) {
  int k = find_setting(L->type->settings, name);
  if (k < 0 || L->type->settings[k].kind != kind)
    pt_fatal("layer type '%s' has no %s setting '%s'", L->type->name, kind_names[kind], name);
  return k;
}

int64_t layer_setting_int(const pt_layer *L, const char *name) {
  return L->set.i[setting_index(L, name, PT_SETTING_INT)];
}

double layer_setting_num(const pt_layer *L, const char *name) {
  return L->set.f[setting_index(L, name, PT_SETTING_NUM)];
}

int layer_setting_bool(const pt_layer *L, const char *name) {
  return L->set.i[setting_index(L, name, PT_SETTING_BOOL)] != 0;
}

/* Setting k's value as the spec would write it. */
static void value_text(const pt_layer *L, int k, char *out, size_t outsz) {
  const pt_setting_decl *d = &L->type->settings[k];
  if (d->kind == PT_SETTING_NUM) snprintf(out, outsz, "%g", L->set.f[k]);
  else if (d->kind == PT_SETTING_BOOL) snprintf(out, outsz, "%s", L->set.i[k] ? "true" : "false");
  else snprintf(out, outsz, "%lld", (long long)L->set.i[k]);
}

const char *layer_settings_describe(const pt_layer *L, char *out, size_t outsz) {
  const pt_setting_decl *d = L->type->settings;
  size_t used = 0;
  if (outsz) out[0] = '\0';
  for (int k = 0; k < L->set.n && used < outsz; k++) {
    if (!L->set.changed[k]) continue;
    char val[64];
    value_text(L, k, val, sizeof val);
    used += (size_t)snprintf(out + used, outsz - used, "%s%s %s", used ? ", " : "", d[k].name,
                             val);
  }
  return out;
}

static void default_text(const pt_setting_decl *d, char *out, size_t outsz) {
  if (d->required) snprintf(out, outsz, "**required**");
  else if (d->def_from) snprintf(out, outsz, "`%s`", d->def_from);
  else if (d->kind == PT_SETTING_BOOL) snprintf(out, outsz, "%s", d->def != 0 ? "true" : "false");
  else snprintf(out, outsz, "%g", d->def);
}

const char *layer_settings_doc(const pt_layer_type *t, char *out, size_t outsz) {
  const pt_setting_decl *d = t->settings;
  size_t used = 0;
  if (outsz) out[0] = '\0';
  for (int k = 0; d && d[k].name && used < outsz; k++) {
    char type[SPEC_NAME_MAX + 2], def[64], range[64] = "";
    snprintf(type, sizeof type, "`%s`", t->name);
    default_text(&d[k], def, sizeof def);
    if (d[k].kind == PT_SETTING_INT)
      snprintf(range, sizeof range, "%lld to %lld", (long long)d[k].lo, (long long)d[k].hi);
    else if (d[k].kind == PT_SETTING_NUM)
      snprintf(range, sizeof range, "%g to %g", d[k].lo, d[k].hi);
    used += (size_t)snprintf(out + used, outsz - used, "| %s | `%s` | %s | %s | %s | %s |\n",
                             k ? "" : type, d[k].name, kind_names[d[k].kind], def, range,
                             d[k].doc);
  }
  return out;
}
