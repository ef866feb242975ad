#!/usr/bin/env python3
"""Compares a pipelined run with the sequential reference run of the same spec.

usage: compare_runs.py REF_METRICS REF_DUMP_PREFIX RUN_METRICS RUN_DUMP_PREFIX RANKS [--exact]

Checks (the pipeline engine's correctness gate):
  - every step's loss agrees to 1e-6 relative (with --exact: bitwise); so does eval_loss
    (data.eval), on the same steps;
  - every parameter tensor held by any rank equals the reference: bitwise for untied tensors,
    within 1e-6 relative (of the tensor's largest value) for tied ones (with --exact: bitwise
    too, as the engine adds tied copies in the sequential order);
  - every reference tensor is held by some rank.
Exits 1 with the first differences listed.
"""
import array
import json
import struct
import sys


def read_dump(path):
    tensors = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        tied = data[pos]
        (numel,) = struct.unpack_from("<q", data, pos + 1)
        pos += 9
        vals = array.array("f")
        vals.frombytes(data[pos:pos + 4 * numel])
        pos += 4 * numel
        tensors[name] = (tied, vals)
    return tensors


def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def eval_losses(path):
    """{step: eval_loss} of the steps that evaluated (data.eval)."""
    return {r["step"]: r["eval_loss"] for r in map(json.loads, open(path)) if "eval_loss" in r}


def main():
    ref_m, ref_d, run_m, run_d, ranks = sys.argv[1:6]
    exact = "--exact" in sys.argv[6:]
    errors = []
    a, b = losses(ref_m), losses(run_m)
    if len(a) != len(b) or not a:
        errors.append(f"step counts differ: {len(a)} vs {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if (x != y) if exact else abs(x - y) > 1e-6 * abs(x):
            errors.append(f"step {i + 1}: loss {y!r} vs sequential {x!r}")
    ea, eb = eval_losses(ref_m), eval_losses(run_m)
    if sorted(ea) != sorted(eb):
        errors.append(f"eval steps differ: {sorted(eb)} vs sequential {sorted(ea)}")
    for step in sorted(set(ea) & set(eb)):
        x, y = ea[step], eb[step]
        if (x != y) if exact else abs(x - y) > 1e-6 * abs(x):
            errors.append(f"step {step}: eval_loss {y!r} vs sequential {x!r}")
    ref = read_dump(ref_d + ".0.bin")
    seen = set()
    for r in range(int(ranks)):
        for name, (tied, vals) in read_dump(f"{run_d}.{r}.bin").items():
            seen.add(name)
            if name not in ref:
                errors.append(f"rank {r}: tensor {name} is not in the reference")
                continue
            want = ref[name][1]
            if tied and not exact:
                scale = max(1e-30, max(abs(v) for v in want))
                worst = max(abs(x - y) for x, y in zip(vals, want))
                if len(vals) != len(want) or worst > 1e-6 * scale:
                    errors.append(f"rank {r}: tied {name} differs by {worst:.3g} (scale {scale:.3g})")
            elif vals.tobytes() != want.tobytes():
                diff = sum(1 for x, y in zip(vals, want) if x != y)
                errors.append(f"rank {r}: {name}: {diff} of {len(want)} values not bitwise equal")
    missing = set(ref) - seen
    if missing:
        errors.append(f"tensors held by no rank: {sorted(missing)[:5]}")
    if errors:
        print("\n".join(errors[:20]))
        sys.exit(1)
    evals = f", {len(ea)} eval losses" if ea else ""
    print(f"pipeline matches sequential: {len(a)} losses{evals}, {len(seen)} tensors over {ranks} ranks")


if __name__ == "__main__":
    main()
