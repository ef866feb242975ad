/* spec/spec_seq_schedule.c: train.seq_len_schedule, sequence lengths that grow between steps.
 *
 * train.seq_len_schedule: {start: S, warmup_steps: W, multiple: K} (K defaults to 1). Step s
 * trains on T_s = min(seq_len, round_down(S + (seq_len - S) * s / W, K)) tokens per sequence;
 * S must be a multiple of K (so T_s never falls below S) and at most model.seq_len, and the
 * schedule needs token data (model.seq_len). Every buffer stays sized for model.seq_len. */
#include "spec/spec.h"

/* Shared by spec/spec_*.c only (spec_load.c calls it from train). */
void spec_load_seq_schedule(pt_spec *s, spec_node *train, spec_errors *e);

void spec_load_seq_schedule(pt_spec *s, spec_node *train, spec_errors *e) {
  static const char *const keys[] = {"start", "warmup_steps", "multiple", NULL};
  spec_train *t = &s->train;
  spec_node *m = spec_find(train, "seq_len_schedule");
  if (!m || spec_node_is_null(m) || !spec_expect_map(m, "train.seq_len_schedule", e)) return;
  t->seq_start = spec_get_int(m, "start", 1, 0, 1, INT32_MAX, e);
  t->seq_warmup = spec_get_int(m, "warmup_steps", 1, 0, 1, INT64_MAX, e);
  t->seq_multiple = spec_get_int(m, "multiple", 0, 1, 1, INT32_MAX, e);
  spec_check_unused(m, "train.seq_len_schedule", keys, e);
  if (e->failed) return;
  if (s->seq_len <= 0 || spec_data_is_records(s->data.format))
    spec_error(e, m, 1, "train.seq_len_schedule needs token data and model.seq_len; remove the "
               "schedule or set model.seq_len");
  else if (s->data.documents) /* the documents are packed once, into rows of seq_len */
    spec_error(e, m, 1, "train.seq_len_schedule does not combine with data.documents (documents "
               "are packed into rows of model.seq_len); remove one of them");
  else if (t->seq_start > s->seq_len)
    spec_error(e, spec_find(m, "start"), 0, "train.seq_len_schedule.start %lld is above "
               "model.seq_len %lld; use a start <= seq_len", (long long)t->seq_start,
               (long long)s->seq_len);
  else if (t->seq_start % t->seq_multiple != 0)
    spec_error(e, spec_find(m, "start"), 0, "train.seq_len_schedule.start %lld is not a multiple "
               "of multiple %lld; round start to a multiple", (long long)t->seq_start,
               (long long)t->seq_multiple);
}

int64_t spec_seq_len_at(const pt_spec *s, int64_t step) {
  const spec_train *t = &s->train;
  if (t->seq_start <= 0 || step >= t->seq_warmup) return s->seq_len;
  int64_t grow = (int64_t)((unsigned __int128)(s->seq_len - t->seq_start) * (unsigned __int128)step /
                           (unsigned __int128)t->seq_warmup);
  int64_t T = t->seq_start + grow;
  T -= T % t->seq_multiple;
  return T < s->seq_len ? T : s->seq_len;
}
