#!/usr/bin/env bash
# The last H200 calls of issue 13's whole-process work (2026-11-30): read-back K proven on the GPU, with
# WITH_PROOFS=1 the slot kernel against torch and the stages (bench/gpu_diff.py: proofs, median of 10);
# then timelines and fresh-process walls.
#   bash bench/gpu_final.sh OUTDIR
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1 FP8CHECK_CACHE_DIR=/tmp/fp8check-cache
python3 bench/gpu_readback.py 2>&1 | tee "$out/gpu_readback.txt"
[ -n "${WITH_PROOFS:-}" ] && python3 bench/gpu_slots.py 2>&1 | tee "$out/gpu_slots.txt"
[ -n "${WITH_PROOFS:-}" ] && python3 bench/gpu_diff.py 2>&1 | tail -16 | tee "$out/gpu_diff.txt"
floor="import torch, triton, click, rich.console, fp8check.cli; torch.zeros(1, device='cuda')"
cmd=(-m fp8check compare --device cuda --num-blocks 16384)
for i in 1 2; do python3 "${cmd[@]}" > /dev/null; python3 "${cmd[@]}" --inputs hashed > /dev/null; done
for kind in normal hashed; do
  python3 bench/startup.py --device cuda --num-blocks 16384 --inputs $kind 2>&1 >/dev/null | tee "$out/timeline_$kind.txt"
done
t() { local TIMEFORMAT=%R; { time "$@" > /dev/null 2>&1; } 2>&1; }
for i in 1 2 3 4 5 6 7; do
  echo "floor $(t python3 -c "$floor") normal $(t python3 "${cmd[@]}") hashed $(t python3 "${cmd[@]}" --inputs hashed)"
done | tee "$out/walls_cached.txt"
python3 - "$out" <<'PY'
import statistics, sys
rows = [line.split() for line in open(f"{sys.argv[1]}/walls_cached.txt")]
med = {rows[0][i]: statistics.median(float(r[i + 1]) for r in rows) for i in (0, 2, 4)}
print("walls", {k: round(v, 2) for k, v in med.items()}, "over floor:", {k: round(v - med["floor"], 2) for k, v in med.items() if k != "floor"})
PY
grep -h "over the floor" "$out"/timeline_*.txt
