/* data/source_tokens.c: what every token-stream source shares (DATA_TOKEN_SOURCE): the file's
 * checks and a row's window, through the entry's token decoder. */
#include "data/source.h"

#include <stdio.h>

#include "data/data_order.h"

static int check_tokens(const pt_data *d, const pt_spec *spec, const char *path, char *err,
                        size_t errsz) {
  int64_t T = spec->seq_len, vocab = spec->vocab;
  if (d->length < T + 2) {
    snprintf(err, errsz, "%s: %lld tokens is too short for seq_len %lld; need at least %lld",
             path, (long long)d->length, (long long)T, (long long)T + 2);
    return -1;
  }
  for (int64_t i = 0; i < d->length; i++) {
    int64_t t = d->src->token(d->map, i);
    if (t >= vocab) {
      snprintf(err, errsz, "%s: token %lld at position %lld is >= model.vocab %lld; raise vocab "
               "or check data.format", path, (long long)t, (long long)i,
               (long long)vocab);
      return -1;
    }
  }
  return 0;
}

int data_tokens_open(pt_data *d, const pt_spec *spec, const char *path, char *err,
                     size_t errsz) {
  if (spec->seq_len <= 0 || spec->vocab <= 0) {
    snprintf(err, errsz, "%s: token data needs model.seq_len and model.vocab", spec->path);
    return -1;
  }
  size_t width = (size_t)d->src->width;
  if (d->map_bytes % width != 0) {
    snprintf(err, errsz, "%s: %s token file's byte count (%zu) is not a multiple of %zu; is it "
             "really %s?", path, d->src->name, d->map_bytes, width, d->src->name);
    return -1;
  }
  d->length = (int64_t)(d->map_bytes / width);
  return check_tokens(d, spec, path, err, errsz);
}

/* (a * b + c) mod m without overflow for any int64 step counts. */
static int64_t mulmod_add(int64_t a, int64_t b, int64_t c, int64_t m) {
  return (int64_t)(((unsigned __int128)a * (unsigned __int128)b + (unsigned __int128)c) %
                   (unsigned __int128)m);
}

void data_tokens_read_row(const pt_data *d, int64_t step, int64_t G, int64_t j, int T, int span,
                          int64_t r, void *inputs, void *targets) {
  int64_t N = d->length;
  /* shuffled: n = floor((N - 1) / span) windows of span (the longest T of the run), so a
   * sequence-length schedule keeps its windows; span + 1 tokens fit at w span */
  int64_t o = d->shuffled ? data_order_window(1, d->seed, step, G, j, (N - 1) / span) * span
                          : mulmod_add(mulmod_add(step, G, j, N - span), span, 0, N - span);
  int32_t *in = (int32_t *)inputs + r * T, *tg = (int32_t *)targets + r * T;
  for (int t = 0; t < T; t++) {
    in[t] = (int32_t)d->src->token(d->map, o + t); /* check_tokens: every id < vocab <= INT32_MAX */
    tg[t] = (int32_t)d->src->token(d->map, o + t + 1);
  }
}
