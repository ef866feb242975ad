#!/usr/bin/env bash
# kit_check.sh: the GPU kit (scripts/gpu_kit.sh) works on a machine that has none of the build's
# libraries. Builds the kit, unpacks it with the source tree in a bare Debian root filesystem
# (debootstrap --variant=minbase bookworm, with python3 and cmake, as the GPU machine has; the
# CUDA libraries where PyTorch's wheels put them there) and runs `scripts/gpu_check.sh --dry`
# in it through chroot, so that a library or path the kit misses fails here, not on the GPU.
# The root filesystem is cached in ~/.cache/pipetrain (PT_CACHE_DIR). Needs root; exits 77
# (skipped) without root or when debootstrap cannot reach the package mirror.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
[[ $(id -u) == 0 ]] || skip "needs root (debootstrap, chroot, mount)"
for tool in debootstrap patchelf; do
  command -v "$tool" >/dev/null || fail "$tool missing: run scripts/install-deps.sh"
done
cache=${PT_CACHE_DIR:-$HOME/.cache/pipetrain}
rootfs=$cache/kit-rootfs-bookworm.tar.gz
mirror=${PT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

t=$SECONDS
bash scripts/gpu_kit.sh "$work/kit" > "$work/kit.log" 2>&1 || { cat "$work/kit.log"; fail "scripts/gpu_kit.sh failed"; }
tail -1 "$work/kit.log"
echo "kit built in $((SECONDS - t)) s"

if [[ ! -f $rootfs ]]; then
  mkdir -p "$cache"
  if ! debootstrap --variant=minbase --include=python3,cmake bookworm "$work/debootstrap" "$mirror" \
      > "$work/debootstrap.log" 2>&1; then
    if grep -Eq "Failed getting release file|Couldn't download|Temporary failure resolving|Could not resolve" \
        "$work/debootstrap.log"; then
      skip "debootstrap cannot reach $mirror: $(grep -m1 -E 'Failed|download|resolv' "$work/debootstrap.log")"
    fi
    tail -5 "$work/debootstrap.log"
    fail "debootstrap failed ($work/debootstrap.log above)"
  fi
  tar -C "$work/debootstrap" -czf "$rootfs.part" . && mv "$rootfs.part" "$rootfs"
fi

chroot=$work/root
mkdir -p "$chroot"
tar -C "$chroot" -xzf "$rootfs"
# The source tree as a device run carries it (tracked and untracked, not ignored) and the kit.
mkdir -p "$chroot/pt"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C "$chroot/pt" -xf -
cp "$work/pipetrain-kit.tar.gz" "$chroot/pt/"
# The CUDA libraries where the GPU machine's PyTorch wheels have them (hard links where the
# file system allows: cuBLASLt alone is half a gigabyte).
cudart=$(ldd build-kit/pipe_train | awk '$1 ~ /^libcudart/ {print $3}')
[[ -n $cudart ]] || fail "build-kit/pipe_train does not load libcudart"
wheel=$chroot/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib
mkdir -p "$wheel"
for lib in $(ldd build-kit/pipe_train | awk '$1 ~ /^lib(cudart|cublas|cublasLt|cudnn|nccl|nvrtc)\./ {print $3}'); do
  cp -l "$(realpath "$lib")" "$wheel/$(basename "$lib")" 2>/dev/null || cp -L "$lib" "$wheel/"
done
# /proc, /sys (hwloc's topology) and a /dev/shm for Open MPI's shared memory, as on any
# machine; unmounted before $work is removed
mkdir -p "$chroot/proc" "$chroot/sys" "$chroot/dev/shm"
mount -t proc proc "$chroot/proc"
pt_at_exit "umount '$chroot/proc'"
mount -t sysfs sysfs "$chroot/sys"
pt_at_exit "umount '$chroot/sys'"
mount -t tmpfs tmpfs "$chroot/dev/shm"
pt_at_exit "umount '$chroot/dev/shm'"

t=$SECONDS
rc=0
chroot "$chroot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  bash -c 'cd /pt && timeout 480 bash scripts/gpu_check.sh --dry /pt/out' || rc=$?
echo "gpu_check.sh --dry in a bare Debian: exit $rc in $((SECONDS - t)) s"
if [[ $rc != 0 ]]; then
  grep -h -A15 -E 'FAIL|Error|error' "$chroot"/pt/out/*.log | head -60 || true
  fail "scripts/gpu_check.sh --dry failed in the bare root filesystem"
fi
