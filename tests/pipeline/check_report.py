#!/usr/bin/env python3
"""check_report.py SCHEDULE STAGES MICRO_BATCHES < pipe_train output

Checks the end-of-run report of a pipelined run: every stage's measured peak memory is within
10% of the plan's estimate, and its peak micro-batches in flight is min(P - s, M) for 1f1b or M
for gpipe. Exits 1 listing what differs.
"""
import re
import sys

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
LINE = re.compile(r"stage (\d+): peak (\d+) micro-batches in flight, peak memory ([0-9.]+) (\w+) "
                  r"\(planned ([0-9.]+) (\w+)\)")


def main():
    schedule, P, M = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    text = sys.stdin.read()
    rows = {int(m[0]): m for m in LINE.findall(text)}
    errors = []
    if sorted(rows) != list(range(P)):
        errors.append(f"expected a report line for stages 0..{P - 1}, got {sorted(rows)}")
    for s, (_, flight, got, gu, plan, pu) in sorted(rows.items()):
        got_b, plan_b = float(got) * UNITS[gu], float(plan) * UNITS[pu]
        if abs(got_b - plan_b) > 0.10 * plan_b:
            errors.append(f"stage {s}: measured {got} {gu} vs planned {plan} {pu} (over 10%)")
        want = M if schedule == "gpipe" else min(P - int(s), M)
        if int(flight) != want:
            errors.append(f"stage {s}: {flight} micro-batches in flight, want {want}")
    if errors:
        print("\n".join(errors) + "\n--- output ---\n" + text)
        sys.exit(1)
    print(f"report ok: {P} stages, memory within 10% of the plan, in-flight counts as scheduled")


if __name__ == "__main__":
    main()
