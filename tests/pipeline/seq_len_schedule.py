#!/usr/bin/env python3
"""seq_len_schedule.py PIPE_TRAIN: train.seq_len_schedule against an independent reference.

Trains tests/pipeline/seq_len_schedule.yaml (sequences of 8, 16, 24, 32 tokens over 4 steps,
G = 2 sequences a step, weights left in place by SGD at lr 1e-30) and checks:
  * the metrics' seq_len is the documented schedule, min(32, rounddown(8 + 24 s / 3, 8));
  * the loss of each step s equals the mean over its sequences j of the loss a separate run with
    model.seq_len = T_s computes at its step 0 on a data file holding exactly the tokens the
    documented position rule names: o = ((s G + j) 32) mod (N - 32), tokens[o, o + T_s + 1).
    That run knows nothing of schedules: it reads its one sequence from offset 0 of its file.
Tolerance 2e-6 relative (float loss scales 1/(G T) vs 1/T; lr 1e-30 moves no weight visibly).
  * a run resumed (--load) in the middle of the schedule continues with the lengths and losses,
    bit for bit, of the run that went through (the length comes from the restored step).
Exits 1 on a mismatch."""
import json
import os
import subprocess
import sys
import tempfile

SPEC = "tests/pipeline/seq_len_schedule.yaml"
DATA = "examples/data/tiny.txt"
T_MAX, START, WARMUP, MULT, G, STEPS = 32, 8, 3, 8, 2, 4


def run(pipe, work, name, *sets, extra=()):
    out = os.path.join(work, name + ".jsonl")
    args = [pipe, SPEC, "--sequential", "--quiet", "--metrics", out, *extra]
    for s in sets:
        args += ["--set", s]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # one GEMM code path for every run
    subprocess.run(args, check=True, env=env)
    return [json.loads(line) for line in open(out)]


def expected_T(s):
    t = START + (T_MAX - START) * s // WARMUP
    return min(T_MAX, t - t % MULT) if s < WARMUP else T_MAX


def check_resume(pipe, work):
    lr = "train.optimizer.lr=1.0e-2"  # weights that move, so a wrong step would show
    whole = run(pipe, work, "whole", lr, "train.steps=4")
    ck = os.path.join(work, "ck")
    run(pipe, work, "first", lr, "train.steps=2", extra=("--save", ck))
    rest = run(pipe, work, "rest", lr, "train.steps=4", extra=("--load", ck))
    got = [(r["step"], r["seq_len"], r["loss"]) for r in rest]
    want = [(r["step"], r["seq_len"], r["loss"]) for r in whole[2:]]
    print("resumed at step 2:", "ok" if got == want else "DIFFERS")
    return [] if got == want else [f"resumed {got} vs whole run {want}"]


def main():
    pipe = sys.argv[1]
    tokens = open(DATA, "rb").read()
    n = len(tokens)
    errors = []
    with tempfile.TemporaryDirectory() as work:
        recs = run(pipe, work, "schedule")
        got = [r.get("seq_len") for r in recs]
        want = [expected_T(s) for s in range(STEPS)]
        if got != want:
            errors.append(f"metrics seq_len {got}, expected {want}")
        for s in range(STEPS):
            T = want[s]
            ref = 0.0
            for j in range(G):
                o = ((s * G + j) * T_MAX) % (n - T_MAX)
                path = os.path.join(work, f"d{s}_{j}.bin")
                with open(path, "wb") as f:
                    f.write(tokens[o:o + T + 1] + b"\0")  # T + 2 tokens: the shortest file
                fixed = run(pipe, work, f"f{s}_{j}", f"model.seq_len={T}",
                            "train.seq_len_schedule=", "train.steps=1",
                            "train.micro_batches=1", f"data.path={path}")
                ref += fixed[0]["loss"] / G
            loss = recs[s]["loss"]
            ok = abs(loss - ref) <= 2e-6 * abs(ref)
            print(f"step {s}: T {T}, loss {loss:.9f}, reference {ref:.9f} {'ok' if ok else 'DIFFERS'}")
            if not ok:
                errors.append(f"step {s}: loss {loss!r} vs reference {ref!r}")
        errors += check_resume(pipe, work)
    for e in errors:
        print("error:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
