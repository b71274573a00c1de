#!/usr/bin/env bash
# Everything the H200 is used for, in one call (device time is scarce): run from the source tree.
#   bash bench/gpu_run.sh OUTDIR
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python3 bench/gpu_verify.py "$out/gpu_verify.json" 2>&1 | tee "$out/gpu_verify.txt"
python3 bench/gpu_issue13.py "$out" > "$out/gpu_issue13.txt" 2>&1
python3 bench/diagnose.py --device cuda 2>&1 | tee "$out/diagnose_cuda.txt"
python3 -m fp8check table --device cuda --num-blocks 8 --json "$out/table_cuda.json" 2>&1 | tee "$out/table_cuda.txt"
python3 -m fp8check compare --device cuda --num-blocks 1024 --inputs ue8m0-boundary --json "$out/boundary.json" 2>&1 | tail -30
python3 -m fp8check compare --device cuda --num-blocks 1024 --scale-fmt fp32 --baseline reference-vllm --json "$out/fp32.json" 2>&1 | tail -30
python3 -m fp8check compare --device cuda --num-blocks 1024 --inputs ties --scale-fmt fp32 --baseline reference-vllm --json "$out/ties_fp32.json" 2>&1 | tail -30
python3 -m fp8check compare --device cuda --num-blocks 1024 --inputs mixed --json "$out/mixed.json" 2>&1 | tail -30
python3 -m fp8check doctor 2>&1 | tail -25
