#!/usr/bin/env bash
# The last H200 calls of issue 13's whole-process work (2026-11-30): read-back K proven on the GPU, with
# WITH_PROOFS=1 the slot kernel against torch and the stages (bench/gpu_diff.py: proofs, median of 10);
# then timelines and fresh-process walls.
#   bash bench/gpu_final.sh OUTDIR
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1 FP8CHECK_CACHE_DIR=/tmp/fp8check-cache
source bench/walls.sh
python3 bench/gpu_readback.py 2>&1 | tee "$out/gpu_readback.txt"
[ -n "${WITH_PROOFS:-}" ] && python3 bench/gpu_slots.py 2>&1 | tee "$out/gpu_slots.txt"
[ -n "${WITH_PROOFS:-}" ] && python3 bench/gpu_diff.py 2>&1 | tail -16 | tee "$out/gpu_diff.txt"
warm
timelines "$out"
walls "$out" walls_cached "${ROUNDS:-7}"
medians "$out" walls_cached
grep -h "over the floor" "$out"/timeline_*.txt
