#!/usr/bin/env bash
# Rehearses the GPU machine's build here, without a GPU (docs/gpu.md, "Building with CUDA"): in a
# Debian 13 chroot with Debian's CUDA LibTorch 2.6 (libtorch-cuda-dev) and nvcc 12.4, it runs
# `scripts/device_build.sh build` with HH_CUDA=ON and the fused kernels on the committed tree and
# the packed prefix (.device/*.tar.gz), exactly as the device session does, then the engine suites
# on the CPU against that LibTorch. A build that fails here would have cost a GPU session its
# measurements; run it after changes to CUDA-only code, CMake or the packed prefix.
#   bash scripts/rehearse_device_build.sh [build] [test]     (default: both; `test` alone reruns
#                                                            the suites on the last build's tree)
# Needs root, debootstrap (installed if missing), Debian's mirror, and the cuDNN library beside
# nvcc here (libtorch_cuda.so links libcudnn.so.9, whose Debian package downloads it from NVIDIA
# at install time; only the link needs it). HH_CHROOT (default /srv/hh-trixie) keeps the chroot
# between runs: the first run takes about 5 minutes of downloads (2.7 GB), later ones reuse it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${HH_CHROOT:-/srv/hh-trixie}"
steps="${*:-build test}"
log() { printf '\033[1m[rehearse]\033[0m %s\n' "$*"; }

make_chroot() {
  command -v debootstrap > /dev/null || apt-get install -y debootstrap > /dev/null
  [ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
  for fs in proc dev; do mountpoint -q "$root/$fs" || mount --bind "/$fs" "$root/$fs"; done
  echo "deb http://deb.debian.org/debian trixie main contrib non-free" > "$root/etc/apt/sources.list"
  chroot "$root" apt-get update -q > /dev/null
  local packages="libtorch-cuda-dev nvidia-cuda-toolkit libopenblas0-pthread cmake ninja-build g++ make pkg-config"
  if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages > "$root/install.log" 2>&1; then
    # nvidia-cudnn's post-install script fetches cuDNN from NVIDIA, which is out of reach here.
    log "nvidia-cudnn could not download cuDNN; using the one beside nvcc for the link"
    printf '#!/bin/sh\nexit 0\n' > "$root/var/lib/dpkg/info/nvidia-cudnn.postinst"
    chroot "$root" dpkg --configure -a > /dev/null
  fi
  local cudnn
  cudnn="$(ls /usr/local/cuda*/lib*/libcudnn.so.9 2> /dev/null | head -1)"
  [ -n "$cudnn" ] || { echo "rehearse: no libcudnn.so.9 beside nvcc here" >&2; exit 1; }
  mkdir -p "$root/opt/cudnn" && cp -L "$cudnn" "$root/opt/cudnn/"
}

copy_tree() {
  [ -f "$repo/.device/deps.tar.gz" ] || bash "$repo/scripts/device_build.sh" pack
  rm -rf "$root/root/hh" && mkdir -p "$root/root/hh/.device"
  git -C "$repo" archive HEAD | tar -x -C "$root/root/hh"
  cp "$repo/.device/deps.tar.gz" "$repo/.device/data.tar.gz" "$root/root/hh/.device/"
  log "tree at $(git -C "$repo" rev-parse --short HEAD) (committed files only)"
}

in_chroot() {  # the device session's build variables, Debian's LibTorch, cuDNN for the link
  chroot "$root" env -i PATH=/usr/bin:/bin HOME=/root LD_LIBRARY_PATH=/opt/cudnn HH_JOBS="$(nproc)" \
    HH_CUDA_ARCHS=90 HH_TORCH_PREFIX=/usr/lib/x86_64-linux-gnu/cmake OUT=/root/out \
    HH_DEVICE_TARGETS="hedgehog hh_engine_tests hh_bench_attention hh_bench_decode" \
    HH_TEST_DEVICE=cpu bash -c "cd /root/hh && $1"
}

trap 'umount "$root/proc" "$root/dev" 2> /dev/null || true' EXIT
make_chroot
if [[ " $steps " == *" build "* ]]; then  # `test` alone reruns the suites on the last build
  copy_tree
  rm -rf "$root/root/out"
fi
mkdir -p "$root/root/out"
if [[ " $steps " == *" build "* ]]; then
  log "device_build.sh build (HH_CUDA=ON, kernels for sm_90) against LibTorch 2.6 with CUDA"
  in_chroot "bash scripts/device_build.sh build" | tail -5
fi
if [[ " $steps " == *" test "* ]]; then
  log "engine suites on the CPU against that build"
  in_chroot ". .device/deps/env.sh && export LD_LIBRARY_PATH=/opt/cudnn:\$LD_LIBRARY_PATH HH_DATA_DIR=/root/hh/.device/data &&
    cd build-gpu && ctest --timeout 900 -j $(nproc) -R '^engine\.' --output-on-failure" > "$root/root/out/test.log" 2>&1 ||
    { grep -E "tests passed|\*\*\*Failed|Timeout" "$root/root/out/test.log"; exit 1; }
  grep -E "tests passed" "$root/root/out/test.log"
fi
log "logs in $root/root/out"
