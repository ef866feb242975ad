#!/usr/bin/env python3
"""check_trace.py TRACE.json METRICS.jsonl STAGES MICRO_BATCHES FIRST LAST STEPS SCHEDULE.txt [SVG]

Checks a pipelined run's Chrome trace and metrics:
  - the trace is valid JSON with a process_name track per rank;
  - on every track the spans are well nested (each span lies inside the one that contains it);
  - every scheduled action of every traced step is there, per stage, as many of each kind as the
    stage's list in SCHEDULE.txt (pipe_train --print-schedule) has: forwards, backwards (B, or I
    and W when split), receives, sends, loads, the reductions and the optimizer; a stage running
    several chunks ("rank R (chunk C: ...)" lines) tags each micro-batch span with one of them;
  - only steps FIRST..LAST are traced;
  - on a GPU (PT_TRACE_DEVICE=1), each rank's compute (F, B, I, W, the optimizer) again on its
    "gpu" track (tid 2) as the device ran it: the same spans, in the order queued, none before
    the host queued it, none overlapping the one before on the stream (observe/trace.h);
  - the metrics file has one line per step with the documented fields;
  - SVG (pipe_trace's picture of step FIRST), when given, has a box per forward and backward
    (B, I, W) of every stage: as many of each class as the schedule has of that kind.
"""
import json
import os
import re
import sys
from collections import Counter


def check_nesting(spans, rank, errors):
    spans = sorted(spans, key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in spans:
        start, end = e["ts"], e["ts"] + e["dur"]
        while stack and stack[-1] <= start + 1e-3:
            stack.pop()
        if stack and end > stack[-1] + 1e-3:
            errors.append(f"rank {rank}: span {e['name']} at {start:.1f} overlaps its enclosing span")
            return
        stack.append(end)


# --print-schedule's action codes and the span (category, or name for transfers) each becomes
SPAN_OF = {"F": "forward", "B": "backward", "I": "backward_input", "W": "backward_weight",
           "rA": "recv act", "rG": "recv grad", "sA": "send act", "sG": "send grad",
           "L": "load", "TIE": "allreduce", "DP": "allreduce", "OPT": "optimizer",
           "FLUSH": "flush"}
ACTION = re.compile(r"^\d*(rA|rG|sA|sG|TIE|DP|OPT|FLUSH|L|F|B|I|W)\d*$")
STAGE_LINE = re.compile(r"^(?:stage|rank) (\d+) \(([^)]*)\):(.*)$")


COMPUTE = ("forward", "backward", "backward_input", "backward_weight", "optimizer")
SLACK_US = 50  # the host's and the device's clocks are tied at each blocking read


def check_device_track(spans, rank, errors):
    """The rank's compute as its GPU ran it (tid 2) against what its host queued (tid 0)."""
    host = sorted((e for e in spans if e.get("tid", 0) == 0 and e["cat"] in COMPUTE),
                  key=lambda e: e["ts"])
    dev = sorted((e for e in spans if e.get("tid") == 2), key=lambda e: e["ts"])
    if [(e["name"], e["args"]["step"]) for e in dev] != \
       [(e["name"], e["args"]["step"]) for e in host]:
        errors.append(f"rank {rank}: the gpu track's {len(dev)} spans are not the {len(host)} "
                      f"compute spans queued, in order")
        return
    for h, d, before in zip(host, dev, [None] + dev[:-1]):
        if d["dur"] <= 0 or d["ts"] < h["ts"] - SLACK_US:
            errors.append(f"rank {rank}: {d['name']} step {d['args']['step']} ran at {d['ts']:.0f} "
                          f"us for {d['dur']:.0f}, queued at {h['ts']:.0f}")
        if before and d["ts"] < before["ts"] + before["dur"] - SLACK_US:
            errors.append(f"rank {rank}: {d['name']} step {d['args']['step']} ran before "
                          f"{before['name']} ended, on one stream")


def scheduled(path):
    """Per stage, how many spans of each kind its action list asks for in one step, and the
    chunks it runs when it runs several (else None)."""
    want, chunks = {}, {}
    for line in open(path):
        m = STAGE_LINE.match(line.strip())
        if m:
            want[int(m[1])] = Counter(SPAN_OF[ACTION.match(t)[1]] for t in m[3].split())
            mine = {int(c) for c in re.findall(r"chunk (\d+):", m[2])}
            chunks[int(m[1])] = mine or None
    return want, chunks


def check_chunk_tags(spans, rank, chunks, errors):
    for e in spans:
        if chunks and e["args"].get("mb") is not None and e["cat"] != "wait" and \
           e["args"].get("chunk") not in chunks:
            errors.append(f"rank {rank}: span {e['name']} tagged chunk {e['args'].get('chunk')}, "
                          f"not one of its chunks {sorted(chunks)}")
            return


def main():
    path, metrics, P, M, first, last, steps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
    plan, chunks = scheduled(sys.argv[8])
    errors = [] if sorted(plan) == list(range(P)) else [f"{sys.argv[8]}: no list for every stage"]
    events = json.load(open(path))["traceEvents"]
    tracks = {e["pid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e["name"] == "process_name"}
    device = os.environ.get("PT_TRACE_DEVICE") == "1"
    gpu_tracks = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
                  and e.get("tid") == 2 and e["args"]["name"] == "gpu"}
    if gpu_tracks != (set(tracks) if device else set()):
        errors.append(f"ranks with a gpu track: {sorted(gpu_tracks)}, expected "
                      f"{sorted(tracks) if device else 'none'}")
    spans = [e for e in events if e.get("ph") == "X"]
    if sorted(tracks) != list(range(len(tracks))) or len(tracks) < P:
        errors.append(f"expected a named track per rank, got {tracks}")
    for rank in tracks:
        every = [e for e in spans if e["pid"] == rank]
        if device:
            check_device_track(every, rank, errors)
        mine = [e for e in every if e.get("tid") != 2]  # the host's spans
        check_nesting(mine, rank, errors)
        stage = rank % P
        check_chunk_tags(mine, rank, chunks.get(stage), errors)
        for step in range(first, last + 1):
            got = Counter()
            for e in mine:
                if e["args"]["step"] != step:
                    continue
                name = e["name"].rstrip("0123456789").strip()
                computes = ("forward", "backward", "backward_input", "backward_weight")
                key = e["cat"] if e["cat"] in computes + ("allreduce", "optimizer") else name
                got[key] += 1
            want = plan.get(stage, Counter())
            for k, v in want.items():
                if got[k] != v:
                    errors.append(f"rank {rank} step {step}: {got[k]} '{k}' spans, scheduled {v}")
    traced = {e["args"]["step"] for e in spans}
    if traced != set(range(first, last + 1)):
        errors.append(f"traced steps {sorted(traced)}, asked {first}..{last}")
    rows = [json.loads(line) for line in open(metrics)]
    fields = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms", "bubble",
              "bubble_mean", "peak_memory_bytes", "mfu")
    if [r.get("step") for r in rows] != list(range(1, steps + 1)):
        errors.append(f"metrics: expected steps 1..{steps}, got {[r.get('step') for r in rows]}")
    for r in rows:
        missing = [f for f in fields if f not in r]
        if missing or len(r.get("bubble", [])) != P or len(r.get("peak_memory_bytes", [])) != P:
            errors.append(f"metrics step {r.get('step')}: missing {missing} or wrong per-stage lengths")
        # mfu's yardstick is one GEMM timing at start: on a loaded machine that timing can be
        # slow and the steps fast, so only a positive, finite, sane figure is required
        elif not all(0 <= b <= 1 for b in r["bubble"]) or not 0 < r["mfu"] < 10:
            errors.append(f"metrics step {r['step']}: bubble {r['bubble']} or mfu {r['mfu']} out of range")
    if len(sys.argv) > 9:
        svg = open(sys.argv[9]).read()
        for code in "FBIW":
            want = sum(c[SPAN_OF[code]] for c in plan.values())
            got = svg.count(f'class="{code}"')
            if got != want:
                errors.append(f"{sys.argv[9]}: {got} '{code}' boxes, scheduled {want}")
    if errors:
        print("\n".join(errors[:20]))
        sys.exit(1)
    print(f"trace ok: {len(spans)} spans on {len(tracks)} tracks, steps {first}..{last}; "
          f"metrics ok: {len(rows)} lines")


if __name__ == "__main__":
    main()
