#!/usr/bin/env python3
"""ck.py CHECK ARGS...: the checks of the checkpoint scripts (roundtrip.sh, chunks.sh), one per
call: losses and parameters against a reference run, a checkpoint's manifest and files, what
pipe_convert wrote. Run from the repository root. Prints what it checked; exits 1 naming the
first difference."""
import json, struct, sys, os
sys.path.insert(0, "tests/pipeline")
from compare_runs import read_dump

def die(msg):
    print("  " + msg)
    sys.exit(1)

def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path))}

def dump(prefix, ranks):
    """name -> (tied, values) over ranks; the first rank holding a name wins (a tie's owner)."""
    out = {}
    for r in range(ranks):
        for name, tv in read_dump(f"{prefix}.{r}.bin").items():
            out.setdefault(name, tv)
    return out

def read_st(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    if 8 + n > len(data):
        die(f"{path}: header length {n} past the end")
    header = json.loads(data[8:8 + n].decode())
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    if (8 + n) % 8:
        die(f"{path}: data section starts at {8 + n}, not a multiple of 8")
    tensors, spans = {}, []
    for name, t in header.items():
        b, e = t["data_offsets"]
        numel = 1
        for d in t["shape"]:
            numel *= d
        if t["dtype"] != "F32" or e - b != 4 * numel or e > len(body):
            die(f"{path}: tensor {name}: bad entry {t}")
        spans.append((b, e))
        tensors[name] = (t["shape"], body[b:e])
    spans.sort()
    pos = 0
    for b, e in spans:
        if b != pos:
            die(f"{path}: gap or overlap at byte {pos}")
        pos = e
    if pos != len(body):
        die(f"{path}: data section is {len(body)} bytes, tensors cover {pos}")
    return tensors, meta

def cmp_losses(ref, run, first, last, tol, label):
    a, b = losses(ref), losses(run)
    want = list(range(int(first), int(last) + 1))
    if sorted(b) != want:
        die(f"{label}: steps {sorted(b)}, expected {first}..{last}")
    tol = float(tol)
    worst = 0.0
    for s in want:
        d = abs(a[s] - b[s])
        worst = max(worst, d / abs(a[s]))
        if (tol == 0 and a[s] != b[s]) or d > tol * abs(a[s]):
            die(f"{label}: step {s}: loss {b[s]!r}, reference {a[s]!r} (diff {d:.3g})")
    kind = "bitwise" if tol == 0 else f"within {tol:g} relative"
    print(f"  {label}: losses of steps {first}..{last} {kind} (max relative diff {worst:.3g})")

def cmp_params(ref_prefix, ref_ranks, run_prefix, run_ranks, label, exact=""):
    """compare_runs.py's rule: untied tensors bitwise, tied ones within 1e-6 of the largest
    (exact: bitwise too)."""
    ref, seen, worst = dump(ref_prefix, int(ref_ranks)), set(), 0.0
    for r in range(int(run_ranks)):
        for name, (tied, vals) in read_dump(f"{run_prefix}.{r}.bin").items():
            seen.add(name)
            if name not in ref:
                die(f"{label}: rank {r}: {name} not in the reference")
            want = ref[name][1]
            if len(vals) != len(want):
                die(f"{label}: rank {r}: {name}: {len(vals)} values, reference {len(want)}")
            if tied and not exact:
                scale = max(1e-30, max(abs(v) for v in want))
                d = max(abs(x - y) for x, y in zip(vals, want))
                worst = max(worst, d / scale)
                if d > 1e-6 * scale:
                    die(f"{label}: rank {r}: tied {name} differs by {d:.3g} (scale {scale:.3g})")
            elif vals.tobytes() != want.tobytes():
                n = sum(1 for x, y in zip(vals, want) if x != y)
                die(f"{label}: rank {r}: {name}: {n} of {len(want)} values not bitwise equal")
    if set(ref) - seen:
        die(f"{label}: tensors held by no rank: {sorted(set(ref) - seen)[:5]}")
    print(f"  {label}: {len(seen)} tensors equal (untied bitwise, tied max rel diff {worst:.3g})")

def manifest(d):
    return json.load(open(os.path.join(d, "manifest.json")))

def check_ckpt(d, step, stages, dp, chunks=None):
    """One file pair per chunk (per stage when chunks is not given: the layout then has no
    chunk entries, as this format always wrote it)."""
    m = manifest(d)
    lay = m["layout"]
    files = int(chunks or stages)
    if m["format"] != "pipetrain-checkpoint/1" or m["step"] != int(step) or \
       m["optimizer"]["t"] != int(step) or lay["stages"] != int(stages) or \
       lay["data_parallel"] != int(dp) or len(lay["bounds"]) != files + 1 or \
       lay.get("chunks") != (int(chunks) if chunks else None) or \
       len(lay.get("chunk_stage", [0] * files)) != files:
        die(f"{d}: manifest says format {m['format']}, step {m['step']}, t {m['optimizer']['t']}, "
            f"layout {lay}; expected step {step}, {stages} stages x {dp}, chunks {chunks}")
    want = sorted([f"model-s{s:03d}.safetensors" for s in range(files)] +
                  [f"optim-s{s:03d}.safetensors" for s in range(files)])
    names = sorted(f["name"] for f in m["files"])
    if names != want or sorted(os.listdir(d)) != sorted(want + ["manifest.json"]):
        die(f"{d}: files {names} / on disk {sorted(os.listdir(d))}, expected {want}")
    import zlib
    for f in m["files"]:
        blob = open(os.path.join(d, f["name"]), "rb").read()
        if zlib.crc32(blob) != f["crc32"] or len(blob) != f["bytes"]:
            die(f"{d}/{f['name']}: crc32/bytes {zlib.crc32(blob)}/{len(blob)}, manifest "
                f"{f['crc32']}/{f['bytes']}")
    what = f", {chunks} chunks" if chunks else ""
    print(f"  {d}: step {step}, {stages} stage(s) x {dp}{what}, {len(m['files'])} files, CRC-32 and sizes match")

def ckpt_tensors(d, kind):
    """name -> bytes over a checkpoint's model- or optim- files."""
    out = {}
    for f in sorted(os.listdir(d)):
        if f.startswith(kind + "-s"):
            for name, (shape, blob) in read_st(os.path.join(d, f))[0].items():
                if name in out:
                    die(f"{d}: {name} stored twice")
                out[name] = (shape, blob)
    return out

def check_convert(out, ckpt, dump_prefix, ranks):
    tensors, meta = read_st(out)
    m = manifest(ckpt)
    if set(tensors) != set(m["tensors"]):
        die(f"{out}: tensors {sorted(set(tensors) ^ set(m['tensors']))[:5]} differ from the manifest")
    ref = dump(dump_prefix, int(ranks))
    if set(ref) != set(tensors):
        die(f"{out}: tensor names differ from the dump: {sorted(set(ref) ^ set(tensors))[:5]}")
    for name, (shape, blob) in tensors.items():
        if shape != m["tensors"][name]["shape"]:
            die(f"{out}: {name}: shape {shape}, manifest {m['tensors'][name]['shape']}")
        if blob != ref[name][1].tobytes():
            die(f"{out}: {name} is not bitwise equal to the saving run's dump")
    if meta.get("format") != "pipetrain-sequential/1" or meta.get("step") != str(m["step"]):
        die(f"{out}: metadata {meta}")
    ties = {f"tied.{g[0]}": ",".join(g[1:]) for g in m["ties"].values()}
    got = {k: v for k, v in meta.items() if k.startswith("tied.")}
    if got != ties or not ties:
        die(f"{out}: tie metadata {got}, expected {ties} (from the manifest's ties {m['ties']})")
    for g in m["ties"].values():
        if g[0] not in tensors or any(n in tensors for n in g[1:]):
            die(f"{out}: tie group {g}: not stored exactly once under its first owner")
    print(f"  {out}: {len(tensors)} tensors bitwise equal to the dump, shapes as in the manifest, "
          f"ties {got}, step {meta['step']}")

def check_optim(out, ckpt):
    tensors, meta = read_st(out)
    want = ckpt_tensors(ckpt, "optim")
    model = manifest(ckpt)["tensors"]
    names = {f"{k}.{s}" for k in model for s in ("exp_avg", "exp_avg_sq")}
    if set(tensors) != names or set(want) != names:
        die(f"{out}: names differ from <tensor>.exp_avg/.exp_avg_sq of the manifest's tensors")
    for name, (shape, blob) in tensors.items():
        if (shape, blob) != want[name]:
            die(f"{out}: {name} differs from the checkpoint's optimizer state")
    print(f"  {out}: {len(tensors)} exp_avg/exp_avg_sq tensors bitwise equal to the checkpoint's "
          f"optim-s*.safetensors (metadata {meta})")

def steps_in(root, *want):
    got = sorted(os.listdir(root))
    exp = [f"step-{int(s):08d}" for s in want]
    if got != exp:
        die(f"{root}: holds {got}, expected {exp}")
    print(f"  {root}: holds {got}")

def differ(a, b, step, label):
    x, y = losses(a)[int(step)], losses(b)[int(step)]
    if x == y:
        die(f"{label}: step {step} losses are equal ({x!r}): the change had no effect")
    print(f"  {label}: step {step} loss {y!r} vs {x!r} (different, as it should be)")

globals()[sys.argv[1]](*sys.argv[2:])
