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

# walls OUT NAME ROUNDS [off]: alternating floor / compare / compare --inputs hashed, ROUNDS times, to
# OUT/NAME.txt; with `off`, the compares run with the cache folder off (FP8CHECK_CACHE_DIR=).
walls() {
  local run=(python3) i
  [ "${4:-}" = off ] && run=(env FP8CHECK_CACHE_DIR= python3)
  for ((i = 0; i < $3; i++)); do
    echo "floor $(t python3 -c "$floor") normal $(t "${run[@]}" "${cmd[@]}") hashed $(t "${run[@]}" "${cmd[@]}" --inputs hashed)"
  done | tee "$1/$2.txt"
}

# medians OUT NAME...: each file's medians and their distance to the floor.
medians() {
  python3 - "$@" <<'PY'
import statistics, sys
for name in sys.argv[2:]:
    rows = [line.split() for line in open(f"{sys.argv[1]}/{name}.txt")]
    med = {rows[0][i]: statistics.median(float(r[i + 1]) for r in rows) for i in (0, 2, 4)}
    print(name, {k: round(v, 2) for k, v in med.items()},
          "over floor:", {k: round(v - med["floor"], 2) for k, v in med.items() if k != "floor"})
PY
}
