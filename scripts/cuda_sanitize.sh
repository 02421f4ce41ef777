#!/usr/bin/env bash
# The fused CUDA Hedgehog kernels (engine/cuda, issue 27) under NVIDIA's compute-sanitizer, on a
# GPU machine: the engine.cuda.hedgehog_cuda suite under memcheck (out-of-bounds and misaligned
# accesses), racecheck (shared-memory hazards between threads) and synccheck (barriers in
# divergent code), each with HH_CUDA_TEST_QUICK=1 (three lengths: the tools are 10-100x slower).
#   bash scripts/cuda_sanitize.sh [build dir]     (default <repo>/build-gpu; needs a build with
#                                                 HH_CUDA=ON and HH_CUDA_KERNELS=ON)
#   HH_SANITIZE_TOOLS      tools to run (default "memcheck racecheck synccheck")
#   HH_SANITIZE_FUNCTIONS  the suite's test functions to run (default all), e.g. pipelinedMatchesReference
#   HH_SANITIZE_SUITE      the suite (default engine.cuda.hedgehog_cuda; engine.cuda.distill_loss: the loss kernel)
# Exit status: 0 when every tool reports no error and the suite passes under it.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${HH_DEVICE_BUILD_DIR:-$repo/build-gpu}}"
bin="$build/tests/hh_engine_tests"
suite="${HH_SANITIZE_SUITE:-engine.cuda.hedgehog_cuda}"
sanitizer="$(command -v compute-sanitizer || true)"
for dir in "${CUDA_HOME:-}/bin" /usr/local/cuda/bin; do
  [ -n "$sanitizer" ] || { [ -x "$dir/compute-sanitizer" ] && sanitizer="$dir/compute-sanitizer"; }
done
[ -n "$sanitizer" ] || { echo "cuda_sanitize: compute-sanitizer not found" >&2; exit 2; }
[ -x "$bin" ] || { echo "cuda_sanitize: no $bin (build with HH_CUDA=ON HH_CUDA_KERNELS=ON)" >&2; exit 2; }
"$bin" --list 2>/dev/null | grep -q "^ *$suite\$" || { echo "cuda_sanitize: $bin has no $suite" >&2; exit 2; }

status=0
for tool in ${HH_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
  echo "== compute-sanitizer --tool $tool"
  start=$(date +%s)
  # shellcheck disable=SC2086  # the functions are separate words
  HH_CUDA_TEST_QUICK=1 "$sanitizer" --tool "$tool" --error-exitcode 99 "$bin" "$suite" ${HH_SANITIZE_FUNCTIONS:-}
  rc=$?
  echo "== $tool: exit $rc in $(( $(date +%s) - start )) s"
  [ "$rc" -eq 0 ] || status=1
done
exit "$status"
