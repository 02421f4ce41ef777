#!/usr/bin/env bash
# One call of the device tool that does as much of the GPU work as its time allows (docs/gpu.md):
# the build, then the checks and measurements of issues 26 and 27 in order of value, each under
# its own time limit and none past the deadline. After every step the logs are packed into
# $OUT/session.tgz and the one-line-per-step index into $OUT/summary.txt: the tool brings back at
# most 8 files, and what a step had written before a time limit still comes back.
#   bash scripts/device_session.sh [SECONDS] [STEP ...]
#     SECONDS  the deadline from the start (default 560: a 600 s call with room to pack)
#     STEP     run only these steps, in the order given (default: all, in the order below); a
#              second call on a machine that is still warm passes the steps the first had no time
#              for (the build directory is kept between calls on a warm machine).
# Carry .device/deps.tar.gz and .device/data.tar.gz (bash scripts/device_build.sh pack, here).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
final="${OUT:-$repo/.device/out}"
work="$repo/.device/session"
build="$repo/build-gpu"
bin="$build/app"
tests="$build/tests/hh_engine_tests"
budget="${1:-560}"
shift || true
deadline=$((SECONDS + budget))
rm -rf "$work"
mkdir -p "$work" "$final"

pack() {
  tar -czf "$final/session.tgz" -C "$work" . 2>/dev/null
  cp "$work/summary.txt" "$final/summary.txt" 2>/dev/null
}

step() {  # step NAME LIMIT COMMAND...: output to NAME.log, never past the deadline
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS - 10))
  if [ "$left" -lt 15 ]; then
    echo "$name: skipped (no time left)" | tee -a "$work/summary.txt"
    return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  local start=$SECONDS rc=0
  # Line-buffered, so that a step stopped at its limit keeps what it had printed.
  timeout -k 5 "$limit" stdbuf -oL -eL "$@" > "$work/$name.log" 2>&1 || rc=$?
  echo "$name: exit $rc in $((SECONDS - start)) s (limit $limit s)" | tee -a "$work/summary.txt"
  tail -n 4 "$work/$name.log" | cut -c1-400
  pack
}

env_ready() {
  [ -f "$repo/.device/deps/env.sh" ] || tar -xzf "$repo/.device/deps.tar.gz" -C "$repo/.device"
  if [ ! -d "$repo/.device/data/npm" ]; then
    mkdir -p "$repo/.device/data" && tar -xzf "$repo/.device/data.tar.gz" -C "$repo/.device/data"
  fi
  # shellcheck disable=SC1091
  . "$repo/.device/deps/env.sh"
  export HH_DATA_DIR="$repo/.device/data"
}

do_build() {
  # sm_90 only: the machine is an H100/H200 (sm_80 is compile-checked on the development machine).
  local targets="hedgehog hh_engine_tests hh_bench_attention hh_bench_decode"
  OUT="$work/build" HH_DEVICE_TARGETS="$targets" HH_CUDA_ARCHS=90 bash "$repo/scripts/device_build.sh" build && return 0
  # A batch of files that does not compile together (a unity build) must not cost the session its
  # measurements: again with one file a translation unit, as the H100 run built it.
  echo "device_session: the build failed; again with HH_UNITY_BUILD=OFF"
  OUT="$work/build-files" HH_DEVICE_TARGETS="$targets" HH_CUDA_ARCHS=90 HH_DEVICE_UNITY=OFF \
    bash "$repo/scripts/device_build.sh" build
}

suites() {  # suites DTYPE REGEX: those engine suites on cuda
  cd "$build" && HH_TEST_DEVICE=cuda HH_TEST_DTYPE="$1" ctest --timeout 300 -j 8 -R "$2" --output-on-failure
}
# Nsight Compute on the fused forward at B=1 H=12 D=64, 16K tokens: the sequential kernel's first
# two launches (its segment sums, then the forward; the bench runs it before the others), then the
# pipelined kernel's, then the chunked forward's state and output passes. Where their time goes,
# for the next optimisation.
profile_forward() {
  local ncu kernel
  ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
  [ -n "$ncu" ] || { echo "profile_forward: no ncu"; return 2; }
  for kernel in 'forwardKernel|segmentSumKernel' 'pipelinedForwardKernel' 'chunkStateKernel|chunkOutputKernel'; do
    "$ncu" --kernel-name regex:"$kernel" --launch-count 2 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      "$build/app/hh_bench_attention" --device cuda --dtype bfloat16 --batch 1 --heads 12 --dim 64 \
      --lengths 16384 --softmax-max 0 --repeats 1 || return $?
  done
}
export repo work build
export -f do_build suites profile_forward  # the steps run them through `bash -c` (timeout and stdbuf need a program)

all_steps=(build kernels loss_kernel steps_gpt2 steps_gpt2_fused_loss pytorch_gpt2 attention_large attention_small
           suites_fp32 steps_gpt2_fused steps_gpt2_pipelined steps_gpt2_chunked decode_b1 demo32_generic
           demo32_fused_loss demo32_fused sanitize_loss sanitize_pipelined sanitize_chunked profile_forward decode_b32
           parity_cuda demo_cuda suites_bf16 memcheck steps_llama steps_llama_fused_loss pytorch_llama demo32_chunked
           parity_chunked)
[ $# -gt 0 ] && all_steps=("$@")
env_ready
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$work/gpu.txt" 2>&1
lengths=1024,2048,4096,8192,16384,32768,65536
for s in "${all_steps[@]}"; do
  case "$s" in
    build) step build 420 bash -c do_build ;;
    kernels) step kernels 120 "$tests" engine.cuda.hedgehog_cuda ;;
    loss_kernel) step loss_kernel 60 "$tests" engine.cuda.distill_loss ;;
    attention_small) step attention_small 120 "$bin/hh_bench_attention" --device cuda --dtype bfloat16 \
        --batch 1 --heads 12 --dim 64 --lengths "$lengths" --softmax-max 65536 ;;
    attention_large) step attention_large 240 "$bin/hh_bench_attention" --device cuda --dtype bfloat16 \
        --batch 8 --heads 32 --dim 128 --lengths "$lengths" --softmax-max 65536 --plain-max 16384 ;;
    suites_fp32) step suites_fp32 200 bash -c 'suites float32 "^engine\."' ;;
    suites_bf16) step suites_bf16 200 bash -c 'suites bfloat16 "^engine\.jobs"' ;;
    decode_b1 | decode_b32) step "$s" 90 "$bin/hh_bench_decode" --device cuda --dtype bfloat16 --batch "${s#decode_b}" \
        --shapes gpt2-small,llama-1b --positions 512,2048,8192,32768 ;;
    parity_cuda | parity_chunked)  # every form against fp64; the layer rows through the measured / chunked kernels
      kernels=measured
      [ "$s" = parity_chunked ] && kernels=chunked
      step "$s" 90 env HH_FUSED_CUDA_KERNELS="$kernels" "$bin/hedgehog" parity --device cuda --head-dim 64 \
        --maps hedgehog --rules additive --dtypes float32 bfloat16 --lengths 1 63 64 65 1000 4097 ;;
    steps_gpt2) step steps_gpt2 120 "$bin/hedgehog" bench --shape gpt2-small --device cuda --dtype bfloat16 \
        --batch-size 8 --seq-len 1024 --json "$work/steps_gpt2.json" ;;
    steps_gpt2_fused | steps_gpt2_pipelined | steps_gpt2_chunked)  # the same steps through each set of fused kernels
      kernels=measured
      [ "$s" = steps_gpt2_pipelined ] && kernels=pipelined
      [ "$s" = steps_gpt2_chunked ] && kernels=chunked
      step "$s" 120 env HH_FUSED_CUDA=on HH_FUSED_CUDA_KERNELS="$kernels" "$bin/hedgehog" bench --shape gpt2-small \
        --device cuda --dtype bfloat16 --batch-size 8 --seq-len 1024 --json "$work/$s.json" ;;
    steps_llama) step steps_llama 150 "$bin/hedgehog" bench --shape llama-1b --device cuda --dtype bfloat16 \
        --batch-size 4 --seq-len 1024 --json "$work/steps_llama.json" ;;
    steps_gpt2_fused_loss | steps_llama_fused_loss)  # the distillation step through the fused loss kernel
      shape=gpt2-small batch=8
      [ "$s" = steps_llama_fused_loss ] && shape=llama-1b batch=4
      step "$s" 120 env HH_FUSED_DISTILL_LOSS=on "$bin/hedgehog" bench --shape "$shape" --only distill --device cuda \
        --dtype bfloat16 --batch-size "$batch" --seq-len 1024 --json "$work/$s.json" ;;
    pytorch_gpt2) step pytorch_gpt2 120 python3 "$repo/scripts/bench_distill_pytorch.py" --shape gpt2-small \
        --device cuda --dtype bfloat16 --batch-size 8 --seq-len 1024 --step both --json "$work/pytorch_gpt2.json" ;;
    pytorch_llama) step pytorch_llama 150 python3 "$repo/scripts/bench_distill_pytorch.py" --shape llama-1b \
        --device cuda --dtype bfloat16 --batch-size 4 --seq-len 1024 --step both --json "$work/pytorch_llama.json" ;;
    demo_cuda) step demo_cuda 180 "$bin/hedgehog" convert --config "$repo/projects/stories/stories.json" \
        --device cuda --run-dir "$build/demo-run" ;;
    demo32_generic | demo32_fused | demo32_chunked)  # the demo teacher (head dim 32) in bf16: generic / fused kernels
      fused=on kernels=measured
      [ "$s" = demo32_generic ] && fused=off
      [ "$s" = demo32_chunked ] && kernels=chunked
      step "$s" 150 env HH_FUSED_CUDA="$fused" HH_FUSED_CUDA_KERNELS="$kernels" "$bin/hedgehog" convert \
        --config "$repo/projects/demo/demo.json" --device cuda --compute-dtype bfloat16 --run-dir "$build/$s-run" ;;
    demo32_fused_loss) step demo32_fused_loss 150 env HH_FUSED_CUDA=off HH_FUSED_DISTILL_LOSS=on "$bin/hedgehog" \
        convert --config "$repo/projects/demo/demo.json" --device cuda --compute-dtype bfloat16 --run-dir "$build/$s-run" ;;
    profile_forward) step profile_forward 150 bash -c profile_forward ;;
    sanitize_pipelined | sanitize_chunked)  # memcheck and racecheck on the kernels built since the H100 run
      functions=pipelinedMatchesReference
      [ "$s" = sanitize_chunked ] && functions=chunkedMatchesReference
      step "$s" 150 env HH_SANITIZE_TOOLS="memcheck racecheck" HH_SANITIZE_FUNCTIONS="$functions" \
        bash "$repo/scripts/cuda_sanitize.sh" "$build" ;;
    sanitize_loss) step sanitize_loss 120 env HH_SANITIZE_TOOLS="memcheck racecheck" HH_SANITIZE_SUITE=engine.cuda.distill_loss \
        bash "$repo/scripts/cuda_sanitize.sh" "$build" ;;
    memcheck) step memcheck 150 env HH_SANITIZE_TOOLS="memcheck racecheck" bash "$repo/scripts/cuda_sanitize.sh" "$build" ;;
    *) echo "device_session: unknown step $s" | tee -a "$work/summary.txt" ;;
  esac
done
# The attention tables for docs/performance_gpu.md, from whatever attention logs this call wrote.
python3 "$repo/scripts/gpu_tables.py" "$work" > "$work/tables.md" 2>&1 || true
pack
echo "session: $(wc -l < "$work/summary.txt") steps in $SECONDS s"
cat "$work/summary.txt"
