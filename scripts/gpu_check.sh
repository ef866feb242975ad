#!/usr/bin/env bash
# scripts/gpu_check.sh [--dry] [--no-bench] [--no-targets] [OUTDIR]: the one command for a bare
# GPU machine (docs/gpu.md, "Running on a real GPU"). Run from the repository root with the kit
# of scripts/gpu_kit.sh beside it (kit/, or pipetrain-kit.tar.gz, unpacked here when kit/ is
# absent). Phases, each under its own timeout, at most about 5.5 minutes until the targets phase;
# targets and bench then take what is left of 9 minutes (inside a device call's 10), logs in OUTDIR (default
# $OUT, else gpu-check/) as they go, a table printed last; exits 1 when a phase failed:
#   machine   GPU, driver, nvcc, PyTorch, which CUDA libraries the kit's programs load
#   ctest     every gpu_ test of the kit on the device; a skip counts as a failure
#   attention which bf16 attention the GPU runs (cuDNN, or the fused kernels and why) and its
#             error against float32 (tests/gpu/test_attention_bf16.c again, its output kept)
#   gates     2 and 4 ranks sharing GPU 0 over the staged transport (comm.backend=mpi,
#             pipeline.devices=[0,0]) against the sequential GPU run (tests/pipeline/gate.sh):
#             1f1b, zbv, tied weights, checkpointing, bf16, bf16 Llama on packed documents
#   trace     a traced 2-stage run sharing GPU 0 (tests/pipeline/trace.sh): each rank's compute
#             again on its gpu track as the GPU ran it, none before the host queued it, none
#             overlapping on the stream (check_trace.py PT_TRACE_DEVICE=1); trace.json and the
#             picture of step 2 kept
#   targets   issue 26's targets, bench/gpu_targets.sh on bench/gpt2_small.yaml: bf16
#             --sequential, 2 stages on the one GPU and torch.compile, alternated
#             (PT_CHECK_TARGETS_ROUNDS, default 2), beside bench/gpu_roofline --time's
#             prediction (each kernel also timed beside its floor), in the time left until
#             PT_CHECK_DEADLINE_S (default 540) seconds from the start, at
#             most PT_CHECK_TARGETS_S (150); skipped under 45 s left or with --no-targets; the
#             rounds done before the time box stay in targets.log
#   bench     bench/gpu_vs_torch.sh on bench/gpt2_small.yaml, 1 round (PT_CHECK_BENCH_ROUNDS;
#             --no-bench: skipped), in what is left of the same budget (at most 180 s, skipped
#             under 45 s): the rows written before a timeout stay in bench.log
#   counters  the launches and bytes of each kernel row the GPU ran (targets.log's timed table)
#             against the emulator's ledger of the same step carried in the kit
#             (scripts/ledger_compare.py): "diff" names where the real libraries took another
#             path; host waits are not compared (a GPU has no counter of them without a profiler)
# --dry: the same phases where there is no GPU (what tests/kit/kit_check.sh runs in a bare
# Debian): the gates on the cpu device, the gpu_ tests may skip, the benchmark on the CPU with
# tests/pipeline/gate.yaml (the tiny gate model) for 1 round (skipped where python3 has no torch).
set -uo pipefail
dry=0 bench=1 targets=1
while [[ ${1:-} == --* ]]; do
  case $1 in
    --dry) dry=1 ;;
    --no-bench) bench=0 ;;
    --no-targets) targets=0 ;;
    *) echo "gpu_check.sh: unknown option $1; use [--dry] [--no-bench] [--no-targets] [OUTDIR]" >&2
       exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(realpath -m "${1:-${OUT:-$root/gpu-check}}")
mkdir -p "$out"
if [[ ! -f kit/env.sh ]]; then
  [[ -f pipetrain-kit.tar.gz ]] || {
    echo "gpu_check.sh: no kit/ nor pipetrain-kit.tar.gz in $root; build it with scripts/gpu_kit.sh" >&2
    exit 2; }
  tar -xzf pipetrain-kit.tar.gz
fi
# shellcheck source=gpu_kit_env.sh
source kit/env.sh
pt=$PT_KIT/build/pipe_train
start=$SECONDS
rows=()
failed=0
row() { # PHASE RESULT SECONDS NOTE
  rows+=("$(printf '%-9s %-5s %4ss  %s' "$1" "$2" "$3" "$4")")
  [[ $2 == FAIL ]] && failed=1
  printf '%s\n' "${rows[-1]}" >> "$out/summary.txt"
}
: > "$out/summary.txt"

# machine: what is here, and whether every library the programs need resolves
t=$SECONDS
{
  echo "kit commit: $(cat "$PT_KIT/commit")"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi: none"
  nvcc --version 2>&1 | tail -2 || echo "nvcc: none"
  timeout 60 "${PT_TORCH_VENV:-/opt/torch/.venv}/bin/python" -c \
    'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")' \
    2>&1 || echo "torch: none"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  orterun --version 2>&1 | head -1
  for elf in "$pt" "$PT_KIT"/build/tests/gpu/test_*; do echo "ldd -r $elf"; ldd -r "$elf"; done
} > "$out/machine.log" 2>&1
gpu=$(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
missing=$(grep -c -E '=> not found|undefined symbol' "$out/machine.log")
if [[ $missing -gt 0 ]]; then
  row machine FAIL $((SECONDS - t)) "$missing libraries or symbols not found (machine.log)"
elif [[ -z $gpu && $dry == 0 ]]; then
  row machine FAIL $((SECONDS - t)) "nvidia-smi lists no GPU"
else
  row machine ok $((SECONDS - t)) "${gpu:-no GPU (dry)}; $(grep -m1 -o 'libcudart[^ ]* => [^ ]*' "$out/machine.log")"
fi

# ctest: every gpu_ test of the kit
t=$SECONDS
timeout 150 ctest --test-dir "$PT_KIT/build" -R '^gpu_' -j4 --timeout 140 --output-on-failure \
  > "$out/ctest.log" 2>&1
rc=$?
ran=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$out/ctest.log")
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*Skipped' "$out/ctest.log")
summary=$(grep -m1 'tests passed' "$out/ctest.log")
if [[ $ran == 0 ]]; then
  row ctest FAIL $((SECONDS - t)) "no gpu_ test ran (ctest.log)"
elif [[ $rc != 0 ]] || { [[ $skipped -gt 0 && $dry == 0 ]]; }; then
  row ctest FAIL $((SECONDS - t)) "$summary, $skipped skipped (ctest.log)"
else
  row ctest ok $((SECONDS - t)) "$summary, $skipped skipped$([[ $dry == 1 ]] && echo ' (dry: skips allowed)')"
fi

# attention: the bf16 attention's library and errors (kernels/cuda/attention_bf16.h)
t=$SECONDS
timeout 60 "$PT_KIT/build/tests/gpu/test_attention_bf16" > "$out/attention.log" 2>&1
rc=$?
lib=$(grep -m1 -o 'attention library: .*' "$out/attention.log")
errs=$(grep -o '\] [a-z-]*: o [^ ]*, dqkv [^ ]*' "$out/attention.log" | head -2 | cut -c3- | paste -sd';')
if [[ $rc == 77 && $dry == 1 ]]; then
  row attention ok $((SECONDS - t)) "skipped (dry: no GPU)"
elif [[ $rc != 0 ]]; then
  row attention FAIL $((SECONDS - t)) "rc $rc; ${lib:-no library line} (attention.log)"
else
  row attention ok $((SECONDS - t)) "$lib; $errs"
fi

# gates: ranks sharing one GPU over the staged transport, against the sequential GPU run
t=$SECONDS
if [[ $dry == 1 ]]; then dev=cpu; share2= share4=; else
  dev=gpu share2="pipeline.devices=[0,0]" share4="pipeline.devices=[0,0,0,0]"; fi
ref="pipeline.device=$dev train.steps=6"
gates_end=$((SECONDS + 100)) # the phase's time, shared by its gates
gate() { # NAME NP "REF EXTRA" "RUN EXTRA" [--exact]
  local name=$1 np=$2 r=$3 p=$4 share=$share2 left=$((gates_end - SECONDS))
  [[ $np == 4 ]] && share=$share4
  shift 4
  if [[ $left -lt 5 ]]; then gates_bad+=("$name(no time left)"); return; fi
  if timeout "$left" bash tests/pipeline/gate.sh "$pt" "$np" "$ref $r" \
      "$ref $r pipeline.stages=$np comm.backend=mpi $share $p" "$@" > "$out/gate_$name.log" 2>&1; then
    gates_ok+=("$name")
  else
    gates_bad+=("$name")
  fi
}
gates_ok=() gates_bad=()
gate p2_1f1b 2 "" ""
gate p4_1f1b_tied 4 "" "" --exact
gate p2_zbv 2 "" "pipeline.schedule=zbv" --exact
gate p4_checkpointing 4 "" "train.activation_checkpoint_interval=1"
gate bf16_p2 2 "train.precision=bf16" "" --exact
# packed documents under bf16: cuDNN's ragged sequences, one per document
gate bf16_docs_llama_p2 2 "train.precision=bf16 train.steps=3" "pipeline.schedule=zb_h1" --exact \
  tests/pipeline/docs_llama_gate.yaml
if [[ ${#gates_bad[@]} -gt 0 ]]; then
  row gates FAIL $((SECONDS - t)) "failed: ${gates_bad[*]} (gate_NAME.log); passed: ${gates_ok[*]:-none}"
else
  row gates ok $((SECONDS - t)) "$dev, bitwise: ${gates_ok[*]}"
fi

# trace: the GPU's own times of each action, tied to the host's clock (docs/gpu.md, "Traces on
# a GPU"); the cpu device in a dry run, which has no gpu track
t=$SECONDS
trace_sets=(--set "pipeline.device=$dev")
[[ $dry == 1 ]] || trace_sets+=(--set comm.backend=mpi --set "$share2")
if PT_TRACE_OUT=$out timeout 60 bash tests/pipeline/trace.sh "$pt" 1f1b 2 "${trace_sets[@]}" \
    > "$out/trace.log" 2>&1; then
  row trace ok $((SECONDS - t)) "$dev: $(grep -m1 '^trace ok' "$out/trace.log")"
else
  row trace FAIL $((SECONDS - t)) "trace.log"
fi

# the two measuring phases' python and bench runner
py=${PT_TORCH_VENV:-/opt/torch/.venv}/bin/python
[[ -x $py ]] || py=python3
export PYTHONPATH=$PT_KIT/py${PYTHONPATH:+:$PYTHONPATH} # PyYAML, where the venv lacks it
have_torch() { # PHASE: true when $py has torch and yaml, else PHASE's row says why not
  "$py" -c 'import torch, yaml' 2>/dev/null && return 0
  if [[ $dry == 1 ]]; then row "$1" skip 0 "$py has no torch (dry)"
  else row "$1" FAIL 0 "$py has no torch or yaml"; fi
  return 1
}
# SCRIPT LOG DRY_SECONDS SECONDS ROUNDS: the bench script SCRIPT under a timeout, on the CPU
# with the tiny gate model for one round (dry), else on GPT-2 small on the GPU; its exit status
run_bench() {
  if [[ $dry == 1 ]]; then
    PT_BENCH_DEVICE=cpu PIPE_TRAIN=$pt PYTHON=$py timeout "$3" bash "bench/$1" \
      tests/pipeline/gate.yaml 1 > "$out/$2" 2>&1
  else
    GPU_ROOFLINE=$PT_KIT/build/gpu_roofline PIPE_TRAIN=$pt PYTHON=$py timeout "$4" \
      bash "bench/$1" bench/gpt2_small.yaml "$5" > "$out/$2" 2>&1
  fi
}
# targets: the issue's measurements beside the roofline's, in what is left of the run's budget
t=$SECONDS
left=$((${PT_CHECK_DEADLINE_S:-540} - (SECONDS - start)))
box=${PT_CHECK_TARGETS_S:-150}
[[ $left -lt $box ]] && box=$left
if [[ $targets == 0 ]]; then
  row targets skip 0 "--no-targets"
elif [[ $box -lt 45 ]]; then
  row targets skip 0 "$left s left of the run's ${PT_CHECK_DEADLINE_S:-540} s"
elif ! have_torch targets; then
  :
else
  run_bench gpu_targets.sh targets.log "$box" "$box" "${PT_CHECK_TARGETS_ROUNDS:-2}"
  rc=$?
  got=$(grep '^targets:' "$out/targets.log" | tail -1)
  rounds_done=$(grep -c '^after round' "$out/targets.log")
  if [[ $rc == 0 || ( $rc == 124 && -n $got ) ]]; then
    row targets ok $((SECONDS - t)) "$rounds_done round(s)$([[ $rc == 124 ]] && echo ", time box ${box} s"): ${got#targets: } (targets.log)"
  else
    row targets FAIL $((SECONDS - t)) "exit $rc (targets.log)"
  fi
fi

# bench: pipetrain against the machine's PyTorch, eager and torch.compile, in what is left
t=$SECONDS
left=$((${PT_CHECK_DEADLINE_S:-540} - (SECONDS - start)))
bench_s=180
[[ $left -lt $bench_s ]] && bench_s=$left
if [[ $bench == 0 ]]; then
  row bench skip 0 "--no-bench"
elif [[ $dry == 0 && $bench_s -lt 45 ]]; then
  row bench skip 0 "$left s left of the run's ${PT_CHECK_DEADLINE_S:-540} s"
elif ! have_torch bench; then
  :
else
  run_bench gpu_vs_torch.sh bench.log "${PT_CHECK_DRY_BENCH_S:-600}" "$bench_s" "${PT_CHECK_BENCH_ROUNDS:-1}"
  rc=$?
  if [[ $rc == 0 ]]; then row bench ok $((SECONDS - t)) "bench.log"
  else row bench FAIL $((SECONDS - t)) "exit $rc (bench.log)"; fi
fi

# counters: the ledger the GPU ran (targets.log's timed table) against the emulator's (the kit's)
t=$SECONDS
if [[ $dry == 1 ]]; then
  row counters skip 0 "no GPU ledger in a dry run"
elif [[ ! -f $PT_KIT/emu_ledger.txt ]]; then
  row counters skip 0 "the kit has no emulator ledger (built without build-gpuemu/)"
elif ! grep -q '^measured on ' "$out/targets.log" 2>/dev/null; then
  row counters skip 0 "no timed roofline in targets.log"
else
  "$py" scripts/ledger_compare.py "$PT_KIT/emu_ledger.txt" "$out/targets.log" > "$out/counters.log" 2>&1
  rc=$?
  got=$(tail -1 "$out/counters.log")
  case $rc in
    0) row counters ok $((SECONDS - t)) "$got (counters.log)" ;;
    1) row counters diff $((SECONDS - t)) "$got: where the GPU's libraries took other paths (counters.log)" ;;
    *) row counters FAIL $((SECONDS - t)) "exit $rc: $got" ;;
  esac
fi

echo
echo "gpu_check.sh$([[ $dry == 1 ]] && echo ' --dry'): $((SECONDS - start)) s, logs in $out"
printf '%s\n' "${rows[@]}"
exit $failed
