# Fresh-process timing of `fp8check compare`, shared by bench/gpu_startup.sh, gpu_final.sh and
# gpu_profile.sh: source it, then call its functions. DEVICE (default cuda) and NUM_BLOCKS (default
# 16384) choose the run; the floor is `import torch, triton, click, rich.console, fp8check.cli` (and, on
# a GPU, the CUDA context).
DEVICE=${DEVICE:-cuda}
floor="import torch, triton, click, rich.console, fp8check.cli"
[ "$DEVICE" = cuda ] && floor="$floor; torch.zeros(1, device='cuda')"
cmd=(-m fp8check compare --device "$DEVICE" --num-blocks "${NUM_BLOCKS:-16384}")

t() { local TIMEFORMAT=%R; { time "$@" > /dev/null 2>&1; } 2>&1; }

# Two runs of each command: Triton's cache and fp8check's cache folder filled.
warm() {
  for i in 1 2; do python3 "${cmd[@]}" > /dev/null; python3 "${cmd[@]}" --inputs hashed > /dev/null; done
}

# timelines OUT: bench/startup.py for `normal` and `hashed` inputs, to OUT/timeline_KIND.txt.
timelines() {
  for kind in normal hashed; do
    python3 bench/startup.py "${cmd[@]:3}" --inputs $kind 2>&1 >/dev/null | tee "$1/timeline_$kind.txt"
  done
}

# The floor with CPython's collector off during the imports, as fp8check's command line runs them
# (fp8check/cli/startup.py): what the same imports cost that process.
floor_nogc="import gc; gc.disable(); $floor; gc.enable()"

# walls OUT NAME ROUNDS [off]: alternating floor / floor_nogc / compare / compare --inputs hashed, ROUNDS
# times, to OUT/NAME.txt; with `off`, the compares run with the cache folder off (FP8CHECK_CACHE_DIR=);
# with BASE=DIR, also `base_normal` / `base_hashed`: the fp8check package under DIR (an A/B).
walls() {
  local run=(python3) i base
  [ "${4:-}" = off ] && run=(env FP8CHECK_CACHE_DIR= python3)
  for ((i = 0; i < $3; i++)); do
    base=""
    # (run from BASE: `python -m` puts the working folder first on the path)
    [ -n "${BASE:-}" ] && base=" base_normal $(cd "$BASE" && PYTHONPATH=. t "${run[@]}" "${cmd[@]}") base_hashed $(cd "$BASE" && PYTHONPATH=. t "${run[@]}" "${cmd[@]}" --inputs hashed)"
    echo "floor $(t python3 -c "$floor") floor_nogc $(t python3 -c "$floor_nogc") normal $(t "${run[@]}" "${cmd[@]}") hashed $(t "${run[@]}" "${cmd[@]}" --inputs hashed)$base"
  done | tee "$1/$2.txt"
}

# medians OUT NAME...: each file's medians (rows of `name seconds` pairs), their distance to both floors,
# and the median of each round's own difference (steadier on a host whose floor drifts between rounds).
medians() {
  python3 - "$@" <<'PY'
import statistics, sys
for name in sys.argv[2:]:
    rows = [line.split() for line in open(f"{sys.argv[1]}/{name}.txt")]
    med = {rows[0][i]: statistics.median(float(r[i + 1]) for r in rows) for i in range(0, len(rows[0]), 2)}
    print(name, len(rows), "rounds, medians:", {k: round(v, 2) for k, v in med.items()})
    for floor in [f for f in ("floor", "floor_nogc") if f in med]:
        print(f"  over {floor}:", {k: round(v - med[floor], 2) for k, v in med.items() if not k.startswith("floor")},
              "paired (median of each round's difference):",
              {k: round(statistics.median(float(r[r.index(k) + 1]) - float(r[r.index(floor) + 1]) for r in rows), 2)
               for k in med if not k.startswith("floor")})
PY
}
