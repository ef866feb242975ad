/* schedule/emit.c: appending actions to a stage's list (schedule/emit.h). */
#include "schedule/emit.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void schedule_emit(schedule_gen *g, pt_action_kind kind, int mb) {
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 64;
    pt_action *grown = pt_calloc((size_t)g->cap, sizeof *grown);
    if (g->acts) memcpy(grown, g->acts, sizeof *grown * (size_t)g->n);
    free(g->acts);
    g->acts = grown;
  }
  g->acts[g->n++] = (pt_action){kind, mb};
}

void schedule_emit_forward(schedule_gen *g, int mb) {
  if (g->s > 0) schedule_emit(g, ACT_RECV_ACT, mb);
  if (g->s == 0 || g->s == g->P - 1) schedule_emit(g, ACT_LOAD, mb);
  schedule_emit(g, ACT_FORWARD, mb);
  if (g->s < g->P - 1) schedule_emit(g, ACT_SEND_ACT, mb);
}

void schedule_emit_backward(schedule_gen *g, int mb) {
  if (g->s < g->P - 1) schedule_emit(g, ACT_RECV_GRAD, mb);
  schedule_emit(g, ACT_BACKWARD, mb);
  if (g->s > 0) schedule_emit(g, ACT_SEND_GRAD, mb);
}
