#!/usr/bin/env python3
"""bench/schedules.py: every registered schedule, measured beside its theory.

  python3 bench/schedules.py [--quick] [--steps N] [--only NAME,NAME]

Part 1, real compute (examples/gpt.yaml, P = 2, one BLAS thread per rank, M = 4, 8, 16): each
schedule's speedup over --sequential, both measured in this run (median step time of the steps
after the first), beside its theoretical speedup P (1 - bubble) with the bubble the schedule's
own simulation gives at unit costs (F = I = W = 1, B = 2: pipe_train --print-schedule).

Part 2, fixed costs (bench/sleep.yaml through build/bench_schedules, P = 4 and 8, M = 2P): every
layer sleeps 2 ms in F, I and W, so 8 ranks fit on 2 cores; the bubble each run measures (the
metrics' bubble_mean: the share of a step a rank spends not computing, median over steps) beside
the closed form at unit costs.

Both parts also print the planner's prediction (partition/auto.h) of each run's step time
beside the measured one: pipe_train --plan --json --layer-times measure on the same layout, the
schedule's action lists simulated with per-layer times measured at start-up (cached), transfer
times and the optimizer. The issue's aim is within 10%; the last line counts the rows inside it.

Prints one table per part; a schedule the engine refuses is shown with the reason. Standard
library only. Exit status 1 if a run fails for another reason.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCHEDULES = ["gpipe", "1f1b", "interleaved_1f1b", "looped_bfs", "zb_h1", "zb_h2", "zbv",
             "dualpipev", "v_half", "v_min"]
VIRTUAL = {"interleaved_1f1b": 2, "looped_bfs": 2}  # the "any v" entries, run with v = 2
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def layout(name, stages, micro):
    sets = ["--set", f"pipeline.schedule={name}", "--set", f"pipeline.stages={stages}",
            "--set", f"train.micro_batches={micro}", "--set", "pipeline.data_parallel=1"]
    if name in VIRTUAL:
        sets += ["--set", f"pipeline.virtual_stages={VIRTUAL[name]}"]
    return sets


def simulated_bubble(binary, spec, name, stages, micro):
    out = subprocess.run([binary, spec, "--print-schedule"] + layout(name, stages, micro),
                         capture_output=True, text=True, env=ENV, cwd=ROOT)
    m = re.search(r"bubble ([0-9.]+)%", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"{name}: --print-schedule failed: {out.stderr.strip()}")
    return float(m.group(1)) / 100.0


def predicted_ms(binary, spec, sets):
    """The planner's simulated step (ms) for the layout the run uses."""
    out = subprocess.run([binary, spec, "--plan", "--json", "--layer-times", "measure"] + sets,
                         capture_output=True, text=True, env=ENV, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"--plan failed: {out.stderr.strip()}")
    return json.loads(out.stdout)["simulated_step_ms"]


RATIOS = []


def prediction_cells(pred, measured):
    RATIOS.append(pred / measured)
    return f"{pred:>9.1f}{100 * (pred / measured - 1):>+8.1f}%"


def run(cmd, metrics):
    """Runs one training; returns (median step ms, median bubble_mean) or the refusal line."""
    out = subprocess.run(cmd + ["--quiet", "--metrics", metrics], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, timeout=900)
    if out.returncode == 2:  # bad input: the engine refuses this layout
        lines = [l for l in (out.stderr + out.stdout).splitlines() if "pipetrain" in l]
        return "refused: " + (lines[0].split(": ", 1)[-1] if lines else "(no message)")
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    rows = [json.loads(line) for line in open(metrics)][1:]  # the first step warms up
    return (statistics.median(r["step_ms"] for r in rows),
            statistics.median(r.get("bubble_mean", 0.0) for r in rows))


def mpirun(n, binary):
    return ["mpirun", "-np", str(n), "--oversubscribe", binary]


def part_real(args, work):
    binary = os.path.join(ROOT, "build", "pipe_train")
    spec = "examples/gpt.yaml"
    common = ["--set", f"train.steps={args.steps}", "--set", "pipeline.partition=balanced",
              "--set", "log.every=1000000", "--set", "pipeline.data_parallel=1"]
    print(f"Part 1: {spec}, P = 2, real compute, one thread per rank: speedup over --sequential")
    print(f"{'schedule':<18}{'M':>4}{'seq ms':>10}{'pipe ms':>10}{'speedup':>9}{'theory':>8}"
          f"{'% of it':>9}{'sim ms':>9}{'sim err':>9}")
    for micro in args.micro:
        seq = run([binary, spec, "--sequential", "--set", "pipeline.stages=1",
                   "--set", f"train.micro_batches={micro}"] + common, f"{work}/seq.jsonl")
        for name in args.only:
            theory = 2 * (1 - simulated_bubble(binary, spec, name, 2, micro))
            got = run(mpirun(2, binary) + [spec] + layout(name, 2, micro) + common,
                      f"{work}/pipe.jsonl")
            if isinstance(got, str):
                print(f"{name:<18}{micro:>4}  {got}")
                continue
            speedup = seq[0] / got[0]
            pred = predicted_ms(binary, spec, layout(name, 2, micro) + common)
            print(f"{name:<18}{micro:>4}{seq[0]:>10.1f}{got[0]:>10.1f}{speedup:>9.3f}"
                  f"{theory:>8.3f}{100 * speedup / theory:>8.1f}%"
                  f"{prediction_cells(pred, got[0])}")


def part_sleep(args, work):
    binary = os.path.join(ROOT, "build", "bench_schedules")
    spec = "bench/sleep.yaml"
    print(f"\nPart 2: {spec}, every layer 2 ms in F, I and W: bubble (idle share of a step)")
    print(f"{'schedule':<18}{'P':>3}{'M':>4}{'measured':>10}{'theory':>8}{'diff':>8}"
          f"{'step ms':>9}{'sim ms':>9}{'sim err':>9}")
    for stages in args.stages:
        micro = 2 * stages
        for name in args.only:
            theory = simulated_bubble(binary, spec, name, stages, micro)
            sets = ["--set", f"train.steps={args.steps}"] + layout(name, stages, micro)
            got = run(mpirun(stages, binary) + [spec] + sets, f"{work}/sleep.jsonl")
            if isinstance(got, str):
                print(f"{name:<18}{stages:>3}{micro:>4}  {got}")
                continue
            pred = predicted_ms(binary, spec, sets)
            print(f"{name:<18}{stages:>3}{micro:>4}{100 * got[1]:>9.1f}%{100 * theory:>7.1f}%"
                  f"{100 * (got[1] - theory):>+7.1f}{got[0]:>9.1f}"
                  f"{prediction_cells(pred, got[0])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="M = 4 only, P = 4 only, 3 steps")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--only", default=",".join(SCHEDULES), help="comma-separated schedules")
    ap.add_argument("--part", choices=["real", "sleep", "both"], default="both")
    args = ap.parse_args()
    args.only = [s for s in args.only.split(",") if s]
    args.micro, args.stages = ([4], [4]) if args.quick else ([4, 8, 16], [4, 8])
    if args.quick:
        args.steps = 3
    for b in ("pipe_train", "bench_schedules"):
        if not os.path.exists(os.path.join(ROOT, "build", b)):
            sys.exit(f"schedules.py: build/{b} is missing: cmake -S . -B build && "
                     f"cmake --build build -j")
    with tempfile.TemporaryDirectory() as work:
        try:
            if args.part in ("real", "both"):
                part_real(args, work)
            if args.part in ("sleep", "both"):
                part_sleep(args, work)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            sys.exit(f"schedules.py: {e}")
    if RATIOS:
        errs = sorted(abs(r - 1) for r in RATIOS)
        inside = sum(e <= 0.10 for e in errs)
        print(f"\nprediction: {inside} of {len(errs)} runs within 10% of the measured step; "
              f"median error {100 * statistics.median(errs):.1f}%, worst {100 * errs[-1]:.1f}%")


if __name__ == "__main__":
    main()
