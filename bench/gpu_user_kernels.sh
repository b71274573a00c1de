#!/usr/bin/env bash
# The H200 pass for users' kernels and parity (one call: device time is scarce). Run from the source tree:
#   bash bench/gpu_user_kernels.sh OUTDIR
# Prints each command's verdict line and exit code, then a short table last.
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1
k=tests/kernels/rocm_indexer_ops.py
rows=()
run() {  # name, expected exit code, command...
  local name=$1 want=$2; shift 2
  local start=$(date +%s%N)
  "$@" > "$out/$name.txt" 2>&1
  local rc=$? took=$(( ($(date +%s%N) - start) / 1000000 ))
  tail -3 "$out/$name.txt"
  rows+=("$(printf '%-38s rc=%s want=%s %7d ms' "$name" "$rc" "$want" "$took")")
}
nvidia-smi --query-gpu=name --format=csv,noheader
for b in 64 16 1; do
  run "vllmfile-writer-b$b" 0 python3 -m fp8check compare --device cuda --num-blocks 64 --block $b \
      --baseline reference --candidate vllm-file:$k --json "$out/vllmfile-writer-b$b.json"
done
run vllmfile-writer-shuffled 0 python3 -m fp8check compare --device cuda --num-blocks 64 --slots shuffled \
    --baseline reference --candidate vllm-file:$k
sed '/value_region = /s/\.view(FP8_DTYPE)//' $k > "$out/pre_fix.py"  # the seed bug: the value slice stays uint8
run vllmfile-prefix-table 0 python3 -m fp8check table --device cuda --num-blocks 8 \
    --buggy vllm-file:$out/pre_fix.py --fixed vllm-file:$k
run parity-default 0 python3 -m fp8check parity --config configs/seed-parity.toml --device cuda --json "$out/parity.json"
run parity-vllmfile-triton-reader-linear 0 python3 -m fp8check parity --device cuda --layout linear \
    --reader vllm-file:$k:rocm_fp8_paged_mqa_logits_triton --writers triton --json "$out/parity-triton-reader.json"
run parity-vllmfile-torch-reader-shuffle 1 python3 -m fp8check parity --device cuda \
    --reader vllm-file:$k:fp8_paged_mqa_logits_torch --writers triton
run gpu-parity-bench 0 python3 bench/gpu_parity.py
python3 bench/diff_words.py > "$out/diff_words.txt" 2>&1; tail -15 "$out/diff_words.txt"
printf '%s\n' "${rows[@]}"
# The default CI gate on the GPU (exit code and summary only)
python3 -m fp8check gate configs/ci.toml --junit "$out/gate.xml" --json "$out/gate.json" > "$out/gate.txt" 2>&1
echo "gate configs/ci.toml on cuda: rc=$?"; tail -5 "$out/gate.txt"
