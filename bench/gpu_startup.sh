#!/usr/bin/env bash
# Issue 13's whole-process item on a CUDA GPU, in one call:
#   bash bench/gpu_startup.sh OUTDIR
# 1. the reference kernel's start-up proof (now against the CPU oracle) over the proof matrix;
# 2. a stage-by-stage timeline of fresh processes (bench/startup.py), warm caches;
# 3. fresh-process wall times, alternating floor / compare / compare --inputs hashed, with the cache
#    folder on and off (FP8CHECK_CACHE_DIR=).
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1 FP8CHECK_CACHE_DIR=/tmp/fp8check-cache
python3 bench/gpu_first_use.py 2>&1 | tee "$out/first_use.txt"
[ -n "${QUICK:-}" ] && exit 0
python3 bench/gpu_issue13.py "$out" reference_kernel_bytes 2>&1 | tail -6
python3 bench/gpu_diff.py 2>&1 | tail -14 | tee "$out/gpu_diff.txt"
floor="import torch, triton, click, rich.console, fp8check.cli; torch.zeros(1, device='cuda')"
cmd=(-m fp8check compare --device cuda --num-blocks 16384)
for i in 1 2; do python3 "${cmd[@]}" > /dev/null; python3 "${cmd[@]}" --inputs hashed > /dev/null; done
for kind in normal hashed; do
  python3 bench/startup.py --device cuda --num-blocks 16384 --inputs $kind 2>&1 >/dev/null | tee "$out/timeline_$kind.txt"
done
t() { local TIMEFORMAT=%R; { time "$@" > /dev/null 2>&1; } 2>&1; }
for i in 1 2 3 4 5; do
  echo "floor $(t python3 -c "$floor") normal $(t python3 "${cmd[@]}") hashed $(t python3 "${cmd[@]}" --inputs hashed)"
done | tee "$out/walls_cached.txt"
for i in 1 2; do
  echo "floor $(t python3 -c "$floor") normal $(FP8CHECK_CACHE_DIR= t python3 "${cmd[@]}") hashed $(FP8CHECK_CACHE_DIR= t python3 "${cmd[@]}" --inputs hashed)"
done | tee "$out/walls_uncached.txt"
python3 - "$out" <<'PY'
import statistics, sys
for name in ("walls_cached", "walls_uncached"):
    rows = [line.split() for line in open(f"{sys.argv[1]}/{name}.txt")]
    med = {rows[0][i]: statistics.median(float(r[i + 1]) for r in rows) for i in (0, 2, 4)}
    print(name, {k: round(v, 2) for k, v in med.items()},
          "over floor:", {k: round(v - med["floor"], 2) for k, v in med.items() if k != "floor"})
PY
