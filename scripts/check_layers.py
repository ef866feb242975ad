#!/usr/bin/env python3
"""Fails when a source file includes a header from a folder above its own.

The folders form one order (docs/architecture.md): each may include from itself and from the
folders before it in LAYERS, never from one after it. Subfolders (kernels/cpu, device/cuda, ...)
belong to their top folder. Programs on top (launcher, bench, tests, examples) may include
anything. Usage: check_layers.py [REPO_ROOT]; prints one line per upward include, exits 1 if any.
"""
import os
import re
import sys

LAYERS = ["core", "spec", "data", "kernels", "layers", "device", "model", "profile",
          "schedule", "partition", "comm", "checkpoint", "observe", "engine", "launcher"]
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad, files = [], 0
    for top in LAYERS:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(n for n in names if n.endswith(SOURCES)):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                files += 1
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1).split("/")[0]
                        if target in rank and rank[target] > rank[top]:
                            bad.append(f"{rel}:{lineno}: includes \"{m.group(1)}\": {target}/ is "
                                       f"above {top}/ (order: {' < '.join(LAYERS)}); move the "
                                       f"shared piece down to {top}/ or below")
    for line in bad:
        print(line)
    if files == 0:
        print(f"check_layers: no sources found under {root}", file=sys.stderr)
        return 1
    print(f"check_layers: {files} files, {len(bad)} upward include(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
