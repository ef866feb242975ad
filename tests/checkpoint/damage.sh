#!/usr/bin/env bash
# damage.sh PIPE_TRAIN [PIPE_CONVERT]: a damaged checkpoint is refused with exit code 2 and one
# line that names the file (and the tensor where there is one), never loaded or crashed on.
#
# One good checkpoint (sequential, tests/pipeline/gate.yaml, 3 steps, --save); each case copies
# it, breaks the copy and runs `pipe_train gate.yaml --sequential --load COPY`:
#   truncated model file, a flipped data byte (CRC mismatch), a missing optimizer file, a
#   missing stage file of a 2-stage checkpoint, checkpoints of other specs (model.dim=48, 5
#   blocks instead of 6), an AdamW checkpoint loaded by an SGD spec, a tensor whose shape differs from the spec's, safetensors headers that
#   lie about offsets or their own length (with the manifest's crc32/bytes updated so only the
#   header validation can catch them), a manifest that is not JSON, one of another format, a
#   directory without a manifest (an interrupted save), a root with no step-N inside; then
#   pipe_convert on damaged copies (exit 2, one line) and one pipelined load (mpirun -np 2).
# PIPE_CONVERT defaults to pipe_convert next to PIPE_TRAIN.
set -euo pipefail
pipe_train=$(realpath "$1")
pipe_convert=$(realpath "${2:-$(dirname "$pipe_train")/pipe_convert}")
. "$(dirname "$0")/common.sh"

cat >"$work/edit.py" <<'EOF'
"""edit.py CKPT FILE OP ARGS: edits a checkpoint file in place and, for header edits, updates
the manifest's crc32 and bytes for it so that only the header validation can notice."""
import json, os, re, struct, sys, zlib

def seal(m):
    """Recomputes manifest_crc32 as pipetrain does: CRC-32 of the manifest printed without
    whitespace and without that key (cJSON_PrintUnformatted's form for this content)."""
    m.pop("manifest_crc32", None)
    m["manifest_crc32"] = zlib.crc32(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode())

def check_seal(ckpt):
    m = json.load(open(os.path.join(ckpt, "manifest.json")))
    want = m["manifest_crc32"]
    seal(m)
    if m["manifest_crc32"] != want:
        sys.exit(f"{ckpt}: manifest_crc32 {want}, recomputed {m['manifest_crc32']}")
    print(f"  {ckpt}: manifest_crc32 {want} matches its content")

def fix_manifest(ckpt, fname):
    mpath = os.path.join(ckpt, "manifest.json")
    m = json.load(open(mpath))
    blob = open(os.path.join(ckpt, fname), "rb").read()
    for f in m["files"]:
        if f["name"] == fname:
            f["crc32"], f["bytes"] = zlib.crc32(blob), len(blob)
            break
    else:
        sys.exit(f"{fname} not in the manifest")
    seal(m)
    json.dump(m, open(mpath, "w"), indent=1)

def edit_header(ckpt, fname, tensor, field, value):
    path = os.path.join(ckpt, fname)
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    h = json.loads(data[8:8 + n])
    old = h[tensor][field]
    h[tensor][field] = json.loads(value)
    text = json.dumps(h, separators=(",", ":")).encode()
    if len(text) > n:
        sys.exit("the edited header is longer than the original")
    open(path, "wb").write(data[:8] + text.ljust(n) + data[8 + n:])
    fix_manifest(ckpt, fname)
    print(f"  edited {fname}: {tensor}.{field} {old} -> {value}")

def header_length(ckpt, fname, value):
    path = os.path.join(ckpt, fname)
    data = bytearray(open(path, "rb").read())
    struct.pack_into("<Q", data, 0, int(value))
    open(path, "wb").write(bytes(data))
    fix_manifest(ckpt, fname)
    print(f"  edited {fname}: header length -> {value} (file is {len(data)} bytes)")

def flip(ckpt, fname):
    path = os.path.join(ckpt, fname)
    data = bytearray(open(path, "rb").read())
    (n,) = struct.unpack_from("<Q", data, 0)
    at = 8 + n + (len(data) - 8 - n) // 2  # inside the data section
    data[at] ^= 0x40
    open(path, "wb").write(bytes(data))
    print(f"  flipped a bit of byte {at} of {fname} (data section starts at {8 + n})")

def offsets(ckpt, fname, tensor):
    data = open(os.path.join(ckpt, fname), "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    print(json.dumps(json.loads(data[8:8 + n])[tensor]["data_offsets"]))

def manifest_set(ckpt, key, value, reseal="1"):
    """Sets key (a.b for a nested one) to the JSON value; reseal=0 leaves the checksum stale."""
    mpath = os.path.join(ckpt, "manifest.json")
    m = json.load(open(mpath))
    *path, last = key.split(".")
    o = m
    for k in path:
        o = o[k]
    o[last] = json.loads(value)
    if reseal == "1":
        seal(m)
    json.dump(m, open(mpath, "w"), indent=1)

def unseal(ckpt):
    mpath = os.path.join(ckpt, "manifest.json")
    m = json.load(open(mpath))
    del m["manifest_crc32"]
    json.dump(m, open(mpath, "w"), indent=1)

def flip_manifest(ckpt, key):
    """Flips one bit of the first digit of the top-level number `key` in the text."""
    mpath = os.path.join(ckpt, "manifest.json")
    text = bytearray(open(mpath, "rb").read())
    at = re.search(rb'"' + key.encode() + rb'":\s*', text).end()
    text[at] ^= 0x01
    open(mpath, "wb").write(bytes(text))
    print(f"  flipped a bit of byte {at} of manifest.json ({key})")

op = sys.argv[1]
globals()[op](*sys.argv[2:])
EOF
edit() { python3 "$work/edit.py" "$@" || fail "edit.py $* failed"; }

# expect_refusal NAME REGEX CMD...: exit code 2, exactly one line of output matching REGEX.
n_cases=0
expect_refusal() {
  local name=$1 regex=$2 code=0
  shift 2
  timeout 120 "$@" >"$work/out" 2>&1 || code=$?
  local lines
  lines=$(awk 'END { print NR }' "$work/out")
  if [[ $code != 2 || $lines != 1 ]] || ! grep -Eq -- "$regex" "$work/out"; then
    echo "FAIL: $name: expected exit 2 and one line matching /$regex/;" \
      "got exit $code and $lines line(s):" >&2
    sed 's/^/    /' "$work/out" >&2
    echo "  command: $*" >&2
    exit 1
  fi
  n_cases=$((n_cases + 1))
  echo "ok: $name: exit 2: $(cat "$work/out")"
}
# load NAME REGEX [CKPT [ARGS...]]: pipe_train --sequential --load CKPT (default: $work/NAME).
load() {
  local name=$1 regex=$2 path=${3:-$work/$1}
  shift $(($# < 3 ? $# : 3))
  expect_refusal "$name" "$regex" "$pipe_train" "$spec" --sequential --load "$path" "$@"
}
copy() { cp -r "$work/good" "$work/$1"; }
q() { printf '%s' "$1" | sed 's/[][\\.*^$(){}+?|]/\\&/g'; } # a literal for grep -E

echo "== writing the good checkpoints"
"$pipe_train" "$spec" --sequential --quiet --set train.steps=3 --save "$work/good" ||
  fail "writing the good checkpoint"
"$pipe_train" "$spec" --sequential --quiet --load "$work/good" >/dev/null ||
  fail "the undamaged checkpoint does not load"
echo "ok: the undamaged checkpoint loads"
W=$(q "$work")
M=model-s000\\.safetensors O=optim-s000\\.safetensors

echo "== damaged files"
copy truncated
truncate -s 100000 "$work/truncated/model-s000.safetensors"
load truncated "^pipetrain: $W/truncated/$M: "

copy flipped
edit flip "$work/flipped" model-s000.safetensors
load flipped "^pipetrain: $W/flipped/$M: .*CRC"

copy flipped_optim
edit flip "$work/flipped_optim" optim-s000.safetensors
load flipped_optim "^pipetrain: $W/flipped_optim/$O: .*CRC"

copy no_optim
rm "$work/no_optim/optim-s000.safetensors"
load no_optim "^pipetrain: $W/no_optim/$O: "

timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" --quiet --set pipeline.stages=2 \
  --set train.steps=3 --save "$work/two" || fail "writing the 2-stage checkpoint"
"$pipe_train" "$spec" --sequential --quiet --load "$work/two" >/dev/null ||
  fail "the undamaged 2-stage checkpoint does not load into one process"
cp -r "$work/two" "$work/two_missing"
rm "$work/two_missing/model-s001.safetensors"
load two_missing "^pipetrain: $W/two_missing/model-s001\\.safetensors: "

echo "== checkpoints of another model"
"$pipe_train" "$spec" --sequential --quiet --set train.steps=1 --set model.dim=48 \
  --save "$work/dim48" || fail "writing the dim=48 checkpoint"
load dim48 "^pipetrain: $W/dim48/manifest\\.json: tensor '0\\.weight' .*different model"
sed 's/repeat: 6/repeat: 5/' "$spec" >"$work/five.yaml"
grep -q 'repeat: 5' "$work/five.yaml" || fail "could not make a 5-block spec"
"$pipe_train" "$work/five.yaml" --sequential --quiet --set train.steps=1 --save "$work/five" ||
  fail "writing the 5-block checkpoint"
load five "^pipetrain: $W/five/manifest\\.json: .*different model"

load optimizer "^pipetrain: $W/good: optimizer state is adamw but the spec trains with sgd" \
  "$work/good" --set 'train.optimizer={name: sgd, lr: 0.01, momentum: 0.9}'

echo "== safetensors headers that lie (manifest crc32/bytes updated to match)"
copy shape
edit edit_header "$work/shape" model-s000.safetensors 1.weight shape '[64, 32]'
load shape "^pipetrain: $W/shape/$M: .*tensor '1\\.weight'"

copy size
b=$(python3 "$work/edit.py" offsets "$work/good" model-s000.safetensors 2.ln1.weight)
edit edit_header "$work/size" model-s000.safetensors 2.ln1.weight data_offsets \
  "$(python3 -c "import json,sys; b,e=json.loads(sys.argv[1]); print([b, e + 256])" "$b")"
load size "^pipetrain: $W/size/$M: .*tensor '2\\.ln1\\.(weight|bias)'"

copy overlap
edit edit_header "$work/overlap" model-s000.safetensors 2.ln1.bias data_offsets "$b"
load overlap "^pipetrain: $W/overlap/$M: .*tensor '2\\.ln1\\.(weight|bias)'"

copy past_end
e=$(python3 "$work/edit.py" offsets "$work/good" model-s000.safetensors 8.bias)
edit edit_header "$work/past_end" model-s000.safetensors 8.bias data_offsets \
  "$(python3 -c "import json,sys; b,e=json.loads(sys.argv[1]); print([b + 4096, e + 4096])" "$e")"
load past_end "^pipetrain: $W/past_end/$M: .*tensor '8\\.bias'"

copy optim_offsets
o=$(python3 "$work/edit.py" offsets "$work/good" optim-s000.safetensors 3.attn.qkv.weight.exp_avg)
edit edit_header "$work/optim_offsets" optim-s000.safetensors 3.attn.qkv.weight.exp_avg \
  data_offsets "$(python3 -c "import json,sys; b,e=json.loads(sys.argv[1]); print([b + 4, e + 4])" "$o")"
load optim_offsets "^pipetrain: $W/optim_offsets/$O: .*tensor '3\\.attn\\.qkv\\.weight\\.exp_avg(_sq)?'"

copy header_length
edit header_length "$work/header_length" model-s000.safetensors 99999999
load header_length "^pipetrain: $W/header_length/$M: "

echo "== manifests"
copy bad_json
printf '{"format": "pipetrain-checkpoint/1", "step": ' >"$work/bad_json/manifest.json"
load bad_json "^pipetrain: $W/bad_json/manifest\\.json: "

copy other_format
edit manifest_set "$work/other_format" format '"pipetrain-checkpoint/0"'
load other_format "^pipetrain: $W/other_format/manifest\\.json: "

edit check_seal "$work/good"
copy manifest_step
edit flip_manifest "$work/manifest_step" step
load manifest_step "^pipetrain: $W/manifest_step/manifest\\.json: damaged: .*manifest_crc32.*restore"

copy manifest_t # t edited and the checksum recomputed: the optimizer file's metadata disagrees
edit manifest_set "$work/manifest_t" optimizer.t 5
load manifest_t "^pipetrain: $W/manifest_t/$O: .*optimizer step 3, .*optimizer\\.t 5"

copy manifest_unsealed_t # an older manifest (no checksum): t still checked against the file
edit unseal "$work/manifest_unsealed_t"
edit manifest_set "$work/manifest_unsealed_t" optimizer.t 5 0
code=0 # the notice, then the refusal
"$pipe_train" "$spec" --sequential --load "$work/manifest_unsealed_t" >"$work/out" 2>&1 || code=$?
[[ $code == 2 && $(wc -l <"$work/out") == 2 ]] && grep -q "notice: .*has no manifest_crc32" "$work/out" &&
  grep -Eq "^pipetrain: $W/manifest_unsealed_t/$O: .*optimizer\\.t 5" "$work/out" ||
  { cat "$work/out"; fail "manifest_unsealed_t: expected the notice and one refusal, exit 2 (got $code)"; }
echo "ok: manifest_unsealed_t: exit 2: $(tail -1 "$work/out")"

copy unsealed # an older manifest without the checksum still loads, with a notice
edit unseal "$work/unsealed"
"$pipe_train" "$spec" --sequential --quiet --load "$work/unsealed" >"$work/out" 2>&1 ||
  { cat "$work/out"; fail "a manifest without manifest_crc32 does not load"; }
grep -q "notice: .*unsealed/manifest.json has no manifest_crc32" "$work/out" ||
  { cat "$work/out"; fail "no notice for a manifest without manifest_crc32"; }
echo "ok: unsealed: loads with $(grep notice "$work/out")"

copy no_manifest
rm "$work/no_manifest/manifest.json"
load no_manifest "^pipetrain: $W/no_manifest: .*manifest"

mkdir -p "$work/empty_root/step-00000007"
cp "$work/good/model-s000.safetensors" "$work/empty_root/step-00000007/"
load empty_root "^pipetrain: $W/empty_root: .*manifest"

echo "== pipe_convert on damaged checkpoints"
for c in flipped no_optim shape size no_manifest; do
  expect_refusal "pipe_convert $c" "^pipetrain: $W/$c(/| |:)" \
    "$pipe_convert" "$work/$c" "$work/$c.safetensors" --with-optimizer
  [[ ! -e "$work/$c.safetensors" ]] || fail "pipe_convert wrote $work/$c.safetensors from a damaged checkpoint"
done
expect_refusal "pipe_convert --stages 2 truncated" "^pipetrain: $W/truncated/$M: " \
  "$pipe_convert" "$work/truncated" --stages 2 --out "$work/truncated_2"
[[ ! -e "$work/truncated_2/manifest.json" ]] || fail "pipe_convert wrote a manifest from a damaged checkpoint"

echo "== a pipelined load of a damaged checkpoint (mpirun -np 2)"
code=0
timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" --quiet --set pipeline.stages=2 \
  --load "$work/flipped" >"$work/out" 2>&1 || code=$?
n=$(grep -c '^pipetrain' "$work/out" || true)
if [[ $code != 2 || $n != 1 ]] || ! grep -Eq "^pipetrain: $W/flipped/$M: .*CRC" "$work/out"; then
  echo "FAIL: mpirun -np 2 --load a damaged checkpoint: expected exit 2 and one pipetrain line" \
    "naming the file; got exit $code, $n pipetrain line(s):" >&2
  sed 's/^/    /' "$work/out" >&2
  exit 1
fi
n_cases=$((n_cases + 1))
echo "ok: mpirun -np 2: exit 2: $(grep '^pipetrain' "$work/out")"

echo "checkpoint damage: $n_cases cases refused as required in $((SECONDS - start)) s"
