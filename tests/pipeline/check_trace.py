#!/usr/bin/env python3
"""check_trace.py TRACE.json METRICS.jsonl STAGES MICRO_BATCHES FIRST LAST STEPS

Checks a pipelined run's Chrome trace and metrics:
  - the trace is valid JSON with a process_name track per rank;
  - on every track the spans are well nested (each span lies inside the one that contains it);
  - every scheduled action of every traced step is there, per stage: M forwards and backwards,
    M activation/gradient receives and sends where the stage has a neighbour, M loads on the
    end stages, one tied-grads, data-parallel-grads and optimizer span per step;
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


def expected(stage, P, M):
    want = Counter({"forward": M, "backward": M, "allreduce": 2, "optimizer": 1})
    if stage > 0:
        want["recv act"] = want["send grad"] = M
    if stage < P - 1:
        want["send act"] = want["recv grad"] = M
    if stage in (0, P - 1):
        want["load"] = M
    return want


def main():
    path, metrics, P, M, first, last, steps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
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
        for step in range(first, last + 1):
            got = Counter()
            for e in mine:
                if e["args"]["step"] != step:
                    continue
                name = e["name"].rstrip("0123456789").strip()
                key = e["cat"] if e["cat"] in ("forward", "backward", "allreduce", "optimizer") else name
                got[key] += 1
            want = expected(stage, P, M)
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
