#!/usr/bin/env bash
# The fresh-process timeline on the H200, as an installed fp8check runs: the device's environment sets
# PYTHONDONTWRITEBYTECODE=1 and the source tree travels without __pycache__, so every import would compile
# fp8check's modules from source (~30 ms after the command's imports alone); pip's install writes them,
# so they are compiled first here.
#   bash bench/gpu_timeline.sh [ROUNDS]
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
python3 -m compileall -q fp8check bench/timeline.py >/dev/null
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python3 bench/timeline.py "${1:-5}" | grep -v "triton launch #\|check_slots #"
TIMELINE_CALLERS="architecture,_syscmd_file" python3 bench/timeline.py --profile \
    | sed -n '/was called by/,$p' | cut -c1-200 | head -30
