/* pipeline.offload (partition/offload.h). */
#include "partition/offload.h"

#include <string.h>

#include "device/device.h"

static const char *const kind_names[] = {"outputs", "saved", NULL};

/* none, auto or a fraction, into *f. */
static void parse_fraction(spec_node *n, double *f, int *is_auto, spec_errors *e) {
  *f = 0.0;
  if (!n || spec_node_is_null(n)) return;
  if (n->kind == SPEC_SCALAR && !strcmp(n->value, "none")) return;
  if (n->kind == SPEC_SCALAR && !strcmp(n->value, "auto")) {
    *is_auto = 1;
    return;
  }
  if (n->kind != SPEC_SCALAR) {
    spec_error(e, n, 0, "pipeline.offload: expected none, auto or a fraction in (0, 1] (of the "
               "stashed activations), e.g. 0.5");
    return;
  }
  *f = spec_node_num(n, 0.0, 1.0, e);
}

static void parse_item(spec_node *n, pt_offload_choice *c, int *is_auto, spec_errors *e) {
  memset(c, 0, sizeof *c);
  if (n->kind != SPEC_MAP) {
    parse_fraction(n, &c->fraction[0], &c->searched, e);
    c->fraction[1] = c->fraction[0];
    *is_auto |= c->searched;
    return;
  }
  for (int i = 0; i < n->n_items && !e->failed; i++) {
    spec_node *it = n->items[i];
    int k = -1;
    for (int j = 0; kind_names[j]; j++)
      if (!strcmp(it->key, kind_names[j])) k = j;
    if (k < 0) {
      spec_error(e, it, 1, "pipeline.offload: unknown kind of tensor '%s'; use outputs or saved",
                 it->key);
      return;
    }
    parse_fraction(it, &c->fraction[k], &c->searched, e);
  }
  *is_auto |= c->searched;
}

int offload_any(const pt_offload_choice *c, int n_stages) {
  for (int s = 0; c && s < n_stages; s++)
    if (c[s].fraction[0] > 0 || c[s].fraction[1] > 0) return 1;
  return 0;
}

int offload_parse(const pt_spec *s, int n_stages, pt_offload_choice *out, int *is_auto,
                  spec_errors *e) {
  spec_node *n = s->pipeline.offload;
  memset(out, 0, sizeof *out * (size_t)n_stages);
  *is_auto = 0;
  if (!n) return 0;
  if (n->kind == SPEC_SEQ && n->n_items != n_stages && n->n_items != 1) {
    spec_error(e, n, 0, "pipeline.offload lists %d values for %d stages; give one per stage or "
               "one for all", n->n_items, n_stages);
    return -1;
  }
  for (int st = 0; st < n_stages && !e->failed; st++)
    parse_item(n->kind == SPEC_SEQ ? n->items[n->n_items == 1 ? 0 : st] : n, &out[st], is_auto, e);
  if (e->failed) return -1;
  spec_device kind = device_resolve(s->pipeline.device);
  if (offload_any(out, n_stages) && !device_kind_offloads(kind)) {
    spec_error(e, n, 0, "pipeline.offload: the %s keeps activations in host memory already, so "
               "there is nothing to offload; set pipeline.device: gpu or emulated, or drop "
               "pipeline.offload", spec_device_names[kind]);
    return -1;
  }
  return 0;
}
