#!/usr/bin/env python3
"""check_report.py SCHEDULE.txt STAGES MICRO_BATCHES < pipe_train output

Checks the end-of-run report of a pipelined run: every stage's measured peak memory is within
10% of the plan's estimate, and its peak micro-batches in flight is the slot count the schedule
gives the stage (SCHEDULE.txt: pipe_train --print-schedule; 1f1b min(P - s, M), gpipe M; for
split schedules the slots are held until W). A stage running several chunks holds at most its
chunks' slots together (each chunk peaks on its own, not necessarily all at once). Exits 1
listing what differs.
"""
import re
import sys

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
LINE = re.compile(r"stage (\d+): peak (\d+) micro-batches in flight, peak memory ([0-9.]+) (\w+) "
                  r"\(planned ([0-9.]+) (\w+)[^)]*\)")  # GPU: ", of which comm ..."


SLOTS = re.compile(r"^stage (\d+) \((\d+) slots?", re.M)
CHUNK_SLOTS = re.compile(r"^rank (\d+) \(([^)]*)\)", re.M)


def stage_slots(text):
    """Per stage: (its slots, whether that is a sum over several chunks)."""
    out = {int(s): (int(n), False) for s, n in SLOTS.findall(text)}
    for r, chunks in CHUNK_SLOTS.findall(text):
        out[int(r)] = (sum(int(n) for n in re.findall(r"chunk \d+: (\d+) slots?", chunks)), True)
    return out


def main():
    schedule, P, M = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    slots = stage_slots(open(schedule).read())
    text = sys.stdin.read()
    rows = {int(m[0]): m for m in LINE.findall(text)}
    errors = []
    if sorted(rows) != list(range(P)):
        errors.append(f"expected a report line for stages 0..{P - 1}, got {sorted(rows)}")
    for s, (_, flight, got, gu, plan, pu) in sorted(rows.items()):
        got_b, plan_b = float(got) * UNITS[gu], float(plan) * UNITS[pu]
        if abs(got_b - plan_b) > 0.10 * plan_b:
            errors.append(f"stage {s}: measured {got} {gu} vs planned {plan} {pu} (over 10%)")
        want, chunked = slots.get(s, (None, False))
        if want is None or (chunked and not 0 < int(flight) <= want) or \
           (not chunked and (want > M or int(flight) != want)):
            errors.append(f"stage {s}: {flight} micro-batches in flight, want "
                          f"{'at most ' if chunked else ''}{want}")
    if errors:
        print("\n".join(errors) + "\n--- output ---\n" + text)
        sys.exit(1)
    print(f"report ok: {P} stages, memory within 10% of the plan, in-flight counts as scheduled")


if __name__ == "__main__":
    main()
