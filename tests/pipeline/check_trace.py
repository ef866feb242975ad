#!/usr/bin/env python3
"""check_trace.py TRACE.json METRICS.jsonl STAGES MICRO_BATCHES FIRST LAST STEPS [CHUNK_STAGES]

Checks a pipelined run's Chrome trace and metrics:
  - the trace is valid JSON with a process_name track per rank;
  - on every track the spans are well nested (each span lies inside the one that contains it);
  - every scheduled action of every traced step is there, per stage: M forwards and backwards,
    M activation/gradient receives and sends where the stage has a neighbour, M loads on the
    end stages, one tied-grads, data-parallel-grads and optimizer span per step; with
    CHUNK_STAGES (the stage of each chunk, "0,1,0,1"), the same per chunk, every micro-batch
    span tagged with one of its stage's chunks, and no transfer between chunks of one stage;
  - only steps FIRST..LAST are traced;
  - the metrics file has one line per step with the documented fields.
"""
import json
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


def expected(stage, P, M, chunks=None):
    """Spans per step on a stage: chunks[c] is the stage of chunk c (one chunk per stage when
    None); a chunk sends and receives only where its neighbour runs elsewhere."""
    chunks = chunks or list(range(P))
    C = len(chunks)
    want = Counter({"allreduce": 2, "optimizer": 1})
    for c in (c for c in range(C) if chunks[c] == stage):
        want["forward"] += M
        want["backward"] += M
        if c > 0 and chunks[c - 1] != stage:
            want["recv act"] += M
            want["send grad"] += M
        if c < C - 1 and chunks[c + 1] != stage:
            want["send act"] += M
            want["recv grad"] += M
        if c in (0, C - 1):
            want["load"] += M
    return want


def check_chunk_tags(spans, rank, stage, chunks, errors):
    if not chunks:
        return
    mine = {c for c in range(len(chunks)) if chunks[c] == stage}
    for e in spans:
        if e["args"].get("mb") is not None and e["cat"] != "wait" and e["args"].get("chunk") not in mine:
            errors.append(f"rank {rank}: span {e['name']} tagged chunk {e['args'].get('chunk')}, "
                          f"not one of its chunks {sorted(mine)}")
            return


def main():
    path, metrics, P, M, first, last, steps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
    chunks = [int(c) for c in sys.argv[8].split(",")] if len(sys.argv) > 8 else None
    errors = []
    events = json.load(open(path))["traceEvents"]
    tracks = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M"}
    spans = [e for e in events if e.get("ph") == "X"]
    if sorted(tracks) != list(range(len(tracks))) or len(tracks) < P:
        errors.append(f"expected a named track per rank, got {tracks}")
    for rank in tracks:
        mine = [e for e in spans if e["pid"] == rank]
        check_nesting(mine, rank, errors)
        stage = rank % P
        check_chunk_tags(mine, rank, stage, chunks, errors)
        for step in range(first, last + 1):
            got = Counter()
            for e in mine:
                if e["args"]["step"] != step:
                    continue
                name = e["name"].rstrip("0123456789").strip()
                key = e["cat"] if e["cat"] in ("forward", "backward", "allreduce", "optimizer") else name
                got[key] += 1
            want = expected(stage, P, M, chunks)
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
        elif not all(0 <= b <= 1 for b in r["bubble"]) or not 0 < r["mfu"] < 1.5:
            errors.append(f"metrics step {r['step']}: bubble {r['bubble']} or mfu {r['mfu']} out of range")
    if errors:
        print("\n".join(errors[:20]))
        sys.exit(1)
    print(f"trace ok: {len(spans)} spans on {len(tracks)} tracks, steps {first}..{last}; "
          f"metrics ok: {len(rows)} lines")


if __name__ == "__main__":
    main()
