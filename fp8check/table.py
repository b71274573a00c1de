"""The seed's byte table: the buggy and the fixed Triton wrapper, each against the C++ path.

Rows are blocks; each column is one CompareResult against the same baseline run (the baseline is
written once and diffed twice). Sweeps are declared as data in a TOML file (configs/seed-table.toml).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .compare import CompareResult, compare, run_side
from .diagnose import Diagnosis, diagnose
from .inputs import Inputs
from .writers.registry import Producer
from .spec import CacheSpec
from .errors import ConfigError
from . import options
from .config import load_toml

def read_config(path: Path) -> dict:
    """The [table] section of a TOML file, validated like the CLI options, as their dest names -> values."""
    section = load_toml(path).get("table")
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: needs a [table] section")
    return options.to_dests(options.validate(section, options.TABLE_KEYS, f"{path} [table]"))


@dataclass(frozen=True)
class SeedTable:
    buggy: CompareResult
    fixed: CompareResult
    buggy_causes: Diagnosis
    fixed_causes: Diagnosis

    @property
    def passed(self) -> bool:
        """The fix is proven: the fixed column is all zero and the buggy column differs, neither writer (nor
        the baseline) wrote outside its cache or changed its inputs."""
        return self.fixed.identical and not self.buggy.diff.identical and not self.buggy.faults


def seed_table(
    spec: CacheSpec, *, baseline: Producer, buggy: Producer, fixed: Producer, inputs: Inputs, device: torch.device
) -> SeedTable:
    inputs = inputs.to(device)
    base = run_side(baseline, spec, inputs, device)
    columns = [compare(spec, baseline=base, candidate=c, inputs=inputs, device=device) for c in (buggy, fixed)]
    causes = [diagnose(spec, r.baseline.buffer, r.candidate.buffer, r.inputs, diff=r.diff) for r in columns]
    return SeedTable(buggy=columns[0], fixed=columns[1], buggy_causes=causes[0], fixed_causes=causes[1])
