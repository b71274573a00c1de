"""Wall time of the default gate (`fp8check gate configs/ci.toml`) as a fresh process, against its target.

`python bench/gate.py [--repeat R] [--config PATH]`

A benchmark, not a test: it prints the whole-process wall time (imports included) of each run, the
gate's own time, and the slowest groups of cases (candidate~baseline and formats) from the JSON report.
Target (issue 12): the whole default gate within 60 s on the 2-core development CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 60.0


def one_run(config: str) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "gate.json"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "fp8check", "gate", config, "--quiet", "--json", str(report)],
                              cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"gate exited {done.returncode}: {done.stdout}{done.stderr}")
        return wall, json.loads(report.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--config", default="configs/ci.toml")
    args = parser.parse_args()
    walls, payload = [], None
    for i in range(args.repeat):
        wall, payload = one_run(args.config)
        walls.append(wall)
        print(f"run {i + 1}: {wall:.1f} s whole process, {payload['run']['seconds']:.1f} s in the gate,"
              f" {payload['counts']['ran']} cases")
    groups: dict[str, list[float]] = defaultdict(list)
    for case_id, seconds in payload["run"]["case_seconds"].items():
        kind, pair, formats = case_id.split(":")[:3]
        groups[f"{kind}:{pair}:{formats}"].append(seconds)
    print("\nslowest groups (last run): cases, total s, median ms per case")
    for name, times in sorted(groups.items(), key=lambda item: -sum(item[1]))[:8]:
        print(f"  {name:58s} {len(times):4d} {sum(times):7.2f} {1000 * statistics.median(times):8.1f}")
    median = statistics.median(walls)
    print(f"\nmedian whole-process wall time {median:.1f} s; target <= {TARGET_S:.0f} s:"
          f" {'met' if median <= TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
