#include "observe/tb_event.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };
enum { DT_STRING = 7 };

void tb_bytes_free(tb_bytes *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static void put(tb_bytes *b, const void *p, size_t n) {
  if (n == 0) return; /* an empty field: p may be NULL, which memcpy must not get */
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    unsigned char *nd = realloc(b->data, cap);
    if (!nd) pt_fatal("out of memory writing TensorBoard events");
    b->data = nd, b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

uint32_t tb_crc32c(const void *p, size_t n) {
  static uint32_t table[256];
  if (!table[1]) /* reflected polynomial 0x82F63B78; filled once, rank 0 only */
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      table[i] = c;
    }
  const unsigned char *s = p;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ s[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* TensorFlow masks stored checksums so a CRC of data holding CRCs stays strong. */
static uint32_t masked_crc(const void *p, size_t n) {
  uint32_t c = tb_crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static void put_le(tb_bytes *b, uint64_t v, int bytes) {
  unsigned char le[8];
  for (int i = 0; i < bytes; i++) le[i] = (unsigned char)(v >> (8 * i));
  put(b, le, (size_t)bytes);
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void tb_record_append(tb_bytes *out, const tb_bytes *event) {
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)event->len >> (8 * i));
  put(out, len, 8);
  put_le(out, masked_crc(len, 8), 4);
  put(out, event->data, event->len);
  put_le(out, masked_crc(event->data, event->len), 4);
}

/* Protocol buffers wire format: varints, keys, and length-delimited fields. */
static void put_varint(tb_bytes *b, uint64_t v) {
  unsigned char s[10];
  int n = 0;
  do {
    s[n++] = (unsigned char)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
    v >>= 7;
  } while (v);
  put(b, s, (size_t)n);
}

static void put_key(tb_bytes *b, int field, int wire) { put_varint(b, (uint64_t)(field << 3 | wire)); }

static void put_field_bytes(tb_bytes *b, int field, const void *p, size_t n) {
  put_key(b, field, WIRE_LEN);
  put_varint(b, n);
  put(b, p, n);
}

static void put_field_msg(tb_bytes *b, int field, const tb_bytes *m) {
  put_field_bytes(b, field, m->data, m->len);
}

static void put_field_str(tb_bytes *b, int field, const char *s) {
  put_field_bytes(b, field, s, strlen(s));
}

static void event_head(tb_bytes *ev, double wall_time, int64_t step) {
  ev->len = 0;
  uint64_t bits;
  memcpy(&bits, &wall_time, 8);
  put_key(ev, 1, WIRE_I64);
  put_le(ev, bits, 8);
  put_key(ev, 2, WIRE_VARINT);
  put_varint(ev, (uint64_t)step);
}

void tb_event_file_version(tb_bytes *ev, double wall_time) {
  event_head(ev, wall_time, 0);
  put_field_str(ev, 3, "brain.Event:2");
}

void tb_event_scalars(tb_bytes *ev, double wall_time, int64_t step, const tb_scalar *v, int n) {
  tb_bytes summary = {0}, value = {0};
  for (int i = 0; i < n; i++) {
    float f = (float)v[i].value;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    value.len = 0;
    put_field_str(&value, 1, v[i].tag);
    put_key(&value, 2, WIRE_I32);
    put_le(&value, bits, 4);
    put_field_msg(&summary, 1, &value);
  }
  event_head(ev, wall_time, step);
  put_field_msg(ev, 5, &summary);
  tb_bytes_free(&summary);
  tb_bytes_free(&value);
}

void tb_event_text(tb_bytes *ev, double wall_time, int64_t step, const char *tag, const char *text) {
  tb_bytes plugin = {0}, meta = {0}, shape = {0}, tensor = {0}, value = {0}, summary = {0};
  put_field_str(&plugin, 1, "text");           /* PluginData.plugin_name */
  put_field_msg(&meta, 1, &plugin);            /* SummaryMetadata.plugin_data */
  put_key(&tensor, 1, WIRE_VARINT);            /* TensorProto.dtype */
  put_varint(&tensor, DT_STRING);
  put_field_msg(&tensor, 2, &shape);           /* its shape: no dims, a scalar */
  put_field_str(&tensor, 8, text);             /* string_val */
  put_field_str(&value, 1, tag);
  put_field_msg(&value, 8, &tensor);
  put_field_msg(&value, 9, &meta);
  put_field_msg(&summary, 1, &value);
  event_head(ev, wall_time, step);
  put_field_msg(ev, 5, &summary);
  tb_bytes *all[] = {&plugin, &meta, &shape, &tensor, &value, &summary};
  for (int i = 0; i < 6; i++) tb_bytes_free(all[i]);
}

static int get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    unsigned char c = *(*p)++;
    *v |= (uint64_t)(c & 0x7F) << shift;
    if (!(c & 0x80)) return 0;
  }
  return -1;
}

/* The step field of a serialized Event (0 when absent, as protobuf defaults); -1 if malformed. */
static int event_step(const unsigned char *p, const unsigned char *end, int64_t *step) {
  *step = 0;
  while (p < end) {
    uint64_t key, v;
    if (get_varint(&p, end, &key) != 0) return -1;
    int wire = (int)(key & 7);
    if (wire == WIRE_VARINT) {
      if (get_varint(&p, end, &v) != 0) return -1;
      if (key >> 3 == 2) *step = (int64_t)v;
    } else if (wire == WIRE_I64 || wire == WIRE_I32) {
      size_t w = wire == WIRE_I64 ? 8 : 4;
      if ((size_t)(end - p) < w) return -1;
      p += w;
    } else if (wire == WIRE_LEN) {
      if (get_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p)) return -1;
      p += v;
    } else {
      return -1;
    }
  }
  return 0;
}

size_t tb_record_read(const unsigned char *buf, size_t n, int64_t *step) {
  if (n < 16) return 0;
  uint64_t len = get_le(buf, 8);
  if (get_le(buf + 8, 4) != masked_crc(buf, 8) || len > n - 16) return 0;
  const unsigned char *data = buf + 12;
  if (get_le(data + len, 4) != masked_crc(data, (size_t)len)) return 0;
  if (event_step(data, data + len, step) != 0) return 0;
  return (size_t)len + 16;
}
