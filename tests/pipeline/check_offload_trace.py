#!/usr/bin/env python3
"""check_offload_trace.py TRACE.json STAGES: the copies of pipeline.offload: 1.0 in a Chrome trace.

Every copy span (cat "copy", named offload or prefetch) is on its own track (tid 1) of its rank,
the compute spans on track 0 (a GPU's own track 2, when it ran them, is check_trace.py's).
Within a traced step, every micro-batch that a rank runs forward goes out inside its F (the copy
is issued right after the forward's layers) and comes back in a prefetch that ends before its B
or I starts, as many prefetches as copies out, on every rank holding more than one layer. Exits
1 listing what differs.
"""
import json
import sys
from collections import defaultdict


def main():
    path, stages = sys.argv[1], int(sys.argv[2])
    events = [e for e in json.load(open(path))["traceEvents"]
              if e.get("ph") == "X" and e.get("tid") != 2]
    errors = []
    spans = defaultdict(list)  # (rank, step) -> events
    for e in events:
        copy = e["cat"] == "copy"
        if e["tid"] != (1 if copy else 0):
            errors.append(f"rank {e['pid']}: {e['name']} ({e['cat']}) on track {e['tid']}")
        spans[(e["pid"], e["args"]["step"])].append(e)
    copies_seen = 0
    for (rank, step), evs in sorted(spans.items()):
        def start(name, key):
            mb, chunk = key
            return [x for x in evs if x["cat"] != "copy" and x["name"] == f"{name}{mb}" and
                    x["args"].get("chunk", -1) == chunk]
        outs = defaultdict(list)
        ins = defaultdict(list)
        for x in evs:
            if x["cat"] == "copy":
                key = (x["args"]["mb"], x["args"].get("chunk", -1))
                (outs if x["name"] == "offload" else ins)[key].append(x)
        copies_seen += sum(len(v) for v in outs.values())
        for mb, xs in outs.items():
            f = start("F", mb)
            if len(f) != 1 or any(not (f[0]["ts"] <= x["ts"] and x["ts"] + x["dur"] <= f[0]["ts"] + f[0]["dur"] + 1)
                                  for x in xs):
                errors.append(f"rank {rank} step {step}: offload of {mb} not inside its F")
            if len(ins[mb]) != len(xs):
                errors.append(f"rank {rank} step {step}: mb {mb} out {len(xs)} times, in {len(ins[mb])}")
        for mb, xs in ins.items():
            b = start("B", mb) + start("I", mb)
            if len(b) != 1 or any(x["ts"] + x["dur"] > b[0]["ts"] + 1 for x in xs):
                errors.append(f"rank {rank} step {step}: prefetch of {mb} after its backward")
    if copies_seen == 0:
        errors.append("no offload copies in the trace")
    if errors:
        print("\n".join(errors[:20]))
        sys.exit(1)
    print(f"offload trace ok: {copies_seen} copies out, each back before its backward, on track 1")


if __name__ == "__main__":
    main()
