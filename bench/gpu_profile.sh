#!/usr/bin/env bash
# Where a whole `fp8check compare --device cuda --num-blocks 16384` process spends its time (issue 13):
# the import floor, fresh-process wall times, `-X importtime`, and a cProfile of one run.
#   bash bench/gpu_profile.sh OUTDIR
set -uo pipefail
out=${1:-.}
export PYTHONPATH=. PYTHONUNBUFFERED=1
source bench/walls.sh
python3 -c "$floor"; python3 "${cmd[@]}" > /dev/null; python3 "${cmd[@]}" --inputs hashed > /dev/null
walls "$out" walls 5
python3 -X importtime "${cmd[@]}" --inputs hashed > /dev/null 2> "$out/importtime.txt"
sort -t'|' -k2 -n -r "$out/importtime.txt" | head -25
for kind in normal hashed; do
  python3 -m cProfile -o "$out/prof_$kind.out" "${cmd[@]}" --inputs $kind > /dev/null
  python3 -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(70)" \
    "$out/prof_$kind.out" > "$out/prof_$kind.txt"
  python3 -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(30)" \
    "$out/prof_$kind.out" > "$out/prof_${kind}_tot.txt"
done
cat "$out/walls.txt"
