#!/usr/bin/env python3
"""scripts/ledger_compare.py EMU_LEDGER GPU_REPORT: one training step's kernel ledger as the
emulator counted it against the one a real GPU ran (scripts/gpu_check.sh's counters row).

EMU_LEDGER: `gpu_roofline SPEC --direct --raw` of the emulated build (rows "row NAME LAUNCHES
TENSOR OTHER BYTES SECONDS HOST_BOUND"; scripts/gpu_kit.sh writes it into the kit as
emu_ledger.txt).
GPU_REPORT: a log holding `gpu_roofline SPEC --time`'s table from the GPU (bench/gpu_targets.sh
prints it into targets.log), for the same spec and settings.

Both count what the code launched, so they differ only where the real libraries took another
path than the emulator's: a cuBLASLt epilogue the GPU's heuristic refused (its unfused launches
instead), a plain product it had no algorithm for (a `:no_lt_algorithm` row: cuBLAS ran it), a
shape cuDNN would not take (the in-house attention), and so on. Prints the rows whose
launches or bytes differ, then the launches a step on each side. Exits 0 when every row is alike,
1 when some differ, 2 when a file is missing or holds no ledger."""
import sys


def emu_rows(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 6 and f[0] == "row":
            rows[f[1]] = (float(f[2]), float(f[5]) / 1e9)  # launches, GB
    return rows


def gpu_rows(path):
    """The table between its header ("kernel  launches ...") and "model FLOPs per step"."""
    rows, inside = {}, False
    for line in open(path):
        f = line.split()
        if f[:2] == ["kernel", "launches"]:
            inside, rows = True, {}
        elif inside and line.startswith("model FLOPs"):
            inside = False
        elif inside and len(f) >= 5:
            rows[f[0]] = (float(f[1]), float(f[4]))
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: ledger_compare.py EMU_LEDGER GPU_REPORT")
    try:
        emu, gpu = emu_rows(sys.argv[1]), gpu_rows(sys.argv[2])
    except OSError as e:
        print(f"ledger_compare.py: {e}")
        return 2
    for name, rows in (("the emulator's ledger " + sys.argv[1], emu),
                       ("the GPU's table in " + sys.argv[2], gpu)):
        if not rows:
            print(f"ledger_compare.py: no ledger rows in {name}")
            return 2
    differ = []
    for name in sorted(set(emu) | set(gpu)):
        e, g = emu.get(name, (0.0, 0.0)), gpu.get(name, (0.0, 0.0))
        # the table prints GB to 4 decimals
        if e[0] != g[0] or abs(e[1] - g[1]) > 6e-5 + 1e-6 * e[1]:
            differ.append((name, e, g))
    if differ:
        print(f"{'kernel':<40} {'emu launches':>12} {'gpu launches':>12} {'emu GB':>10} "
              f"{'gpu GB':>10}")
        for name, e, g in differ:
            print(f"{name:<40} {e[0]:12.0f} {g[0]:12.0f} {e[1]:10.4f} {g[1]:10.4f}")
    launches = (sum(r[0] for r in emu.values()), sum(r[0] for r in gpu.values()))
    print(f"ledger: {len(differ)} of {len(set(emu) | set(gpu))} rows differ; launches a step: "
          f"emulator {launches[0]:.0f}, GPU {launches[1]:.0f}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
