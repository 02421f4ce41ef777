#!/usr/bin/env bash
# The measurements of issues 26 and 27 on a GPU machine, after scripts/device_build.sh built
# BUILD (default build-gpu): each command's output in OUT (default $OUT/bench or
# .device/out/bench), one line per command in OUT/index.txt with its exit status and seconds.
#   bash scripts/device_bench.sh [BUILD] [OUT]
# Every command has a time limit (HH_BENCH_TIMEOUT, default 420 s); HH_BENCH_ONLY="a b" runs only
# the named ones; HH_BENCH_DEVICE=cpu rehearses. What each measures and against what is in docs/gpu.md and docs/performance.md.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build-gpu}"
out="${2:-${OUT:-$repo/.device/out}/bench}"
mkdir -p "$out"
bin="$build/app"
limit="${HH_BENCH_TIMEOUT:-420}"
only=" ${HH_BENCH_ONLY:-} "
device="${HH_BENCH_DEVICE:-cuda}"  # cpu rehearses the plumbing here (HH_BENCH_ONLY=parity_cuda)

run() {  # run NAME COMMAND...: stdout and stderr to OUT/NAME.txt
  local name=$1
  shift
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  printf '\033[1m[bench]\033[0m %s\n' "$name"
  local start=$SECONDS status=0
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1 || status=$?
  echo "$name: exit $status in $((SECONDS - start)) s: $*" | tee -a "$out/index.txt"
  tail -3 "$out/$name.txt"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1 || true
lengths=1024,2048,4096,8192,16384,32768,65536
# Attention, causal, bf16: Hedgehog (generic chunked, fused kernels) against scaled_dot_product_attention.
run attention_b1_h12_d64 "$bin/hh_bench_attention" --device "$device" --dtype bfloat16 --batch 1 --heads 12 --dim 64 \
    --lengths "$lengths" --softmax-max 65536
run attention_b8_h32_d128 "$bin/hh_bench_attention" --device "$device" --dtype bfloat16 --batch 8 --heads 32 --dim 128 \
    --lengths "$lengths" --softmax-max 65536
# Decode: the recurrent step against softmax with a KV cache, GPT-2-small and Llama-3.2-1B shapes.
for batch in 1 32; do
  run "decode_b$batch" "$bin/hh_bench_decode" --device "$device" --dtype bfloat16 --batch "$batch" \
      --shapes gpt2-small,llama-1b --positions 512,2048,8192,32768
done
# The fused kernels against the fp64 reference on the CPU, through the layer's own dispatch.
run parity_cuda "$bin/hedgehog" parity --device "$device" --head-dim 64 --maps hedgehog --rules additive \
    --dtypes float32 bfloat16 --lengths 1 63 64 65 1000 4097
# Conversion steps at scale, the engine and plain PyTorch on the same GPU.
for shape in gpt2-small llama-1b; do
  batch=8
  [ "$shape" = llama-1b ] && batch=4
  run "steps_$shape" "$bin/hedgehog" bench --shape "$shape" --device "$device" --dtype bfloat16 --batch-size "$batch" \
      --seq-len 1024 --only distill --json "$out/steps_$shape.json"
  run "finetune_$shape" "$bin/hedgehog" bench --shape "$shape" --device "$device" --dtype bfloat16 --batch-size "$batch" \
      --seq-len 1024 --only finetune --json "$out/finetune_$shape.json"
  run "pytorch_$shape" python3 "$repo/scripts/bench_distill_pytorch.py" --shape "$shape" --device "$device" \
      --dtype bfloat16 --batch-size "$batch" --seq-len 1024 --step both --json "$out/pytorch_$shape.json"
done
# The stories demo end to end on the GPU (its CPU numbers are in docs/jobs.md).
run demo_cuda "$bin/hedgehog" convert --config "$repo/projects/stories/stories.json" --device "$device" \
    --run-dir "$build/demo-run"  # run files stay on the machine; the log comes back
echo "bench: $(wc -l < "$out/index.txt") commands, outputs in $out"
