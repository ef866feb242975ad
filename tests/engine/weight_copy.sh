#!/usr/bin/env bash
# weight_copy.sh PIPE_TRAIN "K=V ..." ["K=V ..."]: with the settings (the second set for the
# pipelined run only) under train.precision bf16 the products read the bf16
# weight copy the optimizer writes (model/model.h's params_bf16) instead of converting their
# weight per call; the copy holds exactly the bits the conversion gives, so on the settings'
# device (e.g. pipeline.device=gpu under the emulator):
#   (a) the plan counts the copy (weight_copy > 0 in --plan --json): the table reads one
#   (b) a bf16 run with the copy and the same run without it (PIPETRAIN_WEIGHT_COPY=off) give
#       the same losses and parameters, bit for bit
#   (c) a 2-stage pipelined run with the copy (the tied weight broadcast, model_to_device on
#       each stage) gives the sequential run's bits
#   (d) resumed from the step-3 checkpoint (the copy rewritten from the loaded masters), the
#       run repeats steps 4..6 bit for bit, with the copy and without it
# Skipped where the device's bf16 table reads no copy (the CPU's emulated bf16 products), or
# where the settings name a GPU and none can be used.
pipe_train=$1
read -r -a sets <<< "${2:-}"
read -r -a piped <<< "${3:-}"
source "$(dirname "$0")/../lib.sh"
w=$work
spec=tests/pipeline/gate.yaml
opts=(--set train.precision=bf16 --set train.steps=6)
for s in "${sets[@]}"; do opts+=(--set "$s"); done
run() { # NAME [ARGS...]: a sequential run, its metrics and parameters kept under NAME
  local name=$1
  shift
  "$pipe_train" "$spec" --sequential --quiet "${opts[@]}" --metrics "$w/$name.jsonl" \
    --dump-params "$w/$name" "$@"
}
planned() { # [ARGS...]: the plan's weight_copy bytes of stage 0
  "$pipe_train" "$spec" --plan --json "${opts[@]}" "$@" | python3 -c \
    'import json, sys; print(int(json.load(sys.stdin)["stage_plan"][0]["memory_bytes"]["weight_copy"]))'
}
pt_probe_gpu "$pipe_train" "$spec" --sequential --quiet "${opts[@]}" --set train.steps=1
copy=$(planned)
[[ $copy -gt 0 ]] || skip "this device's bf16 products read no weight copy (plan: weight_copy 0)"
echo "plan: weight_copy $copy bytes"
[[ $(planned --set train.precision=fp32) == 0 ]] || fail "fp32 plans a bf16 weight copy"
[[ $(PIPETRAIN_WEIGHT_COPY=off planned) == 0 ]] || fail "PIPETRAIN_WEIGHT_COPY=off plans a copy"
run copy --set "train.checkpoint={dir: $w/ckpt, every: 3, keep: 2}"
PIPETRAIN_WEIGHT_COPY=off run nocopy
run resumed --load "$w/ckpt/step-00000003"
PIPETRAIN_WEIGHT_COPY=off run resumed_nocopy --load "$w/ckpt/step-00000003"
popts=(--set pipeline.stages=2)
for s in "${piped[@]}"; do popts+=(--set "$s"); done
pt_mpirun 2 "$pipe_train" "$spec" --quiet "${opts[@]}" "${popts[@]}" --metrics "$w/p2.jsonl" \
  --dump-params "$w/p2"
python3 - "$w" <<'PY'
import json, sys
w = sys.argv[1]
def losses(name):
    return {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(f"{w}/{name}.jsonl")
            if "loss" in json.loads(l)}
def params(name, ranks=1):  # {tensor key: bytes}, every rank's dump
    out = {}
    for r in range(ranks):
        raw, at = open(f"{w}/{name}.{r}.bin", "rb").read(), 0
        while at < len(raw):
            n = int.from_bytes(raw[at:at + 4], "little"); at += 4
            key = raw[at:at + n].decode(); at += n + 1
            numel = int.from_bytes(raw[at:at + 8], "little"); at += 8
            out[key] = raw[at:at + 4 * numel]; at += 4 * numel
    return out
bad = []
ref, ref_p = losses("copy"), params("copy")
if sorted(ref) != list(range(1, 7)):
    bad.append(f"the run with the copy logged steps {sorted(ref)}")
for name, what, ranks in (("nocopy", "(b) without the copy", 1), ("p2", "(c) 2 stages", 2)):
    got = losses(name)
    if got != ref:
        bad.append(f"{what}: losses differ: {got} vs {ref}")
    if params(name, ranks) != ref_p:
        bad.append(f"{what}: parameters differ from the sequential run with the copy")
for name in ("resumed", "resumed_nocopy"):
    got = losses(name)
    if sorted(got) != list(range(4, 7)) or any(got[s] != ref[s] for s in got):
        bad.append(f"(d) {name}: steps 4..6 differ from the uninterrupted run: {got}")
    if params(name) != ref_p:
        bad.append(f"(d) {name}: parameters differ from the uninterrupted run")
print("\n".join(bad) if bad else "weight copy: same bits with and without it, resumed, 2 stages")
sys.exit(1 if bad else 0)
PY
