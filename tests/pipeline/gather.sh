#!/usr/bin/env bash
# gather.sh PIPE_TRAIN: a 4-stage run's --gather file must equal, byte for byte, the sequential
# run's --gather file of the same spec (same weights, same names, same metadata).
pipe_train=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
"$pipe_train" "$here/gate.yaml" --quiet --set train.steps=4 --gather "$work/seq.safetensors"
timeout 120 mpirun -np 4 --oversubscribe "$pipe_train" "$here/gate.yaml" --quiet \
  --set train.steps=4 --set pipeline.stages=4 --gather "$work/p4.safetensors"
pt_same_bits "$work/seq.safetensors" "$work/p4.safetensors"
echo "gather: the 4-stage file equals the sequential one byte for byte"
