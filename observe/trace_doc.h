/* observe/trace_doc.h: a recorded Chrome trace (observe/trace.h) opened for reading, with what
 * every reader of one needs: its events, its metadata, and replica 0's tracks.
 *
 * Replica 0's tracks come from the "process_name" events "rank R (stage S, replica D)"; a trace
 * without such names (written by hand or by another tool) is taken as one replica, pid =
 * stage. Times in the events stay as written: microseconds on rank 0's clock. A track with a
 * "gpu" thread (its compute as the device ran it, tid 2: observe/trace.h) is read from that
 * thread alone: what the host queued when says nothing of when the device computed.
 * Ownership: the document owns everything it points to; trace_doc_close frees it.
 */
#ifndef PT_TRACE_DOC_H
#define PT_TRACE_DOC_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* a ts and a dur rounded on their own in the JSON: a nested span may end a hair late */
#define TRACE_NEST_SLACK_US 1e-3

typedef struct {
  int pid, stage;
  int device; /* 1: its events are those of tid 2, the device's */
} pt_trace_track;

typedef struct {
  cJSON *root;
  const cJSON *events;   /* the traceEvents array */
  const cJSON *meta;     /* the "metadata" object, NULL when absent */
  pt_trace_track *tracks; /* replica 0's */
  int n_tracks;
  int stages_from_pids;  /* 1: no track names, pid taken as the stage */
} pt_trace_doc;

/* Reads and parses path. Returns 0, or -1 with "PATH: ..." in err (unreadable, or not JSON
 * with a traceEvents array; Chrome's bare array of events is accepted too). */
int trace_doc_open(pt_trace_doc *d, const char *path, char *err, size_t errsz);
void trace_doc_close(pt_trace_doc *d);

/* The stage of a complete ("ph": "X") event on one of replica 0's tracks (on a track with a
 * device thread, of that thread), else -1. */
int trace_doc_stage(const pt_trace_doc *d, const cJSON *e);
/* Which of F, B, I, W (0..3) a span named "<code><mb>" is, with its micro-batch; -1 for other
 * names. */
int trace_doc_compute(const cJSON *e, int *mb);
/* args.step of an event: 1, or 0 when it has none. */
int trace_doc_step(const cJSON *e, int64_t *step);

/* obj[key] when it is a number: 1, else 0. obj[key] when it is a string, else "". */
int trace_json_number(const cJSON *obj, const char *key, double *out);
const char *trace_json_string(const cJSON *obj, const char *key);

#endif
