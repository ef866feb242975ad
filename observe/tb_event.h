/* observe/tb_event.h: TensorBoard's event-file records, encoded by hand.
 *
 * An events file is a sequence of records: uint64 length (little-endian), masked CRC-32C of
 * those 8 bytes, the data, masked CRC-32C of the data. The data is a serialized tensorflow
 * Event (wall_time 1, step 2, file_version 3, summary 5) whose Summary holds Values (tag 1,
 * simple_value 2, tensor 8, metadata 9). Only the fields pipetrain writes are encoded; why a
 * small writer and not protobuf-c is in docs/observability.md ("TensorBoard"). Pure functions of
 * their arguments; no I/O. */
#ifndef PT_TB_EVENT_H
#define PT_TB_EVENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  unsigned char *data;
  size_t len, cap;
} tb_bytes; /* a growing buffer; zero-initialized is empty; tb_bytes_free releases it */

typedef struct {
  const char *tag;
  double value; /* stored as float32 (simple_value) */
} tb_scalar;

void tb_bytes_free(tb_bytes *b);
uint32_t tb_crc32c(const void *p, size_t n);  /* Castagnoli, as TensorBoard's reader checks */
/* Appends one record holding `event` (a serialized Event) to out. */
void tb_record_append(tb_bytes *out, const tb_bytes *event);
/* Each encoder replaces ev's contents with one serialized Event. */
void tb_event_file_version(tb_bytes *ev, double wall_time); /* "brain.Event:2", step 0 */
void tb_event_scalars(tb_bytes *ev, double wall_time, int64_t step, const tb_scalar *v, int n);
/* A text summary (the text plugin's: a scalar DT_STRING tensor, plugin_data "text"). */
void tb_event_text(tb_bytes *ev, double wall_time, int64_t step, const char *tag, const char *text);
/* The record at buf[0..n): its total length with *step set to its Event's step, or 0 when the
 * record is torn or fails a checksum (a crash mid-write leaves such a tail). */
size_t tb_record_read(const unsigned char *buf, size_t n, int64_t *step);

#endif
