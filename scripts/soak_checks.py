"""soak_checks.py: the checks scripts/soak.py makes after every run of pipe_train, on what the
run left behind: the checkpoint root (every complete checkpoint's files against its manifest,
pruning, no lost checkpoint), the --metrics file (resumed where it should, every step bitwise
equal to the uninterrupted run's) and, on a failure, how two --gather files differ. Each check
raises Failure with one line saying what is wrong. Python standard library only.
"""
import collections
import json
import os
import re
import struct
import zlib


class Failure(Exception):
    """A check failed: the message says which and why."""


RootState = collections.namedtuple("RootState", "newest complete incomplete previous tmps")


def root_state(root, keep, every):
    """Checks ROOT (every complete checkpoint's files against its manifest, pruning, no lost
    checkpoint) and returns what is in it."""
    complete, incomplete, previous, tmps = [], [], [], []
    names = sorted(os.listdir(root)) if os.path.isdir(root) else []
    for n in names:
        m = re.fullmatch(r"step-(\d+)(\.previous)?", n)
        if not m:
            continue
        d, step = os.path.join(root, n), int(m.group(1))
        tmps += [f"{n}/{f}" for f in os.listdir(d) if ".tmp." in f]
        if m.group(2):
            previous.append(step)
        elif not os.path.exists(os.path.join(d, "manifest.json")):
            incomplete.append(step)
        else:
            complete.append(step)
            check_manifest(d, step)
    periodic = [s for s in complete if s % every == 0]
    if periodic:
        upto = [s for s in complete if s <= max(periodic)]
        if len(upto) > keep + 1:
            raise Failure(f"{root}: complete checkpoints {complete}: {len(upto)} at or below the "
                          f"newest periodic one, keep is {keep} (+1 while a prune is pending)")
    newest = max(complete) if complete else 0
    for p in previous:  # a complete checkpoint set aside by a save over it that was cut short
        d = os.path.join(root, f"step-{p:08d}")
        if (p > newest and os.path.exists(os.path.join(d + ".previous", "manifest.json"))
                and not os.path.exists(os.path.join(d, "manifest.json"))):
            raise Failure(f"lost checkpoint: step {p} was complete (it is in {d}.previous, with "
                          f"its manifest), but {d} has no manifest, so --load ROOT resumes from "
                          f"step {newest}: a save over the complete step-{p} (the preemption "
                          f"save after the periodic one) was cut short")
    return RootState(newest, complete, incomplete, previous, tmps)


def check_manifest(d, step):
    try:
        with open(os.path.join(d, "manifest.json"), encoding="utf-8") as f:
            man = json.load(f)
    except ValueError as e:
        raise Failure(f"{d}/manifest.json: not valid JSON: {e}") from None
    if man.get("step") != step:
        raise Failure(f"{d}: the manifest says step {man.get('step')}")
    for rec in man["files"]:
        try:
            with open(os.path.join(d, rec["name"]), "rb") as f:
                blob = f.read()
        except OSError as e:
            raise Failure(f"{d}/{rec['name']}: {e}") from None
        if len(blob) != rec["bytes"] or zlib.crc32(blob) != rec["crc32"]:
            raise Failure(f"{d}/{rec['name']}: size/CRC-32 do not match the manifest")


def read_metrics(path):
    """The records of a --metrics file; the last line may be cut by the kill."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    recs = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:
                break
            raise Failure(f"{path}: line {i + 1} is not JSON: {line[:80]}") from None
    return recs


def check_metrics(ref, path, start):
    """A run's steps against the reference's (dict step -> record): (first, last, count)."""
    got = read_metrics(path)
    if not got:
        return 0, 0, 0
    steps = [x["step"] for x in got]
    if steps[0] != start + 1:
        raise Failure(f"the run trained steps {steps[0]}..{steps[-1]}, but the newest complete "
                      f"checkpoint at launch was step {start}: it should have resumed with step "
                      f"{start + 1}")
    if steps != list(range(steps[0], steps[0] + len(steps))):
        raise Failure(f"steps not consecutive: {steps[:20]}...")
    for x in got:
        y = ref.get(x["step"])
        if y is None:
            raise Failure(f"step {x['step']} is past the reference's last step")
        for k in ("loss", "lr", "grad_norm"):
            if x[k] != y[k]:
                raise Failure(f"step {x['step']}: {k} {x[k]!r}, the uninterrupted run had "
                              f"{y[k]!r} (first step that differs)")
    return steps[0], steps[-1], len(steps)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def safetensors_diff(a, b):
    """Lines saying how the gathered files a (reference) and b (soak) differ."""
    (ha, da), (hb, db) = read_safetensors(a), read_safetensors(b)
    out = []
    ma, mb = ha.pop("__metadata__", {}), hb.pop("__metadata__", {})
    if ma != mb:
        out.append(f"metadata differs: {ma} vs {mb}")
    if set(ha) != set(hb):
        out.append(f"tensor names differ: only in reference {sorted(set(ha) - set(hb))[:5]}, "
                   f"only in soak {sorted(set(hb) - set(ha))[:5]}")
    ndiff = 0
    for name in (n for n in ha if n in hb):
        ta = da[ha[name]["data_offsets"][0]:ha[name]["data_offsets"][1]]
        tb = db[hb[name]["data_offsets"][0]:hb[name]["data_offsets"][1]]
        if ta == tb and ha[name]["shape"] == hb[name]["shape"]:
            continue
        ndiff += 1
        if len(ta) != len(tb):
            out.append(f"{name}: shape {ha[name]['shape']} vs {hb[name]['shape']}")
            continue
        fa, fb = struct.unpack(f"<{len(ta) // 4}f", ta), struct.unpack(f"<{len(tb) // 4}f", tb)
        d = [abs(x - y) for x, y in zip(fa, fb)]
        out.append(f"{name}: {sum(1 for x in d if x)} of {len(d)} elements differ, "
                   f"max |diff| {max(d):.3g}")
    out.append(f"{ndiff} of {len(ha)} tensors differ")
    return out
