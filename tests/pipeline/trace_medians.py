#!/usr/bin/env python3
"""trace_medians.py medians TRACE.json | edit TRACE.json OUT.json KEY=JSON|-KEY|drop:KIND ...

medians: what a recorded trace says each chunk takes, computed here from the JSON alone
(standard library only), for test_trace_times to compare observe/trace_times.c against:
replica 0's spans (tracks named "rank R (stage S, replica 0)"), every recorded step but the first
when there are several; a span's busy time is its dur less the "wait" spans nested in it on its
track; its chunk is args.chunk, else its stage. Prints, in seconds:
    steps N / micro_batches M / checkpointing K / bounds ... / chunk_stage ...
    F|B|I|W CHUNK MEDIAN      (one line per chunk and kind present)
    OPT STAGE MEDIAN          (the optimizer span, per step)
edit: a copy of the trace with metadata keys set (KEY=JSON) or removed (-KEY), or without the
spans of one kind (drop:B), for the refusals.
"""
import json
import re
import statistics
import sys
from collections import defaultdict

SLACK_US = 1e-3  # a ts and a dur rounded on their own: a nested wait may end a hair late
COMPUTE = re.compile(r"^([FBIW])(\d+)$")
TRACK = re.compile(r"^rank (\d+) \(stage (\d+), replica (\d+)\)$")


def replica0_stages(events):
    stages = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            m = TRACK.match(e["args"]["name"])
            if m and int(m[3]) == 0:
                stages[e["pid"]] = int(m[2])
    return stages


def busy_spans(events, stages):
    """(kind, group, step, busy µs) of replica 0's compute and optimizer spans."""
    by_pid = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e["pid"] in stages:
            by_pid[e["pid"]].append(e)
    out = []
    for pid, spans in by_pid.items():
        waits = [(w["ts"], w["ts"] + w["dur"], w["dur"]) for w in spans if w["cat"] == "wait"]
        for e in spans:
            m = COMPUTE.match(e["name"])
            if not m and e["name"] != "optimizer":
                continue
            t0, t1 = e["ts"], e["ts"] + e["dur"]
            busy = e["dur"] - sum(d for a, b, d in waits if a >= t0 - SLACK_US and b <= t1 + SLACK_US)
            kind = m[1] if m else "OPT"
            group = e["args"].get("chunk", stages[pid]) if m else stages[pid]
            out.append((kind, group, e["args"]["step"], busy))
    return out


def medians(path):
    doc = json.load(open(path))
    meta, events = doc["metadata"], doc["traceEvents"]
    spans = busy_spans(events, replica0_stages(events))
    steps = sorted({s for k, _, s, _ in spans if k != "OPT"})
    used = steps[1:] if len(steps) > 1 else steps
    groups = defaultdict(list)
    for kind, group, step, busy in spans:
        if step in used:
            groups[(kind, group)].append(busy)
    print("steps", len(used))
    print("micro_batches", meta["micro_batches"])
    print("checkpointing", meta["activation_checkpoint_interval"])
    print("bounds", *meta["bounds"])
    print("chunk_stage", *meta["chunk_stage"])
    for (kind, group), values in sorted(groups.items()):
        print(kind, group, repr(statistics.median(values) / 1e6))


def edit(path, out, changes):
    doc = json.load(open(path))
    for c in changes:
        if c.startswith("drop:"):  # every span of one kind, e.g. drop:B
            doc["traceEvents"] = [e for e in doc["traceEvents"]
                                  if not re.match(rf"^{c[5:]}\d+$", e.get("name", ""))]
        elif c.startswith("-"):
            doc["metadata"].pop(c[1:])
        else:
            key, value = c.split("=", 1)
            doc["metadata"][key] = json.loads(value)
    json.dump(doc, open(out, "w"))


if __name__ == "__main__":
    if sys.argv[1] == "medians":
        medians(sys.argv[2])
    else:
        edit(sys.argv[2], sys.argv[3], sys.argv[4:])
