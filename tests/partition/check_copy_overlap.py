#!/usr/bin/env python3
"""check_copy_overlap.py TRACE.json: the planner's copy overlap (schedule_simulate_copies in
schedule/schedule_sim.h) against a run's Chrome trace with pipeline.offload.

The simulation issues a micro-batch's prefetch when the compute action before its backward
starts, so the copy can run beside that action (on a GPU's copy stream) and the backward waits
for it. In the trace each prefetch (cat "copy", track 1) must therefore be issued after the
compute span before that action ended and before that action itself ended, on the same rank and
step: the window the simulation overlaps it with. Exits 1 listing what differs.
"""
import json
import re
import sys
from collections import defaultdict


def main():
    # the host's spans: a GPU's own track (tid 2, observe/trace.h) is when it ran them, not
    # when the host queued the work and issued the copies
    events = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
              if e.get("ph") == "X" and e.get("tid") != 2]
    spans = defaultdict(list)  # (rank, step) -> events
    for e in events:
        spans[(e["pid"], e["args"]["step"])].append(e)
    errors, checked = [], 0
    for (rank, step), evs in sorted(spans.items()):
        compute = sorted((x for x in evs if x["cat"] != "copy" and
                          re.fullmatch(r"[FBIW]\d+", x["name"])), key=lambda x: x["ts"])
        for p in (x for x in evs if x["cat"] == "copy" and x["name"] == "prefetch"):
            mb, chunk = p["args"]["mb"], p["args"].get("chunk", -1)
            at = [i for i, x in enumerate(compute) if x["name"] in (f"B{mb}", f"I{mb}") and
                  x["args"].get("chunk", -1) == chunk]
            if len(at) != 1 or at[0] == 0:
                errors.append(f"rank {rank} step {step}: no compute action before the backward "
                              f"of {mb}")
                continue
            before = compute[at[0] - 1]
            earlier_end = compute[at[0] - 2]["ts"] + compute[at[0] - 2]["dur"] if at[0] > 1 else 0
            end = before["ts"] + before["dur"]
            checked += 1
            if not (earlier_end - 1 <= p["ts"] <= end + 1):
                errors.append(f"rank {rank} step {step}: prefetch of {mb} issued at {p['ts']}, "
                              f"not while {before['name']} ({before['ts']}..{end}) runs")
    if checked == 0:
        errors.append("no prefetches in the trace")
    if errors:
        print("\n".join(errors[:20]))
        sys.exit(1)
    print(f"copy overlap ok: {checked} prefetches, each issued with the compute action before "
          "its backward, as simulated")


if __name__ == "__main__":
    main()
