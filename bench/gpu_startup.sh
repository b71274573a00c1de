#!/usr/bin/env bash
# Issue 13's whole-process item on a CUDA GPU, in one call:
#   bash bench/gpu_startup.sh OUTDIR          (QUICK=1: the first-use table only)
# 1. the first use of each torch op a compare runs (bench/gpu_first_use.py);
# 2. the reference kernel's start-up proof over the proof matrix, and the stages (bench/gpu_diff.py);
# 3. a stage-by-stage timeline of fresh processes (bench/startup.py), warm caches;
# 4. fresh-process wall times, alternating floor / compare / compare --inputs hashed, with the cache
#    folder on and off (FP8CHECK_CACHE_DIR=).
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1 FP8CHECK_CACHE_DIR=/tmp/fp8check-cache
source bench/walls.sh
python3 bench/gpu_first_use.py 2>&1 | tee "$out/first_use.txt"
[ -n "${QUICK:-}" ] && exit 0
python3 bench/gpu_issue13.py "$out" reference_kernel_bytes 2>&1 | tail -6
python3 bench/gpu_diff.py 2>&1 | tail -14 | tee "$out/gpu_diff.txt"
warm
timelines "$out"
walls "$out" walls_cached 5
walls "$out" walls_uncached 2 off
medians "$out" walls_cached walls_uncached
