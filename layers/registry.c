#include <stdio.h>
#include <string.h>

#include "layers/builtin.h"
#include "layers/layer.h"

static const pt_layer_type *g_types[PT_MAX_LAYER_TYPES];
static int g_n_types;

static int name_valid(const char *name) {
  if (!name || !*name || strlen(name) >= SPEC_NAME_MAX) return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
  return 1;
}

/* What makes the type unusable, or NULL. init, saved_bytes, scratch_bytes and cost may be NULL. */
static const char *type_problem(const pt_layer_type *t) {
  if (!name_valid(t->name))
    return "its name must be 1 to 63 characters of a-z, 0-9 and _";
  if (!t->configure) return "configure is NULL";
  if (!t->forward) return "forward is NULL";
  if (!t->backward_input) return "backward_input is NULL (a layer without an input gradient "
                                 "still needs one that returns)";
  if (!t->backward_weight) return "backward_weight is NULL (a layer without parameters still "
                                  "needs one that returns)";
  return NULL;
}

static int refuse(const pt_layer_type *t, const char *why) {
  fprintf(stderr, "pipetrain: layer_register: cannot register layer type '%s': %s\n",
          t && t->name ? t->name : "(null)", why);
  return -1;
}

int layer_register(const pt_layer_type *type) {
  const char *why = type ? type_problem(type) : "the type is NULL";
  if (why) return refuse(type, why);
  for (int i = 0; i < g_n_types; i++) {
    if (strcmp(g_types[i]->name, type->name) == 0) {
      g_types[i] = type;
      return 0;
    }
  }
  if (g_n_types == PT_MAX_LAYER_TYPES) return refuse(type, "the registry is full");
  g_types[g_n_types++] = type;
  return 0;
}

const pt_layer_type *layer_find(const char *name) {
  for (int i = 0; i < g_n_types; i++)
    if (strcmp(g_types[i]->name, name) == 0) return g_types[i];
  return NULL;
}

const pt_layer_type *layer_type_at(int i) {
  return i >= 0 && i < g_n_types ? g_types[i] : NULL;
}

void layer_list_names(char *out, size_t outsz) {
  size_t used = 0;
  if (outsz) out[0] = '\0';
  for (int i = 0; i < g_n_types && used < outsz; i++)
    used += (size_t)snprintf(out + used, outsz - used, "%s%s", i ? ", " : "", g_types[i]->name);
}

void layer_register_builtins(void) {
  static const pt_layer_type *const builtins[] = {
      &layer_type_embedding, &layer_type_pos_embedding, &layer_type_transformer_block,
      &layer_type_layernorm, &layer_type_linear,        &layer_type_gelu,
      &layer_type_relu,      &layer_type_lm_head,      &layer_type_rmsnorm,
      &layer_type_llama_block,
  };
  /* Only fill in what is missing, so a user's registered override of a built-in survives. */
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (!layer_find(builtins[i]->name)) layer_register(builtins[i]);
}
