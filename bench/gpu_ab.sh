#!/usr/bin/env bash
# Fresh-process A/B of `fp8check compare --device cuda --num-blocks 16384` on the GPU machine: this tree
# against BASE, a folder holding another fp8check package (e.g. `git archive HEAD fp8check | tar -x -C
# .ab/base`, .ab/ excluded from git and carried). bench/gpu_readback.py's proof of read-back K, the
# stage timelines of this tree (and of BASE), then ROUNDS (default 7) alternating rounds of both floors
# (bench/walls.sh) and the compares, and their medians.
#   BASE=.ab/base bash bench/gpu_ab.sh OUTDIR
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1 FP8CHECK_CACHE_DIR=/tmp/fp8check-cache
source bench/walls.sh
python3 bench/gpu_readback.py 2>&1 | tee "$out/gpu_readback.txt"
warm
if [ -n "${BASE:-}" ]; then
  (cd "$BASE" && for i in 1 2; do PYTHONPATH=. python3 "${cmd[@]}" > /dev/null; done)
fi
timelines "$out"
if [ -n "${BASE:-}" ]; then
  for kind in normal hashed; do
    (cd "$BASE" && PYTHONPATH=. python3 "$OLDPWD/bench/startup.py" "${cmd[@]:3}" --inputs $kind 2>&1 >/dev/null) \
      | tee "$out/timeline_base_$kind.txt"
  done
fi
walls "$out" walls_ab "${ROUNDS:-7}"
medians "$out" walls_ab | tee "$out/medians.txt"
grep -H -A1 "over the floor" "$out"/timeline_*.txt
