#!/usr/bin/env python3
"""Writes examples/data/regression.f32: records of 8 float32 inputs then 4 float32 targets.

The targets are a fixed smooth nonlinear function of the inputs (sines and products), so an MLP
can fit them and its mse falls well below the targets' variance. Deterministic.
Usage: python3 scripts/gen_regression.py [OUT] [RECORDS]
"""
import math
import random
import struct
import sys


def targets(x):
    return [
        math.sin(x[0] + 0.5 * x[1]),
        x[2] * x[3] - 0.5 * x[4],
        math.cos(x[5]) * x[6],
        0.3 * sum(x) - x[7] * x[7],
    ]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "examples/data/regression.f32"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    rng = random.Random(7)
    with open(out, "wb") as f:
        for _ in range(n):
            x = [rng.uniform(-1.0, 1.0) for _ in range(8)]
            f.write(struct.pack("<12f", *x, *targets(x)))


if __name__ == "__main__":
    main()
