#include <stdio.h>
#include <string.h>

#include "layers/builtin.h"
#include "layers/layer.h"

#define REGISTRY_MAX 128

static const pt_layer_type *g_types[REGISTRY_MAX];
static int g_n_types;

static int name_valid(const char *name) {
  if (!name || !*name || strlen(name) >= SPEC_NAME_MAX) return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
  return 1;
}

int layer_register(const pt_layer_type *type) {
  if (!type || !name_valid(type->name) || !type->configure || !type->forward ||
      !type->backward_input || !type->backward_weight)
    return -1;
  for (int i = 0; i < g_n_types; i++) {
    if (strcmp(g_types[i]->name, type->name) == 0) {
      g_types[i] = type;
      return 0;
    }
  }
  if (g_n_types == REGISTRY_MAX) return -1;
  g_types[g_n_types++] = type;
  return 0;
}

const pt_layer_type *layer_find(const char *name) {
  for (int i = 0; i < g_n_types; i++)
    if (strcmp(g_types[i]->name, name) == 0) return g_types[i];
  return NULL;
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
      &layer_type_relu,      &layer_type_lm_head,
  };
  /* Only fill in what is missing, so a user's registered override of a built-in survives. */
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (!layer_find(builtins[i]->name)) layer_register(builtins[i]);
}
