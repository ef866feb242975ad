#!/usr/bin/env python3
"""check_report.py SCHEDULE STAGES MICRO_BATCHES [PLAN.json] < pipe_train output

Checks the end-of-run report of a pipelined run: every stage's measured peak memory is within
10% of the plan's estimate, and its peak micro-batches in flight is min(P - s, M) for 1f1b or M
for gpipe; for other schedules at most the plan's (PLAN.json, pipe_train --plan --json: the
slots of the stage's chunks added, which their peaks need not reach together). Exits 1 listing
what differs.
"""
import json
import re
import sys

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
LINE = re.compile(r"stage (\d+): peak (\d+) micro-batches in flight, peak memory ([0-9.]+) (\w+) "
                  r"\(planned ([0-9.]+) (\w+)\)")


def main():
    schedule, P, M = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stages = json.load(open(sys.argv[4]))["stage_plan"] if len(sys.argv) > 4 else None
    text = sys.stdin.read()
    rows = {int(m[0]): m for m in LINE.findall(text)}
    errors = []
    if sorted(rows) != list(range(P)):
        errors.append(f"expected a report line for stages 0..{P - 1}, got {sorted(rows)}")
    for s, (_, flight, got, gu, plan, pu) in sorted(rows.items()):
        got_b, plan_b = float(got) * UNITS[gu], float(plan) * UNITS[pu]
        if abs(got_b - plan_b) > 0.10 * plan_b:
            errors.append(f"stage {s}: measured {got} {gu} vs planned {plan} {pu} (over 10%)")
        if schedule in ("1f1b", "gpipe"):
            want = M if schedule == "gpipe" else min(P - int(s), M)
            if int(flight) != want:
                errors.append(f"stage {s}: {flight} micro-batches in flight, want {want}")
        elif not stages or not 0 < int(flight) <= stages[int(s)]["in_flight"]:
            errors.append(f"stage {s}: {flight} micro-batches in flight, the plan holds "
                          f"{stages[int(s)]['in_flight'] if stages else '?'}")
    if errors:
        print("\n".join(errors) + "\n--- output ---\n" + text)
        sys.exit(1)
    print(f"report ok: {P} stages, memory within 10% of the plan, in-flight counts as scheduled")


if __name__ == "__main__":
    main()
