#!/usr/bin/env python3
"""Conformance of checkpoint/safetensors.c with the safetensors format, using only the standard
library (struct, json, binascii).

  python3 tests/checkpoint/safetensors_interop.py PATH/TO/safetensors_tool

(a) Files written here the way the format spec says (unpadded, space-padded to 8, pretty-printed
    with data stored in another order than the header, several dtypes, metadata) are read by
    `safetensors_tool read`; names, dtypes, shapes, value sums, raw-byte CRCs and metadata must
    match Python's own.
(b) `safetensors_tool write` writes its fixed tensors; the file is parsed here: header length,
    JSON, space padding, 8-byte alignment of the data, contiguous offsets in header order, values.
(c) Files that break the format are rejected by the tool with exit status 2 and a message naming
    the file (and the tensor).
(d) Only if the `safetensors` package and numpy happen to be importable: cross-checks with the
    reference implementation (skipped otherwise; nothing is installed).
Exit status 0 when every check passes.
"""
import binascii
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

CHECKS = [0, 0]  # passed, failed


def check(cond, what):
    if cond:
        CHECKS[0] += 1
    else:
        CHECKS[1] += 1
        print("check failed: " + what, file=sys.stderr)
    return cond


DTYPE_SIZE = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
              "U8": 1, "BOOL": 1}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def f32_round(values):
    """Values rounded to float32 (what the file stores), as Python floats."""
    return list(struct.unpack("<%df" % len(values), struct.pack("<%df" % len(values), *values)))


def f32_sum(values):
    s = 0.0
    for v in values:  # the order and double precision safetensors_tool uses
        s += v
    return s


def write_safetensors(path, tensors, metadata=None, pad_to=8, indent=None, data_order=None,
                      extra_pad=0):
    """tensors: list of (name, dtype, shape, raw bytes) in header order. data_order: the order of
    the data in the file (indices into tensors), default the header order. Returns the header."""
    order = data_order if data_order is not None else list(range(len(tensors)))
    offsets, pos = {}, 0
    for i in order:
        name, _, _, raw = tensors[i]
        offsets[name] = [pos, pos + len(raw)]
        pos += len(raw)
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, _ in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": offsets[name]}
    text = json.dumps(header, indent=indent, ensure_ascii=False).encode("utf-8")
    if pad_to:
        text += b" " * ((-(8 + len(text))) % pad_to)
    text += b" " * extra_pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for i in order:
            f.write(tensors[i][3])
    return text


def run_tool(tool, *args):
    p = subprocess.run([tool] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def parse_read_output(out):
    info, tensors, meta = None, [], []
    for line in out.splitlines():
        kind, rest = line.split("\t", 1)
        if kind == "file":
            info = [int(x) for x in rest.split("\t")]
        elif kind == "tensor":
            name, dtype, shape, s, crc = rest.split("\t")
            dims = [int(x) for x in shape[1:-1].split(",") if x]
            tensors.append((name, dtype, dims, None if s == "-" else float(s), int(crc, 16)))
        elif kind == "meta":
            key, value = rest.split("\t", 1)
            meta.append((key, value))
    return info, tensors, meta


def make_tensors(seed):
    rng = random.Random(seed)
    out, sums = [], {}

    def f32(name, shape):
        vals = f32_round([rng.uniform(-4, 4) for _ in range(numel(shape))])
        out.append((name, "F32", shape, struct.pack("<%df" % len(vals), *vals)))
        sums[name] = f32_sum(vals)

    f32("tok_embed.weight", [16, 8])
    f32("0.attn.qkv.weight", [8, 24])
    f32("0.ln.gain", [8])
    f32("scalar", [])
    f32("empty", [0, 3])
    f32("conv", [2, 3, 2, 2])
    out.append(("steps", "I64", [3], struct.pack("<3q", 1, -2, 1 << 40)))
    out.append(("half", "BF16", [5], bytes(range(10))))
    out.append(("mask", "BOOL", [3], b"\x01\x00\x01"))
    f32("after_odd", [3])  # its data starts at an odd offset when stored after "mask"
    return out, sums


def part_a(tool, tmp):
    metadata = {"format": "pt", "step": "1200", "text": "gr\u00f6\u00dfe \"quoted\" \\ end"}
    variants = [
        ("unpadded", dict(pad_to=None, extra_pad=0)),
        ("unpadded-odd", dict(pad_to=None, extra_pad=3)),
        ("padded8", dict(pad_to=8)),
        ("pretty-reordered", dict(pad_to=8, indent=2, reverse=True)),
        ("no-metadata", dict(pad_to=None, nometa=True)),
    ]
    for seed, (label, opts) in enumerate(variants):
        tensors, sums = make_tensors(seed)
        path = os.path.join(tmp, "py-%s.safetensors" % label)
        order = list(reversed(range(len(tensors)))) if opts.get("reverse") else None
        header = write_safetensors(path, tensors, None if opts.get("nometa") else metadata,
                                   pad_to=opts.get("pad_to"), indent=opts.get("indent"),
                                   data_order=order, extra_pad=opts.get("extra_pad", 0))
        rc, out, err = run_tool(tool, "read", path)
        if not check(rc == 0, "(a) %s: tool read exit %d: %s" % (label, rc, err.strip())):
            continue
        info, got, meta = parse_read_output(out)
        size = os.path.getsize(path)
        check(info == [len(tensors), 8 + len(header), size],
              "(a) %s: file line %s, expected %s" % (label, info, [len(tensors), 8 + len(header), size]))
        check([g[0] for g in got] == [t[0] for t in tensors],
              "(a) %s: tensor order %s" % (label, [g[0] for g in got]))
        for (name, dtype, shape, raw), g in zip(tensors, got):
            check(g[1] == dtype and g[2] == shape,
                  "(a) %s: %s is %s %s, expected %s %s" % (label, name, g[1], g[2], dtype, shape))
            check(g[4] == binascii.crc32(raw), "(a) %s: %s raw bytes CRC differs" % (label, name))
            if dtype == "F32":
                check(g[3] == sums[name], "(a) %s: %s sum %r, expected %r" % (label, name, g[3], sums[name]))
        want_meta = [] if opts.get("nometa") else list(metadata.items())
        check(meta == want_meta, "(a) %s: metadata %s, expected %s" % (label, meta, want_meta))


TOOL_TENSORS = [("embed.weight", [4, 3]), ("conv.weight", [2, 1, 3, 3]), ("scalar", []),
                ("empty", [0, 5]), ("bias", [7]), ("0.attn.qkv.weight", [3, 5])]
TOOL_META = {"format": "pt", "producer": "pipetrain safetensors_tool",
             "note": "tab\there, \"quotes\", gr\u00f6\u00dfe"}


def part_b(tool, tmp):
    path = os.path.join(tmp, "c-written.safetensors")
    rc, out, err = run_tool(tool, "write", path)
    if not check(rc == 0, "(b) tool write exit %d: %s" % (rc, err.strip())):
        return
    data = open(path, "rb").read()
    check(out.startswith("crc\t") and int(out.split("\t")[1], 16) == binascii.crc32(data),
          "(b) CRC printed by st_write (%s) is not the file's (%08x)" % (out.strip(), binascii.crc32(data)))
    check(len(data) >= 8, "(b) file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    check(8 + n <= len(data), "(b) header length %d past the end (%d bytes)" % (n, len(data)))
    check((8 + n) % 8 == 0, "(b) data starts at %d, not a multiple of 8" % (8 + n))
    raw_header = data[8:8 + n]
    text = raw_header.decode("utf-8")
    stripped = text.rstrip(" ")
    check(stripped.startswith("{") and stripped.endswith("}"), "(b) header is not a bare JSON object")
    check(len(text) - len(stripped) < 8, "(b) more than 7 padding spaces")
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)  # keeps order and duplicates
    keys = [k for k, _ in pairs]
    check(len(keys) == len(set(keys)), "(b) duplicate keys in the header")
    header = dict(pairs)
    meta = header.pop("__metadata__", None)
    check(meta is not None and dict(meta) == TOOL_META, "(b) metadata %r" % (meta,))
    names = [k for k in keys if k != "__metadata__"]
    check(names == [t[0] for t in TOOL_TENSORS], "(b) tensor order %s" % names)
    body = data[8 + n:]
    pos = 0
    for k, (name, shape) in enumerate(TOOL_TENSORS):
        entry = dict(header.get(name, []))
        if not check(set(entry) == {"dtype", "shape", "data_offsets"}, "(b) %s fields %s" % (name, sorted(entry))):
            continue
        check(entry["dtype"] == "F32" and entry["shape"] == shape,
              "(b) %s is %s %s" % (name, entry["dtype"], entry["shape"]))
        begin, end = entry["data_offsets"]
        check(begin == pos and end - begin == 4 * numel(shape),
              "(b) %s data_offsets %s (expected to start at %d)" % (name, [begin, end], pos))
        pos = end
        vals = list(struct.unpack("<%df" % numel(shape), body[begin:end]))
        want = [((37 * i + 11 * k) % 101 - 50) / 8 for i in range(numel(shape))]
        check(vals == want, "(b) %s values differ" % name)
    check(pos == len(body), "(b) tensors cover %d of %d data bytes" % (pos, len(body)))
    # and the C reader agrees with itself on its own file
    rc, out, err = run_tool(tool, "read", path)
    check(rc == 0 and parse_read_output(out)[2] == list(TOOL_META.items()), "(b) tool reads its own file: %s" % err)


def part_c(tool, tmp):
    def entry(dtype, shape, b, e):
        return '{"dtype": "%s", "shape": %s, "data_offsets": [%d, %d]}' % (dtype, json.dumps(shape), b, e)

    def raw_file(name, header_text, data_len, length=None):
        path = os.path.join(tmp, name)
        h = header_text.encode("utf-8")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h) if length is None else length) + h + bytes(data_len))
        return path

    cases = [
        ("overlap", '{"a": %s, "b": %s}' % (entry("F32", [4], 0, 16), entry("F32", [4], 8, 24)), 24, None, "b", "overlap"),
        ("gap", '{"a": %s, "b": %s}' % (entry("F32", [2], 0, 8), entry("F32", [2], 12, 20)), 20, None, "b", "gap"),
        ("size", '{"w": %s}' % entry("F32", [3, 5], 0, 100), 100, None, "w", "needs 60"),
        ("past-end", '{"w": %s}' % entry("F32", [25], 0, 100), 60, None, "w", "past the end"),
        ("duplicate", '{"a": %s, "a": %s}' % (entry("F32", [1], 0, 4), entry("F32", [1], 4, 8)), 8, None, "a", "twice"),
        ("dtype", '{"a": %s}' % entry("F33", [1], 0, 4), 4, None, "a", "unknown dtype"),
        ("negative", '{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', 4, None, "a", "negative"),
        ("trailing", '{"a": %s}' % entry("F32", [1], 0, 4), 8, None, None, "cover"),
        ("header-length", "{}", 0, 4096, None, "past the end of the file"),
        ("not-json", '{"a": ', 0, None, None, "not valid JSON"),
        ("metadata", '{"__metadata__": {"k": 1}}', 0, None, None, "not a string"),
    ]
    for label, header_text, data_len, length, tensor, what in cases:
        path = raw_file("bad-%s.safetensors" % label, header_text, data_len, length)
        rc, out, err = run_tool(tool, "read", path)
        ok = rc == 2 and err.startswith(path + ": ") and what in err and err.count("\n") == 1
        if tensor:
            ok = ok and ("tensor '%s'" % tensor) in err
        check(ok, "(c) %s: exit %d, stderr %r" % (label, rc, err))
    # a valid file cut short
    tensors, _ = make_tensors(99)
    path = os.path.join(tmp, "truncated.safetensors")
    write_safetensors(path, tensors, {"a": "b"})
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)
    rc, out, err = run_tool(tool, "read", path)
    check(rc == 2 and "after_odd" in err and "truncated" in err, "(c) truncated: exit %d, %r" % (rc, err))


def part_d(tool, tmp):
    try:
        import numpy as np  # noqa: F401
        from safetensors.numpy import load_file, save_file
    except Exception as e:  # not installed: that part is optional
        print("safetensors_interop: (d) skipped, the safetensors package with numpy is not importable (%s)" % e)
        return
    path = os.path.join(tmp, "c-for-reference.safetensors")
    rc, _, err = run_tool(tool, "write", path)
    if check(rc == 0, "(d) tool write: %s" % err):
        loaded = load_file(path)
        for k, (name, shape) in enumerate(TOOL_TENSORS):
            want = np.array([((37 * i + 11 * k) % 101 - 50) / 8 for i in range(numel(shape))],
                            dtype=np.float32).reshape(shape)
            check(name in loaded and loaded[name].shape == tuple(shape) and (loaded[name] == want).all(),
                  "(d) reference reader: %s" % name)
    path = os.path.join(tmp, "reference-written.safetensors")
    arrs = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "s": np.array(2.5, dtype=np.float32)}
    save_file(arrs, path, metadata={"m": "v"})
    rc, out, err = run_tool(tool, "read", path)
    if check(rc == 0, "(d) tool reads the reference writer's file: %s" % err):
        _, got, meta = parse_read_output(out)
        byname = {g[0]: g for g in got}
        check(byname["x"][2] == [3, 4] and byname["x"][3] == 66.0 and byname["s"][2] == [] and byname["s"][3] == 2.5,
              "(d) values from the reference writer: %s" % got)
        check(meta == [("m", "v")], "(d) metadata from the reference writer: %s" % meta)


def main():
    if len(sys.argv) != 2:
        print("usage: safetensors_interop.py PATH/TO/safetensors_tool", file=sys.stderr)
        return 2
    tool = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="pt_st_interop_") as tmp:
        part_a(tool, tmp)
        part_b(tool, tmp)
        part_c(tool, tmp)
        part_d(tool, tmp)
    print("safetensors_interop: %d passed, %d failed" % (CHECKS[0], CHECKS[1]))
    return 1 if CHECKS[1] else 0


if __name__ == "__main__":
    sys.exit(main())
